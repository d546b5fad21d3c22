//! The node server: serves a local runtime to remote dispatchers over HTTP (RunSpec in, NDJSON RunEvents out).
//!
//! Routes (all need `Authorization: Bearer <token>`, checked by `ar_core::secret`; with no
//! token configured every route answers 403):
//! - `POST /api/exec`: body = RunSpec JSON (strict). Answers `200 application/x-ndjson`, one
//!   RunEvent per line, flushed as produced, until the run's last event (`exited`). A blank
//!   line is sent as keep-alive while the run is silent (JSON decoders skip whitespace), so a
//!   vanished client is noticed; when the client disconnects the run is cancelled.
//!   `Machine` and `Workdir` are cleared: the node always runs locally in its own workspace.
//! - `POST /api/exec/{id}/signal`: raw body (≤ 1 MiB, else 413) → 204.
//! - `POST /api/exec/{id}/cancel` → 204.
//! - `GET /api/node/capabilities`, `POST /api/node/capabilities/recheck` → JSON.
//!
//! Errors are `{"error": "..."}` with 400 (bad spec), 401 (missing/wrong token), 403 (no
//! token configured), 404 (unknown run), 409 (run id active / run finished), 413 (body too
//! large), 500 (spawn failure).

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ar_core::secret::{bearer_token, Secret};
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::local::{LocalConfig, LocalRuntime};
use crate::providers::NamedCommandProvider;
use crate::run::{run_id_for, Run, RunError, RunEvents, Runtime, MAX_SIGNAL_BYTES};
use crate::spec::RunSpec;

/// Environment variable holding the node's bearer token.
pub const NODE_TOKEN_ENV: &str = "AGENT_RUNTIME_NODE_TOKEN";
/// Environment variable holding the node's listen address.
pub const NODE_ADDR_ENV: &str = "AGENT_RUNTIME_NODE_ADDR";
/// Default listen address.
pub const DEFAULT_NODE_ADDR: &str = "127.0.0.1:8091";
/// Largest RunSpec body accepted.
pub const MAX_SPEC_BYTES: usize = 4 * 1024 * 1024;

/// The listen address for `agent-runtime node`: the `--addr` flag, else
/// `AGENT_RUNTIME_NODE_ADDR`, else `127.0.0.1:8091`.
pub fn node_addr(flag: Option<&str>) -> String {
    match flag {
        Some(a) if !a.trim().is_empty() => a.trim().to_string(),
        _ => std::env::var(NODE_ADDR_ENV)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_NODE_ADDR.to_string()),
    }
}

/// The node token from `AGENT_RUNTIME_NODE_TOKEN` (`None` when unset or empty: every route
/// then answers 403).
pub fn node_token_from_env() -> Option<String> {
    std::env::var(NODE_TOKEN_ENV).ok().filter(|t| !t.is_empty())
}

/// Errors of the node server.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// Serving failed.
    #[error("node server: {0}")]
    Io(#[from] std::io::Error),
    /// The configuration is unusable.
    #[error("node config: {0}")]
    Config(String),
}

/// What a node serves.
#[derive(Clone)]
pub struct NodeConfig {
    /// Bearer token; `None` makes every route answer 403.
    pub token: Option<String>,
    /// The runtime runs are dispatched to.
    pub runtime: Arc<dyn Runtime>,
    /// Agent names advertised by the capabilities route.
    pub agents: Vec<String>,
    /// Node name for the capabilities route.
    pub name: String,
    /// Keep-alive interval while a run is silent.
    pub keepalive: Duration,
}

impl std::fmt::Debug for NodeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeConfig")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("agents", &self.agents)
            .field("name", &self.name)
            .finish()
    }
}

impl NodeConfig {
    /// A node over any runtime.
    pub fn new(runtime: Arc<dyn Runtime>, agents: Vec<String>, token: Option<String>) -> Self {
        Self {
            token: token.filter(|t| !t.is_empty()),
            runtime,
            agents,
            name: "node".into(),
            keepalive: Duration::from_secs(5),
        }
    }

    /// The standard node: a [`LocalRuntime`] under `workspace_root` serving `codex`, `claude`,
    /// `opencode` and the given `command:NAME` agents (`--command NAME=PROGRAM` flags), but not
    /// the raw `command` agent (a node never runs an argv chosen by the caller).
    pub fn local(
        workspace_root: impl Into<PathBuf>,
        commands: &[String],
        token: Option<String>,
    ) -> Result<Self, NodeError> {
        let mut rt = LocalRuntime::standard(LocalConfig::new(workspace_root))
            .without_agent("command")
            .named("node");
        for flag in commands {
            let cmd = NamedCommandProvider::parse_flag(flag)
                .map_err(|e| NodeError::Config(e.to_string()))?;
            rt = rt.with_named_command(cmd);
        }
        let agents = rt.agents();
        Ok(Self::new(Arc::new(rt), agents, token))
    }
}

struct NodeState {
    config: NodeConfig,
    token: Option<Secret>,
    runs: Mutex<HashMap<String, Arc<Run>>>,
}

impl NodeState {
    fn runs(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Run>>> {
        match self.runs.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
    fn cancel_all(&self) {
        for run in self.runs().values() {
            run.cancel();
        }
    }
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let body = serde_json::json!({ "error": message.into() }).to_string();
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

async fn auth(State(state): State<Arc<NodeState>>, req: Request, next: Next) -> Response {
    let Some(want) = &state.token else {
        return error(StatusCode::FORBIDDEN, "node token is not configured");
    };
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    match presented {
        Some(got) if want.matches(got) => next.run(req).await,
        Some(_) => error(StatusCode::UNAUTHORIZED, "invalid node token"),
        None => error(StatusCode::UNAUTHORIZED, "missing bearer token"),
    }
}

fn new_state(config: NodeConfig) -> Arc<NodeState> {
    let token = config.token.clone().map(Secret::new);
    Arc::new(NodeState {
        config,
        token,
        runs: Mutex::new(HashMap::new()),
    })
}

fn node_router(state: Arc<NodeState>) -> Router {
    Router::new()
        .route(
            "/api/exec",
            post(exec).layer(DefaultBodyLimit::max(MAX_SPEC_BYTES)),
        )
        .route(
            "/api/exec/{id}/signal",
            post(signal).layer(DefaultBodyLimit::max(MAX_SIGNAL_BYTES)),
        )
        .route("/api/exec/{id}/cancel", post(cancel))
        .route("/api/node/capabilities", get(capabilities))
        .route("/api/node/capabilities/recheck", post(capabilities))
        .layer(middleware::from_fn_with_state(state.clone(), auth))
        .with_state(state)
}

/// Serves the node API on `listener` until `shutdown` completes; then cancels every active
/// run and returns once their streams have ended.
pub async fn serve_node(
    config: NodeConfig,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), NodeError> {
    let state = new_state(config);
    let router = node_router(state.clone());
    let on_shutdown = async move {
        shutdown.await;
        state.cancel_all();
    };
    axum::serve(listener, router)
        .with_graceful_shutdown(on_shutdown)
        .await?;
    Ok(())
}

/// Removes the run from the table when the response stream goes away, cancelling it if it
/// is still running (client disconnect).
struct RunGuard {
    state: Arc<NodeState>,
    run: Arc<Run>,
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        if !self.run.status().terminal() {
            tracing::info!(run_id = %self.run.id(), "node stream closed before the run ended; cancelling");
            self.run.cancel();
        }
        let mut runs = self.state.runs();
        if let Some(r) = runs.get(self.run.id()) {
            if Arc::ptr_eq(r, &self.run) {
                runs.remove(self.run.id());
            }
        }
    }
}

async fn exec(State(state): State<Arc<NodeState>>, body: Bytes) -> Response {
    let mut spec = match RunSpec::from_json(&body) {
        Ok(s) => s,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    spec.machine.clear();
    spec.workdir.clear();
    let run_id = match run_id_for(&spec) {
        Ok(id) => id,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    spec.run_id = run_id.clone();
    if state.runs().contains_key(&run_id) {
        return error(
            StatusCode::CONFLICT,
            format!("run {run_id:?} is already active"),
        );
    }
    let run = match state.config.runtime.dispatch(spec).await {
        Ok(r) => Arc::new(r),
        Err(e) if e.is_client_error() => return error(StatusCode::BAD_REQUEST, e.to_string()),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let Some(events) = run.events() else {
        return error(StatusCode::INTERNAL_SERVER_ERROR, "run stream unavailable");
    };
    {
        let mut runs = state.runs();
        if runs.contains_key(&run_id) {
            run.cancel();
            return error(
                StatusCode::CONFLICT,
                format!("run {run_id:?} is already active"),
            );
        }
        runs.insert(run_id.clone(), run.clone());
    }
    let guard = RunGuard {
        state: state.clone(),
        run,
    };
    ndjson_response(&run_id, events, guard, state.config.keepalive)
}

/// The run's events as NDJSON, a blank line whenever the run stays silent for `keepalive`;
/// the guard goes (cancelling a running run) when the client does.
fn ndjson_response(
    run_id: &str,
    events: RunEvents,
    guard: RunGuard,
    keepalive: Duration,
) -> Response {
    let stream = futures::stream::unfold(
        (events, guard),
        move |(mut events, guard): (RunEvents, RunGuard)| async move {
            let tick = tokio::time::sleep(keepalive);
            tokio::select! {
                ev = events.next() => match ev {
                    Some(ev) => {
                        let mut line = serde_json::to_vec(&ev).unwrap_or_default();
                        line.push(b'\n');
                        Some((Ok::<Bytes, std::io::Error>(Bytes::from(line)), (events, guard)))
                    }
                    None => None,
                },
                _ = tick => Some((Ok(Bytes::from_static(b"\n")), (events, guard))),
            }
        },
    );
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    if let Ok(v) = HeaderValue::from_str(run_id) {
        headers.insert("x-run-id", v);
    }
    (StatusCode::OK, headers, Body::from_stream(stream)).into_response()
}

fn find(state: &NodeState, id: &str) -> Option<Arc<Run>> {
    state.runs().get(id).cloned()
}

async fn signal(
    State(state): State<Arc<NodeState>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let Some(run) = find(&state, &id) else {
        return error(StatusCode::NOT_FOUND, format!("no active run {id:?}"));
    };
    let Ok(text) = std::str::from_utf8(&body) else {
        return error(StatusCode::BAD_REQUEST, "signal body must be UTF-8");
    };
    let text = text.strip_suffix('\n').unwrap_or(text);
    match run.signal(text).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(RunError::Finished) => error(StatusCode::CONFLICT, "run already finished"),
        Err(e @ RunError::SignalUnsupported(_)) => error(StatusCode::BAD_REQUEST, e.to_string()),
        Err(e @ RunError::TooLarge(_)) => error(StatusCode::PAYLOAD_TOO_LARGE, e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn cancel(State(state): State<Arc<NodeState>>, Path(id): Path<String>) -> Response {
    let Some(run) = find(&state, &id) else {
        return error(StatusCode::NOT_FOUND, format!("no active run {id:?}"));
    };
    run.cancel();
    StatusCode::NO_CONTENT.into_response()
}

async fn capabilities(State(state): State<Arc<NodeState>>) -> Response {
    let body = serde_json::json!({
        "name": state.config.name,
        "runtime": state.config.runtime.name(),
        "agents": state.config.agents,
        "active_runs": state.runs().len(),
        "version": env!("CARGO_PKG_VERSION"),
    });
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.to_string(),
    )
        .into_response()
}
