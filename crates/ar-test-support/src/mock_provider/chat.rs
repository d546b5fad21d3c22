//! OpenAI Chat Completions rendering: `chat.completion` objects and `chat.completion.chunk` SSE.

use serde_json::{json, Value};

use super::reply::{split_pieces, FinishReason, Reply, StreamEnd, Usage};
use super::sse::{data, done, StreamParts};
use super::RenderCtx;

fn finish_str(f: FinishReason) -> &'static str {
    match f {
        FinishReason::Stop => "stop",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::Length => "length",
    }
}

pub(crate) fn usage_json(u: &Usage) -> Value {
    json!({
        "prompt_tokens": u.input,
        "completion_tokens": u.output,
        "total_tokens": u.total(),
        "prompt_tokens_details": { "cached_tokens": u.cached },
        "completion_tokens_details": { "reasoning_tokens": u.reasoning },
    })
}

fn completion_id(ctx: &RenderCtx) -> String {
    format!("chatcmpl-mock-{}", ctx.seq)
}

pub(crate) fn render_json(reply: &Reply, ctx: &RenderCtx) -> Value {
    let text = reply.full_text();
    let mut message = json!({
        "role": "assistant",
        "content": if text.is_empty() && !reply.tool_calls.is_empty() { Value::Null } else { Value::from(text) },
        "refusal": null,
    });
    if !reply.reasoning_deltas.is_empty() {
        message["reasoning_content"] = Value::from(reply.full_reasoning());
    }
    if !reply.tool_calls.is_empty() {
        let calls: Vec<Value> = reply
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                json!({
                    "id": ctx.tool_call_id(reply, i, "call_mock"),
                    "type": "function",
                    "function": { "name": c.name, "arguments": c.arguments },
                })
            })
            .collect();
        message["tool_calls"] = Value::from(calls);
    }
    json!({
        "id": completion_id(ctx),
        "object": "chat.completion",
        "created": ctx.created,
        "model": ctx.model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_str(reply.finish_reason()),
        }],
        "usage": usage_json(&reply.usage),
    })
}

pub(crate) fn render_stream(reply: &Reply, ctx: &RenderCtx) -> StreamParts {
    let id = completion_id(ctx);
    let chunk = |delta: Value, finish: Value| {
        data(&json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }],
        }))
    };
    let mut parts = StreamParts::default();
    parts.head.push(chunk(
        json!({ "role": "assistant", "content": "" }),
        Value::Null,
    ));
    for d in reply.reasoning_deltas.iter().filter(|d| !d.is_empty()) {
        parts
            .content
            .push(chunk(json!({ "reasoning_content": d }), Value::Null));
    }
    for d in &reply.text_deltas {
        if !d.is_empty() {
            parts
                .content
                .push(chunk(json!({ "content": d }), Value::Null));
        }
    }
    for (i, c) in reply.tool_calls.iter().enumerate() {
        parts.content.push(chunk(
            json!({ "tool_calls": [{
                "index": i,
                "id": ctx.tool_call_id(reply, i, "call_mock"),
                "type": "function",
                "function": { "name": c.name, "arguments": "" },
            }] }),
            Value::Null,
        ));
        for piece in split_pieces(&c.arguments, reply.arg_chunks) {
            parts.content.push(chunk(
                json!({ "tool_calls": [{ "index": i, "function": { "arguments": piece } }] }),
                Value::Null,
            ));
        }
    }
    parts.tail.push(chunk(
        json!({}),
        Value::from(finish_str(reply.finish_reason())),
    ));
    if ctx.include_usage {
        parts.tail.push(data(&json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [],
            "usage": usage_json(&reply.usage),
        })));
    }
    parts.tail.push(done());
    if let StreamEnd::Error(err) = &reply.end {
        parts.error.push(data(&super::openai_error_body(err)));
    }
    parts
}
