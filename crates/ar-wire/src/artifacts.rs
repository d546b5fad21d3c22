//! Run artifacts (plans, input/approval requests, skill manifests, outputs) and the append-artifact request.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::de::{nd, raw};

/// One artifact produced for a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct AgentRunArtifact {
    /// Artifact id.
    #[serde(deserialize_with = "nd")]
    pub id: String,
    /// App id.
    #[serde(deserialize_with = "nd")]
    pub app_id: String,
    /// Run id.
    #[serde(deserialize_with = "nd")]
    pub run_id: String,
    /// Artifact type (e.g. `run_plan`).
    #[serde(deserialize_with = "nd")]
    pub artifact_type: String,
    /// Format (default `json`).
    #[serde(deserialize_with = "nd")]
    pub format: String,
    /// Storage mode (default `inline`).
    #[serde(deserialize_with = "nd")]
    pub storage_mode: String,
    /// Inline content.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub inline_content: String,
    /// Metadata (server default `{}`).
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Per-run order.
    #[serde(deserialize_with = "nd")]
    pub sequence_no: i64,
    /// Creation time.
    #[serde(with = "crate::time::rfc3339", default = "crate::time::go_zero")]
    pub created_at: DateTime<Utc>,
}

/// Body of `POST /v1/runs/{id}/artifacts`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct AppendArtifactRequest {
    /// Artifact type (required).
    #[serde(deserialize_with = "nd")]
    pub artifact_type: String,
    /// Format.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub format: String,
    /// Storage mode.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub storage_mode: String,
    /// Inline content.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub inline_content: String,
    /// Metadata.
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// Default artifact format.
pub const DEFAULT_ARTIFACT_FORMAT: &str = "json";
/// Default artifact storage mode.
pub const DEFAULT_ARTIFACT_STORAGE_MODE: &str = "inline";

wire_values! {
    /// Artifact types the runtime itself writes.
    pub mod artifact_type {
        /// `update_plan` output.
        RUN_PLAN = "run_plan",
        /// `request_user_input` request.
        HUMAN_INPUT_REQUEST = "human_input_request",
        /// `request_approval` request.
        HUMAN_APPROVAL_REQUEST = "human_approval_request",
        /// Staged skill manifest.
        RUNTIME_SKILL_MANIFEST = "runtime_skill_manifest",
    }
}
