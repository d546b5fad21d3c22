//! Legacy Codex device-code authentication state returned by the `codex-auth` routes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::de::nd;

/// Legacy Codex auth state (`POST …/codex-auth/device-code/start|cancel`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct CodexAuthState {
    /// Provider.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// Auth mode.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub auth_mode: String,
    /// See [`codex_auth_state`].
    #[serde(deserialize_with = "nd")]
    pub state: String,
    /// Login id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub login_id: Option<String>,
    /// Auth URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_url: Option<String>,
    /// Device verification URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification_url: Option<String>,
    /// Device user code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_code: Option<String>,
    /// Plan type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_type: Option<String>,
    /// Error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Last change.
    #[serde(with = "crate::time::rfc3339", default = "crate::time::go_zero")]
    pub updated_at: DateTime<Utc>,
}

wire_values! {
    /// `CodexAuthState.state`.
    pub mod codex_auth_state {
        /// Login needed.
        REQUIRED = "required",
        /// Device flow in progress.
        PENDING = "pending",
        /// Logged in.
        CONNECTED = "connected",
        /// Login failed.
        FAILED = "failed",
        /// Login cancelled.
        CANCELLED = "cancelled",
    }
}
