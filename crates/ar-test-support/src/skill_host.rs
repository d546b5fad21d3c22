//! A host's skill provider ([`SkillHost`]), serving what the original Python SDK's
//! `create_fastapi_workspace_skill_lookup_router` serves: `POST /by-id` and `POST /active-by-key` with a `SkillLookupRequest` body → the
//! `WorkspaceSkill` (every field, optional ones as `null`) or 204 when there is none, behind an
//! optional bearer token (401 `{"detail":"unauthorized"}`). Written from that router's shape;
//! tests add skills and read back what the host was asked. (The package router,
//! `GET /objects/{key}`, is not served: this runtime does not fetch skill packages yet.)

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct HostState {
    token: Option<String>,
    skills: Mutex<Vec<Value>>,
    requests: Mutex<Vec<(String, Value)>>,
}

/// The skill host; stops when dropped.
pub struct SkillHost {
    root: String,
    state: Arc<HostState>,
    shutdown: CancellationToken,
}

impl Drop for SkillHost {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A `WorkspaceSkill` as the SDK's pydantic model dumps it.
pub fn workspace_skill(id: &str, key: &str, version_key: &str, instructions: &str) -> Value {
    json!({
        "id": id, "key": key, "version_key": version_key,
        "title": format!("Skill {key}"), "description": format!("The {key} skill."),
        "source_kind": "workspace", "instructions": instructions,
        "required_tools": [], "supported_runtimes": [],
        "policy": {"allow_implicit_invocation": null, "completion_requires_interaction_kinds": [], "interaction_contracts": []},
        "interface": {"display_name": null, "short_description": null, "icon_small": null,
                      "icon_large": null, "brand_color": null, "default_prompt": null},
        "package_object_key": null, "package_file_name": null, "package_checksum": null,
        "package_size": null, "is_archived": false
    })
}

impl SkillHost {
    /// Serves on a loopback port under `/agent-runtime/skills`, requiring `token` when given.
    pub async fn start(token: Option<&str>) -> SkillHost {
        let state = Arc::new(HostState {
            token: token.map(str::to_string),
            ..HostState::default()
        });
        let lookups = Router::new()
            .route("/by-id", post(by_id))
            .route("/active-by-key", post(active_by_key));
        let router = Router::new()
            .nest("/agent-runtime/skills", lookups)
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the skill host");
        let root = format!("http://{}", listener.local_addr().expect("addr"));
        let shutdown = CancellationToken::new();
        crate::spawn_peer("skill host", listener, router, shutdown.clone());
        SkillHost {
            root,
            state,
            shutdown,
        }
    }

    /// The lookup router's base URL (`skill_provider.base_url`).
    pub fn base_url(&self) -> String {
        format!("{}/agent-runtime/skills", self.root)
    }

    /// Adds a skill (see [`workspace_skill`]).
    pub fn add(&self, skill: Value) {
        self.state.skills.lock().push(skill);
    }

    /// Archives the skill with `key` (the provider answers it with `is_archived: true`).
    pub fn archive(&self, key: &str) {
        for skill in self.state.skills.lock().iter_mut() {
            if skill["key"] == key {
                skill["is_archived"] = json!(true);
            }
        }
    }

    /// The lookups received (`by-id` or `active-by-key`, body), authorized ones, in order.
    pub fn requests(&self) -> Vec<(String, Value)> {
        self.state.requests.lock().clone()
    }
}

fn authorized(state: &HostState, headers: &HeaderMap) -> bool {
    crate::bearer_accepted(state.token.as_deref(), headers)
}

fn detail(status: StatusCode, text: &str) -> Response {
    (status, Json(json!({"detail": text}))).into_response()
}

/// One lookup: the skill whose `skill_field` equals the request's `field`; 204 when none.
fn lookup(
    state: &HostState,
    headers: &HeaderMap,
    route: &str,
    body: Value,
    fields: (&str, &str),
) -> Response {
    if !authorized(state, headers) {
        return detail(StatusCode::UNAUTHORIZED, "unauthorized");
    }
    let (field, skill_field) = fields;
    let wanted = body.get(field).cloned().filter(|v| !v.is_null());
    state.requests.lock().push((route.to_string(), body));
    let found = state
        .skills
        .lock()
        .iter()
        .find(|skill| wanted.is_some() && skill.get(skill_field) == wanted.as_ref())
        .cloned();
    match found {
        Some(skill) => Json(skill).into_response(),
        None => StatusCode::NO_CONTENT.into_response(),
    }
}

async fn by_id(
    State(state): State<Arc<HostState>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    lookup(&state, &headers, "by-id", body, ("skill_id", "id"))
}

async fn active_by_key(
    State(state): State<Arc<HostState>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    lookup(&state, &headers, "active-by-key", body, ("key", "key"))
}
