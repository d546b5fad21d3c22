//! A host's `host_prepared` workspace provider ([`WorkspaceHost`]), serving what the original
//! Python SDK's `create_fastapi_workspace_provider_router` serves: `POST /prepare` →
//! `WorkspaceLease`, `POST /finalize` → `FinalizeWorkspaceResult`, `POST /cleanup` → `{}`, each
//! behind an optional bearer token (401 `{"detail":"unauthorized"}`) and answering 422 when a
//! field the SDK's pydantic model requires is missing. Written from that router's shape; the
//! handlers do what a host would: prepare makes a directory per run under a root of the test's,
//! finalize reads the files the run left there into its `output_summary`, cleanup removes the
//! directory. `/repository-spec` (served when a test sets a spec, as the SDK's router serves
//! it only when given a handler) answers the spec of a repository the runtime clones. Tests script misbehaviours and read back what it was asked.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// How `/prepare` answers.
#[derive(Debug, Clone)]
pub enum PrepareAnswer {
    /// A directory per run under the host's root, with this cleanup policy (`None`: unset).
    Directory { cleanup_policy: Option<String> },
    /// This body, as is, with status 200.
    Raw(Value),
    /// A lease whose root does not exist.
    MissingRoot,
}

struct HostState {
    token: Option<String>,
    root: PathBuf,
    prepare: Mutex<PrepareAnswer>,
    /// `/repository-spec`'s answer; `None`: not served (the SDK registers it only when given).
    repository_spec: Mutex<Option<Value>>,
    calls: Mutex<Vec<(String, Value)>>,
    /// Files (relative path, content) every prepared directory starts with, beyond README.md.
    seed: Mutex<Vec<(String, String)>>,
}

/// The workspace provider host; stops when dropped.
pub struct WorkspaceHost {
    url: String,
    state: Arc<HostState>,
    shutdown: CancellationToken,
}

impl Drop for WorkspaceHost {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl WorkspaceHost {
    /// Serves the provider on a loopback port, preparing workspaces under `root`.
    pub async fn start(token: Option<&str>, root: &Path) -> WorkspaceHost {
        let state = Arc::new(HostState {
            token: token.map(str::to_string),
            root: root.to_path_buf(),
            prepare: Mutex::new(PrepareAnswer::Directory {
                cleanup_policy: None,
            }),
            repository_spec: Mutex::new(None),
            calls: Mutex::new(Vec::new()),
            seed: Mutex::new(Vec::new()),
        });
        let router = Router::new()
            .route("/{step}", post(step))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the workspace host");
        let url = format!(
            "http://{}/agent-runtime/workspaces",
            listener.local_addr().expect("addr")
        );
        let shutdown = CancellationToken::new();
        let nested = Router::new().nest("/agent-runtime/workspaces", router);
        crate::spawn_peer("workspace host", listener, nested, shutdown.clone());
        WorkspaceHost {
            url,
            state,
            shutdown,
        }
    }

    /// The provider's `base_url`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Adds a file every prepared workspace starts with (`path` relative to its root).
    pub fn seed(&self, path: &str, content: &str) {
        self.state
            .seed
            .lock()
            .push((path.to_string(), content.to_string()));
    }

    /// How `/prepare` answers from now on.
    pub fn set_prepare(&self, answer: PrepareAnswer) {
        *self.state.prepare.lock() = answer;
    }

    /// Serves `/repository-spec` with `spec` from now on.
    pub fn set_repository_spec(&self, spec: Value) {
        *self.state.repository_spec.lock() = Some(spec);
    }

    /// The steps asked for and their bodies, in order.
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.state.calls.lock().clone()
    }

    /// The bodies of the calls of one step.
    pub fn calls_of(&self, step: &str) -> Vec<Value> {
        self.calls()
            .into_iter()
            .filter(|(name, _)| name == step)
            .map(|(_, body)| body)
            .collect()
    }

    /// The directory `/prepare` makes for `run_id`.
    pub fn workspace_of(&self, run_id: &str) -> PathBuf {
        self.state.root.join(run_id)
    }
}

fn authorized(state: &HostState, headers: &HeaderMap) -> bool {
    crate::bearer_accepted(state.token.as_deref(), headers)
}

/// The fields the SDK's request models require, per step.
fn required(step: &str) -> &'static [&'static str] {
    match step {
        "prepare" | "repository-spec" => &[
            "app_id",
            "run_id",
            "agent_id",
            "runtime_kind",
            "target",
            "workspace_mode",
        ],
        "finalize" => &[
            "app_id",
            "run_id",
            "agent_id",
            "runtime_kind",
            "target",
            "lease",
            "outcome",
        ],
        _ => &[
            "app_id",
            "run_id",
            "agent_id",
            "runtime_kind",
            "target",
            "lease",
        ],
    }
}

async fn step(
    State(state): State<Arc<HostState>>,
    UrlPath(step): UrlPath<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    if !authorized(&state, &headers) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"detail": "unauthorized"})),
        );
    }
    let missing: Vec<_> = required(&step)
        .iter()
        .filter(|field| body.get(**field).is_none_or(Value::is_null))
        .collect();
    if !missing.is_empty() {
        let detail =
            json!([{"type": "missing", "loc": ["body", missing], "msg": "Field required"}]);
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({ "detail": detail })),
        );
    }
    state.calls.lock().push((step.clone(), body.clone()));
    match step.as_str() {
        "prepare" => (StatusCode::OK, Json(prepare(&state, &body))),
        "repository-spec" => match state.repository_spec.lock().clone() {
            Some(spec) => (StatusCode::OK, Json(spec)),
            None => (StatusCode::NOT_FOUND, Json(json!({"detail": "Not Found"}))),
        },
        "finalize" => (StatusCode::OK, Json(finalize(&body))),
        "cleanup" => {
            if let Some(root) = body["lease"]["root_path"].as_str() {
                let _ = std::fs::remove_dir_all(root);
            }
            (StatusCode::OK, Json(json!({})))
        }
        _ => (StatusCode::NOT_FOUND, Json(json!({"detail": "Not Found"}))),
    }
}

fn prepare(state: &HostState, body: &Value) -> Value {
    let run_id = body["run_id"].as_str().unwrap_or("run");
    match state.prepare.lock().clone() {
        PrepareAnswer::Raw(value) => value,
        PrepareAnswer::MissingRoot => json!({
            "id": format!("lease-{run_id}"), "provider": "host",
            "root_path": state.root.join("no-such-dir").join(run_id),
            "cleanup_policy": null, "metadata": {}
        }),
        PrepareAnswer::Directory { cleanup_policy } => {
            let dir = state.root.join(run_id);
            std::fs::create_dir_all(&dir).expect("workspace directory");
            std::fs::write(dir.join("README.md"), "# Ticket workspace\n").expect("seed file");
            for (path, content) in state.seed.lock().iter() {
                let file = dir.join(path);
                std::fs::create_dir_all(file.parent().expect("parent")).expect("seed directory");
                std::fs::write(file, content).expect("seed file");
            }
            json!({
                "id": format!("lease-{run_id}"), "provider": "host", "root_path": dir,
                "cleanup_policy": cleanup_policy, "metadata": {"ticket": body["target"]["id"]}
            })
        }
    }
}

/// The files of the workspace, by name, as the host's answer (`output_summary.files`).
fn finalize(body: &Value) -> Value {
    let mut files = serde_json::Map::new();
    if let Some(root) = body["lease"]["root_path"].as_str() {
        for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
            let content = std::fs::read_to_string(entry.path()).unwrap_or_default();
            files.insert(
                entry.file_name().to_string_lossy().into_owned(),
                json!(content),
            );
        }
    }
    json!({
        "output_summary": {"files": files, "finalized_outcome": body["outcome"]},
        "metadata": {"finalized": true}
    })
}
