//! The harness: starts the real `agent-runtime` binary as a child process with a controlled
//! environment, learns its address from stderr, and talks to it over HTTP.
//!
//! Every child is owned by a [`ChildGuard`] that kills and reaps it on drop, so a failing test
//! never leaves a process behind. Every wait is bounded by [`WAIT`] (or a caller's bound).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use ar_test_support::mock_provider::MockProvider;
use futures::StreamExt as _;
use serde_json::{json, Value};

/// The binary under test, built by cargo for this integration test.
pub const BIN: &str = env!("CARGO_BIN_EXE_agent-runtime");
/// The configured service token of most tests.
pub const TOKEN: &str = "e2e-service-token-0123456789";
/// The app every test works in.
pub const APP: &str = "host_app";
/// A fixed credential encryption key (base64 of 32 bytes) so restarts can open run credentials.
pub const CREDENTIAL_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
/// The run credential sent with every run; it must never come back in any response.
pub const RUN_API_KEY: &str = "sk-e2e-run-secret";

/// Upper bound of any single wait (process start, a run reaching a status, a stream ending).
pub const WAIT: Duration = Duration::from_secs(30);

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

fn drain(
    mut pipe: impl std::io::Read + Send + 'static,
    into: Arc<Mutex<Vec<u8>>>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buffer = [0u8; 8192];
        loop {
            match pipe.read(&mut buffer) {
                Ok(0) | Err(_) => return,
                Ok(read) => into
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .extend_from_slice(&buffer[..read]),
            }
        }
    })
}

/// A child process of the binary; killed (SIGKILL) and reaped when dropped unless it exited.
pub struct ChildGuard {
    child: Child,
    label: String,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
    status: Option<ExitStatus>,
}

impl ChildGuard {
    /// Starts `agent-runtime <args>` with exactly `env` (nothing inherited).
    pub fn spawn(args: &[&str], env: &BTreeMap<String, String>) -> ChildGuard {
        let mut child = Command::new(BIN)
            .args(args)
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {BIN}: {error}"));
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut readers = Vec::new();
        if let Some(pipe) = child.stdout.take() {
            readers.push(drain(pipe, stdout.clone()));
        }
        if let Some(pipe) = child.stderr.take() {
            readers.push(drain(pipe, stderr.clone()));
        }
        ChildGuard {
            child,
            label: format!("agent-runtime {}", args.join(" ")),
            stdout,
            stderr,
            readers,
            status: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the child wrote to stderr so far.
    pub fn stderr(&self) -> String {
        let bytes = self
            .stderr
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Everything the child wrote to stdout so far.
    pub fn stdout(&self) -> String {
        let bytes = self
            .stdout
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The exit status, if the child has exited (reaps it).
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.status = Some(status);
                // The pipes are closed now; let the readers collect the last bytes.
                for reader in self.readers.drain(..) {
                    let _ = reader.join();
                }
            }
        }
        self.status
    }

    /// Waits (bounded) for the child to exit; panics with its stderr when it does not.
    pub async fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(status) = self.try_status() {
                return status;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "{} did not exit within {within:?}; stderr:\n{}",
                    self.label,
                    self.stderr()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits (bounded) until stderr contains `needle`; returns the line holding it.
    /// Panics with the whole stderr when the child exits first or the time runs out.
    pub async fn wait_stderr_line(&mut self, needle: &str, within: Duration) -> String {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let text = self.stderr();
            // Only whole lines: one eprintln! can reach the pipe in several writes.
            let complete = &text[..text.rfind('\n').map_or(0, |end| end + 1)];
            if let Some(line) = complete.lines().find(|line| line.contains(needle)) {
                return line.to_string();
            }
            if let Some(status) = self.try_status() {
                panic!(
                    "{} exited ({status}) before printing {needle:?}; stderr:\n{}",
                    self.label,
                    self.stderr()
                );
            }
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "{} did not print {needle:?} within {within:?}; stderr:\n{text}",
                    self.label
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends SIGTERM (graceful shutdown).
    pub fn terminate(&self) {
        let pid = rustix::process::Pid::from_raw(self.pid() as i32).expect("child pid");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("send SIGTERM");
    }

    /// Sends SIGINT (Ctrl-C; also a graceful shutdown).
    pub fn interrupt(&self) {
        let pid = rustix::process::Pid::from_raw(self.pid() as i32).expect("child pid");
        rustix::process::kill_process(pid, rustix::process::Signal::INT).expect("send SIGINT");
    }

    /// Sends SIGKILL and reaps the child.
    pub fn kill_hard(&mut self) -> ExitStatus {
        if let Some(status) = self.try_status() {
            return status;
        }
        let _ = self.child.kill();
        let status = self.child.wait().expect("reap the killed child");
        self.status = Some(status);
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        status
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if self.try_status().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!("----- stderr of {} -----\n{}", self.label, self.stderr());
        }
    }
}

/// Runs `agent-runtime <args>` to completion (bounded); returns (status, stdout, stderr).
pub async fn run_command(
    args: &[&str],
    env: &BTreeMap<String, String>,
) -> (ExitStatus, String, String) {
    let mut child = ChildGuard::spawn(args, env);
    let status = child.wait_exit(WAIT).await;
    (status, child.stdout(), child.stderr())
}

/// The environment every child starts from: a private HOME and data directory below `dir`,
/// loopback with an ephemeral port, nothing inherited from the test's own environment.
pub fn base_env(dir: &Path) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    env.insert(
        "PATH".to_string(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".to_string()),
    );
    env.insert("HOME".to_string(), dir.join("home").display().to_string());
    env.insert(
        "XDG_DATA_HOME".to_string(),
        dir.join("xdg").display().to_string(),
    );
    env.insert("AGENT_RUNTIME_ADDR".to_string(), "127.0.0.1:0".to_string());
    env.insert("AGENT_RUNTIME_LOG".to_string(), "info".to_string());
    env
}

/// An app configuration approving `mock` as the OpenAI-compatible endpoint `mock` of [`APP`],
/// plus `extra` keys of that app (for example `event_callbacks`).
pub fn app_config(mock: &MockProvider, extra: Value) -> Value {
    let mut app = json!({
        "app_id": APP,
        "model_endpoints": [{"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key", "allow_http": true}]
    });
    if let (Some(target), Some(source)) = (app.as_object_mut(), extra.as_object()) {
        for (key, value) in source {
            target.insert(key.clone(), value.clone());
        }
    }
    json!({ "apps": [app] })
}

/// A configured service on the SQLite file `dir/data/runtime.db`, pointed at `mock`.
pub fn sqlite_env(dir: &Path, mock: &MockProvider) -> BTreeMap<String, String> {
    let mut env = base_env(dir);
    env.insert("AGENT_RUNTIME_SERVICE_TOKEN".into(), TOKEN.into());
    env.insert("AGENT_RUNTIME_STORE_DRIVER".into(), "sqlite".into());
    env.insert(
        "AGENT_RUNTIME_SQLITE_DSN".into(),
        dir.join("data").join("runtime.db").display().to_string(),
    );
    env.insert(
        "AGENT_RUNTIME_APP_CONFIG".into(),
        app_config(mock, json!({})).to_string(),
    );
    env.insert(
        "AGENT_RUNTIME_MODEL_CREDENTIAL_ENCRYPTION_KEY".into(),
        CREDENTIAL_KEY.into(),
    );
    env
}

/// One server-sent event frame: `id:` (persisted events only), `event:` and parsed `data:`.
#[derive(Debug, Clone)]
pub struct Frame {
    pub id: Option<i64>,
    pub event: String,
    pub data: Value,
}

/// A running `agent-runtime serve` and an HTTP client for it.
pub struct Server {
    pub process: ChildGuard,
    pub addr: SocketAddr,
    /// The bearer token requests carry (`None`: anonymous).
    pub token: Option<String>,
    pub client: reqwest::Client,
}

/// An HTTP client that never goes through a proxy (everything here is loopback).
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(WAIT)
        .build()
        .expect("http client")
}

impl Server {
    /// Starts `agent-runtime serve` with `env` and waits (bounded) until it listens.
    pub async fn start(env: &BTreeMap<String, String>) -> Server {
        let mut process = ChildGuard::spawn(&["serve"], env);
        const LISTENING: &str = "agent runtime listening on http://";
        let line = process.wait_stderr_line(LISTENING, WAIT).await;
        let addr: SocketAddr = line
            .split_once(LISTENING)
            .and_then(|(_, rest)| rest.split(|c: char| c.is_whitespace() || c == '/').next())
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        assert!(addr.ip().is_loopback(), "listening on {addr}");
        Server {
            process,
            addr,
            token: env.get("AGENT_RUNTIME_SERVICE_TOKEN").cloned(),
            client: http_client(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Sends a request with the server's token (if any); returns status and JSON (or text).
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        self.send_as(self.token.as_deref(), method, path, body)
            .await
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
        let response = request
            .send()
            .await
            .unwrap_or_else(|error| panic!("{path}: {error}"));
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

    /// Starts a run of `agent_id` against the mock endpoint with a run API key (expects 202).
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

    /// Polls (bounded) until the run's status is one of `statuses`; returns the run.
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
            tokio::time::sleep(Duration::from_millis(20)).await;
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

    /// Opens the run's SSE stream (optionally after a sequence number).
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

/// Reads an SSE response until the server closes it (bounded by `WAIT`; panics on timeout).
pub async fn read_frames(response: reqwest::Response) -> Vec<Frame> {
    read_frames_until_cut(response).await.0
}

/// Reads an SSE response until it ends; also says whether it ended by a broken connection
/// (the server died) rather than a clean close. Partial frames of a broken connection are dropped.
pub async fn read_frames_until_cut(response: reqwest::Response) -> (Vec<Frame>, bool) {
    let mut frames = Vec::new();
    let mut buffer = String::new();
    let mut body = response.bytes_stream();
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut cut = false;
    loop {
        let chunk = match tokio::time::timeout_at(deadline, body.next()).await {
            Err(_) => panic!("the SSE stream did not end within {WAIT:?}; got {frames:?}"),
            Ok(None) => break,
            Ok(Some(Ok(chunk))) => chunk,
            Ok(Some(Err(_))) => {
                cut = true;
                break;
            }
        };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let (mut id, mut event, mut data) = (None, String::new(), String::new());
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("id:") {
                    id = value.trim().parse().ok();
                } else if let Some(value) = line.strip_prefix("event:") {
                    event = value.trim().to_string();
                } else if let Some(value) = line.strip_prefix("data:") {
                    data.push_str(value.strip_prefix(' ').unwrap_or(value));
                }
            }
            if !event.is_empty() || !data.is_empty() {
                let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                frames.push(Frame { id, event, data });
            }
        }
    }
    (frames, cut)
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

/// Polls the mock (bounded) until it has received `count` model requests.
pub async fn wait_model_requests(mock: &MockProvider, count: usize) {
    wait_for(&format!("{count} model requests"), WAIT, || async {
        (mock.model_requests().len() >= count).then_some(())
    })
    .await;
}
