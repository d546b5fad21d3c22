//! Run events in domain form: drafts the engine emits and the stored, sequenced rows.

use chrono::{DateTime, Utc};

use crate::JsonMap;

/// Event type names the runtime emits.
pub mod kind {
    pub const RUN_QUEUED: &str = "run.queued";
    pub const RUN_STARTED: &str = "run.started";
    pub const RUN_PAUSED: &str = "run.paused";
    pub const RUN_RESUMED: &str = "run.resumed";
    pub const RUN_COMPLETED: &str = "run.completed";
    pub const RUN_FAILED: &str = "run.failed";
    pub const RUN_CANCELLED: &str = "run.cancelled";
    pub const USAGE_CHECKPOINT: &str = "usage.checkpoint";
    pub const ASSISTANT_MESSAGE_STARTED: &str = "assistant_message_started";
    pub const ASSISTANT_MESSAGE_DELTA: &str = "assistant_message_delta";
    pub const ASSISTANT_MESSAGE_COMPLETED: &str = "assistant_message_completed";
    pub const REASONING_MESSAGE_STARTED: &str = "reasoning_message_started";
    pub const REASONING_MESSAGE_DELTA: &str = "reasoning_message_delta";
    pub const REASONING_MESSAGE_COMPLETED: &str = "reasoning_message_completed";
    pub const TOOL_CALL_STARTED: &str = "tool_call_started";
    pub const TOOL_CALL_ARGS_DELTA: &str = "tool_call_args_delta";
    pub const TOOL_CALL_RESULT: &str = "tool_call_result";
    pub const TOOL_CALL_FINISHED: &str = "tool_call_finished";
    pub const PLAN_UPDATED: &str = "plan_updated";
    pub const ACTIVITY_SNAPSHOT: &str = "activity_snapshot";
    pub const ACTIVITY_DELTA: &str = "activity_delta";

    /// Deltas are streamed live and never persisted.
    pub fn is_transient(event_type: &str) -> bool {
        matches!(
            event_type,
            ASSISTANT_MESSAGE_DELTA
                | REASONING_MESSAGE_DELTA
                | TOOL_CALL_ARGS_DELTA
                | ACTIVITY_DELTA
        )
    }

    /// Events after which a run's stream has nothing more to say.
    pub fn is_terminal(event_type: &str) -> bool {
        matches!(event_type, RUN_COMPLETED | RUN_FAILED | RUN_CANCELLED)
    }
}

/// An event before the store sequences it.
#[derive(Debug, Clone, PartialEq)]
pub struct EventDraft {
    pub event_type: String,
    pub data: JsonMap,
}

impl EventDraft {
    pub fn new(event_type: &str, data: JsonMap) -> Self {
        EventDraft {
            event_type: event_type.to_string(),
            data,
        }
    }

    pub fn is_transient(&self) -> bool {
        kind::is_transient(&self.event_type)
    }
}

/// A persisted event with its per-run sequence number.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// Store-wide monotonically increasing position (used by outbox cursors).
    pub position: i64,
    pub event_id: String,
    pub app_id: String,
    pub run_id: String,
    pub host_run_id: String,
    pub sequence_no: i64,
    pub event_type: String,
    pub data: JsonMap,
    pub created_at: DateTime<Utc>,
}

/// An event as published live: persisted ones carry their sequence, transient ones do not.
#[derive(Debug, Clone, PartialEq)]
pub enum LiveEvent {
    Persisted(StoredEvent),
    Transient {
        app_id: String,
        run_id: String,
        host_run_id: String,
        event_type: String,
        data: JsonMap,
    },
}

impl LiveEvent {
    pub fn run_id(&self) -> &str {
        match self {
            LiveEvent::Persisted(event) => &event.run_id,
            LiveEvent::Transient { run_id, .. } => run_id,
        }
    }

    pub fn sequence_no(&self) -> Option<i64> {
        match self {
            LiveEvent::Persisted(event) => Some(event.sequence_no),
            LiveEvent::Transient { .. } => None,
        }
    }
}

/// The live fan-out port: the engine publishes, SSE readers subscribe.
pub trait EventBus: Send + Sync + 'static {
    fn publish(&self, event: LiveEvent);
}
