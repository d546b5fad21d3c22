//! The HTTP client of a service under test, with the SDK's request shapes.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{json, Value};

use super::{merge, wait_for, APP, RUN_API_KEY, V2_APP, WAIT};
use crate::mock_provider::MockProvider;

/// An HTTP client that never goes through a proxy (everything here is loopback).
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(WAIT)
        .build()
        .expect("http client")
}

/// Where a service listens, the token its requests carry, and a client for it.
pub struct Api {
    pub addr: SocketAddr,
    /// The bearer token requests carry (`None`: anonymous).
    pub token: Option<String>,
    pub client: reqwest::Client,
}

impl Api {
    pub fn new(addr: SocketAddr, token: Option<String>) -> Api {
        Api {
            addr,
            token,
            client: http_client(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Sends a request with the service's token (if any); returns status and JSON (or text).
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        self.send_as(self.token.as_deref(), method, path, body)
            .await
    }

    /// `DELETE /v1/runs/{id}/model-credential` of a run of [`APP`].
    pub async fn revoke_model_credential(&self, run_id: &str) -> (u16, Value) {
        let path = format!("/v1/runs/{run_id}/model-credential?app_id={APP}");
        self.send(reqwest::Method::DELETE, &path, None).await
    }

    /// Sends a request with an explicit token (`None`: no Authorization header).
    pub async fn send_as(
        &self,
        token: Option<&str>,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self.client.request(method, self.url(path));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        status_and_body(request, path).await
    }

    /// Sends `body` as is (any bytes, `content-type: application/json`); returns status and
    /// JSON (or text).
    pub async fn send_raw(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<String>,
    ) -> (u16, Value) {
        let mut request = self.client.request(method, self.url(path));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        status_and_body(request, path).await
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

    /// Creates or replaces the native agent `id` in [`APP`] (`PUT`), with `extra` fields;
    /// returns its id.
    pub async fn agent(&self, id: &str, extra: Value) -> String {
        let mut body =
            json!({"app_id": APP, "name": format!("agent {id}"), "system_prompt": "You help."});
        merge(&mut body, &extra);
        let (status, agent) = self
            .put(&format!("/v1/agents/{id}?app_id={APP}"), body)
            .await;
        assert!(
            status == 201 || status == 200,
            "agent upsert: {status} {agent}"
        );
        agent["id"].as_str().expect("agent id").to_string()
    }

    /// Creates a native agent in [`APP`] through `POST /v1/agents`; returns the whole agent.
    pub async fn create_agent(&self, name: &str, allowed_tools: &[&str]) -> Value {
        let body = json!({
            "app_id": APP,
            "name": name,
            "system_prompt": "You help with tickets.",
            "allowed_tools": allowed_tools,
        });
        let (status, agent) = self.post("/v1/agents", body).await;
        assert_eq!(status, 201, "create agent: {agent}");
        agent
    }

    /// Starts a run of `agent_id` against the mock endpoint with the run API key
    /// [`RUN_API_KEY`], plus `extra` fields (expects 202).
    pub async fn start_run(&self, mock: &MockProvider, agent_id: &str, extra: Value) -> Value {
        let mut body = json!({
            "app_id": APP,
            "agent_id": agent_id,
            "target": {"type": "ticket", "id": "T-42", "display": {"title": "Broken login"}},
            "instructions": "Look at the ticket.",
            "model": {"provider": "openai_compatible", "model": "mock-model",
                      "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}},
            "model_credential": {"type": "api_key", "api_key": RUN_API_KEY}
        });
        merge(&mut body, &extra);
        let (status, run) = self.post("/v1/runs", body).await;
        assert_eq!(status, 202, "start run: {run}");
        run
    }

    /// How many runs [`APP`] has (`GET /v1/runs`): admission refusals must store none.
    pub async fn run_count(&self) -> usize {
        let (status, runs) = self.get(&format!("/v1/runs?app_id={APP}")).await;
        assert_eq!(status, 200, "list runs: {runs}");
        runs.as_array().map_or(0, Vec::len)
    }

    /// Starts a run of [`V2_APP`]'s agent `agent_id` (created or replaced here) against the mock
    /// endpoint without a credential; returns the run id.
    pub async fn start_v2_run(&self, mock: &MockProvider, agent_id: &str) -> String {
        let (status, agent) = self
            .put(
                &format!("/v1/agents/{agent_id}?app_id={V2_APP}"),
                json!({"app_id": V2_APP, "name": "v2"}),
            )
            .await;
        assert!(status == 201 || status == 200, "v2 agent: {status} {agent}");
        let body = json!({
            "app_id": V2_APP, "agent_id": agent_id, "target": {"type": "doc", "id": "D"},
            "model": {"provider": "openai_compatible", "model": "m",
                      "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "none"}},
            "model_credential": {"type": "none"}
        });
        let (status, run) = self.post("/v1/runs", body).await;
        assert_eq!(status, 202, "start v2 run: {run}");
        run["id"].as_str().expect("run id").to_string()
    }

    /// Waits (bounded by [`WAIT`]) until run `run_id` of `app` completed; returns its persisted
    /// history, checked contiguous.
    pub async fn completed_history(&self, app: &str, run_id: &str) -> Vec<Value> {
        let path = format!("/v1/runs/{run_id}?app_id={app}");
        wait_for(&format!("{run_id} to complete"), WAIT, || async {
            (self.get(&path).await.1["status"] == "completed").then_some(())
        })
        .await;
        let (status, history) = self
            .get(&format!("/v1/runs/{run_id}/events/history?app_id={app}"))
            .await;
        assert_eq!(status, 200, "{history}");
        let history = history.as_array().expect("history").clone();
        assert_contiguous(&history);
        history
    }

    pub async fn run(&self, run_id: &str) -> Value {
        let (status, run) = self.get(&format!("/v1/runs/{run_id}?app_id={APP}")).await;
        assert_eq!(status, 200, "get run: {run}");
        run
    }

    /// Polls (bounded by [`WAIT`]) until the run's status is one of `statuses`; returns the run.
    pub async fn wait_status(&self, run_id: &str, statuses: &[&str]) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let run = self.run(run_id).await;
            if statuses.contains(&run["status"].as_str().unwrap_or_default()) {
                return run;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!("run {run_id} never reached {statuses:?}: {run}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The persisted event history of a run.
    pub async fn events(&self, run_id: &str) -> Vec<Value> {
        self.list(run_id, "events/history").await
    }

    /// `GET /v1/runs/{id}/{what}` as a list.
    pub async fn list(&self, run_id: &str, what: &str) -> Vec<Value> {
        let (status, rows) = self
            .get(&format!("/v1/runs/{run_id}/{what}?app_id={APP}"))
            .await;
        assert_eq!(status, 200, "{what}: {rows}");
        rows.as_array()
            .cloned()
            .unwrap_or_else(|| panic!("{what} is not a list: {rows}"))
    }

    /// Opens the run's SSE stream, optionally with `Last-Event-ID: after` (expects 200).
    pub async fn open_stream(&self, run_id: &str, after: Option<i64>) -> reqwest::Response {
        let mut request = self
            .client
            .get(self.url(&format!("/v1/runs/{run_id}/events?app_id={APP}")))
            .header("accept", "text/event-stream");
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(after) = after {
            request = request.header("Last-Event-ID", after.to_string());
        }
        let response = request.send().await.expect("open SSE stream");
        assert_eq!(response.status(), 200, "SSE stream of {run_id}");
        response
    }
}

/// The `type` of each event.
pub fn event_types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|event| event["type"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Asserts sequence numbers are exactly 1..=n (no gap, no duplicate) and event ids are unique.
pub fn assert_contiguous(events: &[Value]) {
    for (index, event) in events.iter().enumerate() {
        assert_eq!(
            event["sequence_no"].as_i64(),
            Some(index as i64 + 1),
            "sequence broken at position {index}: {:?}",
            event_types(events)
        );
    }
    let mut ids: Vec<&str> = events
        .iter()
        .map(|event| event["event_id"].as_str().unwrap_or_default())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), events.len(), "duplicate event ids");
}

/// Sends `request`; its status and body as JSON (or as a string when it is not JSON).
async fn status_and_body(request: reqwest::RequestBuilder, path: &str) -> (u16, Value) {
    let response = request
        .send()
        .await
        .unwrap_or_else(|error| panic!("{path}: {error}"));
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, value)
}
