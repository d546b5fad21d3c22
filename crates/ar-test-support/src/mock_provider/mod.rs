//! The mock model provider: an in-process axum HTTP server speaking OpenAI Chat Completions,
//! OpenAI Responses and Anthropic Messages (streaming and not), driven by scripted [`Reply`]s.
//!
//! Reply selection per model request: the FIFO queue first ([`MockProvider::push`]), then the
//! responder ([`MockProvider::auto`] / [`MockProvider::respond_with`]), then the fallback
//! ([`MockProvider::set_fallback`]); with none of them the mock answers HTTP 500 with a
//! vendor-shaped error whose message says "no scripted reply".
//!
//! Real CLIs (verified with codex 0.171, Claude Code 2.1, opencode 1.18):
//! - codex: `-c model_provider=mock -c model_providers.mock.base_url=<base_url()>
//!   -c model_providers.mock.wire_api="responses" -m mock-model`; with an unknown model codex
//!   declares the `exec_command {"cmd"}` shell tool (its default model only offers a JS `exec`).
//! - Claude Code: `ANTHROPIC_BASE_URL=<root_url()>`; it probes `HEAD /`, then posts
//!   `/v1/messages?beta=true`. Under root, `--dangerously-skip-permissions` needs `IS_SANDBOX=1`.
//! - opencode: `@ai-sdk/openai-compatible` with `baseURL=<base_url()>`; it first sends a
//!   tool-less title-generation request, which consumes a queued reply — prefer auto mode.
//!
//! [`AutoScript::shell`] adapts its tool calls to whichever shell tool the client declares.
//!
//! ```no_run
//! # async fn demo() {
//! use ar_test_support::mock_provider::{AutoScript, MockProvider, Reply, Usage};
//!
//! let mock = MockProvider::start().await;
//! // Scripted, in order: a tool call, then the answer.
//! mock.push(Reply::tool_call("bash", r#"{"command":"ls"}"#));
//! mock.push(Reply::text_deltas(["Done", "."]).usage(Usage::new(120, 8).cached(100)));
//! // Or conversation-driven, for any number of concurrent runs:
//! mock.auto(AutoScript::five_step("bash"));
//! let base = mock.base_url(); // http://127.0.0.1:PORT/v1
//! # let _ = base;
//! // ... run the client, then assert on what it sent:
//! let sent = mock.model_requests();
//! # let _ = sent;
//! # }
//! ```

mod anthropic;
mod auto;
mod chat;
pub mod chatgpt;
mod chatgpt_login;
mod long_run;
mod reply;
mod responses;
mod sse;
pub mod window;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::{Body as AxumBody, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use parking_lot::Mutex;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use auto::{shell_call, AutoScript, Conversation};
pub use chatgpt_login::DeviceLoginScript;
pub use long_run::LongRun;
pub use reply::{ErrorReply, FinishReason, Reply, StreamEnd, ToolCall, Usage};

use reply::Body;
use sse::StreamParts;

/// Which vendor wire format a request used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WireFormat {
    /// OpenAI `POST /v1/chat/completions`.
    ChatCompletions,
    /// OpenAI `POST /v1/responses`.
    Responses,
    /// Anthropic `POST /v1/messages`.
    AnthropicMessages,
}

/// One HTTP request the mock received.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// HTTP method.
    pub method: String,
    /// Path without the query string, e.g. `/v1/messages`.
    pub path: String,
    /// Raw query string, if any (e.g. `beta=true`).
    pub query: Option<String>,
    /// Request headers.
    pub headers: HeaderMap,
    /// JSON body (`Value::Null` when the body was empty or not JSON).
    pub body: Value,
    /// The wire format when this was a model request.
    pub wire: Option<WireFormat>,
    /// The request's input tokens as the mock counts them ([`window::request_tokens`]).
    pub tokens: u64,
}

impl RecordedRequest {
    /// A header value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Whether the body asked for streaming.
    pub fn is_stream(&self) -> bool {
        self.body.get("stream").and_then(Value::as_bool) == Some(true)
    }
}

type Responder = Arc<dyn Fn(&Conversation<'_>) -> Option<Reply> + Send + Sync>;

pub(crate) struct Shared {
    queue: Mutex<VecDeque<Reply>>,
    fallback: Mutex<Option<Reply>>,
    responder: Mutex<Option<Responder>>,
    log: Mutex<Vec<RecordedRequest>>,
    recording: AtomicBool,
    seq: AtomicU64,
    pub(crate) active_streams: AtomicUsize,
    pub(crate) shutdown: CancellationToken,
    models: Mutex<Vec<String>>,
    /// Keys answered with 401 (as `Authorization: Bearer …` or `x-api-key`).
    rejected_keys: Mutex<Vec<String>>,
    /// The model's context window in tokens (`None`: unbounded).
    context_window: Mutex<Option<u64>>,
    /// Pause between streamed events of replies that set none of their own.
    chunk_delay: Mutex<std::time::Duration>,
}

/// Which backend's rules a model endpoint follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dialect {
    /// The vendor's public API.
    Public,
    /// The ChatGPT subscription backend ([`chatgpt`]).
    ChatGpt,
}

/// A running mock provider. Dropping it stops the server and ends open streams.
pub struct MockProvider {
    shared: Arc<Shared>,
    addr: SocketAddr,
    /// The sign-in issuer's stand-in ([`chatgpt_login`]).
    login: Arc<chatgpt_login::LoginState>,
}

impl MockProvider {
    /// Binds `127.0.0.1:0` and serves in a background task of the current tokio runtime.
    ///
    /// # Panics
    /// When the loopback listener cannot be bound (test environment broken).
    pub async fn start() -> MockProvider {
        let shared = Arc::new(Shared {
            queue: Mutex::new(VecDeque::new()),
            fallback: Mutex::new(None),
            responder: Mutex::new(None),
            log: Mutex::new(Vec::new()),
            recording: AtomicBool::new(true),
            seq: AtomicU64::new(0),
            active_streams: AtomicUsize::new(0),
            shutdown: CancellationToken::new(),
            models: Mutex::new(vec![
                "mock-model".to_string(),
                "gpt-5-mock".to_string(),
                "claude-sonnet-4-5".to_string(),
            ]),
            rejected_keys: Mutex::new(Vec::new()),
            context_window: Mutex::new(None),
            chunk_delay: Mutex::new(std::time::Duration::ZERO),
        });
        let router = Router::new()
            .route(
                "/v1/chat/completions",
                model_endpoint(WireFormat::ChatCompletions),
            )
            .route(
                "/chat/completions",
                model_endpoint(WireFormat::ChatCompletions),
            )
            .route("/v1/responses", model_endpoint(WireFormat::Responses))
            .route("/responses", model_endpoint(WireFormat::Responses))
            .route("/backend-api/codex/responses", chatgpt_endpoint())
            .route(
                "/v1/messages",
                model_endpoint(WireFormat::AnthropicMessages),
            )
            .route("/messages", model_endpoint(WireFormat::AnthropicMessages))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .route("/messages/count_tokens", post(count_tokens))
            .route("/v1/models", get(list_models))
            .route("/models", get(list_models))
            .route("/v1/models/{id}", get(get_model))
            .route("/models/{id}", get(get_model))
            .route("/", get(root).head(root))
            .fallback(fallback)
            .layer(DefaultBodyLimit::max(256 * 1024 * 1024))
            .with_state(shared.clone());
        let login = Arc::new(chatgpt_login::LoginState::default());
        let router = chatgpt_login::router(login.clone()).merge(router);
        let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
            Ok(l) => l,
            Err(e) => panic!("mock provider: cannot bind 127.0.0.1:0: {e}"),
        };
        let addr = match listener.local_addr() {
            Ok(a) => a,
            Err(e) => panic!("mock provider: no local addr: {e}"),
        };
        let token = shared.shutdown.clone();
        crate::spawn_peer("mock provider server", listener, router, token);
        MockProvider {
            shared,
            addr,
            login,
        }
    }

    /// `http://127.0.0.1:PORT/v1` — what OpenAI-style clients take as base URL.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// How the person behaves at the sign-in issuer's stand-in ([`chatgpt_login`]; its root
    /// is [`MockProvider::root_url`]).
    pub fn device_login(&self, script: DeviceLoginScript) {
        self.login.set_script(script);
    }

    /// Every token the sign-in stand-in issued (tests look for them where they must not be).
    pub fn issued_chatgpt_tokens(&self) -> Vec<String> {
        self.login.issued()
    }

    /// Device-code token polls the stand-in answered.
    pub fn device_login_polls(&self) -> usize {
        self.login.polls()
    }

    /// `http://127.0.0.1:PORT/backend-api/codex` — the ChatGPT subscription backend's base
    /// (`openai_chatgpt`, `AGENT_RUNTIME_CHATGPT_BASE_URL`); see [`chatgpt`].
    pub fn chatgpt_url(&self) -> String {
        format!("http://{}/backend-api/codex", self.addr)
    }

    /// `http://127.0.0.1:PORT` — what Anthropic-style clients (`ANTHROPIC_BASE_URL`) take.
    pub fn root_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Queues a reply (FIFO) for the next model request of any wire format.
    pub fn push(&self, reply: Reply) {
        self.shared.queue.lock().push_back(reply);
    }

    /// Queues several replies in order.
    pub fn push_all<I: IntoIterator<Item = Reply>>(&self, replies: I) {
        self.shared.queue.lock().extend(replies);
    }

    /// Number of queued replies not yet consumed.
    pub fn pending(&self) -> usize {
        self.shared.queue.lock().len()
    }

    /// Reply used when the queue is empty and no responder answers.
    pub fn set_fallback(&self, reply: Option<Reply>) {
        *self.shared.fallback.lock() = reply;
    }

    /// Answers by looking at each request's conversation (works for any number of concurrent
    /// runs, no shared queue): see [`AutoScript`].
    pub fn auto(&self, script: AutoScript) {
        let script = Arc::new(script);
        self.respond_with(move |conv| Some(script.reply_for(conv)));
    }

    /// Answers as a long run's model (see [`LongRun`]); keep a clone of `script` to read its
    /// counters.
    pub fn long_run(&self, script: LongRun) {
        self.respond_with(move |conv| Some(script.reply_for(conv)));
    }

    /// Installs a custom responder consulted when the queue is empty; `None` from it falls through
    /// to the fallback.
    pub fn respond_with<F>(&self, f: F)
    where
        F: Fn(&Conversation<'_>) -> Option<Reply> + Send + Sync + 'static,
    {
        *self.shared.responder.lock() = Some(Arc::new(f));
    }

    /// Answers every request made with `key` with the vendor's 401, before any reply is
    /// taken from the queue (a key the vendor revoked).
    pub fn reject_key(&self, key: &str) {
        self.shared.rejected_keys.lock().push(key.to_string());
    }

    /// Gives the model a context window of `tokens` (`None`: unbounded): a request that does
    /// not fit is refused as the vendor refuses it (see [`window`]).
    pub fn set_context_window(&self, tokens: Option<u64>) {
        *self.shared.context_window.lock() = tokens;
    }

    /// Streams slowly: this pause between the events of every reply that sets none itself.
    pub fn set_chunk_delay(&self, delay: std::time::Duration) {
        *self.shared.chunk_delay.lock() = delay;
    }

    /// Removes the responder.
    pub fn clear_responder(&self) {
        *self.shared.responder.lock() = None;
    }

    /// Turns request recording on/off (off for long benchmarks to keep memory flat).
    pub fn set_recording(&self, on: bool) {
        self.shared.recording.store(on, Ordering::Relaxed);
    }

    /// All recorded requests so far (every path, model or not).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.log.lock().clone()
    }

    /// Recorded model requests only (chat completions, responses, messages).
    pub fn model_requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .log
            .lock()
            .iter()
            .filter(|r| r.wire.is_some())
            .cloned()
            .collect()
    }

    /// The `Authorization` header of each recorded model request, in order (empty when absent):
    /// which key each call was made with.
    pub fn bearers(&self) -> Vec<String> {
        self.model_requests()
            .iter()
            .map(|r| r.header("authorization").unwrap_or_default().to_string())
            .collect()
    }

    /// Forgets recorded requests.
    pub fn clear_requests(&self) {
        self.shared.log.lock().clear();
    }

    /// Total model requests served since start (counted even when recording is off).
    pub fn request_count(&self) -> u64 {
        self.shared.seq.load(Ordering::Relaxed)
    }

    /// Streams whose body is still open (not finished, not dropped by the client).
    pub fn active_streams(&self) -> usize {
        self.shared.active_streams.load(Ordering::SeqCst)
    }

    /// Model ids served by `GET /v1/models`.
    pub fn set_models<I, S>(&self, ids: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        *self.shared.models.lock() = ids.into_iter().map(Into::into).collect();
    }
}

impl Drop for MockProvider {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

/// Everything a renderer needs besides the reply.
pub(crate) struct RenderCtx {
    pub model: String,
    pub seq: u64,
    pub include_usage: bool,
    pub created: u64,
}

impl RenderCtx {
    /// Tool call `i`'s id: the scripted one, else `{prefix}_{seq}_{i}` (unique per reply).
    pub(crate) fn tool_call_id(&self, reply: &Reply, i: usize, prefix: &str) -> String {
        let id = &reply.tool_calls[i].id;
        if id.is_empty() {
            format!("{prefix}_{}_{i}", self.seq)
        } else {
            id.clone()
        }
    }
}

fn record(
    shared: &Shared,
    method: &Method,
    uri: &Uri,
    headers: HeaderMap,
    body: Value,
    wire: Option<WireFormat>,
) {
    if !shared.recording.load(Ordering::Relaxed) {
        return;
    }
    let tokens = if wire.is_some() {
        window::request_tokens(&body)
    } else {
        0
    };
    shared.log.lock().push(RecordedRequest {
        method: method.to_string(),
        path: uri.path().to_string(),
        query: uri.query().map(str::to_string),
        headers,
        body,
        wire,
        tokens,
    });
}

fn parse_body(bytes: &Bytes) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(bytes).unwrap_or(Value::Null)
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The error a request gets before any reply is chosen: a body that is not a JSON object, or
/// a key [`MockProvider::reject_key`] named.
fn refusal(shared: &Shared, body: &Value, headers: &HeaderMap) -> Option<ErrorReply> {
    let (status, message) = if !body.is_object() {
        (400, "mock provider: request body is not a JSON object")
    } else if rejects(shared, headers) {
        (401, "Incorrect API key provided (mock: rejected key)")
    } else {
        return None;
    };
    Some(ErrorReply {
        status,
        message: message.into(),
        retry_after: None,
        code: None,
    })
}

/// Whether the request carries a key [`MockProvider::reject_key`] named.
fn rejects(shared: &Shared, headers: &HeaderMap) -> bool {
    let rejected = shared.rejected_keys.lock();
    if rejected.is_empty() {
        return false;
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let bearer = header("authorization").and_then(|v| v.strip_prefix("Bearer "));
    [bearer, header("x-api-key")]
        .into_iter()
        .flatten()
        .any(|key| rejected.iter().any(|r| r == key))
}

fn next_reply(shared: &Shared, conv: &Conversation<'_>) -> Option<Reply> {
    if let Some(r) = shared.queue.lock().pop_front() {
        return Some(r);
    }
    let responder = shared.responder.lock().clone();
    if let Some(f) = responder {
        if let Some(r) = f(conv) {
            return Some(r);
        }
    }
    shared.fallback.lock().clone()
}

/// `POST` to one wire format's model endpoint.
fn model_endpoint(wire: WireFormat) -> MethodRouter<Arc<Shared>> {
    post(
        move |State(shared): State<Arc<Shared>>,
              method: Method,
              uri: Uri,
              headers: HeaderMap,
              bytes: Bytes| {
            let request = (method, uri, headers, bytes);
            model_request(shared, (wire, Dialect::Public), request)
        },
    )
}

/// `POST /backend-api/codex/responses`: Responses in the ChatGPT backend's dialect.
fn chatgpt_endpoint() -> MethodRouter<Arc<Shared>> {
    post(
        move |State(shared): State<Arc<Shared>>,
              method: Method,
              uri: Uri,
              headers: HeaderMap,
              bytes: Bytes| {
            let request = (method, uri, headers, bytes);
            model_request(shared, (WireFormat::Responses, Dialect::ChatGpt), request)
        },
    )
}

/// The answer a request gets before any reply is chosen, if any: a malformed body or a
/// rejected key, what the ChatGPT backend refuses, a request over the context window.
fn early_answer(
    shared: &Shared,
    (wire, dialect): (WireFormat, Dialect),
    body: &Value,
    headers: &HeaderMap,
) -> Option<Response> {
    if let Some(err) = refusal(shared, body, headers) {
        return Some(error_response(wire, &err));
    }
    if dialect == Dialect::ChatGpt {
        if let Some(refused) = chatgpt::refusal(body, headers) {
            return Some(refused);
        }
    }
    let window = (*shared.context_window.lock())?;
    window::overflow(wire, body, window::request_tokens(body), window)
        .map(|err| error_response(wire, &err))
}

async fn model_request(
    shared: Arc<Shared>,
    (wire, dialect): (WireFormat, Dialect),
    (method, uri, headers, bytes): (Method, Uri, HeaderMap, Bytes),
) -> Response {
    let body = parse_body(&bytes);
    let seq = shared.seq.fetch_add(1, Ordering::Relaxed) + 1;
    if let Some(answer) = early_answer(&shared, (wire, dialect), &body, &headers) {
        record(shared.as_ref(), &method, &uri, headers, body, Some(wire));
        return answer;
    }
    let stream = body.get("stream").and_then(Value::as_bool) == Some(true);
    let ctx = RenderCtx {
        model: body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("mock-model")
            .to_string(),
        seq,
        include_usage: body
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            == Some(true),
        created: now_secs(),
    };
    let reply = next_reply(&shared, &Conversation::new(wire, &body));
    // Recorded after choosing the reply so the body moves into the log instead of being cloned.
    record(shared.as_ref(), &method, &uri, headers, body, Some(wire));
    let Some(mut reply) = reply else {
        let err = ErrorReply {
            status: 500,
            message: format!("mock provider: no scripted reply for request #{seq} ({wire:?})"),
            retry_after: None,
            code: None,
        };
        return error_response(wire, &err);
    };
    if !reply.delay.is_zero() {
        tokio::select! {
            _ = tokio::time::sleep(reply.delay) => {}
            _ = shared.shutdown.cancelled() => {
                return StatusCode::SERVICE_UNAVAILABLE.into_response();
            }
        }
    }
    match &reply.body {
        Body::Error(err) => return error_response(wire, err),
        Body::HangBeforeHeaders => {
            shared.shutdown.cancelled().await;
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        }
        Body::Turn => {}
    }
    if stream {
        if reply.chunk_delay.is_zero() {
            reply.chunk_delay = *shared.chunk_delay.lock();
        }
        let parts: StreamParts = match wire {
            WireFormat::ChatCompletions => chat::render_stream(&reply, &ctx),
            WireFormat::Responses => responses::render_stream(&reply, &ctx),
            WireFormat::AnthropicMessages => anthropic::render_stream(&reply, &ctx),
        };
        let parts = match dialect {
            Dialect::ChatGpt => chatgpt::with_keepalives(parts),
            Dialect::Public => parts,
        };
        sse::response(parts, &reply, &shared)
    } else {
        // Non-streaming answers have no "middle": a hang never answers, an in-stream error
        // becomes the HTTP error, a disconnect drops the connection without a response.
        match &reply.end {
            StreamEnd::Hang => {
                shared.shutdown.cancelled().await;
                return StatusCode::SERVICE_UNAVAILABLE.into_response();
            }
            StreamEnd::Error(err) => return error_response(wire, err),
            StreamEnd::Disconnect => {
                let body = futures::stream::once(async {
                    Err::<Bytes, _>(std::io::Error::other("mock provider: scripted disconnect"))
                });
                return Response::new(AxumBody::from_stream(body));
            }
            StreamEnd::Complete => {}
        }
        let json = match wire {
            WireFormat::ChatCompletions => chat::render_json(&reply, &ctx),
            WireFormat::Responses => responses::render_json(&reply, &ctx),
            WireFormat::AnthropicMessages => anthropic::render_json(&reply, &ctx),
        };
        json_response(StatusCode::OK, &json, wire)
    }
}

fn json_response(status: StatusCode, json: &Value, wire: WireFormat) -> Response {
    let mut resp = Response::new(AxumBody::from(json.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if wire == WireFormat::AnthropicMessages {
        resp.headers_mut()
            .insert("request-id", HeaderValue::from_static("req_mock"));
    } else {
        resp.headers_mut()
            .insert("x-request-id", HeaderValue::from_static("req_mock"));
    }
    resp
}

fn error_response(wire: WireFormat, err: &ErrorReply) -> Response {
    let status = StatusCode::from_u16(err.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let json = match wire {
        WireFormat::AnthropicMessages => anthropic::error_body(err),
        WireFormat::ChatCompletions | WireFormat::Responses => openai_error_body(err),
    };
    let mut resp = json_response(status, &json, wire);
    if let Some(secs) = err.retry_after {
        resp.headers_mut()
            .insert(http::header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

/// OpenAI error envelope: `{"error":{"message","type","param","code"}}`.
pub(crate) fn openai_error_body(err: &ErrorReply) -> Value {
    let (kind, code) = match err.status {
        400 => ("invalid_request_error", Value::Null),
        401 => ("invalid_request_error", Value::from("invalid_api_key")),
        403 => ("permission_error", Value::Null),
        404 => ("invalid_request_error", Value::from("model_not_found")),
        429 => ("rate_limit_error", Value::from("rate_limit_exceeded")),
        _ => ("server_error", Value::Null),
    };
    // OpenAI's spent quota is a 429 of its own type (`insufficient_quota`).
    let kind = match err.code.as_deref() {
        Some("insufficient_quota") => "insufficient_quota",
        _ => kind,
    };
    let code = err.code.clone().map_or(code, Value::from);
    serde_json::json!({
        "error": { "message": err.message, "type": kind, "param": null, "code": code }
    })
}

async fn count_tokens(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    let body = parse_body(&bytes);
    record(&shared, &method, &uri, headers, body, None);
    // Rough estimate: a token per 4 bytes of request.
    let tokens = (bytes.len() / 4).max(1);
    json_response(
        StatusCode::OK,
        &serde_json::json!({ "input_tokens": tokens }),
        WireFormat::AnthropicMessages,
    )
}

fn model_entry(id: &str) -> Value {
    // Carries both the OpenAI (`object`, `created`, `owned_by`) and Anthropic (`type`,
    // `display_name`, `created_at`) fields so either client accepts it.
    serde_json::json!({
        "id": id,
        "object": "model",
        "created": 1_700_000_000u64,
        "owned_by": "mock",
        "type": "model",
        "display_name": id,
        "created_at": "2025-01-01T00:00:00Z",
    })
}

async fn list_models(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    record(&shared, &method, &uri, headers, Value::Null, None);
    let ids = shared.models.lock().clone();
    let data: Vec<Value> = ids.iter().map(|id| model_entry(id)).collect();
    let json = serde_json::json!({
        "object": "list",
        "data": data,
        "has_more": false,
        "first_id": ids.first(),
        "last_id": ids.last(),
    });
    json_response(StatusCode::OK, &json, WireFormat::ChatCompletions)
}

async fn get_model(
    State(shared): State<Arc<Shared>>,
    axum::extract::Path(id): axum::extract::Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    record(&shared, &method, &uri, headers, Value::Null, None);
    json_response(
        StatusCode::OK,
        &model_entry(&id),
        WireFormat::ChatCompletions,
    )
}

/// Claude Code probes `HEAD /` before its first request.
async fn root(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    record(&shared, &method, &uri, headers, Value::Null, None);
    StatusCode::OK.into_response()
}

async fn fallback(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    let body = parse_body(&bytes);
    record(&shared, &method, &uri, headers, body, None);
    tracing::debug!(%method, %uri, "mock provider: unknown endpoint");
    let err = ErrorReply {
        status: 404,
        message: format!("mock provider: no route for {method} {}", uri.path()),
        retry_after: None,
        code: None,
    };
    let json = openai_error_body(&err);
    json_response(StatusCode::NOT_FOUND, &json, WireFormat::ChatCompletions)
}
