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

/// Why the runtime asks the host for a fresh run model credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefreshReason {
    /// The credential expires within 30 s (or has expired).
    Expired,
    /// The provider rejected it (HTTP 401) before any answer reached the run.
    Unauthorized,
}

/// What the runtime tells the host's `model_credential_callback` (the SDK's
/// `ModelCredentialRefreshRequest`); the fingerprint is the SHA-256 of the current secret,
/// never the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialRefreshRequest {
    pub credential_fingerprint: String,
    pub app_id: String,
    pub run_id: String,
    pub host_run_id: String,
    pub connection_id: String,
    pub provider: String,
    pub account_id: String,
    pub reason: RefreshReason,
}

/// Failure to get a fresh credential from the host.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    /// The app has no refresh callback.
    #[error("the app has no model credential refresh callback")]
    NoCallback,
    /// The callback could not be reached, or timed out.
    #[error("credential refresh callback unreachable: {0}")]
    Unreachable(String),
    /// The callback answered with a status other than 200.
    #[error("credential refresh callback returned HTTP {0}")]
    Status(u16),
    /// The answer is not `{"credential": {...}}`.
    #[error("credential refresh callback returned an unusable answer: {0}")]
    BadAnswer(String),
}

/// The host's `model_credential_callback`: asked for a replacement of a run's model
/// credential; answers the new credential as the JSON object of `UpdateRunModelCredentialRequest.credential`.
#[async_trait]
pub trait CredentialRefresher: Send + Sync + 'static {
    /// Whether `app_id` has a callback at all.
    fn has_callback(&self, app_id: &str) -> bool;

    async fn refresh(
        &self,
        request: &CredentialRefreshRequest,
    ) -> Result<serde_json::Value, RefreshError>;
}
