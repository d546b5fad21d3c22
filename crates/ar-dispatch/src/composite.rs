//! The authority mux: keeps the subscription lane apart from the legacy one (the cluster
//! router, the other composite, is in [`crate::cluster`]).

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
