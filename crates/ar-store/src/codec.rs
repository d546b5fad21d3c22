//! Value conversions shared by both backends: timestamps, JSON text, NUL stripping, enum
//! decoding, and building domain records from decoded columns.
//!
//! Both backends store the same logical columns; only the physical types differ (TEXT vs
//! JSONB, RFC 3339 text vs timestamptz). Each backend implements [`Cols`] for its row type and
//! the record builders here do the rest, so a record reads back identically from either.

use std::borrow::Cow;

use ar_core::agent::{Agent, SkillRef};
use ar_core::records::{Artifact, Interaction, Message, ToolCallRecord};
use ar_core::store::{Checkpoint, StoreError, StoreResult};
use ar_core::{JsonMap, Run, RunState, StoredEvent};
use chrono::{DateTime, SecondsFormat, Timelike, Utc};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// Truncates a timestamp to whole microseconds, the precision both backends keep.
pub(crate) fn micros(at: DateTime<Utc>) -> DateTime<Utc> {
    let nanos = at.timestamp_subsec_nanos();
    // `with_nanosecond` only rejects values >= 2e9; a truncated value never grows, so the
    // fallback is unreachable but keeps this total.
    at.with_nanosecond(nanos / 1_000 * 1_000).unwrap_or(at)
}

/// The current time at store precision.
pub(crate) fn now() -> DateTime<Utc> {
    micros(Utc::now())
}

/// Fixed-width RFC 3339 text (`2026-01-02T03:04:05.678901Z`): sorts like the instant it names.
pub(crate) fn ts_text(at: DateTime<Utc>) -> String {
    micros(at).to_rfc3339_opts(SecondsFormat::Micros, true)
}

pub(crate) fn parse_ts(column: &str, text: &str) -> StoreResult<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|error| StoreError::Corrupt(format!("{column}: bad timestamp {text:?}: {error}")))
}

/// Text without NUL characters (PostgreSQL rejects them; both backends strip them alike).
pub(crate) fn clean(text: &str) -> Cow<'_, str> {
    if text.contains('\0') {
        Cow::Owned(text.replace('\0', ""))
    } else {
        Cow::Borrowed(text)
    }
}

/// Strips NUL characters from an owned string in place.
pub(crate) fn clean_in_place(text: &mut String) {
    if text.contains('\0') {
        text.retain(|c| c != '\0');
    }
}

/// Strips NUL characters from every string and key of a JSON value.
pub(crate) fn clean_value(value: &mut Value) {
    match value {
        Value::String(text) => clean_in_place(text),
        Value::Array(items) => items.iter_mut().for_each(clean_value),
        Value::Object(map) => clean_map(map),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Strips NUL characters from every key and value of a JSON object.
pub(crate) fn clean_map(map: &mut JsonMap) {
    if map.keys().any(|key| key.contains('\0')) {
        let entries = std::mem::take(map);
        for (mut key, value) in entries {
            clean_in_place(&mut key);
            map.insert(key, value);
        }
    }
    map.values_mut().for_each(clean_value);
}

/// serde_json writes a NUL character as this escape, so its absence proves a clean value.
const NUL_ESCAPE: &str = "\\u0000";

fn encode_error(error: serde_json::Error) -> StoreError {
    StoreError::backend("encoding a JSON value", error)
}

/// JSON text of a value, with NUL characters stripped from its strings.
pub(crate) fn json_text<T: Serialize + ?Sized>(value: &T) -> StoreResult<String> {
    let text = serde_json::to_string(value).map_err(encode_error)?;
    if !text.contains(NUL_ESCAPE) {
        return Ok(text);
    }
    let mut value = serde_json::to_value(value).map_err(encode_error)?;
    clean_value(&mut value);
    serde_json::to_string(&value).map_err(encode_error)
}

/// Like [`json_text`] for a value the caller gets back: strips the NULs in place too, so what
/// is returned equals what a later read yields.
pub(crate) fn json_text_mut(value: &mut Value) -> StoreResult<String> {
    let text = serde_json::to_string(value).map_err(encode_error)?;
    if !text.contains(NUL_ESCAPE) {
        return Ok(text);
    }
    clean_value(value);
    serde_json::to_string(value).map_err(encode_error)
}

/// [`json_text_mut`] for a JSON object, as a raw JSON value (the text, known to be valid, which
/// an event keeps for its envelopes: see [`ar_core::event::EventData`]).
pub(crate) fn json_map_raw_mut(map: &mut JsonMap) -> StoreResult<Box<RawValue>> {
    let raw = serde_json::value::to_raw_value(map).map_err(encode_error)?;
    if !raw.get().contains(NUL_ESCAPE) {
        return Ok(raw);
    }
    clean_map(map);
    serde_json::value::to_raw_value(map).map_err(encode_error)
}

pub(crate) fn json_opt_text_mut(value: &mut Option<Value>) -> StoreResult<Option<String>> {
    value.as_mut().map(json_text_mut).transpose()
}

fn parse_json<T: DeserializeOwned>(column: &str, text: &str) -> StoreResult<T> {
    serde_json::from_str(text)
        .map_err(|error| StoreError::Corrupt(format!("{column}: bad JSON: {error}")))
}

fn parse_enum<T, E: std::fmt::Display>(
    column: &str,
    text: &str,
    parse: impl FnOnce(&str) -> Result<T, E>,
) -> StoreResult<T> {
    parse(text).map_err(|error| StoreError::Corrupt(format!("{column}: {error}")))
}

/// Typed access to one row's columns; each backend maps its physical types onto these.
/// JSON columns are read as text (PostgreSQL queries cast them with `::text`).
pub(crate) trait Cols {
    fn text(&self, column: &str) -> StoreResult<String>;
    fn text_opt(&self, column: &str) -> StoreResult<Option<String>>;
    fn int(&self, column: &str) -> StoreResult<i64>;
    fn flag(&self, column: &str) -> StoreResult<bool>;
    fn bytes(&self, column: &str) -> StoreResult<Vec<u8>>;
    fn ts(&self, column: &str) -> StoreResult<DateTime<Utc>>;
    fn ts_opt(&self, column: &str) -> StoreResult<Option<DateTime<Utc>>>;

    fn json<T: DeserializeOwned>(&self, column: &str) -> StoreResult<T> {
        parse_json(column, &self.text(column)?)
    }

    fn json_opt<T: DeserializeOwned>(&self, column: &str) -> StoreResult<Option<T>> {
        self.text_opt(column)?
            .map(|text| parse_json(column, &text))
            .transpose()
    }
}

pub(crate) fn agent_from(row: &impl Cols) -> StoreResult<Agent> {
    Ok(Agent {
        id: row.text("id")?,
        app_id: row.text("app_id")?,
        name: row.text("name")?,
        runtime_kind: parse_enum(
            "runtime_kind",
            &row.text("runtime_kind")?,
            ar_core::RuntimeKind::parse,
        )?,
        provider: row.text("provider")?,
        model: row.text("model")?,
        system_prompt: row.text("system_prompt")?,
        skills: row.json::<Vec<SkillRef>>("skills")?,
        allowed_tools: row.json("allowed_tools")?,
        allowed_targets: row.json("allowed_targets")?,
        approval_mode: parse_enum(
            "approval_mode",
            &row.text("approval_mode")?,
            ar_core::ApprovalMode::parse,
        )?,
        default_invocation_mode: parse_enum(
            "default_invocation_mode",
            &row.text("default_invocation_mode")?,
            ar_core::InvocationMode::parse,
        )?,
        execution_config: row.json_opt("execution_config")?,
        created_at: row.ts("created_at")?,
        updated_at: row.ts("updated_at")?,
    })
}

pub(crate) fn run_from(row: &impl Cols) -> StoreResult<Run> {
    Ok(Run {
        id: row.text("id")?,
        app_id: row.text("app_id")?,
        host_run_id: row.text("host_run_id")?,
        agent_id: row.text("agent_id")?,
        target: row.json("target")?,
        runtime_kind: parse_enum(
            "runtime_kind",
            &row.text("runtime_kind")?,
            ar_core::RuntimeKind::parse,
        )?,
        execution_mode: parse_enum(
            "execution_mode",
            &row.text("execution_mode")?,
            ar_core::ExecutionMode::parse,
        )?,
        invocation_mode: parse_enum(
            "invocation_mode",
            &row.text("invocation_mode")?,
            ar_core::InvocationMode::parse,
        )?,
        external_actor_id: row.text("external_actor_id")?,
        state: RunState::restore(
            parse_enum("status", &row.text("status")?, ar_core::RunStatus::parse)?,
            parse_enum(
                "pause_reason",
                &row.text("pause_reason")?,
                ar_core::PauseReason::parse,
            )?,
            parse_enum(
                "approval_state",
                &row.text("approval_state")?,
                ar_core::ApprovalState::parse,
            )?,
            row.flag("pause_requested")?,
        ),
        input: row.json("input")?,
        output_summary: row.json("output_summary")?,
        workspace_lease: row.json_opt("workspace_lease")?,
        error_message: row.text("error_message")?,
        started_at: row.ts_opt("started_at")?,
        completed_at: row.ts_opt("completed_at")?,
        created_at: row.ts("created_at")?,
        updated_at: row.ts("updated_at")?,
        version: row.int("version")?,
        engine: row.json("engine_state")?,
    })
}

pub(crate) fn message_from(row: &impl Cols) -> StoreResult<Message> {
    Ok(Message {
        id: row.text("id")?,
        app_id: row.text("app_id")?,
        run_id: row.text("run_id")?,
        runtime_message_id: row.text("runtime_message_id")?,
        role: parse_enum("role", &row.text("role")?, ar_core::MessageRole::parse)?,
        content: row.text("content")?,
        message_type: row.text("message_type")?,
        content_blocks: row.json_opt("content_blocks")?,
        tool_invocations: row.json_opt("tool_invocations")?,
        sequence_no: row.int("sequence_no")?,
        created_at: row.ts("created_at")?,
    })
}

pub(crate) fn artifact_from(row: &impl Cols) -> StoreResult<Artifact> {
    Ok(Artifact {
        id: row.text("id")?,
        app_id: row.text("app_id")?,
        run_id: row.text("run_id")?,
        artifact_type: row.text("artifact_type")?,
        format: row.text("format")?,
        storage_mode: row.text("storage_mode")?,
        inline_content: row.text("inline_content")?,
        metadata: row.json_opt("metadata")?,
        sequence_no: row.int("sequence_no")?,
        created_at: row.ts("created_at")?,
    })
}

pub(crate) fn interaction_from(row: &impl Cols) -> StoreResult<Interaction> {
    Ok(Interaction {
        id: row.text("id")?,
        app_id: row.text("app_id")?,
        run_id: row.text("run_id")?,
        runtime_kind: parse_enum(
            "runtime_kind",
            &row.text("runtime_kind")?,
            ar_core::RuntimeKind::parse,
        )?,
        interaction_kind: row.text("interaction_kind")?,
        status: parse_enum(
            "status",
            &row.text("status")?,
            ar_core::InteractionStatus::parse,
        )?,
        title: row.text("title")?,
        summary: row.text("summary")?,
        request_payload: row.json_opt("request_payload")?,
        response_payload: row.json_opt("response_payload")?,
        resolved_by_external_id: row.text("resolved_by_external_id")?,
        resolved_at: row.ts_opt("resolved_at")?,
        created_at: row.ts("created_at")?,
        updated_at: row.ts("updated_at")?,
    })
}

pub(crate) fn tool_call_from(row: &impl Cols) -> StoreResult<ToolCallRecord> {
    Ok(ToolCallRecord {
        id: row.text("id")?,
        app_id: row.text("app_id")?,
        run_id: row.text("run_id")?,
        tool_name: row.text("tool_name")?,
        input: row.json("input")?,
        output: row.json_opt("output")?,
        error: row.text("error")?,
        mutating: row.flag("mutating")?,
        approval_required: row.flag("approval_required")?,
        created_at: row.ts("created_at")?,
    })
}

pub(crate) fn event_from(row: &impl Cols) -> StoreResult<StoredEvent> {
    Ok(StoredEvent {
        position: row.int("position")?,
        event_id: row.text("event_id")?,
        app_id: row.text("app_id")?,
        run_id: row.text("run_id")?,
        host_run_id: row.text("host_run_id")?,
        sequence_no: row.int("sequence_no")?,
        kind: parse_enum(
            "event_type",
            &row.text("event_type")?,
            ar_core::EventKind::parse,
        )?,
        data: row.json::<JsonMap>("data")?.into(),
        created_at: row.ts("created_at")?,
    })
}

pub(crate) fn checkpoint_from(row: &impl Cols) -> StoreResult<Checkpoint> {
    Ok(Checkpoint {
        run_id: row.text("run_id")?,
        step: row.int("step")?,
        state: row.json("state")?,
        created_at: row.ts("created_at")?,
    })
}
