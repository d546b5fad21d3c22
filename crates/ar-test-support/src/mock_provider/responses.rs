//! OpenAI Responses API rendering: the `response` object and its typed SSE events, in the shape the
//! Codex CLI parses (`response.created` … `response.output_item.done` … `response.completed`).

use axum::body::Bytes;
use serde_json::{json, Value};

use super::reply::{split_pieces, ErrorReply, FinishReason, Reply, StreamEnd, Usage};
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
    let mut item = json!({
        "id": fc_id(ctx, i),
        "type": "function_call",
        "status": if done { "completed" } else { "in_progress" },
        "call_id": ctx.tool_call_id(reply, i, "call_mock"),
        "name": c.name,
        "arguments": if done { c.arguments.as_str() } else { "" },
    });
    if let Some(namespace) = &c.namespace {
        item["namespace"] = json!(namespace);
    }
    item
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
    let mut w = EventWriter { reply, ctx, seq: 0 };
    let mut parts = StreamParts::default();
    for kind in ["response.created", "response.in_progress"] {
        let response = response_object(reply, ctx, "in_progress", Vec::new());
        parts
            .head
            .push(w.event(kind, json!({ "response": response })));
    }
    let mut output_index = 0usize;
    if !reply.reasoning_deltas.is_empty() {
        parts.content.extend(w.reasoning_item(output_index));
        output_index += 1;
    }
    let text = reply.full_text();
    if !text.is_empty() {
        parts.content.extend(w.message_item(output_index, &text));
        output_index += 1;
    }
    for i in 0..reply.tool_calls.len() {
        parts.content.extend(w.call_item(i, output_index));
        output_index += 1;
    }
    parts.tail.push(w.completion());
    if let StreamEnd::Error(err) = &reply.end {
        parts.error.push(w.failure(err));
    }
    parts
}

/// Writes one stream's events, numbering them (`sequence_number`) in the order written.
struct EventWriter<'a> {
    reply: &'a Reply,
    ctx: &'a RenderCtx,
    seq: u64,
}

impl EventWriter<'_> {
    fn event(&mut self, kind: &str, mut body: Value) -> Bytes {
        body["type"] = Value::from(kind);
        body["sequence_number"] = Value::from(self.seq);
        self.seq += 1;
        named(kind, &body)
    }

    /// The reasoning item: added, its summary part streamed and done, the item done.
    fn reasoning_item(&mut self, output_index: usize) -> Vec<Bytes> {
        let (reply, ctx) = (self.reply, self.ctx);
        let item_id = reasoning_id(ctx);
        let summary = reply.full_reasoning();
        let part = |extra: Value| {
            let mut body = json!({
                "item_id": item_id, "output_index": output_index, "summary_index": 0,
            });
            merge(&mut body, extra);
            body
        };
        let mut out = vec![
            self.event(
                "response.output_item.added",
                json!({ "output_index": output_index, "item": reasoning_item(ctx, "", false) }),
            ),
            self.event(
                "response.reasoning_summary_part.added",
                part(json!({ "part": summary_part("") })),
            ),
        ];
        for d in reply.reasoning_deltas.iter().filter(|d| !d.is_empty()) {
            out.push(self.event(
                "response.reasoning_summary_text.delta",
                part(json!({ "delta": d })),
            ));
        }
        out.push(self.event(
            "response.reasoning_summary_text.done",
            part(json!({ "text": summary })),
        ));
        out.push(self.event(
            "response.reasoning_summary_part.done",
            part(json!({ "part": summary_part(&summary) })),
        ));
        out.push(self.event(
            "response.output_item.done",
            json!({ "output_index": output_index, "item": reasoning_item(ctx, &summary, true) }),
        ));
        out
    }

    /// The message item: added, its text part streamed and done, the item done.
    fn message_item(&mut self, output_index: usize, text: &str) -> Vec<Bytes> {
        let (reply, ctx) = (self.reply, self.ctx);
        let item_id = message_id(ctx);
        let part = |extra: Value| {
            let mut body = json!({
                "item_id": item_id, "output_index": output_index, "content_index": 0,
            });
            merge(&mut body, extra);
            body
        };
        let mut out = vec![
            self.event(
                "response.output_item.added",
                json!({ "output_index": output_index, "item": message_item(ctx, "", false) }),
            ),
            self.event(
                "response.content_part.added",
                part(json!({ "part": text_part("") })),
            ),
        ];
        for d in reply.text_deltas.iter().filter(|d| !d.is_empty()) {
            out.push(self.event(
                "response.output_text.delta",
                part(json!({ "delta": d, "logprobs": [] })),
            ));
        }
        out.push(self.event(
            "response.output_text.done",
            part(json!({ "text": text, "logprobs": [] })),
        ));
        out.push(self.event(
            "response.content_part.done",
            part(json!({ "part": text_part(text) })),
        ));
        out.push(self.event(
            "response.output_item.done",
            json!({ "output_index": output_index, "item": message_item(ctx, text, true) }),
        ));
        out
    }

    /// Function call `i`: added, its arguments streamed and done, the item done.
    fn call_item(&mut self, i: usize, output_index: usize) -> Vec<Bytes> {
        let (reply, ctx) = (self.reply, self.ctx);
        let item_id = fc_id(ctx, i);
        let arguments = &reply.tool_calls[i].arguments;
        let mut out = vec![self.event(
            "response.output_item.added",
            json!({ "output_index": output_index, "item": call_item(reply, ctx, i, false) }),
        )];
        for piece in split_pieces(arguments, reply.arg_chunks) {
            out.push(self.event(
                "response.function_call_arguments.delta",
                json!({ "item_id": item_id, "output_index": output_index, "delta": piece }),
            ));
        }
        out.push(self.event(
            "response.function_call_arguments.done",
            json!({ "item_id": item_id, "output_index": output_index, "arguments": arguments }),
        ));
        out.push(self.event(
            "response.output_item.done",
            json!({ "output_index": output_index, "item": call_item(reply, ctx, i, true) }),
        ));
        out
    }

    /// `response.completed` (or `response.incomplete` when cut at the length limit).
    fn completion(&mut self) -> Bytes {
        let (reply, ctx) = (self.reply, self.ctx);
        let status = final_status(reply);
        let kind = if status == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        let response = response_object(reply, ctx, status, output_items(reply, ctx));
        self.event(kind, json!({ "response": response }))
    }

    /// `response.failed` carrying the scripted error.
    fn failure(&mut self, err: &ErrorReply) -> Bytes {
        let mut failed = response_object(self.reply, self.ctx, "failed", Vec::new());
        let code = match err.status {
            429 => "rate_limit_exceeded",
            400 => "invalid_prompt",
            _ => "server_error",
        };
        failed["error"] = json!({ "code": code, "message": err.message });
        self.event("response.failed", json!({ "response": failed }))
    }
}

/// Adds the fields of the object `extra` to the object `body`.
fn merge(body: &mut Value, extra: Value) {
    if let (Value::Object(body), Value::Object(extra)) = (body, extra) {
        body.extend(extra);
    }
}
