//! Builders for the records and events a state change writes, so every path writes them alike.

use ar_core::event::{self as ev, RunEvent, UsageGauge};
use ar_core::ids::{new_id, prefix};
use ar_core::records::{Artifact, Interaction, Message, ToolCallRecord};
use ar_core::store::{RunChange, SecretChange};
use ar_core::{InteractionStatus, MessageRole, PauseReason, Run, Usage};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::error::EngineResult;

/// `text` cut to at most `limit` bytes (on a character boundary), with `…` when cut.
pub(crate) fn clip(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The usage object of the run's output summary (every counter, zeros included).
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
    role: MessageRole,
    content: &str,
    message_type: &str,
    now: DateTime<Utc>,
) -> Message {
    Message {
        id: new_id(prefix::MESSAGE),
        app_id: run.app_id.clone(),
        run_id: run.id.clone(),
        runtime_message_id: String::new(),
        role,
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
) -> EngineResult<()> {
    mark_paused_with(run, change, ev::RunPaused::because(reason))
}

/// [`mark_paused`] with the event's extra details (authentication pauses).
pub(crate) fn mark_paused_with(
    run: &mut Run,
    change: &mut RunChange,
    paused: ev::RunPaused,
) -> EngineResult<()> {
    run.pause(paused.pause_reason)?;
    change.events.push(RunEvent::RunPaused(paused));
    Ok(())
}

/// Records the run's cumulative usage in its output summary; the gauge for its terminal event.
fn store_usage(run: &mut Run, usage: Option<&Usage>) -> Option<UsageGauge> {
    let gauge = UsageGauge::of_run(usage)?;
    run.output_summary
        .insert("usage".into(), usage_json(&gauge.usage));
    run.output_summary.insert(
        "usage_semantic".into(),
        Value::String(gauge.usage_semantic.into()),
    );
    Some(gauge)
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
pub(crate) fn usage_checkpoint(usage: &Usage) -> RunEvent {
    RunEvent::UsageCheckpoint(UsageGauge::cumulative(*usage))
}

/// Ends a turn that answered: a `pause_after_assistant` run waits for the next user message
/// (with its usage in the output summary), any other run completes.
pub(crate) fn mark_turn_done(
    run: &mut Run,
    change: &mut RunChange,
    usage: &Usage,
    now: DateTime<Utc>,
) -> EngineResult<()> {
    if run.input.turn_policy.pauses_after_assistant() {
        run.output_summary.insert("usage".into(), usage_json(usage));
        mark_paused(run, change, PauseReason::AwaitingUserMessage)
    } else {
        mark_completed(run, change, Some(usage), None, now)
    }
}

pub(crate) fn mark_completed(
    run: &mut Run,
    change: &mut RunChange,
    usage: Option<&Usage>,
    reason: Option<&str>,
    now: DateTime<Utc>,
) -> EngineResult<()> {
    run.complete(now)?;
    let usage = store_usage(run, usage);
    change.events.push(RunEvent::RunCompleted(ev::RunCompleted {
        reason: reason.unwrap_or_default().to_string(),
        usage,
        interrupted_external_effects: None,
    }));
    clear_secrets(change);
    Ok(())
}

pub(crate) fn mark_failed(
    run: &mut Run,
    change: &mut RunChange,
    error: &str,
    usage: Option<&Usage>,
    now: DateTime<Utc>,
) -> EngineResult<()> {
    run.fail(error, now)?;
    let usage = store_usage(run, usage);
    change.events.push(RunEvent::RunFailed(ev::RunFailed {
        error: error.to_string(),
        usage,
    }));
    clear_secrets(change);
    Ok(())
}

pub(crate) fn mark_cancelled(
    run: &mut Run,
    change: &mut RunChange,
    now: DateTime<Utc>,
) -> EngineResult<()> {
    run.cancel(now)?;
    change
        .events
        .push(RunEvent::RunCancelled(ev::RunCancelled {}));
    clear_secrets(change);
    Ok(())
}
