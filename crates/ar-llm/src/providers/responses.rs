//! OpenAI Responses: request body (instructions + input items + function tools + controls),
//! endpoint, and the typed-event stream parser (`response.*` events).

use std::collections::HashMap;

use ar_core::model::{ChatRole, ModelRequest, ModelResponse, ModelRoute, StreamDelta};
use ar_core::Usage;
use ar_sse::Event as SseEvent;
use serde_json::{json, Value};

use super::{control, join, ToolCallAssembler};
use crate::client::StreamParser;
use crate::error::LlmError;

/// `max_output_tokens` of every request (the original's default for its Responses models).
const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 16_384;

pub(crate) fn endpoint(base_url: &str) -> String {
    join(base_url, "responses")
}

pub(crate) fn body(route: &ModelRoute, request: &ModelRequest) -> Value {
    let mut instructions: Vec<&str> = Vec::new();
    let mut input: Vec<Value> = Vec::new();
    for m in &request.messages {
        match m.role {
            ChatRole::System => instructions.push(&m.content),
            ChatRole::User => input.push(json!({
                "type": "message",
                "role": "user",
                "content": [{ "type": "input_text", "text": m.content }],
            })),
            ChatRole::Assistant => {
                if !m.content.is_empty() {
                    input.push(json!({
                        "type": "message",
                        "role": "assistant",
                        "content": [{ "type": "output_text", "text": m.content }],
                    }));
                }
                for c in &m.tool_calls {
                    input.push(json!({
                        "type": "function_call",
                        "call_id": c.id,
                        "name": c.name,
                        "arguments": c.arguments,
                    }));
                }
            }
            ChatRole::Tool => input.push(json!({
                "type": "function_call_output",
                "call_id": m.tool_call_id.as_deref().unwrap_or_default(),
                "output": m.content,
            })),
        }
    }
    let mut body = json!({
        "model": route.model,
        "input": input,
        "stream": true,
        "store": false,
        "max_output_tokens": request.max_output_tokens.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS),
    });
    if !instructions.is_empty() {
        body["instructions"] = Value::from(instructions.join("\n\n"));
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": false,
                })
            })
            .collect();
        body["tools"] = Value::from(tools);
    }
    if let Some(effort) = control(route, "reasoning_effort").and_then(Value::as_str) {
        body["reasoning"] = json!({ "effort": effort });
    }
    if let Some(tier) = control(route, "service_tier").and_then(Value::as_str) {
        body["service_tier"] = Value::from(openai_service_tier(tier));
    }
    let quantizations = control(route, "openrouter")
        .and_then(|o| o.pointer("/provider/quantizations"))
        .and_then(Value::as_array)
        .filter(|list| !list.is_empty());
    if let Some(quantizations) = quantizations {
        body["provider"] = json!({ "quantizations": quantizations });
    }
    body
}

/// OpenAI's name of a canonical service tier: it knows `priority` and `default`, not the
/// SDK's `fast` and `standard` (the original maps them the same way).
fn openai_service_tier(canonical: &str) -> &str {
    match canonical {
        "fast" => "priority",
        "standard" => "default",
        other => other,
    }
}

fn usage_from(u: &Value) -> Usage {
    let n = |p: &str| u.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    Usage {
        input_tokens: n("/input_tokens"),
        cached_input_tokens: n("/input_tokens_details/cached_tokens"),
        output_tokens: n("/output_tokens"),
        reasoning_output_tokens: n("/output_tokens_details/reasoning_tokens"),
        total_tokens: n("/total_tokens"),
    }
}

/// Stream state for one Responses call.
#[derive(Debug, Default)]
pub(crate) struct Parser {
    text: String,
    reasoning: String,
    calls: ToolCallAssembler,
    /// Output item id → assembled call index.
    by_item: HashMap<String, usize>,
    /// Text of finished message items, used when no text deltas were streamed.
    done_text: String,
    usage: Option<Usage>,
    finish: Option<String>,
}

impl Parser {
    /// The call index of a function-call item, opening (and announcing) it when first seen.
    fn call_index(&mut self, item: &Value, sink: &mut (dyn FnMut(StreamDelta) + Send)) -> usize {
        let key = item
            .get("id")
            .or_else(|| item.get("call_id"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let index = match self.by_item.get(&key) {
            Some(i) => *i,
            None => {
                let i = self.calls.open();
                self.by_item.insert(key, i);
                i
            }
        };
        let call_id = item.get("call_id").and_then(Value::as_str);
        let name = item.get("name").and_then(Value::as_str);
        self.calls.identify(index, call_id, name, sink);
        index
    }

    fn complete(&mut self, response: Option<&Value>, finish: &str) {
        if let Some(u) = response
            .and_then(|r| r.get("usage"))
            .filter(|u| u.is_object())
        {
            self.usage = Some(usage_from(u));
        }
        self.finish = Some(finish.to_string());
    }
}

fn item_text(item: &Value) -> String {
    item.get("content")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str) == Some("output_text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<String>()
        })
        .unwrap_or_default()
}

impl StreamParser for Parser {
    fn on_event(
        &mut self,
        event: SseEvent,
        sink: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<bool, LlmError> {
        if event.data.trim().is_empty() || event.data.trim() == "[DONE]" {
            return Ok(false);
        }
        let v: Value = serde_json::from_str(&event.data)
            .map_err(|e| LlmError::not_json("responses event", &event.data, e))?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(&event.event);
        let str_of = |key: &str| v.get(key).and_then(Value::as_str).unwrap_or_default();
        match kind {
            "response.output_text.delta" => {
                let d = str_of("delta");
                if !d.is_empty() {
                    self.text.push_str(d);
                    sink(StreamDelta::Text(d.to_string()));
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let d = str_of("delta");
                if !d.is_empty() {
                    self.reasoning.push_str(d);
                    sink(StreamDelta::Reasoning(d.to_string()));
                }
            }
            "response.output_item.added" => {
                if let Some(item) = v.get("item") {
                    if item.get("type").and_then(Value::as_str) == Some("function_call") {
                        let index = self.call_index(item, sink);
                        let args = item
                            .get("arguments")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        self.calls.append(index, args, sink);
                    }
                }
            }
            "response.function_call_arguments.delta" => {
                let item_id = str_of("item_id").to_string();
                if let Some(&index) = self.by_item.get(&item_id) {
                    self.calls.append(index, str_of("delta"), sink);
                }
            }
            "response.output_item.done" => {
                if let Some(item) = v.get("item") {
                    match item.get("type").and_then(Value::as_str) {
                        Some("function_call") => {
                            let index = self.call_index(item, sink);
                            if let Some(args) = item.get("arguments").and_then(Value::as_str) {
                                self.calls.set_final(index, args, sink);
                            }
                        }
                        Some("message") => self.done_text.push_str(&item_text(item)),
                        _ => {}
                    }
                }
            }
            "response.completed" => {
                let finish = if self.calls.len() > 0 {
                    "tool_calls"
                } else {
                    "stop"
                };
                self.complete(v.get("response"), finish);
                return Ok(true);
            }
            "response.incomplete" => {
                self.complete(v.get("response"), "length");
                return Ok(true);
            }
            "response.failed" => {
                let err = v
                    .pointer("/response/error")
                    .filter(|e| e.is_object())
                    .cloned()
                    .unwrap_or_else(|| json!({ "message": "response.failed" }));
                return Err(crate::error::in_stream(&err));
            }
            "error" => {
                let err = v.get("error").filter(|e| e.is_object()).unwrap_or(&v);
                return Err(crate::error::in_stream(err));
            }
            _ => {}
        }
        Ok(false)
    }

    fn finish(self: Box<Self>, _terminal: bool) -> Result<ModelResponse, LlmError> {
        let this = *self;
        let Some(finish_reason) = this.finish else {
            return Err(LlmError::stream_msg(
                "responses stream ended before response.completed",
            ));
        };
        let text = if this.text.is_empty() {
            this.done_text
        } else {
            this.text
        };
        Ok(ModelResponse {
            text,
            reasoning: this.reasoning,
            tool_calls: this.calls.finish(),
            usage: this.usage.unwrap_or_default(),
            finish_reason,
        })
    }
}
