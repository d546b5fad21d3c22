//! A host's MCP provider over the simple `http` transport ([`ProviderHost`]), serving what the
//! original Python SDK's `create_fastapi_mcp_provider_router` serves: `GET /tools` →
//! `{"tools":[…]}`, `POST /call` `{tool_name, input, meta}` → `{content:[{type,text}],
//! is_error}`, both behind an optional bearer token (401 `{"detail":"unauthorized"}`, compared
//! the way the SDK does). A stand-in for a host application, written from that router's shape;
//! tests script its tools and failures and read back what it was asked.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct HostState {
    token: Option<String>,
    tools: Mutex<Vec<Value>>,
    /// Listings still to answer with 503.
    failing_lists: AtomicUsize,
    list_delay: Mutex<Duration>,
    lists: AtomicUsize,
    calls: Mutex<Vec<Value>>,
}

/// The provider host; stops when dropped.
pub struct ProviderHost {
    url: String,
    state: Arc<HostState>,
    shutdown: CancellationToken,
}

impl Drop for ProviderHost {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A tool definition as the SDK's `ToolDefinition` model writes it.
pub fn tool(name: &str, description: &str, mutating: bool) -> Value {
    json!({
        "name": name,
        "description": description,
        "category": "crm",
        "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "mutating": mutating,
        "supported_target_types": [],
    })
}

impl ProviderHost {
    /// Serves `tools` on a loopback port, requiring `token` when given.
    pub async fn start(token: Option<&str>, tools: Vec<Value>) -> ProviderHost {
        let state = Arc::new(HostState {
            token: token.map(str::to_string),
            tools: Mutex::new(tools),
            ..HostState::default()
        });
        let router = Router::new()
            .route("/tools", get(list_tools))
            .route("/call", post(call_tool))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the provider host");
        let url = format!(
            "http://{}/agent-runtime/mcp",
            listener.local_addr().expect("addr")
        );
        let shutdown = CancellationToken::new();
        let nested = Router::new().nest("/agent-runtime/mcp", router);
        crate::spawn_peer("provider host", listener, nested, shutdown.clone());
        ProviderHost {
            url,
            state,
            shutdown,
        }
    }

    /// The provider URL (`…/agent-runtime/mcp`, under which `/tools` and `/call` are served).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Replaces the advertised tools.
    pub fn set_tools(&self, tools: Vec<Value>) {
        *self.state.tools.lock() = tools;
    }

    /// The next `count` listings answer 503.
    pub fn fail_next_lists(&self, count: usize) {
        self.state.failing_lists.store(count, Ordering::SeqCst);
    }

    /// Every listing waits this long before answering.
    pub fn set_list_delay(&self, delay: Duration) {
        *self.state.list_delay.lock() = delay;
    }

    /// How many listings were asked for (authorized ones).
    pub fn lists(&self) -> usize {
        self.state.lists.load(Ordering::SeqCst)
    }

    /// The bodies of the tool calls received, in order.
    pub fn calls(&self) -> Vec<Value> {
        self.state.calls.lock().clone()
    }
}

fn authorized(state: &HostState, headers: &HeaderMap) -> bool {
    crate::bearer_accepted(state.token.as_deref(), headers)
}

fn unauthorized() -> (StatusCode, Json<Value>) {
    (
        StatusCode::UNAUTHORIZED,
        Json(json!({"detail": "unauthorized"})),
    )
}

async fn list_tools(
    State(state): State<Arc<HostState>>,
    headers: HeaderMap,
) -> (StatusCode, Json<Value>) {
    if !authorized(&state, &headers) {
        return unauthorized();
    }
    state.lists.fetch_add(1, Ordering::SeqCst);
    let delay = *state.list_delay.lock();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let failing = state
        .failing_lists
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    if failing.is_ok() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"detail": "catalogue warming up"})),
        );
    }
    let tools = state.tools.lock().clone();
    (StatusCode::OK, Json(json!({"tools": tools})))
}

/// `echo_*` tools answer with their input's text; `bulk_*` tools with it repeated `times`
/// times (at most 1 MiB: a tool with a large output); `fail_*` tools with an error result.
async fn call_tool(
    State(state): State<Arc<HostState>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    if !authorized(&state, &headers) {
        return unauthorized();
    }
    state.calls.lock().push(body.clone());
    let name = body["tool_name"].as_str().unwrap_or_default();
    let text = body["input"]["text"].as_str().unwrap_or_default();
    let (is_error, answer) = if name.starts_with("fail") {
        (true, format!("{name} failed on purpose"))
    } else if name.starts_with("bulk") {
        let times = body["input"]["times"].as_u64().unwrap_or(1) as usize;
        let times = times.min((1 << 20) / text.len().max(1));
        (false, text.repeat(times))
    } else {
        (false, format!("{name}: {text}"))
    };
    (
        StatusCode::OK,
        Json(json!({
            "content": [{"type": "text", "text": answer}],
            "is_error": is_error,
            "approval_required": false,
            "interaction_id": null,
        })),
    )
}
