//! Run events: v1/v2 envelopes, the bare transient event, typed `data` payloads, replay responses, and event names.

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::de::{is_zero, nd};

/// A persisted (or callback/NATS-delivered) event. v2 adds `schema_version`, `turn_id`,
/// `segment_id`, `revision` and `base_revision`; v1 leaves them empty, so they are omitted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct EventEnvelope {
    /// Unique event id (NATS dedup id, callback idempotency key).
    #[serde(deserialize_with = "nd")]
    pub event_id: String,
    /// Emission time.
    #[serde(with = "crate::time::rfc3339", default = "crate::time::go_zero")]
    pub sent_at: DateTime<Utc>,
    /// Per-run durable sequence (v2, history) or sink-local counter (v1 NATS/callbacks).
    #[serde(deserialize_with = "nd")]
    pub sequence_no: i64,
    /// App id.
    #[serde(deserialize_with = "nd")]
    pub app_id: String,
    /// Run id.
    #[serde(deserialize_with = "nd")]
    pub run_id: String,
    /// App run id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub host_run_id: String,
    /// `"2"` for v2 envelopes; see [`EVENT_SCHEMA_VERSION_V2`].
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub schema_version: String,
    /// v2 turn identity.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub turn_id: String,
    /// v2 segment identity (message/tool call/activity).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub segment_id: String,
    /// v2 revision (= `sequence_no`).
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub revision: i64,
    /// v2 base revision (currently unused).
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub base_revision: i64,
    /// Event type; see [`EventKind`].
    #[serde(rename = "type", deserialize_with = "nd")]
    pub event_type: String,
    /// Type-specific payload.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub data: Map<String, Value>,
}

/// [`EventEnvelope`] borrowed from the event it describes: written for every SSE frame,
/// callback and NATS message, where copying the event's data only to serialize it would be
/// most of the work. Serializes exactly as the owned envelope does (same fields, order and
/// omissions).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct EventEnvelopeRef<'a> {
    pub event_id: &'a str,
    #[serde(with = "crate::time::rfc3339")]
    pub sent_at: DateTime<Utc>,
    pub sequence_no: i64,
    pub app_id: &'a str,
    pub run_id: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub host_run_id: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub schema_version: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub turn_id: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub segment_id: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    pub revision: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub base_revision: i64,
    #[serde(rename = "type")]
    pub event_type: &'a str,
    #[serde(skip_serializing_if = "EnvelopeData::is_empty")]
    pub data: EnvelopeData<'a>,
}

/// An envelope's `data`, borrowed: the object, or its JSON text when the event carries it
/// (written once at commit), which is then copied as it is instead of serialized again.
#[derive(Debug, Clone, Copy)]
pub enum EnvelopeData<'a> {
    Object(&'a Map<String, Value>),
    /// The text of an object (never of another JSON value).
    Text(&'a RawValue),
}

impl EnvelopeData<'_> {
    /// Empty data is omitted from the envelope.
    pub fn is_empty(&self) -> bool {
        match self {
            EnvelopeData::Object(map) => map.is_empty(),
            EnvelopeData::Text(text) => text.get() == "{}",
        }
    }

    fn to_map(self) -> Map<String, Value> {
        match self {
            EnvelopeData::Object(map) => map.clone(),
            // The text of an object: unreadable only if someone broke that promise.
            EnvelopeData::Text(text) => serde_json::from_str(text.get()).unwrap_or_default(),
        }
    }
}

impl Serialize for EnvelopeData<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            EnvelopeData::Object(map) => map.serialize(serializer),
            EnvelopeData::Text(text) => text.serialize(serializer),
        }
    }
}

impl EventEnvelopeRef<'_> {
    /// The owned envelope (for responses that hold envelopes, and for decoding helpers).
    pub fn to_owned_envelope(&self) -> EventEnvelope {
        EventEnvelope {
            event_id: self.event_id.to_owned(),
            sent_at: self.sent_at,
            sequence_no: self.sequence_no,
            app_id: self.app_id.to_owned(),
            run_id: self.run_id.to_owned(),
            host_run_id: self.host_run_id.to_owned(),
            schema_version: self.schema_version.to_owned(),
            turn_id: self.turn_id.to_owned(),
            segment_id: self.segment_id.to_owned(),
            revision: self.revision,
            base_revision: self.base_revision,
            event_type: self.event_type.to_owned(),
            data: self.data.to_map(),
        }
    }
}

/// The bare form of a transient (never persisted) event, as sent on SSE for deltas.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct Event {
    /// App id.
    #[serde(deserialize_with = "nd")]
    pub app_id: String,
    /// Run id.
    #[serde(deserialize_with = "nd")]
    pub run_id: String,
    /// App run id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub host_run_id: String,
    /// Event type.
    #[serde(rename = "type", deserialize_with = "nd")]
    pub event_type: String,
    /// Payload.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub data: Map<String, Value>,
}

fn decode<T: DeserializeOwned>(data: &Map<String, Value>) -> serde_json::Result<T> {
    serde_json::from_value(Value::Object(data.clone()))
}

impl EventEnvelope {
    /// Decodes `data` into any payload type.
    pub fn decode_data<T: DeserializeOwned>(&self) -> serde_json::Result<T> {
        decode(&self.data)
    }

    /// The payload of an `assistant_message_*` event; `None` for other types.
    pub fn assistant_message(&self) -> Option<serde_json::Result<AssistantMessageEventData>> {
        is_assistant_message_type(&self.event_type).then(|| self.decode_data())
    }

    /// The payload of a `reasoning_message_*` event; `None` for other types.
    pub fn reasoning_message(&self) -> Option<serde_json::Result<ReasoningMessageEventData>> {
        is_reasoning_message_type(&self.event_type).then(|| self.decode_data())
    }

    /// The payload of a `tool_call_*` event; `None` for other types.
    pub fn tool_call(&self) -> Option<serde_json::Result<ToolCallEventData>> {
        is_tool_call_type(&self.event_type).then(|| self.decode_data())
    }

    /// The payload of a `plan_updated` event; `None` for other types.
    pub fn plan_updated(&self) -> Option<serde_json::Result<PlanUpdatedEventData>> {
        (kind_of(&self.event_type) == Some(EventKind::PlanUpdated)).then(|| self.decode_data())
    }

    /// The payload of a `usage.checkpoint` event; `None` for other types.
    pub fn usage_checkpoint(&self) -> Option<serde_json::Result<UsageCheckpointEventData>> {
        (kind_of(&self.event_type) == Some(EventKind::UsageCheckpoint)).then(|| self.decode_data())
    }

    /// The payload of a `codex_auth.state_changed` event; `None` for other types.
    pub fn codex_auth_state(&self) -> Option<serde_json::Result<CodexAuthStateEventData>> {
        (kind_of(&self.event_type) == Some(EventKind::CodexAuthStateChanged))
            .then(|| self.decode_data())
    }

    /// The bare transient form of this event.
    pub fn to_event(&self) -> Event {
        Event {
            app_id: self.app_id.clone(),
            run_id: self.run_id.clone(),
            host_run_id: self.host_run_id.clone(),
            event_type: self.event_type.clone(),
            data: self.data.clone(),
        }
    }
}

impl Event {
    /// Decodes `data` into any payload type.
    pub fn decode_data<T: DeserializeOwned>(&self) -> serde_json::Result<T> {
        decode(&self.data)
    }
}

/// `data` of `assistant_message_started|delta|completed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct AssistantMessageEventData {
    /// Message id.
    #[serde(deserialize_with = "nd")]
    pub message_id: String,
    /// Delta text.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// Full content (on completion).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub content: String,
}

/// `data` of `reasoning_message_started|delta|completed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ReasoningMessageEventData {
    /// Message id.
    #[serde(deserialize_with = "nd")]
    pub message_id: String,
    /// Delta text.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// Full content.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub content: String,
    /// Provider-encrypted reasoning.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub encrypted_value: String,
}

/// `data` of `tool_call_started|args_delta|result|finished`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ToolCallEventData {
    /// Tool call id.
    #[serde(deserialize_with = "nd")]
    pub tool_call_id: String,
    /// Tool name.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub tool_name: String,
    /// Tool input as JSON text.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub tool_input: String,
    /// Assistant message that issued the call.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub parent_message_id: String,
    /// Message holding the result.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub result_message_id: String,
    /// Streaming argument fragment.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub args_delta: String,
    /// Accumulated arguments.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub args_text: String,
    /// Result content.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub content: String,
    /// Short result summary.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub output_summary: String,
    /// Duration in milliseconds.
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub duration_ms: i64,
    /// Tool error.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// `data` of `plan_updated`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct PlanUpdatedEventData {
    /// Rendered plan / explanation.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub content: String,
    /// Plan steps.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<RunPlanStep>,
    /// Note.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// Extra data.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub data: Map<String, Value>,
}

/// One plan step.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct RunPlanStep {
    /// Step text.
    #[serde(deserialize_with = "nd")]
    pub step: String,
    /// See [`plan_step_status`].
    #[serde(deserialize_with = "nd")]
    pub status: String,
}

/// Token usage (cumulative per run unless `usage_semantic` says otherwise).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct Usage {
    /// Total tokens.
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub total_tokens: i64,
    /// Input tokens (includes cached).
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub input_tokens: i64,
    /// Cached input tokens.
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub cached_input_tokens: i64,
    /// Output tokens (includes reasoning).
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub output_tokens: i64,
    /// Reasoning output tokens.
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub reasoning_output_tokens: i64,
}

impl Usage {
    /// Whether every counter is zero.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// `data` of `usage.checkpoint`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct UsageCheckpointEventData {
    /// Usage gauge (struct value: always written).
    #[serde(deserialize_with = "nd")]
    pub usage: Usage,
    /// See [`usage_semantic`].
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub usage_semantic: String,
}

/// `data` of `codex_auth.state_changed` (legacy).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct CodexAuthStateEventData {
    /// Provider.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// Auth mode.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub auth_mode: String,
    /// See [`crate::codex::codex_auth_state`].
    #[serde(deserialize_with = "nd")]
    pub state: String,
    /// Login id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub login_id: String,
    /// Auth URL.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub auth_url: String,
    /// Device verification URL.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub verification_url: String,
    /// Device user code.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub user_code: String,
    /// Plan type.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub plan_type: String,
    /// Error.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// Response of `GET /v2/runs/{id}/events`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct EventListResponse {
    /// Events after `after_sequence` (always written).
    #[serde(deserialize_with = "nd")]
    pub events: Vec<EventEnvelope>,
    /// Sequence to pass as the next `after_sequence`.
    #[serde(deserialize_with = "nd")]
    pub next_sequence_no: i64,
    /// Full snapshot (unpaged requests from sequence 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_state_snapshot: Option<StreamStateSnapshot>,
}

/// Query string of `GET /v2/runs/{id}/events`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct EventListQuery {
    /// Owning app.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub app_id: String,
    /// Return events with a greater sequence (default 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_sequence: Option<i64>,
    /// Page size, 1..=[`MAX_EVENT_PAGE_SIZE`]; absent = unpaged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_size: Option<i64>,
}

/// Maximum `page_size` of the v2 events API.
pub const MAX_EVENT_PAGE_SIZE: i64 = 1000;

/// Materialized v2 stream state through `through_sequence` (`state.events` = all v2 envelopes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct StreamStateSnapshot {
    /// Always `"2"`.
    #[serde(deserialize_with = "nd")]
    pub schema_version: String,
    /// Run id.
    #[serde(deserialize_with = "nd")]
    pub run_id: String,
    /// Last sequence included.
    #[serde(deserialize_with = "nd")]
    pub through_sequence: i64,
    /// JSON-shaped state (always written).
    #[serde(deserialize_with = "nd")]
    pub state: Map<String, Value>,
}

/// `schema_version` of v2 envelopes.
pub const EVENT_SCHEMA_VERSION_V2: &str = "2";

/// Request header declaring the host's event projection contract (`v1` or `v2`).
pub const EVENT_PROTOCOL_HEADER: &str = "X-Agent-Runtime-Event-Protocol";

wire_values! {
    /// Values of [`EVENT_PROTOCOL_HEADER`] and app `event_protocol`.
    pub mod event_protocol {
        /// Legacy projection (default).
        V1 = "v1",
        /// Durable per-run sequences and v2 envelopes.
        V2 = "v2",
    }
}

wire_values! {
    /// `UsageCheckpointEventData.usage_semantic`.
    pub mod usage_semantic {
        /// Latest per-run total (what the runtime emits).
        CUMULATIVE = "cumulative",
        /// Increment since the previous checkpoint.
        DELTA = "delta",
    }
}

wire_values! {
    /// `RunPlanStep.status`.
    pub mod plan_step_status {
        /// Not started.
        PENDING = "pending",
        /// Working on it.
        IN_PROGRESS = "in_progress",
        /// Done.
        COMPLETED = "completed",
    }
}

/// Event `type` names: the one list is the domain's [`EventKind`] (`as_str`, `parse`,
/// `is_transient`, `is_lifecycle`).
pub use ar_core::EventKind;

fn kind_of(event_type: &str) -> Option<EventKind> {
    EventKind::parse(event_type).ok()
}

/// Whether an event type is transient (never persisted).
pub fn is_transient(event_type: &str) -> bool {
    kind_of(event_type).is_some_and(EventKind::is_transient)
}

/// Whether an event type is a `run.*` lifecycle event.
pub fn is_lifecycle(event_type: &str) -> bool {
    kind_of(event_type).is_some_and(EventKind::is_lifecycle)
}

/// Whether an event type is one of `assistant_message_*`.
pub fn is_assistant_message_type(event_type: &str) -> bool {
    matches!(
        kind_of(event_type),
        Some(
            EventKind::AssistantMessageStarted
                | EventKind::AssistantMessageDelta
                | EventKind::AssistantMessageCompleted
        )
    )
}

/// Whether an event type is one of `reasoning_message_*`.
pub fn is_reasoning_message_type(event_type: &str) -> bool {
    matches!(
        kind_of(event_type),
        Some(
            EventKind::ReasoningMessageStarted
                | EventKind::ReasoningMessageDelta
                | EventKind::ReasoningMessageCompleted
        )
    )
}

/// Whether an event type is one of `tool_call_*`.
pub fn is_tool_call_type(event_type: &str) -> bool {
    matches!(
        kind_of(event_type),
        Some(
            EventKind::ToolCallStarted
                | EventKind::ToolCallArgsDelta
                | EventKind::ToolCallResult
                | EventKind::ToolCallFinished
        )
    )
}

#[cfg(test)]
mod envelope_ref_tests {
    use super::*;

    fn owned(v2: bool, data: Map<String, Value>) -> EventEnvelope {
        EventEnvelope {
            event_id: "evt_1".into(),
            sent_at: "2026-12-04T10:11:12.123456789Z".parse().unwrap(),
            sequence_no: 7,
            app_id: "app".into(),
            run_id: "run_1".into(),
            host_run_id: if v2 { "host_9".into() } else { String::new() },
            schema_version: if v2 { "2".into() } else { String::new() },
            turn_id: if v2 { "turn".into() } else { String::new() },
            segment_id: if v2 { "msg".into() } else { String::new() },
            revision: if v2 { 7 } else { 0 },
            base_revision: 0,
            event_type: "assistant_message_completed".into(),
            data,
        }
    }

    fn borrowed(envelope: &EventEnvelope) -> EventEnvelopeRef<'_> {
        EventEnvelopeRef {
            event_id: &envelope.event_id,
            sent_at: envelope.sent_at,
            sequence_no: envelope.sequence_no,
            app_id: &envelope.app_id,
            run_id: &envelope.run_id,
            host_run_id: &envelope.host_run_id,
            schema_version: &envelope.schema_version,
            turn_id: &envelope.turn_id,
            segment_id: &envelope.segment_id,
            revision: envelope.revision,
            base_revision: envelope.base_revision,
            event_type: &envelope.event_type,
            data: EnvelopeData::Object(&envelope.data),
        }
    }

    #[test]
    fn a_borrowed_envelope_writes_exactly_the_owned_one() {
        let mut data = Map::new();
        data.insert("message_id".into(), Value::from("msg"));
        data.insert("text".into(), Value::from("héllo \"quoted\""));
        for (v2, data) in [(false, data.clone()), (true, data), (false, Map::new())] {
            let envelope = owned(v2, data);
            let view = borrowed(&envelope);
            let expected = serde_json::to_string(&envelope).unwrap();
            assert_eq!(serde_json::to_string(&view).unwrap(), expected);
            assert_eq!(view.to_owned_envelope(), envelope);
            // The data's text, as an event carries it from its commit, writes the same bytes.
            let text = serde_json::value::to_raw_value(&envelope.data).unwrap();
            let from_text = EventEnvelopeRef {
                data: EnvelopeData::Text(&text),
                ..view
            };
            assert_eq!(serde_json::to_string(&from_text).unwrap(), expected);
            assert_eq!(from_text.to_owned_envelope(), envelope);
        }
    }
}
