//! The stand-in for OpenAI's sign-in issuer and the ChatGPT backend's account discovery, as
//! the Codex CLI (0.171) calls them for a device-code login (the shapes its own client code
//! sends and reads): `POST /api/accounts/deviceauth/usercode` (`{client_id}` →
//! `{device_auth_id, user_code, interval}`), `POST /api/accounts/deviceauth/token`
//! (`{device_auth_id, user_code}` → 403 while the person has not signed in, then
//! `{authorization_code, code_challenge, code_verifier}`), `POST /oauth/token` (form
//! `grant_type=authorization_code&code&redirect_uri&client_id&code_verifier`, or
//! `grant_type=refresh_token` with a refresh token it issued → `{id_token, access_token,
//! refresh_token, expires_in}` (a new refresh token each time), JWTs whose
//! `https://api.openai.com/auth` claim carries the plan
//! and account), `GET /codex/device` (the page the person opens) and `GET
//! /backend-api/wham/accounts/check` (the account's workspace and its backend origin).
//!
//! Point `codex app-server` at it with `CODEX_APP_SERVER_LOGIN_ISSUER=<root_url>` and
//! `-c chatgpt_base_url="<root_url>/backend-api/"`. [`DeviceLoginScript`] says how many polls
//! pass before the person signs in, and whether they do.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use parking_lot::Mutex;
use serde_json::{json, Value};

/// How the person behaves at the issuer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceLoginScript {
    /// Token polls answered "pending" (403) before the answer.
    pub pending_polls: usize,
    /// Whether the person signs in (else the issuer answers the poll with 400, denied).
    pub approve: bool,
    /// The ChatGPT plan of the account.
    pub plan_type: String,
    /// The ChatGPT account (workspace) id.
    pub account_id: String,
    /// The account's email.
    pub email: String,
}

impl Default for DeviceLoginScript {
    fn default() -> Self {
        DeviceLoginScript {
            pending_polls: 2,
            approve: true,
            plan_type: "plus".into(),
            account_id: "acct_mock_1".into(),
            email: "person@example.com".into(),
        }
    }
}

/// The issuer's state: the script, the polls seen, the tokens issued.
#[derive(Debug, Default)]
pub(crate) struct LoginState {
    script: Mutex<DeviceLoginScript>,
    polls: AtomicUsize,
    issued: Mutex<Vec<String>>,
}

impl LoginState {
    pub(crate) fn set_script(&self, script: DeviceLoginScript) {
        *self.script.lock() = script;
        self.polls.store(0, Ordering::SeqCst);
    }

    /// Every token issued so far (access, id and refresh tokens).
    pub(crate) fn issued(&self) -> Vec<String> {
        self.issued.lock().clone()
    }

    pub(crate) fn polls(&self) -> usize {
        self.polls.load(Ordering::SeqCst)
    }
}

/// The issuer's and the account discovery's routes.
pub(crate) fn router(state: Arc<LoginState>) -> Router {
    Router::new()
        .route("/api/accounts/deviceauth/usercode", post(user_code))
        .route("/api/accounts/deviceauth/token", post(poll))
        .route("/oauth/token", post(token))
        .route(
            "/codex/device",
            get(|| async { "Enter your code to sign in to Codex." }),
        )
        .route("/backend-api/wham/accounts/check", get(accounts_check))
        .with_state(state)
}

async fn user_code(Json(body): Json<Value>) -> Response {
    if body
        .get("client_id")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "client_id is required"})),
        )
            .into_response();
    }
    Json(json!({"device_auth_id": "dev_auth_mock_1", "user_code": "MOCK-1234", "interval": "1"}))
        .into_response()
}

async fn poll(State(state): State<Arc<LoginState>>, Json(body): Json<Value>) -> Response {
    if body.get("device_auth_id").and_then(Value::as_str) != Some("dev_auth_mock_1")
        || body.get("user_code").and_then(Value::as_str) != Some("MOCK-1234")
    {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "unknown device code"})),
        )
            .into_response();
    }
    let seen = state.polls.fetch_add(1, Ordering::SeqCst);
    let script = state.script.lock().clone();
    if seen < script.pending_polls {
        return (
            StatusCode::FORBIDDEN,
            Json(json!({"error": "authorization_pending"})),
        )
            .into_response();
    }
    if !script.approve {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "access_denied"})),
        )
            .into_response();
    }
    Json(json!({"authorization_code": "code_mock_1", "code_challenge": "challenge_mock", "code_verifier": "verifier_mock"}))
        .into_response()
}

fn b64(value: &Value) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
}

/// A JWT codex reads the account from (unsigned: codex does not verify it, the backend would).
fn jwt(script: &DeviceLoginScript, serial: usize) -> String {
    let claims = json!({
        "email": script.email,
        "exp": now_secs() + 3600,
        "jti": format!("mock-{serial}"),
        "https://api.openai.com/auth": {
            "chatgpt_plan_type": script.plan_type,
            "chatgpt_account_id": script.account_id,
            "chatgpt_user_id": "user_mock_1",
        },
    });
    format!(
        "{}.{}.mock-signature-{serial}",
        b64(&json!({"alg": "none", "typ": "JWT"})),
        b64(&claims)
    )
}

async fn token(State(state): State<Arc<LoginState>>, body: String) -> Response {
    let form: Vec<(String, String)> = url_pairs(&body);
    let get = |key: &str| form.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    let refresh = get("grant_type") == Some("refresh_token")
        && get("refresh_token").is_some_and(|token| {
            token.starts_with("rt_mock_") && state.issued.lock().iter().any(|t| t == token)
        });
    let code = get("grant_type") == Some("authorization_code")
        && get("code") == Some("code_mock_1")
        && get("code_verifier") == Some("verifier_mock");
    if !(refresh || code) || get("client_id").is_none_or(str::is_empty) {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "invalid_grant"})),
        )
            .into_response();
    }
    let script = state.script.lock().clone();
    let mut issued = state.issued.lock();
    let serial = issued.len();
    let (id_token, access_token) = (jwt(&script, serial), jwt(&script, serial + 1));
    let refresh_token = format!("rt_mock_{serial}_{}", now_nanos());
    issued.extend([
        id_token.clone(),
        access_token.clone(),
        refresh_token.clone(),
    ]);
    Json(json!({"id_token": id_token, "access_token": access_token, "refresh_token": refresh_token, "expires_in": 3600}))
        .into_response()
}

async fn accounts_check(State(state): State<Arc<LoginState>>) -> Response {
    let script = state.script.lock().clone();
    Json(json!({
        "accounts": [{"id": script.account_id, "name": "Mock workspace", "structure": "personal",
                      "workspace_backend_origin": "https://chatgpt.com",
                      "account_routing_override": "NO_CONSTRAINT"}],
        "account_ordering": [script.account_id],
        "default_account_id": script.account_id,
    }))
    .into_response()
}

/// `a=b&c=d` form pairs (the values compared here need no decoding).
fn url_pairs(body: &str) -> Vec<(String, String)> {
    body.split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

fn now_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}
