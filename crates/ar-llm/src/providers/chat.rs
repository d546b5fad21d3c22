//! OpenAI Chat Completions: request body, endpoint, and the `chat.completion.chunk` stream parser
//! (text, reasoning, tool-call delta assembly, `stream_options.include_usage` usage chunk).

use ar_core::model::{ChatMessage, ChatRole, ModelRequest, ModelResponse, ModelRoute, StreamDelta};
use ar_core::Usage;
use ar_sse::Event as SseEvent;
use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{join, normalize_finish, ToolCallAssembler};
use crate::client::StreamParser;
use crate::error::LlmError;

pub(crate) fn endpoint(base_url: &str) -> String {
    join(base_url, "chat/completions")
}

/// The request body, serialized straight from the transcript (no intermediate JSON tree: the
/// transcript is re-sent at every step, so copying it into `Value`s cost more than the write).
pub(crate) fn body(
    route: &ModelRoute,
    request: &ModelRequest,
) -> Result<Vec<u8>, serde_json::Error> {
    let messages: Vec<WireMessage<'_>> = request.messages.iter().map(WireMessage::from).collect();
    let tools: Vec<WireTool<'_>> = request
        .tools
        .iter()
        .map(|tool| WireTool {
            kind: "function",
            function: WireFunction {
                name: &tool.name,
                description: &tool.description,
                parameters: &tool.parameters,
            },
        })
        .collect();
    serde_json::to_vec(&WireRequest {
        model: &route.model,
        messages,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        max_tokens: request.max_output_tokens,
        tools,
    })
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    /// Sent only when the run bounds its answers (a configured context window).
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    /// `null` for an assistant message that only calls tools.
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

impl<'a> From<&'a ChatMessage> for WireMessage<'a> {
    fn from(message: &'a ChatMessage) -> Self {
        let content = Some(message.content.as_str());
        match message.role {
            ChatRole::System => WireMessage::plain("system", content),
            ChatRole::User => WireMessage::plain("user", content),
            ChatRole::Assistant => WireMessage {
                role: "assistant",
                content: content.filter(|text| message.tool_calls.is_empty() || !text.is_empty()),
                tool_calls: message
                    .tool_calls
                    .iter()
                    .map(|call| WireCall {
                        id: &call.id,
                        kind: "function",
                        function: WireCallFunction {
                            name: &call.name,
                            arguments: &call.arguments,
                        },
                    })
                    .collect(),
                tool_call_id: None,
            },
            ChatRole::Tool => WireMessage {
                tool_call_id: Some(message.tool_call_id.as_deref().unwrap_or_default()),
                ..WireMessage::plain("tool", content)
            },
        }
    }
}

impl<'a> WireMessage<'a> {
    fn plain(role: &'static str, content: Option<&'a str>) -> Self {
        WireMessage {
            role,
            content,
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireCallFunction<'a>,
}

#[derive(Serialize)]
struct WireCallFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
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

/// One `chat.completion.chunk`, read with borrowed strings. Chunks arrive several times per
/// model call; a document that does not fit these types is read again as a generic JSON value
/// (`Parser::on_value`), so vendors' variations are handled the same either way.
#[derive(Deserialize)]
struct ChunkView<'a> {
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default, borrow)]
    choices: Vec<ChoiceView<'a>>,
}

#[derive(Deserialize)]
struct ChoiceView<'a> {
    #[serde(default, borrow)]
    delta: Option<DeltaView<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct DeltaView<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<ToolCallView<'a>>>,
}

#[derive(Deserialize)]
struct ToolCallView<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    function: Option<FunctionView<'a>>,
}

#[derive(Deserialize)]
struct FunctionView<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<Cow<'a, str>>,
}

/// (vendor index, id, name, argument delta) of one tool-call delta.
type CallDelta<'c> = (
    Option<u64>,
    Option<&'c str>,
    Option<&'c str>,
    Option<&'c str>,
);

/// The parts of a chunk the parser acts on, from either reading.
struct ChunkParts<'c> {
    text: Option<&'c str>,
    reasoning: Option<&'c str>,
    /// Each tool-call delta, in order.
    calls: Vec<CallDelta<'c>>,
    finish_reason: Option<&'c str>,
}

impl Parser {
    fn apply(&mut self, parts: ChunkParts<'_>, sink: &mut (dyn FnMut(StreamDelta) + Send)) {
        if let Some(text) = parts.text.filter(|text| !text.is_empty()) {
            self.text.push_str(text);
            sink(StreamDelta::Text(text.to_string()));
        }
        if let Some(reasoning) = parts.reasoning.filter(|reasoning| !reasoning.is_empty()) {
            self.reasoning.push_str(reasoning);
            sink(StreamDelta::Reasoning(reasoning.to_string()));
        }
        for (pos, (vendor, id, name, arguments)) in parts.calls.into_iter().enumerate() {
            let vendor = vendor.unwrap_or(pos as u64);
            let index = match self.vendor_index.iter().position(|v| *v == vendor) {
                Some(i) => i,
                None => {
                    self.vendor_index.push(vendor);
                    self.calls.open()
                }
            };
            if let Some(arguments) = arguments {
                self.calls.append(index, arguments, sink);
            }
            self.calls.identify(index, id, name, sink);
        }
        if let Some(finish) = parts.finish_reason {
            self.finish = Some(finish.to_string());
        }
    }

    /// The fast path: a chunk that fits [`ChunkView`].
    fn on_view(
        &mut self,
        chunk: ChunkView<'_>,
        sink: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<(), LlmError> {
        if let Some(err) = &chunk.error {
            return Err(crate::error::in_stream(err));
        }
        if let Some(u) = chunk.usage.as_ref().filter(|u| u.is_object()) {
            self.usage = Some(usage_from(u));
        }
        let Some(choice) = chunk.choices.first() else {
            return Ok(());
        };
        let delta = choice.delta.as_ref();
        let parts = ChunkParts {
            text: delta.and_then(|d| d.content.as_deref()),
            reasoning: delta
                .and_then(|d| d.reasoning_content.as_deref().or(d.reasoning.as_deref())),
            calls: delta
                .and_then(|d| d.tool_calls.as_ref())
                .map(|calls| {
                    calls
                        .iter()
                        .map(|call| {
                            let function = call.function.as_ref();
                            (
                                call.index,
                                call.id.as_deref(),
                                function.and_then(|f| f.name.as_deref()),
                                function.and_then(|f| f.arguments.as_deref()),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
            finish_reason: choice.finish_reason.as_deref(),
        };
        self.apply(parts, sink);
        Ok(())
    }

    /// The general path: any JSON object, fields of unexpected types read as absent.
    fn on_value(
        &mut self,
        chunk: &Value,
        sink: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<(), LlmError> {
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
            return Ok(());
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        let parts = ChunkParts {
            text: delta.get("content").and_then(Value::as_str),
            reasoning: delta
                .get("reasoning_content")
                .or_else(|| delta.get("reasoning"))
                .and_then(Value::as_str),
            calls: delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(|calls| {
                    calls
                        .iter()
                        .map(|tc| {
                            (
                                tc.get("index").and_then(Value::as_u64),
                                tc.get("id").and_then(Value::as_str),
                                tc.pointer("/function/name").and_then(Value::as_str),
                                tc.pointer("/function/arguments").and_then(Value::as_str),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
            finish_reason: choice.get("finish_reason").and_then(Value::as_str),
        };
        self.apply(parts, sink);
        Ok(())
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
        if let Ok(chunk) = serde_json::from_str::<ChunkView<'_>>(data) {
            self.on_view(chunk, sink)?;
            return Ok(false);
        }
        let chunk: Value =
            serde_json::from_str(data).map_err(|e| LlmError::not_json("chat chunk", data, e))?;
        self.on_value(&chunk, sink)?;
        Ok(false)
    }

    fn finish(self: Box<Self>, terminal: bool) -> Result<ModelResponse, LlmError> {
        let this = *self;
        // Some compatible servers omit `[DONE]`; a finish_reason is enough.
        let finish = match (this.finish, terminal) {
            (Some(f), _) => f,
            (None, true) => String::new(),
            (None, false) => {
                return Err(LlmError::stream_msg(
                    "chat stream ended before a finish_reason",
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
