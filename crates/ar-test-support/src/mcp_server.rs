//! An authenticating MCP server for tests ([`McpTestServer`]): rmcp's server side over
//! streamable HTTP on axum, answering 401 unless the request carries the bearer token it
//! currently accepts, with a read tool (`lookup`, annotated read-only), a write tool
//! (`record`, annotated as a non-destructive write), the `_meta` of each call kept, and misbehaviours
//! on demand ([`Misbehaviour`]: hang, a huge result, a garbage body). It also times its own
//! handling of each `tools/call` ([`McpTestServer::take_call_timings`]), so a benchmark can tell
//! the client's overhead from the server's time.
//!
//! ```ignore
//! let server = McpTestServer::start(McpTestOptions::with_token("tok-1")).await;
//! // point a run's `mcp_servers[].url` at `server.url()`, with bearer token "tok-1"
//! server.set_token(Some("tok-2")); // the old token now gets 401 (rotate-and-resume tests)
//! server.set_misbehaviour(Misbehaviour::Hang); // every tools/call hangs from now on
//! assert_eq!(server.recorded(), vec![json!({"entry": "x"})]);
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use futures::StreamExt;
use parking_lot::{Mutex, RwLock};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// The size of [`Misbehaviour::HugeText`] results tests use: 10 MB.
pub const TEN_MB: usize = 10 * 1024 * 1024;
/// The largest request body read (the garbage check reads bodies whole).
const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// How the server answers `tools/call` (other requests are always answered properly).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Misbehaviour {
    /// Answers properly.
    #[default]
    None,
    /// Never answers a call (the SSE answer stays open without a response).
    Hang,
    /// Answers every call with this many bytes of text.
    HugeText(usize),
    /// Answers every call with `200 application/json` and a body that is not JSON.
    Garbage,
}

/// How a [`McpTestServer`] starts.
#[derive(Debug, Clone, Default)]
pub struct McpTestOptions {
    /// The bearer token accepted; `None` accepts every request.
    pub token: Option<String>,
    /// When set, `tools/list` answers in pages of this many tools (with `nextCursor`).
    pub tools_page_size: Option<usize>,
    /// Serve without sessions, answering each request with a plain JSON body (no SSE).
    pub stateless_json: bool,
}

impl McpTestOptions {
    pub fn with_token(token: &str) -> Self {
        McpTestOptions {
            token: Some(token.to_string()),
            ..McpTestOptions::default()
        }
    }
}

struct Shared {
    token: RwLock<Option<String>>,
    misbehaviour: RwLock<Misbehaviour>,
    records: Mutex<Vec<Value>>,
    calls: Mutex<Vec<String>>,
    /// The `_meta` of each `tools/call` as it came on the wire (null when it had none).
    call_meta: Mutex<Vec<Value>>,
    /// Per `tools/call`: from the request reaching the server to the end of its answer's body.
    call_timings: Mutex<Vec<(Instant, Duration)>>,
    initializations: AtomicUsize,
    refused: AtomicUsize,
    tools_page_size: Option<usize>,
}

/// A running test MCP server on `127.0.0.1`; stops when dropped.
pub struct McpTestServer {
    shared: Arc<Shared>,
    sessions: Arc<LocalSessionManager>,
    addr: SocketAddr,
    shutdown: CancellationToken,
}

impl McpTestServer {
    /// Binds `127.0.0.1:0` and serves `/mcp` in a task of the current tokio runtime.
    ///
    /// # Panics
    /// When the loopback listener cannot be bound (test environment broken).
    pub async fn start(options: McpTestOptions) -> McpTestServer {
        let shared = Arc::new(Shared {
            token: RwLock::new(options.token),
            misbehaviour: RwLock::new(Misbehaviour::None),
            records: Mutex::new(Vec::new()),
            calls: Mutex::new(Vec::new()),
            call_meta: Mutex::new(Vec::new()),
            call_timings: Mutex::new(Vec::new()),
            initializations: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
            tools_page_size: options.tools_page_size,
        });
        let shutdown = CancellationToken::new();
        let sessions = Arc::new(LocalSessionManager::default());
        let mut config = StreamableHttpServerConfig::default();
        config.cancellation_token = shutdown.child_token();
        config.sse_keep_alive = None;
        if options.stateless_json {
            config.legacy_session_mode = false;
            config.json_response = true;
        }
        let tools = TestTools {
            shared: shared.clone(),
        };
        let service =
            StreamableHttpService::new(move || Ok(tools.clone()), sessions.clone(), config);
        let router = Router::new()
            .nest_service("/mcp", service)
            .layer(middleware::from_fn_with_state(shared.clone(), gate));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|err| panic!("MCP test server: cannot bind 127.0.0.1:0: {err}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|err| panic!("MCP test server: no local address: {err}"));
        let token = shutdown.clone();
        crate::spawn_peer("MCP test server", listener, router, token);
        McpTestServer {
            shared,
            sessions,
            addr,
            shutdown,
        }
    }

    /// `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Changes the accepted bearer token (`None`: no check) for the requests to come.
    pub fn set_token(&self, token: Option<&str>) {
        *self.shared.token.write() = token.map(str::to_string);
    }

    /// Changes how `tools/call` is answered from now on.
    pub fn set_misbehaviour(&self, misbehaviour: Misbehaviour) {
        *self.shared.misbehaviour.write() = misbehaviour;
    }

    /// Forgets every session, as a restarted server would: requests with an old session id
    /// get 404.
    pub async fn forget_sessions(&self) {
        self.sessions.sessions.write().await.clear();
    }

    /// The `entry` arguments of the `record` calls so far, in order.
    pub fn recorded(&self) -> Vec<Value> {
        self.shared.records.lock().clone()
    }

    /// The names of the tools called so far, in order (misbehaving calls included).
    pub fn calls(&self) -> Vec<String> {
        self.shared.calls.lock().clone()
    }

    /// The `params._meta` object of each `tools/call` request so far as the client sent it, in
    /// order (null for a call without one; refused calls are not counted).
    pub fn call_meta(&self) -> Vec<Value> {
        self.shared.call_meta.lock().clone()
    }

    /// The server's own time for each `tools/call` answered since the last take, in order: from
    /// the request reaching the server (before the bearer check) to the last chunk of its answer
    /// handed to the HTTP layer (the SSE event carrying the result, or the JSON body). Refused
    /// calls are not counted.
    pub fn take_call_timings(&self) -> Vec<Duration> {
        let mut timings = std::mem::take(&mut *self.shared.call_timings.lock());
        // Noted as answers end, which need not be the order the calls arrived in.
        timings.sort_by_key(|(arrived, _)| *arrived);
        timings.into_iter().map(|(_, took)| took).collect()
    }

    /// How many `initialize` requests were served (one per session opened).
    pub fn initializations(&self) -> usize {
        self.shared.initializations.load(Ordering::SeqCst)
    }

    /// How many requests were refused with 401.
    pub fn refused(&self) -> usize {
        self.shared.refused.load(Ordering::SeqCst)
    }
}

impl Drop for McpTestServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The bearer check, the `initialize` count and the garbage answer, before rmcp sees a request.
async fn gate(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let arrived = Instant::now();
    let expected = shared.token.read().clone();
    if let Some(expected) = expected {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "));
        if given != Some(expected.as_str()) {
            shared.refused.fetch_add(1, Ordering::SeqCst);
            let challenge = [(header::WWW_AUTHENTICATE, "Bearer realm=\"mcp-test\"")];
            return (StatusCode::UNAUTHORIZED, challenge, "unauthorized").into_response();
        }
    }
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, MAX_REQUEST_BYTES).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "request too large").into_response();
    };
    let method = method_of(&body);
    if method.as_deref() == Some("tools/call") {
        shared.call_meta.lock().push(call_meta_of(&body));
    }
    match method.as_deref() {
        Some("initialize") => {
            shared.initializations.fetch_add(1, Ordering::SeqCst);
        }
        Some("tools/call") if *shared.misbehaviour.read() == Misbehaviour::Garbage => {
            let json = [(header::CONTENT_TYPE, "application/json")];
            return (StatusCode::OK, json, "<html>this is not JSON-RPC").into_response();
        }
        Some("tools/call") => {
            let response = next.run(Request::from_parts(parts, Body::from(body))).await;
            return timed(response, arrived, shared);
        }
        _ => {}
    }
    next.run(Request::from_parts(parts, Body::from(body))).await
}

/// `response` with a body that records the server's time for the call when it ends.
fn timed(response: Response, arrived: Instant, shared: Arc<Shared>) -> Response {
    let (parts, body) = response.into_parts();
    let mut chunks = body.into_data_stream();
    let mut timer = CallTimer {
        arrived,
        last_chunk: None,
        shared: Some(shared),
    };
    let body = futures::stream::poll_fn(move |cx| {
        let next = chunks.poll_next_unpin(cx);
        match &next {
            Poll::Ready(Some(_)) => timer.last_chunk = Some(arrived.elapsed()),
            Poll::Ready(None) => timer.finish(),
            Poll::Pending => {}
        }
        next
    });
    Response::from_parts(parts, Body::from_stream(body))
}

/// The time from a call's arrival to the last chunk of its answer handed to the HTTP layer.
/// Noted at the end of the body, or when the body is dropped: a client may stop reading once
/// it has the answer, before the stream's end is polled.
struct CallTimer {
    arrived: Instant,
    last_chunk: Option<Duration>,
    shared: Option<Arc<Shared>>,
}

impl CallTimer {
    fn finish(&mut self) {
        if let Some(shared) = self.shared.take() {
            let took = self.last_chunk.unwrap_or_else(|| self.arrived.elapsed());
            shared.call_timings.lock().push((self.arrived, took));
        }
    }
}

impl Drop for CallTimer {
    fn drop(&mut self) {
        self.finish();
    }
}

fn method_of(body: &Bytes) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    value.get("method")?.as_str().map(str::to_string)
}

fn call_meta_of(body: &Bytes) -> Value {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|value| value.get("params")?.get("_meta").cloned())
        .unwrap_or(Value::Null)
}

#[derive(Clone)]
struct TestTools {
    shared: Arc<Shared>,
}

fn tools() -> Vec<Tool> {
    let schema = |property: &str, kind: &str| -> JsonObject {
        let value = json!({
            "type": "object",
            "properties": { property: { "type": kind } },
            "required": [property],
        });
        match value {
            Value::Object(map) => map,
            _ => JsonObject::new(),
        }
    };
    vec![
        Tool::new(
            "lookup",
            "Looks a key up (read-only).",
            schema("key", "string"),
        )
        .annotate(ToolAnnotations::new().read_only(true)),
        Tool::new(
            "record",
            "Records an entry (a write).",
            schema("entry", "string"),
        )
        .annotate(ToolAnnotations::new().read_only(false).destructive(false)),
    ]
}

impl TestTools {
    fn answer(&self, name: &str, arguments: &JsonObject) -> Result<CallToolResult, ErrorData> {
        match name {
            "lookup" => {
                let key = arguments.get("key").and_then(Value::as_str).unwrap_or("");
                let mut result =
                    CallToolResult::success(vec![ContentBlock::text(format!("value of {key}"))]);
                result.structured_content =
                    Some(json!({ "key": key, "value": format!("value of {key}") }));
                Ok(result)
            }
            "record" => {
                let entry = arguments.get("entry").cloned().unwrap_or(Value::Null);
                let mut records = self.shared.records.lock();
                records.push(json!({ "entry": entry }));
                let text = format!("recorded entry {}", records.len());
                Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
            }
            other => Err(ErrorData::invalid_params(
                format!("unknown tool {other}"),
                None,
            )),
        }
    }
}

impl ServerHandler for TestTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let all = tools();
        let Some(size) = self.shared.tools_page_size else {
            return Ok(ListToolsResult::with_all_items(all));
        };
        let start: usize = request
            .and_then(|params| params.cursor)
            .and_then(|cursor| cursor.parse().ok())
            .unwrap_or(0);
        let end = (start + size.max(1)).min(all.len());
        let mut page = ListToolsResult::with_all_items(all[start.min(end)..end].to_vec());
        page.next_cursor = (end < all.len()).then(|| end.to_string());
        Ok(page)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.shared.calls.lock().push(request.name.to_string());
        let misbehaviour = *self.shared.misbehaviour.read();
        match misbehaviour {
            Misbehaviour::Hang => std::future::pending().await,
            Misbehaviour::HugeText(bytes) => {
                Ok(CallToolResult::success(vec![ContentBlock::text("x".repeat(bytes))]).into())
            }
            Misbehaviour::None | Misbehaviour::Garbage => {
                let arguments = request.arguments.unwrap_or_default();
                self.answer(&request.name, &arguments).map(Into::into)
            }
        }
    }
}
