//! The node server: serves a local runtime to remote dispatchers over HTTP (RunSpec in, NDJSON
//! RunEvents out) — the machine side of a fleet, run as `agent-runtime node`.
//!
//! Routes (all need `Authorization: Bearer <token>`, compared in constant time by
//! `ar_core::secret`; with no token configured every route answers 403):
//! - `POST /api/exec`: body = RunSpec JSON (strict). Answers `200 application/x-ndjson`, one
//!   RunEvent per line, flushed as produced, until the run's last event (`exited`). A blank
//!   line is sent as keep-alive while the run is silent (JSON decoders skip whitespace), so a
//!   vanished client is noticed; when the client disconnects the run is cancelled.
//!   `Machine` and `Workdir` are cleared: the node always runs locally in its own workspace
//!   (`<root>/<run id>`). A spec with a `turn` is set up here (private home, egress proxy on
//!   this machine, MCP bridge started as this executable) and its stdout lines are sent raw
//!   (`stdout`), for the caller's parser. A failed run's `exited` carries the failure in
//!   `data`, and the turn's egress report in `egress`.
//! - `POST /api/exec/{id}/signal`: raw body (≤ 1 MiB, else 413) → 204.
//! - `POST /api/exec/{id}/cancel` → 204.
//! - `GET /api/node/capabilities`, `POST /api/node/capabilities/recheck` → JSON
//!   ([`crate::remote::NodeCapabilities`]: agents, load, limit, whether it accepts runs, and
//!   seed 000's inventory; `recheck` probes the CLIs again).
//!
//! As an appliance the node limits its concurrent runs (503 past `max_concurrent_runs`),
//! removes each run's workdir once the run has been idle for `workdir_ttl` (and every stale
//! one at start), and shuts down gracefully: new runs are refused (503), running ones get
//! `shutdown_grace` to finish, then are cancelled and reported (`exited` with `error_code`
//! `node_shutdown`, so the caller can run them again elsewhere).
//!
//! Errors are `{"error": "..."}` with 400 (bad spec), 401 (missing/wrong token), 403 (no
//! token configured), 404 (unknown run), 409 (run id active / run finished), 413 (body too
//! large), 500 (spawn failure), 503 (at capacity, shutting down).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use ar_core::secret::{bearer_token, Secret};
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio_util::sync::CancellationToken;

use crate::consts::EXIT_CODE_NODE_SHUTDOWN;
use crate::contracts::AgentSourceInventorySnapshot;
use crate::event::{EventType, State as RunState};
use crate::inventory::{machine_inventory, probe_agents};
use crate::local::{LocalConfig, LocalRuntime};
use crate::providers::NamedCommandProvider;
use crate::remote::NodeCapabilities;
use crate::run::{run_id_for, Run, RunError, RunEvents, Runtime, MAX_SIGNAL_BYTES};
use crate::spec::RunSpec;
use crate::turn::TurnResources;

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

/// What a node serves and how it behaves as an appliance.
#[derive(Clone)]
pub struct NodeConfig {
    /// Bearer token; `None` makes every route answer 403.
    pub token: Option<String>,
    /// The runtime runs are dispatched to.
    pub runtime: Arc<dyn Runtime>,
    /// Agent names advertised by the capabilities route, with the program each runs (probed
    /// for the inventory; `None` for command agents).
    pub agents: Vec<(String, Option<String>)>,
    /// Node name for the capabilities route and the inventory.
    pub name: String,
    /// Keep-alive interval while a run is silent.
    pub keepalive: Duration,
    /// Most runs at once; more are refused with 503 (0: no limit).
    pub max_concurrent_runs: usize,
    /// Where the runtime makes `<root>/<run id>` workdirs (swept by the node); `None`: none.
    pub workdir_root: Option<PathBuf>,
    /// A run's workdir is removed once the run has been idle this long.
    pub workdir_ttl: Duration,
    /// Time running runs get to finish at shutdown before they are cancelled.
    pub shutdown_grace: Duration,
}

impl std::fmt::Debug for NodeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeConfig")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("agents", &self.agents)
            .field("name", &self.name)
            .field("max_concurrent_runs", &self.max_concurrent_runs)
            .finish()
    }
}

/// Options of the standard node ([`NodeConfig::local`]).
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// `--command NAME=PROGRAM` flags.
    pub commands: Vec<String>,
    /// The `agent-runtime` executable CLI turns start as their MCP bridge.
    pub bridge_program: Option<PathBuf>,
    /// The node's name.
    pub name: String,
    /// See [`NodeConfig::max_concurrent_runs`].
    pub max_concurrent_runs: usize,
    /// See [`NodeConfig::workdir_ttl`].
    pub workdir_ttl: Duration,
    /// See [`NodeConfig::shutdown_grace`].
    pub shutdown_grace: Duration,
}

impl Default for NodeOptions {
    fn default() -> Self {
        NodeOptions {
            commands: Vec::new(),
            bridge_program: None,
            name: "node".into(),
            max_concurrent_runs: 0,
            workdir_ttl: Duration::from_secs(3600),
            shutdown_grace: Duration::from_secs(30),
        }
    }
}

impl NodeConfig {
    /// A node over any runtime.
    pub fn new(runtime: Arc<dyn Runtime>, agents: Vec<String>, token: Option<String>) -> Self {
        Self {
            token: token.filter(|t| !t.is_empty()),
            runtime,
            agents: agents.into_iter().map(|agent| (agent, None)).collect(),
            name: "node".into(),
            keepalive: Duration::from_secs(5),
            max_concurrent_runs: 0,
            workdir_root: None,
            workdir_ttl: Duration::from_secs(3600),
            shutdown_grace: Duration::from_secs(30),
        }
    }

    /// The standard node: a [`LocalRuntime`] under `workspace_root` serving `codex`, `claude`,
    /// `opencode` (with CLI turns: egress proxies, MCP bridge) and the given `command:NAME`
    /// agents, but not the raw `command` agent (a node never runs an argv chosen by the caller).
    pub fn local(
        workspace_root: impl Into<PathBuf>,
        options: &NodeOptions,
        token: Option<String>,
    ) -> Result<Self, NodeError> {
        let root = workspace_root.into();
        let upstream = crate::egress::upstream_client()
            .map_err(|e| NodeError::Config(format!("egress client: {e}")))?;
        let turns = TurnResources {
            bridge_program: options.bridge_program.clone(),
            egress_limits: crate::egress::EgressLimits::default(),
            upstream,
        };
        let mut rt = LocalRuntime::standard(LocalConfig::new(&root).with_turns(turns))
            .without_agent("command")
            .named("node");
        for flag in &options.commands {
            let cmd = NamedCommandProvider::parse_flag(flag)
                .map_err(|e| NodeError::Config(e.to_string()))?;
            rt = rt.with_named_command(cmd);
        }
        let agents = rt.agent_programs();
        let mut config = Self::new(Arc::new(rt), Vec::new(), token);
        config.agents = agents;
        config.name = options.name.clone();
        config.max_concurrent_runs = options.max_concurrent_runs;
        config.workdir_root = Some(root);
        config.workdir_ttl = options.workdir_ttl;
        config.shutdown_grace = options.shutdown_grace;
        Ok(config)
    }

    /// The agent names.
    pub fn agent_names(&self) -> Vec<String> {
        self.agents.iter().map(|(agent, _)| agent.clone()).collect()
    }
}

struct NodeState {
    config: NodeConfig,
    token: Option<Secret>,
    runs: Mutex<HashMap<String, Arc<Run>>>,
    /// When each run's last turn ended (for the workdir sweep).
    finished: Mutex<HashMap<String, Instant>>,
    /// Set once the node shuts down: no new runs.
    draining: CancellationToken,
    /// Runs the shutdown cancelled (reported as `node_shutdown`).
    shut_down: Mutex<HashSet<String>>,
    inventory: RwLock<Option<AgentSourceInventorySnapshot>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl NodeState {
    fn runs(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Run>>> {
        lock(&self.runs)
    }

    /// Cancels every running run, marking it as ended by the shutdown.
    fn cancel_all(&self) {
        let runs: Vec<Arc<Run>> = self.runs().values().cloned().collect();
        let mut marked = lock(&self.shut_down);
        for run in runs {
            marked.insert(run.id().to_string());
            run.cancel();
        }
    }

    /// Probes the agents again and keeps the inventory.
    async fn refresh_inventory(&self) {
        let probes = probe_agents(&self.config.agents).await;
        let instance = format!("{}-{}", self.config.name, std::process::id());
        match machine_inventory(&self.config.name, &instance, &probes) {
            Ok(snapshot) => {
                *self.inventory.write().unwrap_or_else(|p| p.into_inner()) = Some(snapshot)
            }
            Err(error) => tracing::warn!(%error, "the node's inventory is not valid"),
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
        finished: Mutex::new(HashMap::new()),
        draining: CancellationToken::new(),
        shut_down: Mutex::new(HashSet::new()),
        inventory: RwLock::new(None),
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
        .route("/api/node/capabilities/recheck", post(recheck))
        .layer(middleware::from_fn_with_state(state.clone(), auth))
        .with_state(state)
}

/// Serves the node API on `listener` until `shutdown` completes; then refuses new runs, gives
/// running ones the grace period, cancels the rest (reported `node_shutdown`) and returns once
/// their streams have ended.
pub async fn serve_node(
    config: NodeConfig,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), NodeError> {
    let state = new_state(config);
    // The CLIs are probed while the node already serves: until the inventory is there its
    // capabilities carry none, and routers wait for it before sending runs.
    let probing = state.clone();
    tokio::spawn(async move { probing.refresh_inventory().await });
    let sweeper = CancellationToken::new();
    if let Some(root) = state.config.workdir_root.clone() {
        remove_stale_workdirs(&root, &HashSet::new()).await;
        tokio::spawn(sweep_workdirs(state.clone(), root, sweeper.clone()));
    }
    let router = node_router(state.clone());
    let draining = state.clone();
    let on_shutdown = async move {
        shutdown.await;
        drain(&draining).await;
    };
    // Events are small NDJSON lines: without TCP_NODELAY each waits for the client's delayed
    // ACK (tens of milliseconds per run).
    let listener =
        axum::serve::ListenerExt::tap_io(listener, |stream: &mut tokio::net::TcpStream| {
            let _ = stream.set_nodelay(true);
        });
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(on_shutdown)
        .await;
    sweeper.cancel();
    served?;
    Ok(())
}

/// Refuses new runs, waits up to the grace period for running ones, then cancels the rest.
async fn drain(state: &NodeState) {
    state.draining.cancel();
    let grace = state.config.shutdown_grace;
    let running = state.runs().len();
    tracing::info!(
        running,
        grace_secs = grace.as_secs(),
        "node shutting down: refusing new runs"
    );
    let deadline = Instant::now() + grace;
    while !state.runs().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let left = state.runs().len();
    if left > 0 {
        tracing::warn!(
            left,
            "node shutting down: cancelling the runs still running"
        );
        state.cancel_all();
    }
}

/// Removes the workdirs of runs idle for the TTL, every minute (or sooner for short TTLs).
async fn sweep_workdirs(state: Arc<NodeState>, root: PathBuf, stop: CancellationToken) {
    let every = state
        .config
        .workdir_ttl
        .clamp(Duration::from_secs(1), Duration::from_secs(60));
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        let ttl = state.config.workdir_ttl;
        let expired: Vec<String> = {
            let mut finished = lock(&state.finished);
            let gone: Vec<String> = finished
                .iter()
                .filter(|(_, at)| at.elapsed() >= ttl)
                .map(|(id, _)| id.clone())
                .collect();
            for id in &gone {
                finished.remove(id);
            }
            gone
        };
        let active: HashSet<String> = state.runs().keys().cloned().collect();
        for id in expired.iter().filter(|id| !active.contains(*id)) {
            remove_dir(&root.join(id)).await;
        }
    }
}

/// Removes every run directory under `root` (and turn scratch left by a crash) but those of
/// `keep`. Only names a run id can have are touched.
async fn remove_stale_workdirs(root: &std::path::Path, keep: &HashSet<String>) {
    let Ok(mut entries) = tokio::fs::read_dir(root).await else {
        return;
    };
    while let Ok(Some(entry)) = entries.next_entry().await {
        let name = entry.file_name().to_string_lossy().to_string();
        let scratch = name == ".homes" || name == ".bridges";
        let run_like = run_id_for(&RunSpec {
            run_id: name.clone(),
            ..Default::default()
        })
        .is_ok();
        if (scratch || run_like) && !keep.contains(&name) {
            remove_dir(&entry.path()).await;
        }
    }
}

async fn remove_dir(dir: &std::path::Path) {
    match tokio::fs::remove_dir_all(dir).await {
        Ok(()) => tracing::debug!(dir = %dir.display(), "removed a run's workdir"),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            tracing::warn!(%error, dir = %dir.display(), "could not remove a run's workdir")
        }
    }
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
        drop(runs);
        lock(&self.state.finished).insert(self.run.id().to_string(), Instant::now());
    }
}

/// Whether the node can take one more run now, given its `runs` (the error response when not).
fn admission(
    state: &NodeState,
    runs: &HashMap<String, Arc<Run>>,
    run_id: &str,
) -> Result<(), (StatusCode, String)> {
    if state.draining.is_cancelled() {
        return Err((
            StatusCode::SERVICE_UNAVAILABLE,
            "the node is shutting down and takes no new runs".into(),
        ));
    }
    if runs.contains_key(run_id) {
        return Err((
            StatusCode::CONFLICT,
            format!("run {run_id:?} is already active"),
        ));
    }
    let max = state.config.max_concurrent_runs;
    if max > 0 && runs.len() >= max {
        return Err((
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the node is at capacity ({max} concurrent runs)"),
        ));
    }
    Ok(())
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
    if let Err((status, message)) = admission(&state, &state.runs(), &run_id) {
        return error(status, message);
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
        // Checked again, and taken, under one lock: another request may have taken the
        // last place meanwhile.
        let mut runs = state.runs();
        if let Err((status, message)) = admission(&state, &runs, &run_id) {
            run.cancel();
            return error(status, message);
        }
        runs.insert(run_id.clone(), run.clone());
    }
    lock(&state.finished).remove(&run_id);
    let guard = RunGuard {
        state: state.clone(),
        run,
    };
    ndjson_response(&run_id, events, guard, state.config.keepalive)
}

/// The last event as this node reports it: a failed run's reason in `data`, a run the
/// shutdown cancelled as `node_shutdown`.
fn final_event(guard: &RunGuard, mut event: crate::event::RunEvent) -> crate::event::RunEvent {
    if event.kind != EventType::Exited {
        return event;
    }
    let status = guard.run.status();
    if lock(&guard.state.shut_down).remove(guard.run.id()) {
        event.error_code = EXIT_CODE_NODE_SHUTDOWN.to_string();
        event.data = "the node shut down before the run ended".to_string();
    } else if status.state == RunState::Failed && event.data.is_empty() {
        event.data = status.err;
    }
    event
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
                        let ev = final_event(&guard, ev);
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

fn capabilities_of(state: &NodeState) -> NodeCapabilities {
    NodeCapabilities {
        name: state.config.name.clone(),
        runtime: state.config.runtime.name().to_string(),
        agents: state.config.agent_names(),
        active_runs: state.runs().len(),
        max_concurrent_runs: state.config.max_concurrent_runs,
        accepting: !state.draining.is_cancelled(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        inventory: state
            .inventory
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone(),
    }
}

async fn capabilities(State(state): State<Arc<NodeState>>) -> Response {
    axum::Json(capabilities_of(&state)).into_response()
}

async fn recheck(State(state): State<Arc<NodeState>>) -> Response {
    state.refresh_inventory().await;
    axum::Json(capabilities_of(&state)).into_response()
}
