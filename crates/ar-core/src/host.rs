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

/// Failure to obtain context; admission answers 400 and a running turn fails.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("target context unavailable: {0}")]
pub struct ContextError(pub String);

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
