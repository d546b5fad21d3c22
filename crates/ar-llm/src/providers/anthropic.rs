//! Anthropic Messages: request body (system + alternating messages with tool_use/tool_result
//! blocks), endpoint, `x-api-key` auth, and the content-block event stream parser.

use std::collections::HashMap;

use ar_core::model::{ChatRole, ModelRequest, ModelResponse, ModelRoute, StreamDelta};
use ar_core::Usage;
use ar_sse::Event as SseEvent;
use serde_json::{json, Value};

use super::{control, join, normalize_finish, ToolCallAssembler};
use crate::client::StreamParser;
use crate::error::LlmError;

/// API version header sent with every request.
pub(crate) const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` when the route's controls do not set one (the API requires it).
pub(crate) const DEFAULT_MAX_TOKENS: u64 = 8192;

/// `{base}/v1/messages`, or `{base}/messages` when the base already ends in `/v1`.
pub(crate) fn endpoint(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/v1") {
        join(base, "messages")
    } else {
        join(base, "v1/messages")
    }
}

pub(crate) fn auth(
    builder: reqwest::RequestBuilder,
    route: &ModelRoute,
) -> reqwest::RequestBuilder {
    let builder = builder.header("anthropic-version", ANTHROPIC_VERSION);
    match route.api_key.as_ref().filter(|k| !k.is_empty()) {
        Some(key) => builder.header("x-api-key", key.expose()),
        None => builder,
    }
}

fn parse_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({}),
    }
}

/// Appends blocks to the last message when it has the same role (the API wants alternation).
fn push_blocks(messages: &mut Vec<Value>, role: &str, blocks: Vec<Value>) {
    if blocks.is_empty() {
        return;
    }
    if let Some(last) = messages.last_mut() {
        if last.get("role").and_then(Value::as_str) == Some(role) {
            if let Some(content) = last.get_mut("content").and_then(Value::as_array_mut) {
                content.extend(blocks);
                return;
            }
        }
    }
    messages.push(json!({ "role": role, "content": blocks }));
}

pub(crate) fn body(route: &ModelRoute, request: &ModelRequest) -> Value {
    let mut system: Vec<&str> = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    for m in &request.messages {
        match m.role {
            ChatRole::System => system.push(&m.content),
            ChatRole::User => {
                let blocks = if m.content.is_empty() {
                    Vec::new()
                } else {
                    vec![json!({ "type": "text", "text": m.content })]
                };
                push_blocks(&mut messages, "user", blocks);
            }
            ChatRole::Assistant => {
                let mut blocks = Vec::new();
                if !m.content.is_empty() {
                    blocks.push(json!({ "type": "text", "text": m.content }));
                }
                for c in &m.tool_calls {
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": c.id,
                        "name": c.name,
                        "input": parse_input(&c.arguments),
                    }));
                }
                push_blocks(&mut messages, "assistant", blocks);
            }
            ChatRole::Tool => push_blocks(
                &mut messages,
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id.as_deref().unwrap_or_default(),
                    "content": m.content,
                })],
            ),
        }
    }
    let max_tokens = request
        .max_output_tokens
        .or_else(|| {
            control(route, "max_tokens")
                .or_else(|| control(route, "max_output_tokens"))
                .and_then(Value::as_u64)
        })
        .unwrap_or(DEFAULT_MAX_TOKENS);
    let mut body = json!({
        "model": route.model,
        "max_tokens": max_tokens,
        "messages": messages,
        "stream": true,
    });
    if !system.is_empty() {
        body["system"] = Value::from(system.join("\n\n"));
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.parameters,
                })
            })
            .collect();
        body["tools"] = Value::from(tools);
    }
    body
}

#[derive(Debug, Default, Clone, Copy)]
struct RawUsage {
    input: i64,
    cache_read: i64,
    cache_creation: i64,
    output: i64,
}

impl RawUsage {
    fn merge(&mut self, u: &Value) {
        let n = |k: &str| u.get(k).and_then(Value::as_i64);
        if let Some(v) = n("input_tokens") {
            self.input = v;
        }
        if let Some(v) = n("cache_read_input_tokens") {
            self.cache_read = v;
        }
        if let Some(v) = n("cache_creation_input_tokens") {
            self.cache_creation = v;
        }
        if let Some(v) = n("output_tokens") {
            self.output = v;
        }
    }

    /// Domain usage counts cached input as part of input.
    fn to_usage(self) -> Usage {
        let input = self.input + self.cache_read + self.cache_creation;
        Usage {
            input_tokens: input,
            cached_input_tokens: self.cache_read,
            output_tokens: self.output,
            reasoning_output_tokens: 0,
            total_tokens: input + self.output,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Block {
    Text,
    Thinking,
    Tool(usize),
    Other,
}

/// Stream state for one Messages call.
#[derive(Debug, Default)]
pub(crate) struct Parser {
    text: String,
    reasoning: String,
    calls: ToolCallAssembler,
    blocks: HashMap<u64, Block>,
    usage: RawUsage,
    stop_reason: Option<String>,
}

impl StreamParser for Parser {
    fn on_event(
        &mut self,
        event: SseEvent,
        sink: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<bool, LlmError> {
        if event.data.trim().is_empty() {
            return Ok(false);
        }
        let v: Value = serde_json::from_str(&event.data)
            .map_err(|e| LlmError::not_json("messages event", &event.data, e))?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(&event.event);
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "message_start" => {
                if let Some(u) = v.pointer("/message/usage") {
                    self.usage.merge(u);
                }
            }
            "content_block_start" => {
                let cb = v.get("content_block").unwrap_or(&Value::Null);
                let block = match cb.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let t = cb.get("text").and_then(Value::as_str).unwrap_or_default();
                        if !t.is_empty() {
                            self.text.push_str(t);
                            sink(StreamDelta::Text(t.to_string()));
                        }
                        Block::Text
                    }
                    Some("thinking") => Block::Thinking,
                    Some("tool_use") => {
                        let i = self.calls.open();
                        let id = cb.get("id").and_then(Value::as_str);
                        let name = cb.get("name").and_then(Value::as_str);
                        self.calls.identify(i, id, name, sink);
                        // A non-empty initial input (rare) is the whole argument object.
                        if let Some(input) = cb
                            .get("input")
                            .filter(|x| x.as_object().is_some_and(|o| !o.is_empty()))
                        {
                            self.calls.append(i, &input.to_string(), sink);
                        }
                        Block::Tool(i)
                    }
                    _ => Block::Other,
                };
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let d = v.get("delta").unwrap_or(&Value::Null);
                let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or_default();
                match (
                    self.blocks.get(&index).copied(),
                    d.get("type").and_then(Value::as_str),
                ) {
                    (_, Some("text_delta")) => {
                        let t = s("text");
                        if !t.is_empty() {
                            self.text.push_str(t);
                            sink(StreamDelta::Text(t.to_string()));
                        }
                    }
                    (_, Some("thinking_delta")) => {
                        let t = s("thinking");
                        if !t.is_empty() {
                            self.reasoning.push_str(t);
                            sink(StreamDelta::Reasoning(t.to_string()));
                        }
                    }
                    (Some(Block::Tool(i)), Some("input_json_delta")) => {
                        self.calls.append(i, s("partial_json"), sink);
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(r.to_string());
                }
                if let Some(u) = v.get("usage") {
                    self.usage.merge(u);
                }
            }
            "message_stop" => return Ok(true),
            "error" => {
                let err = v.get("error").unwrap_or(&v);
                return Err(crate::error::in_stream(err));
            }
            _ => {}
        }
        Ok(false)
    }

    fn finish(self: Box<Self>, terminal: bool) -> Result<ModelResponse, LlmError> {
        let this = *self;
        let Some(stop) = this.stop_reason.or_else(|| terminal.then(String::new)) else {
            return Err(LlmError::stream_msg(
                "messages stream ended before message_stop",
            ));
        };
        let tool_calls = this.calls.finish();
        let finish_reason = if stop.is_empty() {
            if tool_calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            }
            .to_string()
        } else {
            normalize_finish(&stop)
        };
        Ok(ModelResponse {
            text: this.text,
            reasoning: this.reasoning,
            tool_calls,
            usage: this.usage.to_usage(),
            finish_reason,
        })
    }
}
