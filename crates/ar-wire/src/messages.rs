//! Transcript messages of a run and the append-message request.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::de::{nd, raw};

/// One transcript message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct AgentRunMessage {
    /// Message id.
    #[serde(deserialize_with = "nd")]
    pub id: String,
    /// App id.
    #[serde(deserialize_with = "nd")]
    pub app_id: String,
    /// Run id.
    #[serde(deserialize_with = "nd")]
    pub run_id: String,
    /// Adapter-side id (or the resume id for resume messages).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub runtime_message_id: String,
    /// `user`, `assistant`, `system`, `tool`.
    #[serde(deserialize_with = "nd")]
    pub role: String,
    /// Text content (always written).
    #[serde(deserialize_with = "nd")]
    pub content: String,
    /// See [`message_type`].
    #[serde(deserialize_with = "nd")]
    pub message_type: String,
    /// Structured content blocks.
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub content_blocks: Option<Value>,
    /// Tool invocations of an assistant turn.
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub tool_invocations: Option<Value>,
    /// Per-run order.
    #[serde(deserialize_with = "nd")]
    pub sequence_no: i64,
    /// Creation time.
    #[serde(with = "crate::time::rfc3339", default = "crate::time::go_zero")]
    pub created_at: DateTime<Utc>,
}

/// Body of `POST /v1/runs/{id}/messages`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct AppendMessageRequest {
    /// Role (server default `user`; always written).
    #[serde(deserialize_with = "nd")]
    pub role: String,
    /// Content (trimmed by the server).
    #[serde(deserialize_with = "nd")]
    pub content: String,
    /// Acting external user.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub external_actor_id: String,
}

/// Default role of appended messages.
pub const DEFAULT_APPEND_ROLE: &str = "user";

wire_values! {
    /// `AgentRunMessage.role`.
    pub mod message_role {
        /// End user.
        USER = "user",
        /// Model.
        ASSISTANT = "assistant",
        /// System.
        SYSTEM = "system",
        /// Tool output.
        TOOL = "tool",
    }
}

wire_values! {
    /// `AgentRunMessage.message_type` (open set; these are the runtime's own).
    pub mod message_type {
        /// Plain message.
        MESSAGE = "message",
        /// Native assistant turn with blocks/invocations.
        ASSISTANT_TURN = "assistant_turn",
        /// Tool result.
        TOOL_RESULT = "tool_result",
        /// System notification.
        SYSTEM_NOTIFICATION = "system_notification",
    }
}
