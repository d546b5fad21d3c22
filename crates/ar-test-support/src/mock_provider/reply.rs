//! Vendor-neutral scripted replies for the mock provider: text, tool calls, usage, errors, pacing.

use std::time::Duration;

/// Token accounting attached to a reply; rendered into each vendor's usage shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens (including cached ones, as OpenAI counts them).
    pub input: u64,
    /// Completion tokens (including reasoning ones).
    pub output: u64,
    /// Prompt tokens served from cache.
    pub cached: u64,
    /// Completion tokens spent on reasoning.
    pub reasoning: u64,
}

impl Usage {
    /// Usage with only input/output counts.
    pub fn new(input: u64, output: u64) -> Self {
        Self {
            input,
            output,
            cached: 0,
            reasoning: 0,
        }
    }

    /// Sets the cached-input count.
    pub fn cached(mut self, cached: u64) -> Self {
        self.cached = cached;
        self
    }

    /// Sets the reasoning-output count.
    pub fn reasoning(mut self, reasoning: u64) -> Self {
        self.reasoning = reasoning;
        self
    }

    /// input + output.
    pub fn total(&self) -> u64 {
        self.input + self.output
    }
}

/// Why the model stopped; mapped per wire format (`stop`/`end_turn`, `tool_calls`/`tool_use`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// Natural end of the answer.
    Stop,
    /// The model wants tool results.
    ToolCalls,
    /// Output token limit hit.
    Length,
}

/// One tool/function call the scripted model makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    /// Call id; generated (`call_mock_…` / `toolu_mock_…`) when empty.
    pub id: String,
    /// Tool/function name.
    pub name: String,
    /// Arguments as a JSON document in a string (as OpenAI sends them).
    pub arguments: String,
    /// The namespace tool the function belongs to (Responses `namespace` tools, as codex
    /// declares an MCP server's tools); rendered on Responses calls only.
    pub namespace: Option<String>,
}

impl ToolCall {
    /// A call with a generated id.
    pub fn new(name: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self {
            id: String::new(),
            name: name.into(),
            arguments: arguments.into(),
            namespace: None,
        }
    }

    /// The call of `name` in the namespace tool `namespace`.
    pub fn in_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// A call with an explicit id.
    pub fn with_id(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
            namespace: None,
        }
    }
}

/// An HTTP error answer, rendered with the vendor's error body shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorReply {
    /// HTTP status, e.g. 401, 429, 500, 529.
    pub status: u16,
    /// Human-readable message put in the error body.
    pub message: String,
    /// Value of a `Retry-After` header (seconds), if any.
    pub retry_after: Option<u64>,
    /// The OpenAI error `code` (e.g. `insufficient_quota`), else the one the status implies.
    pub code: Option<String>,
}

/// How a stream ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEnd {
    /// Normal completion events (`[DONE]`, `response.completed`, `message_stop`).
    Complete,
    /// Send the start and content deltas, then stall until the client goes away.
    Hang,
    /// Send the start and content deltas, then abort the connection mid-body.
    Disconnect,
    /// Send the start and content deltas, then the vendor's in-stream error event (chat: a
    /// `data: {"error":…}` chunk; Responses: `response.failed`; Anthropic: `event: error`), then
    /// close. The status picks the error type (429 rate limit, 529 overloaded, 500 server, …).
    Error(ErrorReply),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Body {
    Turn,
    Error(ErrorReply),
    /// Respond with nothing (not even headers) until the client goes away.
    HangBeforeHeaders,
}

/// A scripted model answer, independent of the wire format that will carry it.
///
/// Build with [`Reply::text`], [`Reply::tool_call`], [`Reply::error`], ... and refine with the
/// chained setters. Text is streamed as one delta per entry of `text_deltas`; tool-call arguments
/// are split into `arg_chunks` pieces when streamed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub(crate) body: Body,
    /// Text deltas; concatenated they are the assistant text.
    pub text_deltas: Vec<String>,
    /// Reasoning deltas (chat `reasoning_content`, Responses reasoning summary, Anthropic
    /// thinking block), streamed before the text.
    pub reasoning_deltas: Vec<String>,
    /// Tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Usage reported for this reply (zero unless set).
    pub usage: Usage,
    /// Explicit finish reason; derived from `tool_calls` when `None`.
    pub finish: Option<FinishReason>,
    /// Wait this long before sending response headers.
    pub delay: Duration,
    /// Wait this long between streamed events.
    pub chunk_delay: Duration,
    /// How a stream ends.
    pub end: StreamEnd,
    /// Number of pieces tool-call arguments are split into when streamed (at least 1).
    pub arg_chunks: usize,
}

impl Default for Reply {
    fn default() -> Self {
        Self {
            body: Body::Turn,
            text_deltas: Vec::new(),
            reasoning_deltas: Vec::new(),
            tool_calls: Vec::new(),
            usage: Usage::default(),
            finish: None,
            delay: Duration::ZERO,
            chunk_delay: Duration::ZERO,
            end: StreamEnd::Complete,
            arg_chunks: 3,
        }
    }
}

impl Reply {
    /// An empty assistant turn (no text, no tools); add parts with the setters.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Assistant text, streamed as a single delta.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text_deltas: vec![text.into()],
            ..Self::default()
        }
    }

    /// Assistant text streamed as the given deltas.
    pub fn text_deltas<I, S>(deltas: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            text_deltas: deltas.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// A single tool call (`arguments` is a JSON document as a string).
    pub fn tool_call(name: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self::default().with_tool_call(ToolCall::new(name, arguments))
    }

    /// Several tool calls in one turn.
    pub fn tool_calls<I>(calls: I) -> Self
    where
        I: IntoIterator<Item = ToolCall>,
    {
        Self {
            tool_calls: calls.into_iter().collect(),
            ..Self::default()
        }
    }

    /// Codex CLI's shell tool: a function `shell` with `{"command":["bash","-lc",script]}`.
    pub fn codex_shell(script: &str) -> Self {
        let args = serde_json::json!({ "command": ["bash", "-lc", script] });
        Self::tool_call("shell", args.to_string())
    }

    /// An HTTP error with the vendor's error body.
    pub fn error(status: u16, message: impl Into<String>) -> Self {
        Self {
            body: Body::Error(ErrorReply {
                status,
                message: message.into(),
                retry_after: None,
                code: None,
            }),
            ..Self::default()
        }
    }

    /// 429 with a `Retry-After` header.
    pub fn rate_limited(retry_after_secs: u64) -> Self {
        Self::error(429, "Rate limit reached (mock)").retry_after(retry_after_secs)
    }

    /// OpenAI's 429 for a spent quota (`insufficient_quota`): no wait cures it.
    pub fn quota_exhausted() -> Self {
        let mut reply = Self::error(
            429,
            "You exceeded your current quota, please check your plan and billing details (mock)",
        );
        if let Body::Error(error) = &mut reply.body {
            error.code = Some("insufficient_quota".to_string());
        }
        reply
    }

    /// 500 server error.
    pub fn server_error() -> Self {
        Self::error(
            500,
            "The server had an error processing your request (mock)",
        )
    }

    /// 401 invalid API key.
    pub fn unauthorized() -> Self {
        Self::error(401, "Incorrect API key provided (mock)")
    }

    /// Never send headers; the request stays pending until the client gives up.
    pub fn hang_before_headers() -> Self {
        Self {
            body: Body::HangBeforeHeaders,
            ..Self::default()
        }
    }

    /// A stream that starts (start events, role chunk) and then stalls until the client leaves.
    pub fn hang() -> Self {
        Self {
            end: StreamEnd::Hang,
            ..Self::default()
        }
    }

    /// Appends a text delta.
    pub fn with_text(mut self, delta: impl Into<String>) -> Self {
        self.text_deltas.push(delta.into());
        self
    }

    /// Appends a reasoning delta.
    pub fn with_reasoning(mut self, delta: impl Into<String>) -> Self {
        self.reasoning_deltas.push(delta.into());
        self
    }

    /// Appends a tool call.
    pub fn with_tool_call(mut self, call: ToolCall) -> Self {
        self.tool_calls.push(call);
        self
    }

    /// Appends a tool call by name and JSON-string arguments.
    pub fn and_tool_call(self, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        self.with_tool_call(ToolCall::new(name, arguments))
    }

    /// Sets usage.
    pub fn usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self
    }

    /// Sets an explicit finish reason.
    pub fn finish(mut self, finish: FinishReason) -> Self {
        self.finish = Some(finish);
        self
    }

    /// Waits before sending headers.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Waits between streamed events.
    pub fn chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = delay;
        self
    }

    /// After the content deltas, stall instead of completing.
    pub fn then_hang(mut self) -> Self {
        self.end = StreamEnd::Hang;
        self
    }

    /// After the content deltas, abort the connection instead of completing.
    pub fn then_disconnect(mut self) -> Self {
        self.end = StreamEnd::Disconnect;
        self
    }

    /// After the content deltas, send the vendor's in-stream error event instead of completing.
    pub fn then_error(mut self, status: u16, message: impl Into<String>) -> Self {
        self.end = StreamEnd::Error(ErrorReply {
            status,
            message: message.into(),
            retry_after: None,
            code: None,
        });
        self
    }

    /// Splits streamed tool arguments into `n` pieces.
    pub fn arg_chunks(mut self, n: usize) -> Self {
        self.arg_chunks = n.max(1);
        self
    }

    /// Sets `Retry-After` on an error reply (no effect on other replies).
    pub fn retry_after(mut self, secs: u64) -> Self {
        if let Body::Error(e) = &mut self.body {
            e.retry_after = Some(secs);
        }
        self
    }

    /// The concatenated reasoning text.
    pub fn full_reasoning(&self) -> String {
        self.reasoning_deltas.concat()
    }

    /// The concatenated assistant text.
    pub fn full_text(&self) -> String {
        self.text_deltas.concat()
    }

    /// The finish reason that will be reported.
    pub fn finish_reason(&self) -> FinishReason {
        self.finish.unwrap_or(if self.tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        })
    }

    /// The error this reply stands for, if it is an error.
    pub fn as_error(&self) -> Option<&ErrorReply> {
        match &self.body {
            Body::Error(e) => Some(e),
            _ => None,
        }
    }

    /// The scripted "5-step agent" used by benchmarks: four sequential tool calls, then a final
    /// answer. Push these in order for one run; for concurrent runs use [`super::AutoScript`].
    pub fn five_step_agent(tool: &str, final_text: &str) -> Vec<Reply> {
        let mut out: Vec<Reply> = (1..=4)
            .map(|i| {
                let args = serde_json::json!({ "command": format!("echo step {i}") });
                Reply::tool_call(tool, args.to_string())
            })
            .collect();
        out.push(Reply::text(final_text));
        out
    }
}

/// Splits `s` into at most `n` non-empty pieces on char boundaries.
pub(crate) fn split_pieces(s: &str, n: usize) -> Vec<&str> {
    let n = n.max(1);
    if s.is_empty() {
        return Vec::new();
    }
    let chars = s.chars().count();
    let per = chars.div_ceil(n).max(1);
    let mut out = Vec::with_capacity(n);
    let mut start = 0;
    let mut count = 0;
    for (idx, _) in s.char_indices() {
        if count == per {
            out.push(&s[start..idx]);
            start = idx;
            count = 0;
        }
        count += 1;
    }
    out.push(&s[start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_pieces_rejoins() {
        for n in 1..6 {
            let s = r#"{"command":"échø hi"}"#;
            let parts = split_pieces(s, n);
            assert!(parts.len() <= n);
            assert_eq!(parts.concat(), s);
        }
        assert!(split_pieces("", 3).is_empty());
    }
}
