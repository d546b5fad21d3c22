//! OpenAI Responses API rendering: the `response` object and its typed SSE events, in the shape the
//! Codex CLI parses (`response.created` … `response.output_item.done` … `response.completed`).

use serde_json::{json, Value};

use super::reply::{split_pieces, FinishReason, Reply, StreamEnd, Usage};
use super::sse::{named, StreamParts};
use super::RenderCtx;

pub(crate) fn usage_json(u: &Usage) -> Value {
    json!({
        "input_tokens": u.input,
        "input_tokens_details": { "cached_tokens": u.cached },
        "output_tokens": u.output,
        "output_tokens_details": { "reasoning_tokens": u.reasoning },
        "total_tokens": u.total(),
    })
}

fn response_id(ctx: &RenderCtx) -> String {
    format!("resp_mock_{}", ctx.seq)
}

fn message_id(ctx: &RenderCtx) -> String {
    format!("msg_mock_{}", ctx.seq)
}

fn fc_id(ctx: &RenderCtx, i: usize) -> String {
    format!("fc_mock_{}_{i}", ctx.seq)
}

fn call_id(reply: &Reply, ctx: &RenderCtx, i: usize) -> String {
    let id = &reply.tool_calls[i].id;
    if id.is_empty() {
        format!("call_mock_{}_{i}", ctx.seq)
    } else {
        id.clone()
    }
}

fn reasoning_id(ctx: &RenderCtx) -> String {
    format!("rs_mock_{}", ctx.seq)
}

fn summary_part(text: &str) -> Value {
    json!({ "type": "summary_text", "text": text })
}

fn reasoning_item(ctx: &RenderCtx, text: &str, done: bool) -> Value {
    json!({
        "id": reasoning_id(ctx),
        "type": "reasoning",
        "summary": if done { vec![summary_part(text)] } else { Vec::new() },
    })
}

fn text_part(text: &str) -> Value {
    json!({ "type": "output_text", "text": text, "annotations": [] })
}

fn message_item(ctx: &RenderCtx, text: &str, done: bool) -> Value {
    json!({
        "id": message_id(ctx),
        "type": "message",
        "status": if done { "completed" } else { "in_progress" },
        "role": "assistant",
        "content": if done { vec![text_part(text)] } else { Vec::new() },
    })
}

fn call_item(reply: &Reply, ctx: &RenderCtx, i: usize, done: bool) -> Value {
    let c = &reply.tool_calls[i];
    json!({
        "id": fc_id(ctx, i),
        "type": "function_call",
        "status": if done { "completed" } else { "in_progress" },
        "call_id": call_id(reply, ctx, i),
        "name": c.name,
        "arguments": if done { c.arguments.as_str() } else { "" },
    })
}

/// All finished output items: reasoning, the message (when there is text), function calls.
fn output_items(reply: &Reply, ctx: &RenderCtx) -> Vec<Value> {
    let mut out = Vec::new();
    if !reply.reasoning_deltas.is_empty() {
        out.push(reasoning_item(ctx, &reply.full_reasoning(), true));
    }
    let text = reply.full_text();
    if !text.is_empty() {
        out.push(message_item(ctx, &text, true));
    }
    for i in 0..reply.tool_calls.len() {
        out.push(call_item(reply, ctx, i, true));
    }
    out
}

fn response_object(reply: &Reply, ctx: &RenderCtx, status: &str, output: Vec<Value>) -> Value {
    let finished = status != "in_progress";
    json!({
        "id": response_id(ctx),
        "object": "response",
        "created_at": ctx.created,
        "status": status,
        "error": null,
        "incomplete_details": if status == "incomplete" {
            json!({ "reason": "max_output_tokens" })
        } else {
            Value::Null
        },
        "instructions": null,
        "model": ctx.model,
        "output": output,
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "usage": if finished { usage_json(&reply.usage) } else { Value::Null },
    })
}

fn final_status(reply: &Reply) -> &'static str {
    if reply.finish_reason() == FinishReason::Length {
        "incomplete"
    } else {
        "completed"
    }
}

pub(crate) fn render_json(reply: &Reply, ctx: &RenderCtx) -> Value {
    response_object(reply, ctx, final_status(reply), output_items(reply, ctx))
}

pub(crate) fn render_stream(reply: &Reply, ctx: &RenderCtx) -> StreamParts {
    let mut seq = 0u64;
    let mut ev = |kind: &str, mut body: Value| {
        body["type"] = Value::from(kind);
        body["sequence_number"] = Value::from(seq);
        seq += 1;
        named(kind, &body)
    };
    let mut parts = StreamParts::default();
    parts.head.push(ev(
        "response.created",
        json!({ "response": response_object(reply, ctx, "in_progress", Vec::new()) }),
    ));
    parts.head.push(ev(
        "response.in_progress",
        json!({ "response": response_object(reply, ctx, "in_progress", Vec::new()) }),
    ));

    let text = reply.full_text();
    let mut output_index = 0usize;
    if !reply.reasoning_deltas.is_empty() {
        let item_id = reasoning_id(ctx);
        let summary = reply.full_reasoning();
        parts.content.push(ev(
            "response.output_item.added",
            json!({ "output_index": output_index, "item": reasoning_item(ctx, "", false) }),
        ));
        parts.content.push(ev(
            "response.reasoning_summary_part.added",
            json!({
                "item_id": item_id, "output_index": output_index, "summary_index": 0,
                "part": summary_part(""),
            }),
        ));
        for d in reply.reasoning_deltas.iter().filter(|d| !d.is_empty()) {
            parts.content.push(ev(
                "response.reasoning_summary_text.delta",
                json!({
                    "item_id": item_id, "output_index": output_index, "summary_index": 0,
                    "delta": d,
                }),
            ));
        }
        parts.content.push(ev(
            "response.reasoning_summary_text.done",
            json!({
                "item_id": item_id, "output_index": output_index, "summary_index": 0,
                "text": summary,
            }),
        ));
        parts.content.push(ev(
            "response.reasoning_summary_part.done",
            json!({
                "item_id": item_id, "output_index": output_index, "summary_index": 0,
                "part": summary_part(&summary),
            }),
        ));
        parts.content.push(ev(
            "response.output_item.done",
            json!({ "output_index": output_index, "item": reasoning_item(ctx, &summary, true) }),
        ));
        output_index += 1;
    }
    if !text.is_empty() {
        let item_id = message_id(ctx);
        parts.content.push(ev(
            "response.output_item.added",
            json!({ "output_index": output_index, "item": message_item(ctx, "", false) }),
        ));
        parts.content.push(ev(
            "response.content_part.added",
            json!({
                "item_id": item_id, "output_index": output_index, "content_index": 0,
                "part": text_part(""),
            }),
        ));
        for d in reply.text_deltas.iter().filter(|d| !d.is_empty()) {
            parts.content.push(ev(
                "response.output_text.delta",
                json!({
                    "item_id": item_id, "output_index": output_index, "content_index": 0,
                    "delta": d, "logprobs": [],
                }),
            ));
        }
        parts.content.push(ev(
            "response.output_text.done",
            json!({
                "item_id": item_id, "output_index": output_index, "content_index": 0,
                "text": text, "logprobs": [],
            }),
        ));
        parts.content.push(ev(
            "response.content_part.done",
            json!({
                "item_id": item_id, "output_index": output_index, "content_index": 0,
                "part": text_part(&text),
            }),
        ));
        parts.content.push(ev(
            "response.output_item.done",
            json!({ "output_index": output_index, "item": message_item(ctx, &text, true) }),
        ));
        output_index += 1;
    }
    for (i, c) in reply.tool_calls.iter().enumerate() {
        let item_id = fc_id(ctx, i);
        parts.content.push(ev(
            "response.output_item.added",
            json!({ "output_index": output_index, "item": call_item(reply, ctx, i, false) }),
        ));
        for piece in split_pieces(&c.arguments, reply.arg_chunks) {
            parts.content.push(ev(
                "response.function_call_arguments.delta",
                json!({ "item_id": item_id, "output_index": output_index, "delta": piece }),
            ));
        }
        parts.content.push(ev(
            "response.function_call_arguments.done",
            json!({ "item_id": item_id, "output_index": output_index, "arguments": c.arguments }),
        ));
        parts.content.push(ev(
            "response.output_item.done",
            json!({ "output_index": output_index, "item": call_item(reply, ctx, i, true) }),
        ));
        output_index += 1;
    }
    let status = final_status(reply);
    let kind = if status == "incomplete" {
        "response.incomplete"
    } else {
        "response.completed"
    };
    parts.tail.push(ev(
        kind,
        json!({ "response": response_object(reply, ctx, status, output_items(reply, ctx)) }),
    ));
    if let StreamEnd::Error(err) = &reply.end {
        let mut failed = response_object(reply, ctx, "failed", Vec::new());
        let code = match err.status {
            429 => "rate_limit_exceeded",
            400 => "invalid_prompt",
            _ => "server_error",
        };
        failed["error"] = json!({ "code": code, "message": err.message });
        parts
            .error
            .push(ev("response.failed", json!({ "response": failed })));
    }
    parts
}
