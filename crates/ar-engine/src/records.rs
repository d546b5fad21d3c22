//! Builders for the records and events a state change writes, so every path writes them alike.

use ar_core::event::{kind, EventDraft};
use ar_core::ids::{new_id, prefix};
use ar_core::records::{Artifact, Interaction, Message, ToolCallRecord};
use ar_core::store::{RunChange, SecretChange};
use ar_core::{InteractionStatus, JsonMap, PauseReason, Run, RunStatus, Usage};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

pub(crate) fn object(value: Value) -> JsonMap {
    match value {
        Value::Object(map) => map,
        _ => JsonMap::new(),
    }
}

pub(crate) fn event(event_type: &str, data: Value) -> EventDraft {
    EventDraft::new(event_type, object(data))
}

pub(crate) fn usage_json(usage: &Usage) -> Value {
    json!({
        "total_tokens": usage.total_tokens,
        "input_tokens": usage.input_tokens,
        "cached_input_tokens": usage.cached_input_tokens,
        "output_tokens": usage.output_tokens,
        "reasoning_output_tokens": usage.reasoning_output_tokens,
    })
}

pub(crate) fn message(
    run: &Run,
    role: &str,
    content: &str,
    message_type: &str,
    now: DateTime<Utc>,
) -> Message {
    Message {
        id: new_id(prefix::MESSAGE),
        app_id: run.app_id.clone(),
        run_id: run.id.clone(),
        runtime_message_id: String::new(),
        role: role.to_string(),
        content: content.to_string(),
        message_type: message_type.to_string(),
        content_blocks: None,
        tool_invocations: None,
        sequence_no: 0,
        created_at: now,
    }
}

pub(crate) fn artifact(
    run: &Run,
    artifact_type: &str,
    format: &str,
    content: &str,
    now: DateTime<Utc>,
) -> Artifact {
    Artifact {
        id: new_id(prefix::ARTIFACT),
        app_id: run.app_id.clone(),
        run_id: run.id.clone(),
        artifact_type: artifact_type.to_string(),
        format: format.to_string(),
        storage_mode: "inline".to_string(),
        inline_content: content.to_string(),
        metadata: Some(json!({})),
        sequence_no: 0,
        created_at: now,
    }
}

pub(crate) fn interaction(
    run: &Run,
    kind: &str,
    title: &str,
    summary: &str,
    request_payload: Value,
    now: DateTime<Utc>,
) -> Interaction {
    Interaction {
        id: new_id(prefix::INTERACTION),
        app_id: run.app_id.clone(),
        run_id: run.id.clone(),
        runtime_kind: run.runtime_kind,
        interaction_kind: kind.to_string(),
        status: InteractionStatus::Pending,
        title: title.to_string(),
        summary: summary.to_string(),
        request_payload: Some(request_payload),
        response_payload: None,
        resolved_by_external_id: String::new(),
        resolved_at: None,
        created_at: now,
        updated_at: now,
    }
}

pub(crate) fn tool_call_record(
    run: &Run,
    tool_name: &str,
    input: Value,
    mutating: bool,
    approval_required: bool,
    now: DateTime<Utc>,
) -> ToolCallRecord {
    ToolCallRecord {
        id: new_id(prefix::TOOL_CALL),
        app_id: run.app_id.clone(),
        run_id: run.id.clone(),
        tool_name: tool_name.to_string(),
        input,
        output: None,
        error: String::new(),
        mutating,
        approval_required,
        created_at: now,
    }
}

/// Pauses a run for `reason` and records the `run.paused` event.
pub(crate) fn mark_paused(
    run: &mut Run,
    change: &mut RunChange,
    reason: PauseReason,
    extra: JsonMap,
) {
    run.status = RunStatus::Paused;
    run.pause_reason = reason;
    run.pause_requested = false;
    let mut data = extra;
    data.insert(
        "pause_reason".into(),
        Value::String(reason.as_str().to_string()),
    );
    change.events.push(EventDraft::new(kind::RUN_PAUSED, data));
}

fn store_usage(run: &mut Run, usage: Option<&Usage>) -> JsonMap {
    let mut data = JsonMap::new();
    if let Some(usage) = usage.filter(|usage| !usage.is_zero()) {
        run.output_summary.insert("usage".into(), usage_json(usage));
        run.output_summary
            .insert("usage_semantic".into(), Value::String("cumulative".into()));
        data.insert("usage".into(), usage_json(usage));
        data.insert("usage_semantic".into(), Value::String("cumulative".into()));
    }
    data
}

/// Terminal states clear run secrets (credentials never outlive the run).
fn clear_secrets(change: &mut RunChange) {
    change.secrets.push(SecretChange::DeleteAll);
}

/// Records what a tool call returned: its content, and as the error too when it failed.
pub(crate) fn record_tool_output(row: &mut ToolCallRecord, content: &str, is_error: bool) {
    row.output = Some(json!({"content": content}));
    if is_error {
        row.error = content.to_string();
    }
}

/// `usage.checkpoint` with the run's cumulative usage.
pub(crate) fn usage_checkpoint(usage: &Usage) -> EventDraft {
    event(
        kind::USAGE_CHECKPOINT,
        json!({"usage": usage_json(usage), "usage_semantic": "cumulative"}),
    )
}

/// Ends a turn that answered: a `pause_after_assistant` run waits for the next user message
/// (with its usage in the output summary), any other run completes.
pub(crate) fn mark_turn_done(
    run: &mut Run,
    change: &mut RunChange,
    usage: &Usage,
    now: DateTime<Utc>,
) {
    if run.input.turn_policy.pauses_after_assistant() {
        run.output_summary.insert("usage".into(), usage_json(usage));
        mark_paused(
            run,
            change,
            PauseReason::AwaitingUserMessage,
            JsonMap::new(),
        );
    } else {
        mark_completed(run, change, Some(usage), None, now);
    }
}

pub(crate) fn mark_completed(
    run: &mut Run,
    change: &mut RunChange,
    usage: Option<&Usage>,
    reason: Option<&str>,
    now: DateTime<Utc>,
) {
    run.status = RunStatus::Completed;
    run.pause_reason = PauseReason::None;
    run.pause_requested = false;
    run.completed_at = Some(now);
    let mut data = store_usage(run, usage);
    if let Some(reason) = reason {
        data.insert("reason".into(), Value::String(reason.to_string()));
    }
    change
        .events
        .push(EventDraft::new(kind::RUN_COMPLETED, data));
    clear_secrets(change);
}

pub(crate) fn mark_failed(
    run: &mut Run,
    change: &mut RunChange,
    error: &str,
    usage: Option<&Usage>,
    now: DateTime<Utc>,
) {
    run.status = RunStatus::Failed;
    run.pause_reason = PauseReason::None;
    run.pause_requested = false;
    run.error_message = error.to_string();
    run.completed_at = Some(now);
    let mut data = store_usage(run, usage);
    data.insert("error".into(), Value::String(error.to_string()));
    change.events.push(EventDraft::new(kind::RUN_FAILED, data));
    clear_secrets(change);
}

pub(crate) fn mark_cancelled(run: &mut Run, change: &mut RunChange, now: DateTime<Utc>) {
    run.status = RunStatus::Cancelled;
    run.pause_reason = PauseReason::None;
    run.pause_requested = false;
    run.completed_at = Some(now);
    change.events.push(event(kind::RUN_CANCELLED, json!({})));
    clear_secrets(change);
}
