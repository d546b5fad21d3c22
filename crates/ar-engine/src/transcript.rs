//! The native loop's checkpointed state: transcript, pending tool calls, usage, counters.
//!
//! One `LoopState` is saved with every step's commit (`Checkpoint.state`). Recovery, resume,
//! and later replay/fork from step N all start from it.

use ar_core::model::{ChatMessage, ModelToolCall};
use ar_core::Usage;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A person's decision on a parked tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Decision {
    Approved,
    Rejected {
        reason: String,
    },
    /// An answer to `request_user_input` (or any interaction) given as content/payload.
    Answered {
        content: String,
    },
}

/// A tool call from the last assistant message that has no result in the transcript yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    pub call: ModelToolCall,
    /// Interaction that parks this call, if any.
    #[serde(default)]
    pub interaction_id: Option<String>,
    /// The ToolCall audit row id.
    #[serde(default)]
    pub record_id: Option<String>,
    #[serde(default)]
    pub decision: Option<Decision>,
    /// A mutating call was started before a crash: its outcome is unknown.
    #[serde(default)]
    pub started: bool,
}

/// State of the native loop after a step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoopState {
    /// Model rounds taken so far in the run.
    pub step: i64,
    /// Model rounds taken in the current turn.
    #[serde(default)]
    pub turn_steps: i64,
    pub transcript: Vec<ChatMessage>,
    #[serde(default)]
    pub pending: Vec<PendingCall>,
    /// User messages to add once pending tool calls have results (keeps call/result pairing).
    #[serde(default)]
    pub queued_user_messages: Vec<String>,
    /// Cumulative usage of the run.
    #[serde(default)]
    pub usage: Usage,
    /// Completion corrections used in the current turn.
    #[serde(default)]
    pub corrections: i64,
    /// Whether the current turn had its skill-policy corrective turn.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skill_corrected: bool,
    /// Model calls of the run, summary turns included (for its `max_model_calls` budget).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub model_calls: u64,
    /// Milliseconds the run has spent running (for its `max_wall_time_seconds` budget).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub running_ms: u64,
    /// Summaries that replaced old turns (`context.compaction_*`'s generation).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub compactions: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

impl LoopState {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// An unreadable checkpoint is this runtime's fault (it wrote it): an internal error.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, crate::error::EngineError> {
        serde_json::from_value(value.clone()).map_err(|error| {
            crate::error::EngineError::internal("reading the run's checkpoint", error)
        })
    }

    /// Opens an empty transcript with the system prompt and the run's instructions ("Begin."
    /// when it has none).
    pub fn open(&mut self, system_prompt: String, instructions: &str) {
        if !self.transcript.is_empty() {
            return;
        }
        let instructions = if instructions.is_empty() {
            "Begin."
        } else {
            instructions
        };
        self.transcript.push(ChatMessage::system(system_prompt));
        self.transcript.push(ChatMessage::user(instructions));
    }

    /// Adds the time since `since` to the running time and moves `since` to `now`.
    pub fn count_running(&mut self, since: &mut DateTime<Utc>, now: DateTime<Utc>) {
        let elapsed = (now - *since).num_milliseconds();
        self.running_ms += u64::try_from(elapsed).unwrap_or(0);
        *since = now;
    }

    /// Moves queued user messages into the transcript when no tool call is still open.
    pub fn flush_queued_messages(&mut self) {
        if self.pending.is_empty() {
            for content in self.queued_user_messages.drain(..) {
                self.transcript.push(ChatMessage::user(content));
            }
        }
    }
}
