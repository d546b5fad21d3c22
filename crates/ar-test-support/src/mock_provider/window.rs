//! A model's context window, as vendors enforce it: a request whose input, with the output it
//! asks room for, does not fit is refused with a 400 in the vendor's own words (OpenAI's
//! `context_length_exceeded` for Chat Completions and Responses, Anthropic's "prompt is too
//! long" or "input length and `max_tokens` exceed context limit").
//!
//! The mock counts a request's input tokens as a quarter of its JSON body's bytes (rounded
//! up), about what vendors' tokenizers give for English text and JSON; [`request_tokens`] is
//! that count, recorded with every request so that tests can check what was sent.

use serde_json::Value;

use super::reply::ErrorReply;
use super::WireFormat;

/// The mock's count of a request's input tokens: its JSON body's bytes divided by 4, rounded up.
pub fn request_tokens(body: &Value) -> u64 {
    let bytes = body.to_string().len() as u64;
    bytes.div_ceil(4)
}

/// The room for output a request asks for (`max_output_tokens`, `max_tokens`,
/// `max_completion_tokens`), 0 when it names none.
fn requested_output(body: &Value) -> u64 {
    ["max_output_tokens", "max_completion_tokens", "max_tokens"]
        .iter()
        .find_map(|key| body.get(*key).and_then(Value::as_u64))
        .unwrap_or(0)
}

/// The vendor's refusal of a request of `input` tokens that does not fit `window`, `None`
/// when it fits.
pub(crate) fn overflow(
    wire: WireFormat,
    body: &Value,
    input: u64,
    window: u64,
) -> Option<ErrorReply> {
    let output = requested_output(body);
    if input + output <= window {
        return None;
    }
    let (message, code) = match wire {
        WireFormat::ChatCompletions => (
            format!(
                "This model's maximum context length is {window} tokens. However, you requested {} tokens ({input} in the messages, {output} in the completion). Please reduce the length of the messages or completion.",
                input + output
            ),
            Some("context_length_exceeded"),
        ),
        WireFormat::Responses => (
            "Your input exceeds the context window of this model. Please adjust your input and try again.".to_string(),
            Some("context_length_exceeded"),
        ),
        WireFormat::AnthropicMessages if input > window => (
            format!("prompt is too long: {input} tokens > {window} maximum"),
            None,
        ),
        WireFormat::AnthropicMessages => (
            format!(
                "input length and `max_tokens` exceed context limit: {input} + {output} > {window}, decrease input length or `max_tokens` and try again"
            ),
            None,
        ),
    };
    Some(ErrorReply {
        status: 400,
        message,
        retry_after: None,
        code: code.map(str::to_string),
    })
}
