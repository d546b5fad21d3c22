//! JSON shapes of the Go SDK's wire types (seed 001), checked field by field: every field the
//! SDK always writes must be present with the right JSON type, optional (`omitempty`) fields
//! must have the right type when present, and no key may appear that the SDK does not know
//! (a misspelt field would silently decode to the zero value in Go).

use serde_json::Value;

/// The JSON type a field must have.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Str,
    /// An RFC 3339 timestamp (Go's `time.Time`).
    Time,
    Int,
    Bool,
    Object,
    List,
    /// `json.RawMessage` / `interface{}`: any JSON value.
    Any,
}

/// Whether Go always writes the field (no `omitempty`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    Always,
    OmitEmpty,
}

use Kind::*;
use Presence::*;

pub type Shape = &'static [(&'static str, Kind, Presence)];

pub const AGENT: Shape = &[
    ("id", Str, Always),
    ("app_id", Str, Always),
    ("name", Str, Always),
    ("runtime_kind", Str, Always),
    ("provider", Str, OmitEmpty),
    ("model", Str, OmitEmpty),
    ("system_prompt", Str, OmitEmpty),
    ("skills", List, OmitEmpty),
    ("allowed_tools", List, OmitEmpty),
    ("allowed_targets", List, OmitEmpty),
    ("approval_mode", Str, Always),
    ("default_invocation_mode", Str, Always),
    ("execution_config", Any, OmitEmpty),
    ("created_at", Time, Always),
    ("updated_at", Time, Always),
];

pub const RUN: Shape = &[
    ("id", Str, Always),
    ("app_id", Str, Always),
    ("host_run_id", Str, OmitEmpty),
    ("agent_id", Str, Always),
    ("target", Object, Always),
    ("runtime_kind", Str, Always),
    ("execution_mode", Str, Always),
    ("invocation_mode", Str, Always),
    ("external_actor_id", Str, OmitEmpty),
    ("status", Str, Always),
    ("pause_reason", Str, Always),
    ("approval_state", Str, Always),
    ("input", Object, Always),
    ("output_summary", Any, OmitEmpty),
    ("workspace_lease", Object, OmitEmpty),
    ("error_message", Str, OmitEmpty),
    ("started_at", Time, OmitEmpty),
    ("completed_at", Time, OmitEmpty),
    ("created_at", Time, Always),
    ("updated_at", Time, Always),
];

pub const TARGET: Shape = &[
    ("type", Str, Always),
    ("id", Str, Always),
    ("display", Object, OmitEmpty),
    ("metadata", Object, OmitEmpty),
];

pub const RUN_INPUT: Shape = &[
    ("model", Object, OmitEmpty),
    ("credential_source", Str, OmitEmpty),
    ("instructions", Str, OmitEmpty),
    ("allowed_tools", List, OmitEmpty),
    ("trigger", Object, OmitEmpty),
    ("metadata", Object, OmitEmpty),
    ("context_summary", Str, OmitEmpty),
    // A struct with `omitempty` is still written by encoding/json.
    ("turn_policy", Object, OmitEmpty),
];

pub const RUN_MODEL: Shape = &[
    ("provider", Str, Always),
    ("model", Str, Always),
    ("endpoint", Object, OmitEmpty),
    ("controls", Object, OmitEmpty),
];

pub const EVENT: Shape = &[
    ("event_id", Str, Always),
    ("sent_at", Time, Always),
    ("sequence_no", Int, Always),
    ("app_id", Str, Always),
    ("run_id", Str, Always),
    ("host_run_id", Str, OmitEmpty),
    ("schema_version", Str, OmitEmpty),
    ("turn_id", Str, OmitEmpty),
    ("segment_id", Str, OmitEmpty),
    ("revision", Int, OmitEmpty),
    ("base_revision", Int, OmitEmpty),
    ("type", Str, Always),
    ("data", Object, OmitEmpty),
];

/// A transient (never persisted) stream frame: the SDK's `Event`.
pub const TRANSIENT: Shape = &[
    ("app_id", Str, Always),
    ("run_id", Str, Always),
    ("host_run_id", Str, OmitEmpty),
    ("type", Str, Always),
    ("data", Object, OmitEmpty),
];

/// `AssistantMessageEventData`.
pub const ASSISTANT_MESSAGE_DATA: Shape = &[
    ("message_id", Str, Always),
    ("text", Str, OmitEmpty),
    ("content", Str, OmitEmpty),
    // The runtime adds the run's host id to every event's data.
    ("host_run_id", Str, OmitEmpty),
];

pub const MESSAGE: Shape = &[
    ("id", Str, Always),
    ("app_id", Str, Always),
    ("run_id", Str, Always),
    ("runtime_message_id", Str, OmitEmpty),
    ("role", Str, Always),
    ("content", Str, Always),
    ("message_type", Str, Always),
    ("content_blocks", Any, OmitEmpty),
    ("tool_invocations", Any, OmitEmpty),
    ("sequence_no", Int, Always),
    ("created_at", Time, Always),
];

pub const TOOL_CALL: Shape = &[
    ("id", Str, Always),
    ("app_id", Str, Always),
    ("run_id", Str, Always),
    ("tool_name", Str, Always),
    ("input", Any, Always),
    ("output", Any, OmitEmpty),
    ("error", Str, OmitEmpty),
    ("mutating", Bool, Always),
    ("approval_required", Bool, Always),
    ("created_at", Time, Always),
];

pub const INTERACTION: Shape = &[
    ("id", Str, Always),
    ("app_id", Str, Always),
    ("run_id", Str, Always),
    ("runtime_kind", Str, Always),
    ("interaction_kind", Str, Always),
    ("status", Str, Always),
    ("title", Str, OmitEmpty),
    ("summary", Str, OmitEmpty),
    ("request_payload", Any, OmitEmpty),
    ("response_payload", Any, OmitEmpty),
    ("resolved_by_external_id", Str, OmitEmpty),
    ("resolved_at", Time, OmitEmpty),
    ("created_at", Time, Always),
    ("updated_at", Time, Always),
];

pub const EXECUTION: Shape = &[
    ("execution_mode", Str, Always),
    ("state", Str, Always),
    ("workflow_id", Str, OmitEmpty),
    ("temporal_run_id", Str, OmitEmpty),
    ("task_queue", Str, OmitEmpty),
    ("history_length", Int, OmitEmpty),
    ("history_size_bytes", Int, OmitEmpty),
    ("state_transition_count", Int, OmitEmpty),
    ("started_at", Time, OmitEmpty),
    ("closed_at", Time, OmitEmpty),
];

fn kind_matches(kind: Kind, value: &Value) -> bool {
    match kind {
        Str => value.is_string(),
        Time => value
            .as_str()
            .is_some_and(|text| chrono::DateTime::parse_from_rfc3339(text).is_ok()),
        Int => value.is_i64() || value.is_u64(),
        Bool => value.is_boolean(),
        Object => value.is_object(),
        List => value.is_array(),
        Any => true,
    }
}

/// Asserts `value` has `shape`; `what` names it in the failure message.
pub fn check(what: &str, shape: Shape, value: &Value) {
    let Some(object) = value.as_object() else {
        panic!("{what}: expected a JSON object, got {value}");
    };
    for key in object.keys() {
        assert!(
            shape.iter().any(|(name, _, _)| name == key),
            "{what}: field {key:?} is not in the SDK type: {value}"
        );
    }
    for (name, kind, presence) in shape {
        match object.get(*name) {
            None if *presence == Always => {
                panic!("{what}: the SDK always writes {name:?}, missing in {value}")
            }
            None => {}
            // Go writes a nil RawMessage / map / slice without omitempty as null.
            Some(Value::Null) if matches!(kind, Any) => {}
            Some(field) => assert!(
                kind_matches(*kind, field),
                "{what}: field {name:?} should be {kind:?}, got {field} in {value}"
            ),
        }
    }
}

/// Checks a run with its nested target, input and model route.
pub fn check_run(what: &str, run: &Value) {
    check(what, RUN, run);
    check(&format!("{what}.target"), TARGET, &run["target"]);
    check(&format!("{what}.input"), RUN_INPUT, &run["input"]);
    if let Some(model) = run["input"].get("model") {
        check(&format!("{what}.input.model"), RUN_MODEL, model);
    }
}

/// Checks every element of a list.
pub fn check_all(what: &str, shape: Shape, values: &[Value]) {
    for (index, value) in values.iter().enumerate() {
        check(&format!("{what}[{index}]"), shape, value);
    }
}
