//! Records a run accumulates: messages, artifacts, interactions and tool calls.

use chrono::{DateTime, Utc};

use crate::{InteractionStatus, MessageRole, RuntimeKind};

/// A transcript message visible to hosts.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: String,
    pub app_id: String,
    pub run_id: String,
    pub runtime_message_id: String,
    pub role: MessageRole,
    pub content: String,
    pub message_type: String,
    pub content_blocks: Option<serde_json::Value>,
    pub tool_invocations: Option<serde_json::Value>,
    /// Assigned by the store on append, per run.
    pub sequence_no: i64,
    pub created_at: DateTime<Utc>,
}

/// Message types the runtime writes.
pub mod message_type {
    pub const MESSAGE: &str = "message";
    pub const ASSISTANT_TURN: &str = "assistant_turn";
    pub const TOOL_RESULT: &str = "tool_result";
    pub const SYSTEM_NOTIFICATION: &str = "system_notification";
}

/// An output artifact of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    pub id: String,
    pub app_id: String,
    pub run_id: String,
    pub artifact_type: String,
    pub format: String,
    pub storage_mode: String,
    pub inline_content: String,
    pub metadata: Option<serde_json::Value>,
    /// Assigned by the store on append, per run.
    pub sequence_no: i64,
    pub created_at: DateTime<Utc>,
}

/// A question or approval put to a person.
#[derive(Debug, Clone, PartialEq)]
pub struct Interaction {
    pub id: String,
    pub app_id: String,
    pub run_id: String,
    pub runtime_kind: RuntimeKind,
    pub interaction_kind: String,
    pub status: InteractionStatus,
    pub title: String,
    pub summary: String,
    pub request_payload: Option<serde_json::Value>,
    pub response_payload: Option<serde_json::Value>,
    pub resolved_by_external_id: String,
    pub resolved_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Interaction kinds the runtime creates.
pub mod interaction_kind {
    pub const APPROVAL_REQUEST: &str = "approval_request";
    pub const REQUEST_USER_INPUT: &str = "request_user_input";
    pub const REVIEW_CHECKPOINT: &str = "review_checkpoint";
    pub const AUTHENTICATION: &str = "authentication";
    /// The run's next model call would go past one of its budgets (an addition of this
    /// version); resolved by a resume that raises it.
    pub const BUDGET: &str = "budget";

    /// Kinds that put a run in `paused/human_approval`.
    pub fn is_approval(kind: &str) -> bool {
        matches!(
            kind,
            APPROVAL_REQUEST | REVIEW_CHECKPOINT | "human_approval"
        )
    }
}

/// Durable audit record of one tool call (successful, failed or gated).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRecord {
    pub id: String,
    pub app_id: String,
    pub run_id: String,
    pub tool_name: String,
    pub input: serde_json::Value,
    pub output: Option<serde_json::Value>,
    pub error: String,
    pub mutating: bool,
    pub approval_required: bool,
    pub created_at: DateTime<Utc>,
}
