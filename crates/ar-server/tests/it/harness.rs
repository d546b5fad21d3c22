//! Test harness: starts the service with a given environment and talks to it over HTTP.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use ar_config::ServiceSettings;
use ar_test_support::mock_provider::MockProvider;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

pub const TOKEN: &str = "test-token-0123456789";
pub const APP: &str = "host_app";

/// A running service and a client for it.
pub struct TestServer {
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<JoinHandle<anyhow::Result<()>>>,
    pub _dir: Option<tempfile::TempDir>,
}

/// Environment for a service whose app approves the mock as an OpenAI-compatible endpoint.
pub fn env_for(mock: &MockProvider, store_dsn: &str) -> HashMap<String, String> {
    let app_config = json!({
        "apps": [{
            "app_id": APP,
            "model_endpoints": [{"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key", "allow_http": true}]
        }, {
            "app_id": "v2_app",
            "event_protocol": "v2",
            "model_endpoints": [{"id": "mock", "base_url": mock.base_url(), "auth_mode": "none", "allow_http": true}]
        }]
    });
    HashMap::from([
        ("AGENT_RUNTIME_SERVICE_TOKEN".to_string(), TOKEN.to_string()),
        (
            "AGENT_RUNTIME_STORE_DRIVER".to_string(),
            "sqlite".to_string(),
        ),
        (
            "AGENT_RUNTIME_SQLITE_DSN".to_string(),
            store_dsn.to_string(),
        ),
        (
            "AGENT_RUNTIME_APP_CONFIG".to_string(),
            app_config.to_string(),
        ),
        (
            "AGENT_RUNTIME_MODEL_CREDENTIAL_ENCRYPTION_KEY".to_string(),
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=".to_string(),
        ),
        (
            "AGENT_RUNTIME_INSTANCE_ID".to_string(),
            "inst_test".to_string(),
        ),
    ])
}

impl TestServer {
    pub async fn start_with(env: HashMap<String, String>) -> TestServer {
        // Logs help when a test fails; `AR_TEST_LOG=debug` turns them on.
        if let Ok(filter) = std::env::var("AR_TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_test_writer()
                .try_init();
        }
        let settings = ServiceSettings::from_env(|name| env.get(name).cloned())
            .unwrap_or_else(|diagnostics| panic!("settings: {diagnostics:?}"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let mut service = ar_server::Service::build(settings, addr)
            .await
            .expect("build service");
        service.shutdown_grace = Duration::from_millis(300);
        let task = tokio::spawn(service.serve(listener, async move {
            let _ = stopped.await;
        }));
        TestServer {
            addr,
            client: reqwest::Client::new(),
            stop: Some(stop),
            task: Some(task),
            _dir: None,
        }
    }

    /// A service on a fresh SQLite file, pointed at `mock`.
    pub async fn start(mock: &MockProvider) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let dsn = dir.path().join("runtime.db").display().to_string();
        let mut server = TestServer::start_with(env_for(mock, &dsn)).await;
        server._dir = Some(dir);
        server
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self
            .client
            .request(method, self.url(path))
            .bearer_auth(TOKEN);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::PUT, path, Some(body)).await
    }

    /// Creates a native agent in `APP` and returns its id.
    pub async fn agent(&self, id: &str, extra: Value) -> String {
        let mut body =
            json!({"app_id": APP, "name": format!("agent {id}"), "system_prompt": "You help."});
        if let (Some(target), Some(source)) = (body.as_object_mut(), extra.as_object()) {
            for (key, value) in source {
                target.insert(key.clone(), value.clone());
            }
        }
        let (status, agent) = self
            .put(&format!("/v1/agents/{id}?app_id={APP}"), body)
            .await;
        assert!(
            status == 201 || status == 200,
            "agent upsert: {status} {agent}"
        );
        agent["id"].as_str().expect("agent id").to_string()
    }

    /// Starts a run against the mock endpoint (api_key credential).
    pub async fn start_run(&self, mock: &MockProvider, agent_id: &str, extra: Value) -> Value {
        let mut body = json!({
            "app_id": APP,
            "agent_id": agent_id,
            "target": {"type": "ticket", "id": "T-1"},
            "instructions": "Do the task.",
            "model": {"provider": "openai_compatible", "model": "mock-model",
                      "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}},
            "model_credential": {"type": "api_key", "api_key": "sk-test-secret"}
        });
        if let (Some(target), Some(source)) = (body.as_object_mut(), extra.as_object()) {
            for (key, value) in source {
                target.insert(key.clone(), value.clone());
            }
        }
        let (status, run) = self.post("/v1/runs", body).await;
        assert_eq!(status, 202, "start run: {run}");
        run
    }

    pub async fn run(&self, run_id: &str) -> Value {
        let (status, run) = self.get(&format!("/v1/runs/{run_id}?app_id={APP}")).await;
        assert_eq!(status, 200, "get run: {run}");
        run
    }

    /// Polls until the run reaches one of `statuses` (bounded: 20 s).
    pub async fn wait_status(&self, run_id: &str, statuses: &[&str]) -> Value {
        for _ in 0..2000 {
            let run = self.run(run_id).await;
            if statuses.contains(&run["status"].as_str().unwrap_or_default()) {
                return run;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "run {run_id} never reached {statuses:?}: {}",
            self.run(run_id).await
        );
    }

    pub async fn events(&self, run_id: &str) -> Vec<Value> {
        let (status, events) = self
            .get(&format!("/v1/runs/{run_id}/events/history?app_id={APP}"))
            .await;
        assert_eq!(status, 200, "history: {events}");
        events.as_array().cloned().unwrap_or_default()
    }

    pub async fn list(&self, run_id: &str, what: &str) -> Vec<Value> {
        let (status, rows) = self
            .get(&format!("/v1/runs/{run_id}/{what}?app_id={APP}"))
            .await;
        assert_eq!(status, 200, "{what}: {rows}");
        rows.as_array().cloned().unwrap_or_default()
    }
}

pub fn event_types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|event| event["type"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Asserts sequence numbers are exactly 1..=n.
pub fn assert_contiguous(events: &[Value]) {
    for (index, event) in events.iter().enumerate() {
        assert_eq!(
            event["sequence_no"].as_i64(),
            Some(index as i64 + 1),
            "sequence gap at {index}: {events:?}"
        );
    }
}
