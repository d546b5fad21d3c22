//! Per-run model routing: `RunModel`, model controls, approved endpoints, and request-only model credentials.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::de::nd;

/// Pins a run to a provider/model route without modifying the agent. Secret-free.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct RunModel {
    /// Provider; see [`provider`].
    #[serde(deserialize_with = "nd")]
    pub provider: String,
    /// Model name (1..=256 chars).
    #[serde(deserialize_with = "nd")]
    pub model: String,
    /// Approved Chat Completions endpoint binding (only for `openai_compatible`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<ModelEndpoint>,
    /// Request controls; when present (even `{}`) they replace the agent's legacy controls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controls: Option<ModelControls>,
}

/// An administrator-approved Chat Completions destination; must match app configuration exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ModelEndpoint {
    /// Binding id from the app's `model_endpoints`.
    #[serde(deserialize_with = "nd")]
    pub id: String,
    /// Canonical base URL (no trailing slash).
    #[serde(deserialize_with = "nd")]
    pub base_url: String,
    /// `api_key` or `none`; see [`endpoint_auth_mode`].
    #[serde(deserialize_with = "nd")]
    pub auth_mode: String,
}

/// Model request options only (not execution or tool limits). Pointer fields in Go: `Some("")` is kept.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ModelControls {
    /// See [`reasoning_effort`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// See [`service_tier`] and [`normalize_service_tier`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<String>,
    /// OpenRouter routing preferences.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub openrouter: Option<OpenRouterModelControls>,
}

/// OpenRouter routing preferences.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct OpenRouterModelControls {
    /// Provider preferences.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<OpenRouterProviderPreferences>,
}

/// Restricts the OpenRouter provider's quantization.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct OpenRouterProviderPreferences {
    /// Allowed quantizations.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub quantizations: Vec<String>,
}

/// Request-only model credential supplied by the host backend. `Debug` redacts secrets.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ModelCredential {
    /// See [`credential_type`].
    #[serde(rename = "type", deserialize_with = "nd")]
    pub credential_type: String,
    /// Secret API key (for `api_key`).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub api_key: String,
    /// Secret OAuth access token (for `oauth`).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub access_token: String,
    /// Access-token expiry.
    #[serde(
        with = "crate::time::rfc3339_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub expires_at: Option<DateTime<Utc>>,
    /// Host connection id (cannot change on replacement).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub connection_id: String,
    /// Provider account id (cannot change on replacement).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub account_id: String,
}

impl fmt::Debug for ModelCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelCredential")
            .field("credential_type", &self.credential_type)
            .field("api_key", &crate::redact(&self.api_key))
            .field("access_token", &crate::redact(&self.access_token))
            .field("expires_at", &self.expires_at)
            .field("connection_id", &self.connection_id)
            .field("account_id", &self.account_id)
            .finish()
    }
}

/// Body of `PUT /v1/runs/{id}/model-credential`; also the host's refresh-callback response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct UpdateRunModelCredentialRequest {
    /// Replacement credential.
    #[serde(deserialize_with = "nd")]
    pub credential: ModelCredential,
}

/// Response of `PUT /v1/runs/{id}/model-credential`; never echoes the secret.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct RunModelCredentialUpdate {
    /// Run id.
    #[serde(deserialize_with = "nd")]
    pub run_id: String,
    /// Expiry of the stored credential.
    #[serde(
        with = "crate::time::rfc3339_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub expires_at: Option<DateTime<Utc>>,
}

wire_values! {
    /// `RunModel.provider`.
    pub mod provider {
        /// Anthropic Messages.
        ANTHROPIC = "anthropic",
        /// OpenAI Responses.
        OPENAI = "openai",
        /// OpenRouter.
        OPENROUTER = "openrouter",
        /// OpenRouter via the Responses API.
        OPENROUTER_RESPONSES = "openrouter_responses",
        /// ChatGPT subscription (run OAuth credential only).
        OPENAI_CHATGPT = "openai_chatgpt",
        /// Approved Chat Completions endpoint.
        OPENAI_COMPATIBLE = "openai_compatible",
    }
}

wire_values! {
    /// `ModelControls.reasoning_effort` (OpenAI Responses providers only).
    pub mod reasoning_effort {
        /// No reasoning.
        NONE = "none",
        /// Minimal.
        MINIMAL = "minimal",
        /// Low.
        LOW = "low",
        /// Medium.
        MEDIUM = "medium",
        /// High.
        HIGH = "high",
        /// Extra high.
        XHIGH = "xhigh",
    }
}

wire_values! {
    /// Canonical `ModelControls.service_tier` values; aliases `default`/`priority` go through [`normalize_service_tier`].
    pub mod service_tier {
        /// Standard processing (alias `default`).
        STANDARD = "standard",
        /// Priority processing (alias `priority`).
        FAST = "fast",
        /// Flex processing.
        FLEX = "flex",
        /// Provider decides.
        AUTO = "auto",
    }
}

/// Maps provider-native service-tier aliases to canonical names (trimmed, lower-cased), like the Go SDK.
pub use ar_core::model::normalize_service_tier;

wire_values! {
    /// `ModelCredential.type`.
    pub mod credential_type {
        /// Provider API key.
        API_KEY = "api_key",
        /// Explicit no-auth (approved `openai_compatible` endpoints only).
        NONE = "none",
        /// OAuth access token (ChatGPT).
        OAUTH = "oauth",
    }
}

wire_values! {
    /// `ModelEndpoint.auth_mode`.
    pub mod endpoint_auth_mode {
        /// Bearer API key.
        API_KEY = "api_key",
        /// No authentication.
        NONE = "none",
    }
}

wire_values! {
    /// `RunInput.credential_source`.
    pub mod credential_source {
        /// A run-scoped credential was supplied by the app.
        APP = "app",
    }
}
