//! Composite runtimes: the authority mux (keeps the subscription lane apart) and the cluster router.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;

use crate::consts::ERROR_CHAT_POLICY_UNAVAILABLE;
use crate::run::{DispatchError, Run, Runtime};
use crate::spec::RunSpec;

/// Keeps the legacy lane and the subscription lane strictly apart.
/// Empty authority → legacy (unless the agent or profile names the subscription lane, which
/// is refused); `chat_subscription_isolated_v1` → subscription; anything else →
/// `chat_policy_unavailable`.
pub struct AuthorityMux {
    legacy: Arc<dyn Runtime>,
    subscription: Arc<dyn Runtime>,
}

impl AuthorityMux {
    /// A mux over the two lanes.
    pub fn new(legacy: Arc<dyn Runtime>, subscription: Arc<dyn Runtime>) -> Self {
        Self {
            legacy,
            subscription,
        }
    }
}

#[async_trait]
impl Runtime for AuthorityMux {
    fn name(&self) -> &str {
        "authority-mux"
    }
    async fn dispatch(&self, spec: RunSpec) -> Result<Run, DispatchError> {
        spec.validate_authority()?;
        match spec.authority.as_str() {
            "" if spec.looks_like_subscription() => Err(DispatchError::Policy {
                code: ERROR_CHAT_POLICY_UNAVAILABLE,
                message: "codex-subscription requires authority chat_subscription_isolated_v1"
                    .into(),
            }),
            "" => self.legacy.dispatch(spec).await,
            crate::consts::AUTHORITY_CHAT_SUBSCRIPTION_ISOLATED_V1 => {
                self.subscription.dispatch(spec).await
            }
            other => Err(DispatchError::Policy {
                code: ERROR_CHAT_POLICY_UNAVAILABLE,
                message: format!("unknown authority {other:?}"),
            }),
        }
    }
}

/// Routes by `RunSpec::machine`: empty or the local machine's name → local runtime; a peer
/// name → that peer's runtime (normally a [`crate::RemoteRuntime`]); anything else → error.
pub struct ClusterRouter {
    local_name: String,
    local: Arc<dyn Runtime>,
    peers: HashMap<String, Arc<dyn Runtime>>,
}

impl ClusterRouter {
    /// A router whose local machine is called `local_name`.
    pub fn new(local_name: impl Into<String>, local: Arc<dyn Runtime>) -> Self {
        Self {
            local_name: local_name.into(),
            local,
            peers: HashMap::new(),
        }
    }

    /// Adds a peer.
    pub fn with_peer(mut self, name: impl Into<String>, runtime: Arc<dyn Runtime>) -> Self {
        self.peers.insert(name.into(), runtime);
        self
    }
}

#[async_trait]
impl Runtime for ClusterRouter {
    fn name(&self) -> &str {
        "cluster"
    }
    async fn dispatch(&self, spec: RunSpec) -> Result<Run, DispatchError> {
        if spec.machine.is_empty() || spec.machine == self.local_name {
            return self.local.dispatch(spec).await;
        }
        match self.peers.get(&spec.machine) {
            Some(peer) => peer.dispatch(spec).await,
            None => Err(DispatchError::UnknownMachine(spec.machine.clone())),
        }
    }
}
