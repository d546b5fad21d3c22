//! OpenAI Chat Completions: request body, endpoint, and the `chat.completion.chunk` stream parser
//! (text, reasoning, tool-call delta assembly, `stream_options.include_usage` usage chunk).

use ar_core::model::{ChatRole, ModelRequest, ModelResponse, ModelRoute, StreamDelta};
use ar_core::Usage;
use serde_json::{json, Value};

use super::{join, normalize_finish, ToolCallAssembler};
use crate::client::StreamParser;
use crate::error::LlmError;
use crate::sse::SseEvent;

pub(crate) fn endpoint(base_url: &str) -> String {
    join(base_url, "chat/completions")
}

pub(crate) fn body(route: &ModelRoute, request: &ModelRequest) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|m| match m.role {
            ChatRole::System => json!({ "role": "system", "content": m.content }),
            ChatRole::User => json!({ "role": "user", "content": m.content }),
            ChatRole::Assistant => {
                let mut v = json!({ "role": "assistant" });
                if m.tool_calls.is_empty() || !m.content.is_empty() {
                    v["content"] = Value::from(m.content.as_str());
                } else {
                    v["content"] = Value::Null;
                }
                if !m.tool_calls.is_empty() {
                    let calls: Vec<Value> = m
                        .tool_calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id,
                                "type": "function",
                                "function": { "name": c.name, "arguments": c.arguments },
                            })
                        })
                        .collect();
                    v["tool_calls"] = Value::from(calls);
                }
                v
            }
            ChatRole::Tool => json!({
                "role": "tool",
                "tool_call_id": m.tool_call_id.as_deref().unwrap_or_default(),
                "content": m.content,
            }),
        })
        .collect();
    let mut body = json!({
        "model": route.model,
        "messages": messages,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                })
            })
            .collect();
        body["tools"] = Value::from(tools);
    }
    body
}

/// Stream state for one Chat Completions call.
#[derive(Debug, Default)]
pub(crate) struct Parser {
    text: String,
    reasoning: String,
    calls: ToolCallAssembler,
    /// Vendor `index` of each assembled call, by position.
    vendor_index: Vec<u64>,
    finish: Option<String>,
    usage: Option<Usage>,
}

fn usage_from(u: &Value) -> Usage {
    let n = |p: &str| u.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    Usage {
        input_tokens: n("/prompt_tokens"),
        cached_input_tokens: n("/prompt_tokens_details/cached_tokens"),
        output_tokens: n("/completion_tokens"),
        reasoning_output_tokens: n("/completion_tokens_details/reasoning_tokens"),
        total_tokens: n("/total_tokens"),
    }
}

impl StreamParser for Parser {
    fn on_event(
        &mut self,
        event: SseEvent,
        sink: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<bool, LlmError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| LlmError::Decode(format!("chat chunk is not JSON ({e}): {data}")))?;
        if let Some(err) = chunk.get("error") {
            return Err(crate::error::in_stream(err));
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage_from(u));
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(false);
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        if let Some(t) = delta.get("content").and_then(Value::as_str) {
            if !t.is_empty() {
                self.text.push_str(t);
                sink(StreamDelta::Text(t.to_string()));
            }
        }
        let reasoning = delta
            .get("reasoning_content")
            .or_else(|| delta.get("reasoning"))
            .and_then(Value::as_str);
        if let Some(r) = reasoning.filter(|r| !r.is_empty()) {
            self.reasoning.push_str(r);
            sink(StreamDelta::Reasoning(r.to_string()));
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for (pos, tc) in calls.iter().enumerate() {
                let vendor = tc
                    .get("index")
                    .and_then(Value::as_u64)
                    .unwrap_or(pos as u64);
                let index = match self.vendor_index.iter().position(|v| *v == vendor) {
                    Some(i) => i,
                    None => {
                        self.vendor_index.push(vendor);
                        self.calls.open()
                    }
                };
                let id = tc.get("id").and_then(Value::as_str);
                let name = tc.pointer("/function/name").and_then(Value::as_str);
                if let Some(args) = tc.pointer("/function/arguments").and_then(Value::as_str) {
                    self.calls.append(index, args, sink);
                }
                self.calls.identify(index, id, name, sink);
            }
        }
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(f.to_string());
        }
        Ok(false)
    }

    fn finish(self: Box<Self>, terminal: bool) -> Result<ModelResponse, LlmError> {
        let this = *self;
        // Some compatible servers omit `[DONE]`; a finish_reason is enough.
        let finish = match (this.finish, terminal) {
            (Some(f), _) => f,
            (None, true) => String::new(),
            (None, false) => {
                return Err(LlmError::Stream(
                    "chat stream ended before a finish_reason".into(),
                ))
            }
        };
        let tool_calls = this.calls.finish();
        let finish_reason = if finish.is_empty() {
            if tool_calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            }
            .to_string()
        } else {
            normalize_finish(&finish)
        };
        Ok(ModelResponse {
            text: this.text,
            reasoning: this.reasoning,
            tool_calls,
            usage: this.usage.unwrap_or_default(),
            finish_reason,
        })
    }
}
