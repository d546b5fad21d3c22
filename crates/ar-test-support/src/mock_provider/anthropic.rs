//! Anthropic Messages rendering: the `message` object, its SSE event sequence, and error bodies.

use axum::body::Bytes;
use serde_json::{json, Value};

use super::reply::{split_pieces, ErrorReply, FinishReason, Reply, StreamEnd, Usage};
use super::sse::{named, StreamParts};
use super::RenderCtx;

fn stop_reason(f: FinishReason) -> &'static str {
    match f {
        FinishReason::Stop => "end_turn",
        FinishReason::ToolCalls => "tool_use",
        FinishReason::Length => "max_tokens",
    }
}

/// Anthropic counts cached tokens separately from `input_tokens`.
fn usage_json(u: &Usage, output: u64) -> Value {
    json!({
        "input_tokens": u.input.saturating_sub(u.cached),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": u.cached,
        "output_tokens": output,
    })
}

fn message_id(ctx: &RenderCtx) -> String {
    format!("msg_mock_{}", ctx.seq)
}

fn input_object(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({}),
    }
}

pub(crate) fn render_json(reply: &Reply, ctx: &RenderCtx) -> Value {
    let mut content = Vec::new();
    if !reply.reasoning_deltas.is_empty() {
        content.push(json!({
            "type": "thinking", "thinking": reply.full_reasoning(), "signature": "mock-signature",
        }));
    }
    let text = reply.full_text();
    if !text.is_empty() {
        content.push(json!({ "type": "text", "text": text }));
    }
    for (i, c) in reply.tool_calls.iter().enumerate() {
        content.push(json!({
            "type": "tool_use",
            "id": ctx.tool_call_id(reply, i, "toolu_mock"),
            "name": c.name,
            "input": input_object(&c.arguments),
        }));
    }
    json!({
        "id": message_id(ctx),
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": content,
        "stop_reason": stop_reason(reply.finish_reason()),
        "stop_sequence": null,
        "usage": usage_json(&reply.usage, reply.usage.output),
    })
}

pub(crate) fn render_stream(reply: &Reply, ctx: &RenderCtx) -> StreamParts {
    let mut parts = StreamParts::default();
    let message = json!({
        "id": message_id(ctx),
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": [],
        "stop_reason": null,
        "stop_sequence": null,
        "usage": usage_json(&reply.usage, 1),
    });
    parts
        .head
        .push(event("message_start", json!({ "message": message })));
    parts.head.push(event("ping", json!({})));

    let mut index = 0usize;
    let thinking: Vec<&String> = non_empty(&reply.reasoning_deltas);
    if !thinking.is_empty() {
        let deltas = thinking
            .into_iter()
            .map(|d| json!({ "type": "thinking_delta", "thinking": d }))
            .chain([json!({ "type": "signature_delta", "signature": "mock-signature" })]);
        let start = json!({ "type": "thinking", "thinking": "" });
        parts.content.extend(content_block(index, start, deltas));
        index += 1;
    }
    let text: Vec<&String> = non_empty(&reply.text_deltas);
    if !text.is_empty() {
        let deltas = text
            .into_iter()
            .map(|d| json!({ "type": "text_delta", "text": d }));
        let start = json!({ "type": "text", "text": "" });
        parts.content.extend(content_block(index, start, deltas));
        index += 1;
    }
    for (i, c) in reply.tool_calls.iter().enumerate() {
        let deltas = split_pieces(&c.arguments, reply.arg_chunks)
            .into_iter()
            .map(|piece| json!({ "type": "input_json_delta", "partial_json": piece }));
        let start = json!({
            "type": "tool_use", "id": ctx.tool_call_id(reply, i, "toolu_mock"), "name": c.name, "input": {},
        });
        parts.content.extend(content_block(index, start, deltas));
        index += 1;
    }
    let stop = json!({
        "delta": { "stop_reason": stop_reason(reply.finish_reason()), "stop_sequence": null },
        "usage": usage_json(&reply.usage, reply.usage.output),
    });
    parts.tail.push(event("message_delta", stop));
    parts.tail.push(event("message_stop", json!({})));
    if let StreamEnd::Error(err) = &reply.end {
        parts.error.push(named("error", &error_body(err)));
    }
    parts
}

/// An event named `kind` whose body is `fields` with `"type": kind` first.
fn event(kind: &str, fields: Value) -> Bytes {
    let mut body = json!({ "type": kind });
    if let (Value::Object(body), Value::Object(fields)) = (&mut body, fields) {
        body.extend(fields);
    }
    named(kind, &body)
}

/// One content block at `index`: its start, one delta event per delta, its stop.
fn content_block(index: usize, start: Value, deltas: impl Iterator<Item = Value>) -> Vec<Bytes> {
    let mut out = vec![event(
        "content_block_start",
        json!({ "index": index, "content_block": start }),
    )];
    out.extend(deltas.map(|delta| {
        event(
            "content_block_delta",
            json!({ "index": index, "delta": delta }),
        )
    }));
    out.push(event("content_block_stop", json!({ "index": index })));
    out
}

fn non_empty(deltas: &[String]) -> Vec<&String> {
    deltas.iter().filter(|d| !d.is_empty()).collect()
}

/// Anthropic error envelope: `{"type":"error","error":{"type","message"}}`.
pub(crate) fn error_body(err: &ErrorReply) -> Value {
    let kind = match err.status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({ "type": "error", "error": { "type": kind, "message": err.message } })
}
