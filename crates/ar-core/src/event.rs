//! Run events in domain form: the one list of event kinds, one typed payload per kind, and the
//! stored (sequenced) and live forms.
//!
//! The engine builds only [`RunEvent`] values. Their `data` object — the payload as the contract
//! spells it, with `host_run_id` added for persisted events of runs that have one — is produced
//! by [`RunEvent::data`], the one place event JSON is made; envelopes (v1, v2) wrap that object
//! in `ar-server`. Field names and omission rules follow the events the original service emits
//! (service contract §4); a snapshot test in this crate pins every kind.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::enums::contract_enum;
use crate::{JsonMap, Usage};

contract_enum!(
    /// Every event type of the contract, persisted and transient, in contract order.
    EventKind, "event type" {
        RunQueued => "run.queued",
        RunStarted => "run.started",
        RunPaused => "run.paused",
        RunResumed => "run.resumed",
        RunCompleted => "run.completed",
        RunFailed => "run.failed",
        RunCancelled => "run.cancelled",
        RunMcpCredentialUpdated => "run.mcp_credential_updated",
        UsageCheckpoint => "usage.checkpoint",
        WorkspacePrepared => "workspace.prepared",
        WorkspaceFinalized => "workspace.finalized",
        WorkspaceCleaned => "workspace.cleaned",
        AssistantMessageStarted => "assistant_message_started",
        AssistantMessageDelta => "assistant_message_delta",
        AssistantMessageCompleted => "assistant_message_completed",
        ReasoningMessageStarted => "reasoning_message_started",
        ReasoningMessageDelta => "reasoning_message_delta",
        ReasoningMessageCompleted => "reasoning_message_completed",
        ToolCallStarted => "tool_call_started",
        ToolCallArgsDelta => "tool_call_args_delta",
        ToolCallResult => "tool_call_result",
        ToolCallFinished => "tool_call_finished",
        PlanUpdated => "plan_updated",
        ActivitySnapshot => "activity_snapshot",
        ActivityDelta => "activity_delta",
        A2aTask => "a2a.task",
        CodexAuthStateChanged => "codex_auth.state_changed",
        ContextCompactionStarted => "context.compaction_started",
        ContextCompactionCompleted => "context.compaction_completed",
        ContextCompactionFailed => "context.compaction_failed",
    }
);

impl EventKind {
    /// Deltas are streamed live and never persisted, replayed or delivered to callbacks.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            EventKind::AssistantMessageDelta
                | EventKind::ReasoningMessageDelta
                | EventKind::ToolCallArgsDelta
                | EventKind::ActivityDelta
        )
    }

    /// Events after which a run's stream has nothing more to say.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            EventKind::RunCompleted | EventKind::RunFailed | EventKind::RunCancelled
        )
    }

    /// `run.*` lifecycle events.
    pub fn is_lifecycle(self) -> bool {
        self.as_str().starts_with("run.")
    }

    /// Kinds that are persisted (and so can be delivered to callbacks).
    pub fn persisted() -> impl Iterator<Item = EventKind> {
        EventKind::ALL
            .iter()
            .copied()
            .filter(|kind| !kind.is_transient())
    }
}

/// `run.queued`: the run was admitted (`status` is always `queued`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunQueued {
    pub status: &'static str,
}

impl Default for RunQueued {
    fn default() -> Self {
        RunQueued { status: "queued" }
    }
}

/// `run.started`: a turn began executing.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunStarted {}

/// Which MCP server needs authentication (MCP auth pauses).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PauseAuthentication {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub provider: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub server_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub server_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// `run.paused`: why the run waits, and for authentication pauses whose credential.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunPaused {
    pub pause_reason: crate::PauseReason,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authentication: Option<PauseAuthentication>,
    /// The model provider whose credential failed (model-credential auth pauses).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub provider: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub connection_id: String,
}

impl RunPaused {
    pub fn because(pause_reason: crate::PauseReason) -> Self {
        RunPaused {
            pause_reason,
            authentication: None,
            provider: String::new(),
            connection_id: String::new(),
        }
    }
}

/// `run.resumed`: the accepted resume and the interaction it resolved (empty when none).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunResumed {
    pub resume_id: String,
    pub interaction_id: String,
}

/// The cumulative usage a terminal event or checkpoint carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct UsageGauge {
    pub usage: Usage,
    /// Always `cumulative`: the runtime reports the run's running total.
    pub usage_semantic: &'static str,
}

impl UsageGauge {
    pub fn cumulative(usage: Usage) -> Self {
        UsageGauge {
            usage,
            usage_semantic: "cumulative",
        }
    }

    /// The gauge a terminal event carries: none when nothing was used.
    pub fn of_run(usage: Option<&Usage>) -> Option<Self> {
        usage
            .filter(|usage| !usage.is_zero())
            .map(|usage| UsageGauge::cumulative(*usage))
    }
}

/// `run.completed`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunCompleted {
    /// A non-default completion reason (`idle_timeout`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(flatten)]
    pub usage: Option<UsageGauge>,
    /// Side effects whose outcome is unknown (recovered from checkpoints).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted_external_effects: Option<Value>,
}

/// `run.failed`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunFailed {
    pub error: String,
    #[serde(flatten)]
    pub usage: Option<UsageGauge>,
}

/// `run.cancelled`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunCancelled {}

/// `run.mcp_credential_updated`: a run MCP server's credential was rotated (never the secret).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunMcpCredentialUpdated {
    pub server_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

/// `context.compaction_started`: a summary turn is about to shrink the run's context (the
/// original's event; its `generation` counts the run's summaries).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ContextCompactionStarted {
    pub generation: u64,
    pub estimated_input_tokens: u64,
}

/// `context.compaction_completed`: the context shrank from about `estimated_before` to about
/// `estimated_after` tokens, by cutting old tool outputs and summarizing old messages.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ContextCompactionCompleted {
    pub generation: u64,
    pub estimated_before: u64,
    pub estimated_after: u64,
    pub trimmed_tool_outputs: u64,
    pub summarized_messages: u64,
}

/// `context.compaction_failed`: the context could not be shrunk (the run goes on while its
/// next request still fits, and fails otherwise).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ContextCompactionFailed {
    pub generation: u64,
    pub error: String,
}

/// `workspace.prepared`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WorkspacePrepared {
    pub lease_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// Lease metadata (secret-free).
    #[serde(skip_serializing_if = "JsonMap::is_empty")]
    pub metadata: JsonMap,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primary: Option<bool>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub alias: String,
}

/// `workspace.finalized` (`outcome`: completed, paused or failed).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WorkspaceFinalized {
    pub lease_id: String,
    pub outcome: String,
}

/// `workspace.cleaned` (`reason`: completed, failed, cancelled or paused).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WorkspaceCleaned {
    pub lease_id: String,
    pub reason: String,
}

/// `assistant_message_started` and `reasoning_message_started`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MessageStarted {
    pub message_id: String,
}

/// `assistant_message_delta` and `reasoning_message_delta` (transient).
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct MessageDelta {
    pub message_id: String,
    pub text: String,
}

/// `assistant_message_completed` and `reasoning_message_completed`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MessageCompleted {
    pub message_id: String,
    pub content: String,
    /// Provider-encrypted reasoning (reasoning messages only).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub encrypted_value: String,
}

/// `tool_call_started`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolCallStarted {
    pub tool_call_id: String,
    pub tool_name: String,
    /// The assistant message that issued the call.
    pub parent_message_id: String,
}

/// `tool_call_args_delta` (transient).
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct ToolCallArgsDelta {
    pub tool_call_id: String,
    pub args_delta: String,
}

/// `tool_call_result`: the call's result content (clipped) and the message holding it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolCallResult {
    pub tool_call_id: String,
    pub tool_name: String,
    pub content: String,
    pub result_message_id: String,
}

/// `tool_call_finished`: input, a short summary of the output, duration, and the error if any.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolCallFinished {
    pub tool_call_id: String,
    pub tool_name: String,
    pub tool_input: String,
    pub output_summary: String,
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// `plan_updated`: the plan as given, its steps, the explanation, and the tool call behind it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PlanUpdated {
    pub content: String,
    pub plan: Value,
    pub note: String,
    pub data: JsonMap,
}

/// `activity_snapshot`: the whole state of a long-running activity.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ActivitySnapshot {
    pub activity_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub activity_type: String,
    #[serde(skip_serializing_if = "JsonMap::is_empty")]
    pub content: JsonMap,
}

/// `activity_delta` (transient): a change to an activity's state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct ActivityDelta {
    pub activity_id: String,
    #[serde(default, skip_serializing_if = "JsonMap::is_empty")]
    pub delta: JsonMap,
}

/// One URL file part of an A2A message.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct A2aFile {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub media_type: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub url: String,
}

/// `a2a.task`: an update of a remote A2A task.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct A2aTask {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub external_agent_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub context_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub task_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub state: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<A2aFile>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message_id: String,
}

/// `codex_auth.state_changed` (legacy Codex device sign-in).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CodexAuthStateChanged {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub provider: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub auth_mode: String,
    pub state: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub login_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub auth_url: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub verification_url: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user_code: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub plan_type: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// Declares [`RunEvent`]: one variant per kind with its payload, and the kind of each.
macro_rules! run_events {
    ($($variant:ident($payload:ty)),+ $(,)?) => {
        /// One event of a run, typed by kind.
        #[derive(Debug, Clone, PartialEq)]
        pub enum RunEvent {
            $($variant($payload)),+
        }

        impl RunEvent {
            /// The event's type.
            pub fn kind(&self) -> EventKind {
                match self {
                    $(RunEvent::$variant(_) => EventKind::$variant),+
                }
            }

            fn payload_value(&self) -> serde_json::Result<Value> {
                match self {
                    $(RunEvent::$variant(payload) => serde_json::to_value(payload)),+
                }
            }
        }
    };
}

run_events! {
    RunQueued(RunQueued),
    RunStarted(RunStarted),
    RunPaused(RunPaused),
    RunResumed(RunResumed),
    RunCompleted(RunCompleted),
    RunFailed(RunFailed),
    RunCancelled(RunCancelled),
    RunMcpCredentialUpdated(RunMcpCredentialUpdated),
    UsageCheckpoint(UsageGauge),
    WorkspacePrepared(WorkspacePrepared),
    WorkspaceFinalized(WorkspaceFinalized),
    WorkspaceCleaned(WorkspaceCleaned),
    AssistantMessageStarted(MessageStarted),
    AssistantMessageDelta(MessageDelta),
    AssistantMessageCompleted(MessageCompleted),
    ReasoningMessageStarted(MessageStarted),
    ReasoningMessageDelta(MessageDelta),
    ReasoningMessageCompleted(MessageCompleted),
    ToolCallStarted(ToolCallStarted),
    ToolCallArgsDelta(ToolCallArgsDelta),
    ToolCallResult(ToolCallResult),
    ToolCallFinished(ToolCallFinished),
    PlanUpdated(PlanUpdated),
    ActivitySnapshot(ActivitySnapshot),
    ActivityDelta(ActivityDelta),
    A2aTask(A2aTask),
    CodexAuthStateChanged(CodexAuthStateChanged),
    ContextCompactionStarted(ContextCompactionStarted),
    ContextCompactionCompleted(ContextCompactionCompleted),
    ContextCompactionFailed(ContextCompactionFailed),
}

impl RunEvent {
    pub fn is_transient(&self) -> bool {
        self.kind().is_transient()
    }

    /// The event's `data` object. Persisted events of a run with a host run id carry it as
    /// `host_run_id` (the contract adds it to every such payload); transient ones carry it
    /// in their bare envelope instead, so pass `""` for them.
    pub fn data(&self, host_run_id: &str) -> JsonMap {
        let mut data = match self.payload_value() {
            Ok(Value::Object(map)) => map,
            // Payloads are plain structs of strings, numbers and JSON values: serializing
            // them cannot fail, and none is anything but an object.
            _ => JsonMap::new(),
        };
        if !host_run_id.is_empty() {
            data.entry("host_run_id")
                .or_insert_with(|| Value::String(host_run_id.to_string()));
        }
        data
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
    pub kind: EventKind,
    /// The payload as persisted (see [`RunEvent::data`]).
    pub data: EventData,
    pub created_at: DateTime<Utc>,
}

impl StoredEvent {
    /// The same event (ids, place, kind, time) carrying `data` instead of its own: what is
    /// sent where the payload cannot go, without copying the payload it replaces.
    pub fn with_data(&self, data: EventData) -> StoredEvent {
        StoredEvent {
            position: self.position,
            event_id: self.event_id.clone(),
            app_id: self.app_id.clone(),
            run_id: self.run_id.clone(),
            host_run_id: self.host_run_id.clone(),
            sequence_no: self.sequence_no,
            kind: self.kind,
            data,
            created_at: self.created_at,
        }
    }
}

/// A persisted event's payload: the object, and its JSON text when the commit that stored it
/// wrote that text, so every envelope of the event (SSE frames, callbacks, NATS messages)
/// copies the text instead of serializing the object again. Read as a [`JsonMap`] (`Deref`);
/// it never changes after the commit, so the text cannot fall out of step with the object.
#[derive(Debug, Clone, Default)]
pub struct EventData {
    map: JsonMap,
    json: Option<Box<serde_json::value::RawValue>>,
}

impl EventData {
    /// `map` with `json`, its JSON text as the store wrote it. The caller vouches that the
    /// text is `map` serialized (the store makes both from one object).
    pub fn with_json(map: JsonMap, json: Box<serde_json::value::RawValue>) -> EventData {
        EventData {
            map,
            json: Some(json),
        }
    }

    /// The JSON text of the object, when known.
    pub fn json(&self) -> Option<&serde_json::value::RawValue> {
        self.json.as_deref()
    }
}

impl From<JsonMap> for EventData {
    fn from(map: JsonMap) -> Self {
        EventData { map, json: None }
    }
}

impl std::ops::Deref for EventData {
    type Target = JsonMap;

    fn deref(&self) -> &JsonMap {
        &self.map
    }
}

/// Equal objects are equal payloads, whether or not one carries its text.
impl PartialEq for EventData {
    fn eq(&self, other: &Self) -> bool {
        self.map == other.map
    }
}

/// A transient event as published live (never stored).
#[derive(Debug, Clone, PartialEq)]
pub struct TransientEvent {
    pub app_id: String,
    pub run_id: String,
    pub host_run_id: String,
    pub event: RunEvent,
}

/// An event as published live: persisted ones carry their sequence, transient ones do not.
///
/// Both are shared (`Arc`): an event never changes once published, and every reader of the
/// bus (SSE subscribers, the replica link, the NATS sink) takes it without a copy.
#[derive(Debug, Clone, PartialEq)]
pub enum LiveEvent {
    Persisted(Arc<StoredEvent>),
    Transient(Arc<TransientEvent>),
}

impl From<StoredEvent> for LiveEvent {
    fn from(event: StoredEvent) -> Self {
        LiveEvent::Persisted(Arc::new(event))
    }
}

impl From<TransientEvent> for LiveEvent {
    fn from(event: TransientEvent) -> Self {
        LiveEvent::Transient(Arc::new(event))
    }
}

impl LiveEvent {
    pub fn run_id(&self) -> &str {
        match self {
            LiveEvent::Persisted(event) => &event.run_id,
            LiveEvent::Transient(event) => &event.run_id,
        }
    }

    pub fn sequence_no(&self) -> Option<i64> {
        match self {
            LiveEvent::Persisted(event) => Some(event.sequence_no),
            LiveEvent::Transient(_) => None,
        }
    }

    pub fn kind(&self) -> EventKind {
        match self {
            LiveEvent::Persisted(event) => event.kind,
            LiveEvent::Transient(event) => event.event.kind(),
        }
    }
}

/// The live fan-out port: the engine publishes, SSE readers subscribe.
pub trait EventBus: Send + Sync + 'static {
    fn publish(&self, event: LiveEvent);
}

#[cfg(test)]
mod tests;
