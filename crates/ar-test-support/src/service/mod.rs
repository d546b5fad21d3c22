//! The HTTP test harness of both service suites: the service in process ([`TestServer`], for
//! ar-server's integration tests) or as the real binary ([`Server`], for agent-runtime's
//! end-to-end tests), and one client with the SDK's request shapes ([`Api`]) that both deref to.
//!
//! Every wait is bounded by [`WAIT`] (or a caller's bound); a child process is killed and
//! reaped when its guard drops, so a failing test leaves nothing behind.

mod binary;
mod client;
mod in_process;
pub mod nats;
mod postgres;
mod proxy;
mod sse;
pub mod temporal;
pub mod tls_proxy;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::mock_provider::MockProvider;

pub use binary::{
    base_env, run_command, sqlite_env, sqlite_execute, sqlite_strings, ChildGuard, Server,
};
pub use client::{assert_contiguous, event_types, http_client, Api};
pub use in_process::{env_for, TestServer};
pub use postgres::{on_fresh_database, on_postgres};
pub use proxy::CutProxy;
pub use sse::{read_frames, read_frames_until_cut, Frame, FrameStream};

/// The service token of the configured services.
pub const TOKEN: &str = "test-service-token-0123456789";
/// The app every test works in.
pub const APP: &str = "host_app";
/// The app of [`in_process::env_for`] with event protocol v2 (its mock endpoint needs no credential).
pub const V2_APP: &str = "v2_app";
/// A fixed credential encryption key (base64 of 32 bytes) so restarts can open run credentials.
pub const CREDENTIAL_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
/// The run credential [`Api::start_run`] sends; it must never come back in any response.
pub const RUN_API_KEY: &str = "sk-test-run-secret";
/// Upper bound of any single wait (a server start, a run reaching a status, a stream ending).
pub const WAIT: Duration = Duration::from_secs(30);

/// Environment variables of a service under test.
pub type Env = BTreeMap<String, String>;

/// An app configuration approving `mock` as the OpenAI-compatible endpoint `mock` of [`APP`],
/// plus `extra` keys of that app (for example `event_callbacks`).
pub fn app_config(mock: &MockProvider, extra: Value) -> Value {
    let mut app = json!({
        "app_id": APP,
        "model_endpoints": [{"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key", "allow_http": true}]
    });
    merge(&mut app, &extra);
    json!({ "apps": [app] })
}

/// Copies the keys of the object `extra` into the object `target`.
pub fn merge(target: &mut Value, extra: &Value) {
    if let (Some(target), Some(source)) = (target.as_object_mut(), extra.as_object()) {
        for (key, value) in source {
            target.insert(key.clone(), value.clone());
        }
    }
}

/// Polls `probe` every 20 ms until it yields a value; panics with `what` after `within`.
pub async fn wait_for<T, F, Fut>(what: &str, within: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("gave up after {within:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls the mock (bounded) until it has received `count` model requests.
pub async fn wait_model_requests(mock: &MockProvider, count: usize) {
    wait_for(&format!("{count} model requests"), WAIT, || async {
        (mock.model_requests().len() >= count).then_some(())
    })
    .await;
}
