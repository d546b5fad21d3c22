//! The uniform error body `{"error": "<message>"}` and the runtime's fixed error messages.

use serde::{Deserialize, Serialize};

use crate::de::nd;

/// Every non-2xx JSON response: `{"error": "<message>"}`. Where the original's message is a
/// fixed phrase ("invalid request body"), `detail` (our addition) says what exactly was wrong.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ErrorBody {
    /// Human-readable message.
    #[serde(deserialize_with = "nd")]
    pub error: String,
    /// What exactly was wrong, where `error` is the contract's fixed phrase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl ErrorBody {
    /// Builds an error body.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            error: message.into(),
            detail: None,
        }
    }

    /// Builds an error body with the fixed `message` and what exactly was wrong.
    pub fn with_detail(message: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            error: message.into(),
            detail: Some(detail.into()),
        }
    }
}

impl std::fmt::Display for ErrorBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.error)
    }
}

/// Fixed messages the contract names.
pub mod messages {
    /// 401.
    pub const UNAUTHORIZED: &str = "unauthorized";
    /// 400 when the `app_id` query parameter is missing.
    pub const APP_ID_REQUIRED: &str = "app_id is required";
    /// 404 run.
    pub const RUN_NOT_FOUND: &str = "run not found";
    /// 404 agent.
    pub const AGENT_NOT_FOUND: &str = "agent not found";
    /// 404 unknown sub-path.
    pub const NOT_FOUND: &str = "not found";
    /// 405.
    pub const METHOD_NOT_ALLOWED: &str = "method not allowed";
    /// 404 from v2 routes when the app is on v1.
    pub const V2_NOT_ENABLED: &str = "v2 event protocol is not enabled for app";
    /// 400 from the run tool gateway on terminal runs.
    pub const RUN_NOT_ACTIVE: &str = "agent run is not active";
    /// 400 resume on a terminal run.
    pub const RUN_TERMINAL: &str = "run is terminal";
    /// 400 resume on a run that is not paused.
    pub const RUN_NOT_PAUSED: &str = "run is not paused";
    /// 400 resume of an expired chat.
    pub const RUN_IDLE_TIMEOUT: &str = "run idle timeout expired";
    /// 400 for a body that cannot be read or decoded (the detail says why).
    pub const INVALID_REQUEST_BODY: &str = "invalid request body";
    /// 400 for a model-credential body that cannot be decoded.
    pub const INVALID_CREDENTIAL_REQUEST: &str = "invalid credential request";
    /// 400 from the run tool gateway for an unknown run.
    pub const AGENT_RUN_NOT_FOUND: &str = "agent run not found";
    /// 400 from legacy Codex routes.
    pub const CODEX_AUTH_NOT_CONFIGURED: &str = "codex auth manager is not configured";
}
