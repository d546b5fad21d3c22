//! A host's skill provider ([`SkillHost`]), serving what the original Python SDK's
//! `create_fastapi_workspace_skill_lookup_router` serves: `POST /by-id` and `POST /active-by-key` with a `SkillLookupRequest` body → the
//! `WorkspaceSkill` (every field, optional ones as `null`) or 204 when there is none, behind an
//! optional bearer token (401 `{"detail":"unauthorized"}`). Written from that router's shape;
//! tests add skills and read back what the host was asked. It also serves what
//! `create_fastapi_skill_package_router` serves: `GET /objects/{object_key:path}` → the
//! archive as `application/zip`, 404 `{"detail":"skill package object not found"}` for an
//! unknown key, behind its own optional bearer token. [`skill_package`] builds a zip.

use std::sync::Arc;

use axum::extract::Path;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct HostState {
    token: Option<String>,
    package_token: Option<String>,
    skills: Mutex<Vec<Value>>,
    requests: Mutex<Vec<(String, Value)>>,
    packages: Mutex<std::collections::HashMap<String, Vec<u8>>>,
    /// The object keys asked for, authorized ones, in order.
    package_requests: Mutex<Vec<String>>,
}

/// A zip of `(path, content)` entries, deflated, as the original's `BuildSkillArchive` makes
/// them (`<key>/SKILL.md` and the skill's other files).
pub fn skill_package(entries: &[(&str, &str)]) -> Vec<u8> {
    use std::io::Write;
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (path, content) in entries {
        writer.start_file(*path, options).expect("zip entry");
        writer.write_all(content.as_bytes()).expect("zip write");
    }
    writer.finish().expect("zip finish").into_inner()
}

/// The hex SHA-256 of `bytes` (a package's `package_checksum`).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
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
        Self::start_with(token, None).await
    }

    /// As [`SkillHost::start`], the package router requiring `package_token` when given.
    pub async fn start_with(token: Option<&str>, package_token: Option<&str>) -> SkillHost {
        let state = Arc::new(HostState {
            token: token.map(str::to_string),
            package_token: package_token.map(str::to_string),
            ..HostState::default()
        });
        let lookups = Router::new()
            .route("/by-id", post(by_id))
            .route("/active-by-key", post(active_by_key));
        let packages = Router::new().route("/objects/{*object_key}", get(object));
        let router = Router::new()
            .nest("/agent-runtime/skills", lookups)
            .nest("/agent-runtime/skill-packages", packages)
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

    /// The package router's base URL (`skill_provider.package_base_url`).
    pub fn package_base_url(&self) -> String {
        format!("{}/agent-runtime/skill-packages", self.root)
    }

    /// Stores `archive` under `object_key`.
    pub fn add_package(&self, object_key: &str, archive: Vec<u8>) {
        self.state
            .packages
            .lock()
            .insert(object_key.to_string(), archive);
    }

    /// The object keys fetched (authorized requests), in order.
    pub fn package_requests(&self) -> Vec<String> {
        self.state.package_requests.lock().clone()
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

async fn object(
    State(state): State<Arc<HostState>>,
    headers: HeaderMap,
    Path(object_key): Path<String>,
) -> Response {
    if !crate::bearer_accepted(state.package_token.as_deref(), &headers) {
        return detail(StatusCode::UNAUTHORIZED, "unauthorized");
    }
    state.package_requests.lock().push(object_key.clone());
    match state.packages.lock().get(&object_key) {
        Some(archive) => (
            [(http::header::CONTENT_TYPE, "application/zip")],
            archive.clone(),
        )
            .into_response(),
        None => detail(StatusCode::NOT_FOUND, "skill package object not found"),
    }
}
