//! `LlmClient`: the `ModelClient` implementation. Picks the wire format from the route's
//! provider, sends with bounded retries (only before the stream starts), and drives the
//! provider's stream parser over the SSE body.

use std::time::Duration;

use ar_core::model::{
    DeltaSink, ModelClient, ModelError, ModelRequest, ModelResponse, ModelRoute, StreamDelta,
};
use ar_sse::{Decoder as SseDecoder, Event as SseEvent};
use async_trait::async_trait;
use futures::StreamExt;

use crate::error::{from_status, LlmError};
use crate::providers::{anthropic, chat, chatgpt, responses};
use crate::retry::{parse_retry_after, RetryPolicy};

/// The vendor wire formats this crate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireApi {
    /// OpenAI Chat Completions (`{base}/chat/completions`).
    ChatCompletions,
    /// OpenAI Responses (`{base}/responses`).
    Responses,
    /// Anthropic Messages (`{base}/v1/messages`, or `{base}/messages` when base ends in `/v1`).
    AnthropicMessages,
    /// OpenAI Responses as the ChatGPT subscription backend takes it (`{base}/responses`).
    ChatGptResponses,
}

impl WireApi {
    /// The wire format of a provider name from the service contract: `openai_compatible` →
    /// Chat Completions; `openai`, `openrouter`, `openrouter_responses` → Responses;
    /// `openai_chatgpt` → Responses for the subscription backend; `anthropic` → Messages.
    /// Aliases `chat_completions`, `responses`, `messages` name a wire format directly.
    pub fn for_provider(provider: &str) -> Option<WireApi> {
        match provider {
            "openai_compatible" | "chat_completions" | "openai_chat" => {
                Some(WireApi::ChatCompletions)
            }
            "openai" | "openrouter" | "openrouter_responses" | "responses" => {
                Some(WireApi::Responses)
            }
            "openai_chatgpt" => Some(WireApi::ChatGptResponses),
            "anthropic" | "messages" | "anthropic_messages" => Some(WireApi::AnthropicMessages),
            _ => None,
        }
    }

    /// The vendor's public base URL for a provider, used when a route leaves `base_url` empty.
    pub fn default_base_url(provider: &str) -> Option<&'static str> {
        match provider {
            "openai" => Some("https://api.openai.com/v1"),
            "openrouter" | "openrouter_responses" => Some("https://openrouter.ai/api/v1"),
            "anthropic" => Some("https://api.anthropic.com"),
            "openai_chatgpt" => Some("https://chatgpt.com/backend-api/codex"),
            _ => None,
        }
    }
}

/// Consumes a provider's SSE events and assembles the final answer.
pub(crate) trait StreamParser: Send {
    /// Handles one event; `Ok(true)` once the terminal event arrived.
    fn on_event(
        &mut self,
        event: SseEvent,
        sink: &mut (dyn FnMut(StreamDelta) + Send),
    ) -> Result<bool, LlmError>;

    /// The assembled response. `terminal` says whether the terminal event was seen (otherwise
    /// the body ended early); parsers may accept an answer that is complete in substance.
    fn finish(self: Box<Self>, terminal: bool) -> Result<ModelResponse, LlmError>;
}

/// Settings shared by every call of an [`LlmClient`].
#[derive(Debug, Clone)]
pub struct LlmClientConfig {
    /// Retries before the stream starts.
    pub retry: RetryPolicy,
    /// Longest silence tolerated between stream chunks.
    pub idle_timeout: Duration,
    /// Time allowed to connect.
    pub connect_timeout: Duration,
    /// Forces a wire format regardless of the route's provider.
    pub wire_override: Option<WireApi>,
}

impl Default for LlmClientConfig {
    fn default() -> Self {
        Self {
            retry: RetryPolicy::default(),
            idle_timeout: Duration::from_secs(300),
            connect_timeout: Duration::from_secs(30),
            wire_override: None,
        }
    }
}

/// Streaming model client for Chat Completions, Responses and Anthropic Messages.
///
/// Cancel a call by dropping its future: the HTTP connection is dropped with it.
#[derive(Debug, Clone)]
pub struct LlmClient {
    http: reqwest::Client,
    config: LlmClientConfig,
}

impl LlmClient {
    /// A client with default settings (3 retries, 300 s idle timeout, no redirects).
    ///
    /// # Errors
    /// When the TLS backend cannot be initialised.
    pub fn new() -> Result<Self, LlmError> {
        Self::with_config(LlmClientConfig::default())
    }

    /// A client with explicit settings.
    ///
    /// # Errors
    /// When the TLS backend cannot be initialised.
    pub fn with_config(config: LlmClientConfig) -> Result<Self, LlmError> {
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            // Contract: compatible endpoints are called exactly at the bound URL, no redirects.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(LlmError::request)?;
        Ok(Self { http, config })
    }

    /// Reuses an existing `reqwest::Client` (its redirect/timeout settings apply as built).
    pub fn from_http(http: reqwest::Client, config: LlmClientConfig) -> Self {
        Self { http, config }
    }

    /// The settings in use.
    pub fn config(&self) -> &LlmClientConfig {
        &self.config
    }

    /// Runs one call in an explicit wire format.
    ///
    /// # Errors
    /// Any [`LlmError`]; transient ones only after the retry budget is spent.
    pub async fn complete_wire(
        &self,
        wire: WireApi,
        route: &ModelRoute,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, LlmError> {
        let base = if route.base_url.is_empty() {
            WireApi::default_base_url(&route.provider).ok_or_else(|| {
                LlmError::request_msg(format!("route for {:?} has no base_url", route.provider))
            })?
        } else {
            route.base_url.as_str()
        };
        let encode = |error: serde_json::Error| LlmError::request(error);
        let as_bytes = |body: serde_json::Value| serde_json::to_vec(&body).map_err(encode);
        let (url, body) = match wire {
            WireApi::ChatCompletions => (
                chat::endpoint(base),
                chat::body(route, request).map_err(encode)?,
            ),
            WireApi::Responses => (
                responses::endpoint(base),
                as_bytes(responses::body(route, request))?,
            ),
            WireApi::ChatGptResponses => (
                chatgpt::endpoint(base),
                as_bytes(chatgpt::body(route, request))?,
            ),
            WireApi::AnthropicMessages => (
                anthropic::endpoint(base),
                as_bytes(anthropic::body(route, request))?,
            ),
        };
        // Serialised once; every retry re-sends the same bytes.
        let bytes = bytes::Bytes::from(body);
        let send = || {
            self.send_with_retry(|| {
                let builder = self
                    .http
                    .post(&url)
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .header(reqwest::header::ACCEPT, "text/event-stream")
                    .body(bytes.clone());
                match wire {
                    WireApi::AnthropicMessages => anthropic::auth(builder, route),
                    WireApi::ChatGptResponses => chatgpt::auth(builder, route),
                    WireApi::ChatCompletions | WireApi::Responses => {
                        match route.api_key.as_ref().filter(|k| !k.is_empty()) {
                            Some(key) => builder.bearer_auth(key.expose()),
                            None => builder,
                        }
                    }
                }
            })
        };
        let mut emitted = false;
        let mut sink = |delta: StreamDelta| {
            emitted = true;
            on_delta(delta);
        };
        let answer = self
            .read_stream(send().await?, parser_for(wire), &mut sink)
            .await;
        match answer {
            // The subscription backend sometimes ends a stream before its first output; with
            // nothing shown yet, asking once more repeats nothing (the original does the same).
            Err(LlmError::Stream { .. } | LlmError::Decode { .. })
                if wire == WireApi::ChatGptResponses && !emitted =>
            {
                tracing::debug!("the ChatGPT stream broke before any output; asking once more");
                self.read_stream(send().await?, parser_for(wire), on_delta)
                    .await
            }
            answer => answer,
        }
    }

    async fn send_with_retry<F>(&self, make: F) -> Result<reqwest::Response, LlmError>
    where
        F: Fn() -> reqwest::RequestBuilder,
    {
        let policy = &self.config.retry;
        let mut attempt = 0u32;
        loop {
            let err = match make().send().await {
                Ok(resp) if resp.status().is_success() => return Ok(resp),
                Ok(resp) => status_error(resp).await,
                Err(e) if e.is_builder() || e.is_redirect() => LlmError::request(e),
                Err(e) => LlmError::Connect(e),
            };
            if !err.is_retryable() || attempt >= policy.max_retries {
                return Err(err);
            }
            let Some(wait) = policy.delay(attempt, err.retry_after()) else {
                return Err(err);
            };
            tracing::debug!(attempt, ?wait, error = %err, "retrying model request");
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    async fn read_stream(
        &self,
        response: reqwest::Response,
        mut parser: Box<dyn StreamParser>,
        sink: DeltaSink<'_>,
    ) -> Result<ModelResponse, LlmError> {
        let idle = self.config.idle_timeout;
        let mut body = response.bytes_stream();
        let mut decoder = SseDecoder::new();
        let mut terminal = false;
        'read: loop {
            let chunk = match tokio::time::timeout(idle, body.next()).await {
                Err(_) => return Err(LlmError::stream_msg(format!("no data for {idle:?}"))),
                Ok(None) => break,
                Ok(Some(Err(e))) => return Err(LlmError::stream(e)),
                Ok(Some(Ok(chunk))) => chunk,
            };
            decoder.push(&chunk);
            while let Some(event) = decoder.next_event() {
                if parser.on_event(event, sink)? {
                    terminal = true;
                    break 'read;
                }
            }
        }
        if terminal {
            // Drain a well-behaved tail briefly so the connection can be reused.
            let drain = async { while let Some(Ok(_)) = body.next().await {} };
            let _ = tokio::time::timeout(Duration::from_millis(50), drain).await;
        }
        parser.finish(terminal)
    }
}

/// A fresh stream parser for a wire format.
fn parser_for(wire: WireApi) -> Box<dyn StreamParser> {
    match wire {
        WireApi::ChatCompletions => Box::new(chat::Parser::default()),
        WireApi::Responses | WireApi::ChatGptResponses => Box::new(responses::Parser::default()),
        WireApi::AnthropicMessages => Box::new(anthropic::Parser::default()),
    }
}

async fn status_error(resp: reqwest::Response) -> LlmError {
    let status = resp.status().as_u16();
    let retry_after = parse_retry_after(resp.headers());
    let text = resp.text().await.unwrap_or_default();
    from_status(status, &text, retry_after)
}

#[async_trait]
impl ModelClient for LlmClient {
    async fn complete(
        &self,
        route: &ModelRoute,
        request: &ModelRequest,
        on_delta: DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let wire = self
            .config
            .wire_override
            .or_else(|| WireApi::for_provider(&route.provider))
            .ok_or_else(|| ModelError::UnsupportedProvider(route.provider.clone()))?;
        self.complete_wire(wire, route, request, on_delta)
            .await
            .map_err(ModelError::from)
    }
}
