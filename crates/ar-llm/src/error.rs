//! Provider-side failures, classified for the retry loop and mapped onto the domain `ModelError`.

use std::sync::Arc;
use std::time::Duration;

use ar_core::model::{ModelCause, ModelError};

/// What made a request fail before it was sent (the HTTP client's or the encoder's error).
pub type LlmCause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A failure inside one provider call, before it is reported to the engine.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The vendor answered with a non-success HTTP status.
    #[error("HTTP {status}: {message}")]
    Status {
        status: u16,
        message: String,
        /// Server-requested wait (`Retry-After` / `retry-after-ms`).
        retry_after: Option<Duration>,
    },
    /// The account's quota or credit is spent (OpenAI's 429 `insufficient_quota`, a 402):
    /// never retried.
    #[error("quota exhausted (HTTP {status}): {message}")]
    QuotaExhausted { status: u16, message: String },
    /// The request does not fit the model's context window (never retried as it is).
    #[error("context window exceeded (HTTP {status}): {message}")]
    ContextOverflow { status: u16, message: String },
    /// The request could not be sent or no response head arrived (nothing consumed).
    #[error("request failed: {0}")]
    Connect(#[source] reqwest::Error),
    /// The request could not be built or was redirected (not retried).
    #[error("request error: {message}")]
    Request {
        message: String,
        #[source]
        cause: Option<LlmCause>,
    },
    /// The response stream broke or stalled after it started.
    #[error("stream failed: {message}")]
    Stream {
        message: String,
        #[source]
        cause: Option<reqwest::Error>,
    },
    /// The vendor reported an error inside an otherwise successful stream; `status` is the HTTP
    /// status its error type stands for (see [`status_for_error_kind`]).
    #[error("provider error in stream ({status}): {message}")]
    InStream { status: u16, message: String },
    /// Bytes arrived but were not JSON.
    #[error("invalid response: {message}")]
    Decode {
        message: String,
        #[source]
        cause: serde_json::Error,
    },
    /// No wire format serves the route's provider.
    #[error("unsupported provider {0:?}")]
    UnsupportedProvider(String),
}

impl LlmError {
    /// A request that could not be built or sent, keeping why as its source.
    pub(crate) fn request(cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        LlmError::Request {
            message: cause.to_string(),
            cause: Some(Box::new(cause)),
        }
    }

    /// A request refused before any I/O (nothing underneath).
    pub(crate) fn request_msg(message: impl Into<String>) -> Self {
        LlmError::Request {
            message: message.into(),
            cause: None,
        }
    }

    /// A stream the transport broke.
    pub(crate) fn stream(cause: reqwest::Error) -> Self {
        LlmError::Stream {
            message: cause.to_string(),
            cause: Some(cause),
        }
    }

    /// A stream that stalled or ended early (nothing underneath).
    pub(crate) fn stream_msg(message: impl Into<String>) -> Self {
        LlmError::Stream {
            message: message.into(),
            cause: None,
        }
    }

    /// A streamed `what` whose data is not JSON; the message quotes the data.
    pub(crate) fn not_json(what: &str, data: &str, cause: serde_json::Error) -> Self {
        LlmError::Decode {
            message: format!("{what} is not JSON ({cause}): {data}"),
            cause,
        }
    }

    /// Whether a fresh attempt may succeed. Only failures that happen before any response byte
    /// is consumed are ever retried; the caller guarantees that.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Status { status, .. } => is_retryable_status(*status),
            LlmError::Connect(_) => true,
            _ => false,
        }
    }

    /// The server-requested delay, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// Whether an error answer says the account's quota or credit is spent: a 402 (OpenRouter's
/// "insufficient credits"), or an error whose type or code is `insufficient_quota` (OpenAI's
/// 429 that no wait cures).
pub(crate) fn is_quota_exhausted(status: u16, body: &str) -> bool {
    if status == 402 {
        return true;
    }
    let Ok(parsed) = serde_json::from_str::<serde_json::Value>(body) else {
        return false;
    };
    ["/error/code", "/error/type", "/code", "/type"]
        .iter()
        .any(|pointer| {
            parsed.pointer(pointer).and_then(|v| v.as_str()) == Some("insufficient_quota")
        })
}

/// Whether an error answer says the request is too long for the model's context window:
/// OpenAI's `context_length_exceeded` (Chat Completions and Responses), Anthropic's "prompt is
/// too long", and the usual wordings of compatible servers.
pub(crate) fn is_context_overflow(status: u16, code: &str, message: &str) -> bool {
    if !matches!(status, 400 | 413 | 422) {
        return false;
    }
    let message = message.to_ascii_lowercase();
    code == "context_length_exceeded"
        || [
            "context_length_exceeded",
            "maximum context length",
            "exceeds the context window",
            "context window exceeded",
            "prompt is too long",
            "exceed context limit",
        ]
        .iter()
        .any(|wording| message.contains(wording))
}

/// The `code` (else `type`) of a vendor error body, `""` when it has none.
fn error_code(body: &str) -> String {
    let Ok(parsed) = serde_json::from_str::<serde_json::Value>(body) else {
        return String::new();
    };
    ["/error/code", "/code", "/error/type"]
        .iter()
        .find_map(|pointer| parsed.pointer(pointer).and_then(|v| v.as_str()))
        .unwrap_or_default()
        .to_string()
}

/// The error an unsuccessful answer stands for: a spent quota, a context overflow, or a
/// plain status (retried when transient).
pub(crate) fn from_status(status: u16, body: &str, retry_after: Option<Duration>) -> LlmError {
    let message = error_message(body);
    if is_quota_exhausted(status, body) {
        return LlmError::QuotaExhausted { status, message };
    }
    if is_context_overflow(status, &error_code(body), &message) {
        return LlmError::ContextOverflow { status, message };
    }
    LlmError::Status {
        status,
        message,
        retry_after,
    }
}

/// 408, 409 (lock conflicts), 429 and server errors (incl. Anthropic's 529) are transient.
pub fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || (500..=599).contains(&status)
}

impl From<LlmError> for ModelError {
    fn from(e: LlmError) -> Self {
        match e {
            LlmError::Status {
                status, message, ..
            } => match status {
                401 | 403 => ModelError::Authentication(message),
                s if is_retryable_status(s) => ModelError::Unavailable { status, message },
                _ => ModelError::Rejected { status, message },
            },
            LlmError::QuotaExhausted { status, message } => {
                ModelError::QuotaExhausted { status, message }
            }
            LlmError::ContextOverflow { status, message } => {
                ModelError::ContextOverflow { status, message }
            }
            LlmError::Connect(cause) => ModelError::Transport {
                message: cause.to_string(),
                cause: Some(Arc::new(cause)),
            },
            LlmError::Request { message, cause } => ModelError::Transport {
                message,
                cause: cause.map(ModelCause::from),
            },
            LlmError::Stream { message, cause } => ModelError::Transport {
                message,
                cause: cause.map(|cause| Arc::new(cause) as ModelCause),
            },
            LlmError::InStream {
                status: 402,
                message,
            } => ModelError::QuotaExhausted {
                status: 402,
                message,
            },
            LlmError::InStream { status, message } => LlmError::Status {
                status,
                message,
                retry_after: None,
            }
            .into(),
            LlmError::Decode { message, cause } => ModelError::InvalidResponse {
                message,
                cause: Some(Arc::new(cause)),
            },
            LlmError::UnsupportedProvider(p) => ModelError::UnsupportedProvider(p),
        }
    }
}

/// The HTTP status a vendor error type/code stands for (OpenAI `type`/`code`, Anthropic
/// `error.type`); unknown kinds count as server errors (500).
pub fn status_for_error_kind(kind: &str) -> u16 {
    match kind {
        "invalid_request_error" | "invalid_prompt" | "context_length_exceeded" => 400,
        "authentication_error" | "invalid_api_key" => 401,
        "permission_error" => 403,
        "not_found_error" | "model_not_found" => 404,
        "request_too_large" => 413,
        "rate_limit_error" | "rate_limit_exceeded" => 429,
        "insufficient_quota" => 402,
        "overloaded_error" => 529,
        _ => 500,
    }
}

/// An in-stream error from a vendor error object (`{"type"|"code", "message"}`).
pub(crate) fn in_stream(err: &serde_json::Value) -> LlmError {
    let kind = err
        .get("code")
        .and_then(|c| c.as_str())
        .or_else(|| err.get("type").and_then(|t| t.as_str()))
        .unwrap_or_default();
    let message = err
        .get("message")
        .and_then(|m| m.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| err.to_string());
    let status = status_for_error_kind(kind);
    if is_context_overflow(status, kind, &message) {
        return LlmError::ContextOverflow { status, message };
    }
    LlmError::InStream { status, message }
}

/// Pulls a human message out of a vendor error body (`{"error":{"message"}}` for OpenAI and
/// Anthropic alike, `{"detail"}` for the ChatGPT backend), falling back to the raw text.
pub(crate) fn error_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let from_json = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error"))
            .or_else(|| v.get("detail"))
            .and_then(|m| m.as_str())
            .map(str::to_string)
    });
    from_json.unwrap_or_else(|| {
        let trimmed = body.trim();
        let mut s: String = trimmed.chars().take(500).collect();
        if s.is_empty() {
            s = "(empty body)".to_string();
        }
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_statuses_to_domain_errors() {
        let e = |status| LlmError::Status {
            status,
            message: "m".into(),
            retry_after: None,
        };
        assert!(matches!(
            ModelError::from(e(401)),
            ModelError::Authentication(_)
        ));
        assert!(matches!(
            ModelError::from(e(403)),
            ModelError::Authentication(_)
        ));
        assert!(matches!(
            ModelError::from(e(429)),
            ModelError::Unavailable { status: 429, .. }
        ));
        assert!(matches!(
            ModelError::from(e(529)),
            ModelError::Unavailable { status: 529, .. }
        ));
        assert!(matches!(
            ModelError::from(e(400)),
            ModelError::Rejected { status: 400, .. }
        ));
        assert!(e(503).is_retryable());
        assert!(!e(401).is_retryable());
        assert!(!LlmError::stream_msg("x").is_retryable());
        let e = in_stream(&serde_json::json!({"type": "overloaded_error", "message": "busy"}));
        assert!(matches!(
            ModelError::from(e),
            ModelError::Unavailable { status: 529, .. }
        ));
        let e =
            in_stream(&serde_json::json!({"code": "context_length_exceeded", "message": "long"}));
        assert!(matches!(
            ModelError::from(e),
            ModelError::ContextOverflow { status: 400, .. }
        ));
        let e = in_stream(&serde_json::json!({"code": "invalid_prompt", "message": "no"}));
        assert!(matches!(
            ModelError::from(e),
            ModelError::Rejected { status: 400, .. }
        ));
    }

    #[test]
    fn a_spent_quota_is_told_apart_from_a_rate_limit() {
        let openai = r#"{"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}}"#;
        assert!(is_quota_exhausted(429, openai));
        assert!(is_quota_exhausted(402, "Insufficient credits"));
        let limited = r#"{"error": {"message": "slow down", "type": "rate_limit_error", "code": "rate_limit_exceeded"}}"#;
        assert!(!is_quota_exhausted(429, limited));
        assert!(!is_quota_exhausted(429, "not json"));
        let spent = LlmError::QuotaExhausted {
            status: 429,
            message: "spent".into(),
        };
        assert!(!spent.is_retryable());
        assert!(matches!(
            ModelError::from(spent),
            ModelError::QuotaExhausted { status: 429, .. }
        ));
        let e = in_stream(&serde_json::json!({"code": "insufficient_quota", "message": "spent"}));
        assert!(matches!(
            ModelError::from(e),
            ModelError::QuotaExhausted { status: 402, .. }
        ));
    }

    #[test]
    fn a_context_overflow_is_told_apart_from_other_refusals() {
        let openai = r#"{"error": {"message": "This model's maximum context length is 8192 tokens.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}"#;
        assert!(matches!(
            from_status(400, openai, None),
            LlmError::ContextOverflow { status: 400, .. }
        ));
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 9000 tokens > 8192 maximum"}}"#;
        assert!(matches!(
            from_status(400, anthropic, None),
            LlmError::ContextOverflow { .. }
        ));
        let other = r#"{"error": {"message": "bad tool schema", "type": "invalid_request_error"}}"#;
        assert!(matches!(
            from_status(400, other, None),
            LlmError::Status { status: 400, .. }
        ));
        // A server error that mentions the window is still a server error.
        assert!(matches!(
            from_status(500, openai, None),
            LlmError::Status { status: 500, .. }
        ));
    }

    #[test]
    fn decode_errors_keep_the_parser_error_as_their_source() {
        use std::error::Error as _;
        let parse = serde_json::from_str::<serde_json::Value>("{oops").unwrap_err();
        let error = LlmError::not_json("chat chunk", "{oops", parse);
        assert!(error
            .to_string()
            .starts_with("invalid response: chat chunk is not JSON ("));
        assert!(error
            .source()
            .is_some_and(|cause| cause.is::<serde_json::Error>()));
        let model = ModelError::from(error);
        assert!(matches!(model, ModelError::InvalidResponse { .. }));
        assert!(model.source().is_some(), "{model:?}");
    }

    #[test]
    fn extracts_vendor_messages() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad key","type":"x"}}"#),
            "bad key"
        );
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#
            ),
            "busy"
        );
        assert_eq!(error_message("plain text"), "plain text");
        assert_eq!(error_message(""), "(empty body)");
    }
}
