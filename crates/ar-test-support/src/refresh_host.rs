//! A host's `model_credential_callback` ([`RefreshHost`]): `POST /refresh` with the SDK's
//! `ModelCredentialRefreshRequest` behind a bearer token, answering the credential the test
//! set as `{"credential": {...}}` (the SDK's `UpdateRunModelCredentialRequest`), or an error
//! status. A stand-in for a host application that keeps the refresh token itself.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct HostState {
    token: String,
    /// The credential answered next; `None`: 503.
    answer: Mutex<Option<Value>>,
    /// How long each answer is held back (a host that takes its time to refresh).
    delay: Mutex<std::time::Duration>,
    requests: Mutex<Vec<Value>>,
}

/// A running refresh callback on a loopback port.
pub struct RefreshHost {
    url: String,
    state: Arc<HostState>,
    shutdown: CancellationToken,
}

impl RefreshHost {
    /// Serves `POST /refresh`, requiring `token`.
    pub async fn start(token: &str) -> RefreshHost {
        let state = Arc::new(HostState {
            token: token.to_string(),
            ..HostState::default()
        });
        let router = Router::new()
            .route("/refresh", post(refresh))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the refresh host");
        let url = format!("http://{}/refresh", listener.local_addr().expect("addr"));
        let shutdown = CancellationToken::new();
        crate::spawn_peer("refresh host", listener, router, shutdown.clone());
        RefreshHost {
            url,
            state,
            shutdown,
        }
    }

    /// The callback URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The credential the next refreshes answer (`None`: they fail with 503).
    pub fn answer(&self, credential: Option<Value>) {
        *self.state.answer.lock() = credential;
    }

    /// Holds every later answer back by `delay` (the request is recorded on arrival).
    pub fn delay(&self, delay: std::time::Duration) {
        *self.state.delay.lock() = delay;
    }

    /// The refresh requests received, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.state.requests.lock().clone()
    }
}

impl Drop for RefreshHost {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn refresh(
    State(state): State<Arc<HostState>>,
    headers: HeaderMap,
    Json(request): Json<Value>,
) -> (StatusCode, Json<Value>) {
    if !crate::bearer_accepted(Some(&state.token), &headers) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"detail": "unauthorized"})),
        );
    }
    state.requests.lock().push(request);
    let delay = *state.delay.lock();
    tokio::time::sleep(delay).await;
    match state.answer.lock().clone() {
        Some(credential) => (StatusCode::OK, Json(json!({ "credential": credential }))),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"detail": "connection needs reconnecting"})),
        ),
    }
}
