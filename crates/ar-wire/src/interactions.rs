//! Interactions: pending human input / approval / auth requests on a run, with kind and status values.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::de::{nd, raw};

/// A request for a human (input, approval, review, authentication) and its resolution.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct AgentRunInteraction {
    /// Interaction id.
    #[serde(deserialize_with = "nd")]
    pub id: String,
    /// App id.
    #[serde(deserialize_with = "nd")]
    pub app_id: String,
    /// Run id.
    #[serde(deserialize_with = "nd")]
    pub run_id: String,
    /// Runtime kind that raised it.
    #[serde(deserialize_with = "nd")]
    pub runtime_kind: String,
    /// See [`interaction_kind`].
    #[serde(deserialize_with = "nd")]
    pub interaction_kind: String,
    /// See [`interaction_status`].
    #[serde(deserialize_with = "nd")]
    pub status: String,
    /// Title.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// Summary.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// Request payload (schema-tagged).
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub request_payload: Option<Value>,
    /// Response payload.
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub response_payload: Option<Value>,
    /// Who resolved it.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub resolved_by_external_id: String,
    /// Resolution time.
    #[serde(
        with = "crate::time::rfc3339_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub resolved_at: Option<DateTime<Utc>>,
    /// Creation time.
    #[serde(with = "crate::time::rfc3339", default = "crate::time::go_zero")]
    pub created_at: DateTime<Utc>,
    /// Last update time.
    #[serde(with = "crate::time::rfc3339", default = "crate::time::go_zero")]
    pub updated_at: DateTime<Utc>,
}

wire_values! {
    /// `AgentRunInteraction.status`.
    pub mod interaction_status {
        /// Waiting.
        PENDING = "pending",
        /// Answered.
        RESOLVED = "resolved",
    }
}

wire_values! {
    /// `AgentRunInteraction.interaction_kind` values raised by the runtime (plus accepted legacy kinds).
    pub mod interaction_kind {
        /// `request_user_input` tool.
        REQUEST_USER_INPUT = "request_user_input",
        /// `request_approval` tool or gated tool call.
        APPROVAL_REQUEST = "approval_request",
        /// `request_review_checkpoint` tool.
        REVIEW_CHECKPOINT = "review_checkpoint",
        /// Model or MCP authentication needed.
        AUTHENTICATION = "authentication",
        /// Legacy input kind.
        HUMAN_INPUT = "human_input",
        /// Legacy approval kind.
        HUMAN_APPROVAL = "human_approval",
        /// Legacy input kind.
        INPUT_REQUEST = "input_request",
        /// Legacy Codex command approval.
        COMMAND_EXECUTION_APPROVAL = "command_execution_approval",
        /// Legacy Codex file change approval.
        FILE_CHANGE_APPROVAL = "file_change_approval",
        /// Legacy Codex permissions approval.
        PERMISSIONS_APPROVAL = "permissions_approval",
    }
}

/// Whether a pending interaction of this kind forces an approval pause.
pub fn is_approval_kind(kind: &str) -> bool {
    matches!(
        kind,
        interaction_kind::APPROVAL_REQUEST
            | interaction_kind::REVIEW_CHECKPOINT
            | interaction_kind::HUMAN_APPROVAL
    )
}

/// Whether a pending interaction of this kind forces an input pause.
pub fn is_input_kind(kind: &str) -> bool {
    matches!(
        kind,
        interaction_kind::REQUEST_USER_INPUT
            | interaction_kind::INPUT_REQUEST
            | interaction_kind::HUMAN_INPUT
    )
}

wire_values! {
    /// Schema tags carried in interaction request payloads.
    pub mod payload_schema {
        /// Envelope tag.
        AGENT_RUNTIME_V1 = "agent_runtime.v1",
        /// `request_user_input` payload.
        REQUEST_USER_INPUT_V1 = "request_user_input_v1",
        /// `request_approval` payload.
        APPROVAL_REQUEST_V1 = "approval_request_v1",
        /// `request_review_checkpoint` payload.
        REVIEW_CHECKPOINT_V1 = "review_checkpoint_v1",
    }
}
