//! Host callback ports: what the runtime asks the host application (target context).

use async_trait::async_trait;

use crate::{JsonMap, TargetRef};

/// What the runtime sends when it needs a target's context.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextRequest {
    pub app_id: String,
    pub run_id: String,
    pub agent_id: String,
    pub target: TargetRef,
    pub trigger: Option<JsonMap>,
    pub metadata: Option<JsonMap>,
}

/// The host's answer: a (possibly enriched) target, a summary for the model, opaque data.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TargetContext {
    pub target: TargetRef,
    pub summary: String,
    pub data: JsonMap,
}

/// Why a host callback failed, kept as the error's source.
pub type HostCause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Failure to obtain context: the host is down or answered something unusable. It is the
/// host's fault, not the caller's: admission answers 502 and a running turn fails.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// The context endpoint could not be reached, or timed out.
    #[error("target context unavailable: context endpoint unreachable: {detail}")]
    Unreachable {
        detail: String,
        #[source]
        cause: HostCause,
    },
    /// The endpoint answered with a non-success status (`detail`: the start of its body).
    #[error("target context unavailable: context endpoint returned HTTP {status}{detail}")]
    Status { status: u16, detail: String },
    /// The endpoint's answer could not be read or is not a target context.
    #[error("target context unavailable: context endpoint returned an unusable answer: {cause}")]
    BadAnswer {
        #[source]
        cause: HostCause,
    },
}

/// Resolves target context, at admission and at each turn.
#[async_trait]
pub trait ContextProvider: Send + Sync + 'static {
    async fn resolve(&self, request: &ContextRequest) -> Result<TargetContext, ContextError>;
}

/// The fallback for apps without a context endpoint: the target itself, no summary.
#[derive(Debug, Clone, Copy, Default)]
pub struct StaticContext;

#[async_trait]
impl ContextProvider for StaticContext {
    async fn resolve(&self, request: &ContextRequest) -> Result<TargetContext, ContextError> {
        Ok(TargetContext {
            target: request.target.clone(),
            summary: String::new(),
            data: JsonMap::new(),
        })
    }
}
