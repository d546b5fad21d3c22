//! The model port: a vendor-neutral, streaming chat-with-tools call.
//!
//! Providers (Chat Completions, Responses, Anthropic Messages) implement [`ModelClient`] in
//! `ar-llm`. The engine builds a [`ModelRequest`] from the run's transcript, receives streamed
//! [`StreamDelta`]s through a callback (to publish live events) and a final [`ModelResponse`].
//! Cancelling is dropping the future.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::secret::Secret;
use crate::Usage;

/// Author of a transcript message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatRole {
    System,
    User,
    Assistant,
    Tool,
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelToolCall {
    pub id: String,
    pub name: String,
    /// Arguments as the model produced them (JSON text, possibly invalid).
    pub arguments: String,
}

/// The built-in demo model's provider name (`agent-runtime serve --demo`): a deterministic
/// stand-in for a first run without a vendor key, served only in demo mode.
pub const DEMO_PROVIDER: &str = "demo";

/// One message of the transcript sent to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: ChatRole,
    #[serde(default)]
    pub content: String,
    /// For assistant messages: the tool calls it made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ModelToolCall>,
    /// For tool messages: which call this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        ChatMessage {
            role: ChatRole::System,
            content: content.into(),
            tool_calls: vec![],
            tool_call_id: None,
        }
    }

    pub fn user(content: impl Into<String>) -> Self {
        ChatMessage {
            role: ChatRole::User,
            content: content.into(),
            tool_calls: vec![],
            tool_call_id: None,
        }
    }

    pub fn assistant(content: impl Into<String>, tool_calls: Vec<ModelToolCall>) -> Self {
        ChatMessage {
            role: ChatRole::Assistant,
            content: content.into(),
            tool_calls,
            tool_call_id: None,
        }
    }

    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            role: ChatRole::Tool,
            content: content.into(),
            tool_calls: vec![],
            tool_call_id: Some(tool_call_id.into()),
        }
    }
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: serde_json::Value,
}

/// The canonical name of a service tier, as the SDK's `NormalizeServiceTier` gives it:
/// trimmed, lower-cased, OpenAI's own `default` and `priority` read as `standard` and `fast`.
pub fn normalize_service_tier(value: &str) -> String {
    let value = value.trim().to_ascii_lowercase();
    match value.as_str() {
        "default" => "standard".to_owned(),
        "priority" => "fast".to_owned(),
        _ => value,
    }
}

/// Where and as whom a request goes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelRoute {
    /// `openai`, `openai_compatible`, `anthropic`, …
    pub provider: String,
    pub model: String,
    /// Base URL ending before the vendor path (e.g. `https://api.openai.com/v1`).
    pub base_url: String,
    /// Bearer/API key; `None` for approved no-auth endpoints.
    pub api_key: Option<Secret>,
    /// Model controls as given by the host (reasoning effort, service tier, …).
    pub controls: Option<serde_json::Value>,
    /// The ChatGPT account a subscription token acts for (`openai_chatgpt`: sent as the
    /// `ChatGPT-Account-ID` header); `None` for every other provider.
    pub account_id: Option<String>,
}

/// One model call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelRequest {
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    /// The most the answer may spend (`None`: the provider's default of this runtime). Set
    /// when the agent configures its context window, so that input and output fit in it.
    pub max_output_tokens: Option<u64>,
}

/// A piece of a streamed answer, in arrival order.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamDelta {
    Text(String),
    Reasoning(String),
    /// A tool call began; `index` identifies it among the response's calls.
    ToolCallStarted {
        index: usize,
        id: String,
        name: String,
    },
    ToolCallArguments {
        index: usize,
        delta: String,
    },
}

/// The complete answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelResponse {
    pub text: String,
    pub reasoning: String,
    pub tool_calls: Vec<ModelToolCall>,
    pub usage: Usage,
    pub finish_reason: String,
}

/// What failed underneath a model call (the transport's or the decoder's error), kept as the
/// error's source; shared so the error stays `Clone`.
pub type ModelCause = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Why a model call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ModelError {
    /// The credential was rejected (401/403): the run pauses for authentication.
    #[error("model authentication failed: {0}")]
    Authentication(String),
    /// Rate limited or server error after retries.
    #[error("model provider unavailable (status {status}): {message}")]
    Unavailable { status: u16, message: String },
    /// The request was refused (4xx other than auth and 429).
    #[error("model request rejected (status {status}): {message}")]
    Rejected { status: u16, message: String },
    /// The account's quota or credit is spent: retrying cannot help until someone pays.
    #[error("model provider quota exhausted (status {status}): {message}")]
    QuotaExhausted { status: u16, message: String },
    /// The request does not fit the model's context window (a 4xx saying so): the transcript
    /// must shrink before the call can succeed.
    #[error("model context window exceeded (status {status}): {message}")]
    ContextOverflow { status: u16, message: String },
    /// The request could not be sent or built, or the stream broke or stalled.
    #[error("model transport error: {message}")]
    Transport {
        message: String,
        #[source]
        cause: Option<ModelCause>,
    },
    /// The provider's answer did not have the expected shape.
    #[error("invalid model response: {message}")]
    InvalidResponse {
        message: String,
        #[source]
        cause: Option<ModelCause>,
    },
    /// No client serves this provider.
    #[error("model provider {0:?} is not configured")]
    UnsupportedProvider(String),
}

/// Equal when the kind and what is said agree; causes are not compared (they are opaque, and
/// the message already says what they said).
impl PartialEq for ModelError {
    fn eq(&self, other: &Self) -> bool {
        use ModelError::*;
        match (self, other) {
            (Authentication(a), Authentication(b)) => a == b,
            (
                Unavailable { status, message },
                Unavailable {
                    status: other_status,
                    message: other_message,
                },
            )
            | (
                Rejected { status, message },
                Rejected {
                    status: other_status,
                    message: other_message,
                },
            )
            | (
                QuotaExhausted { status, message },
                QuotaExhausted {
                    status: other_status,
                    message: other_message,
                },
            )
            | (
                ContextOverflow { status, message },
                ContextOverflow {
                    status: other_status,
                    message: other_message,
                },
            ) => status == other_status && message == other_message,
            (Transport { message: a, .. }, Transport { message: b, .. })
            | (InvalidResponse { message: a, .. }, InvalidResponse { message: b, .. }) => a == b,
            (UnsupportedProvider(a), UnsupportedProvider(b)) => a == b,
            _ => false,
        }
    }
}

/// Receives streamed deltas while a call is in flight.
pub type DeltaSink<'a> = &'a mut (dyn FnMut(StreamDelta) + Send);

/// A model provider.
#[async_trait]
pub trait ModelClient: Send + Sync + 'static {
    async fn complete(
        &self,
        route: &ModelRoute,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError>;
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn a_transport_error_keeps_its_cause_through_clones() {
        let cause = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let error = ModelError::Transport {
            message: "connection refused".into(),
            cause: Some(Arc::new(cause)),
        };
        let copy = error.clone();
        assert_eq!(
            copy.to_string(),
            "model transport error: connection refused"
        );
        let source = copy.source().expect("the cause is the source");
        assert_eq!(source.to_string(), "refused");
        // Equality compares what the errors say, not their causes.
        assert_eq!(
            error,
            ModelError::Transport {
                message: "connection refused".into(),
                cause: None,
            }
        );
        assert_ne!(
            error,
            ModelError::InvalidResponse {
                message: "connection refused".into(),
                cause: None,
            }
        );
    }
}
