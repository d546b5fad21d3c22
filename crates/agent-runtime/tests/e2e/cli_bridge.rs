//! The real codex, Claude Code and opencode CLIs, run by the real binary against the mock model,
//! calling their run's tools through the MCP bridge the service configures for them: a host
//! tool (`get_context`) and a run MCP tool (`mcp__docs__lookup` of the test MCP server) are
//! gated, run and recorded by the run tool gateway, once each; the CLI and its bridge never see
//! the service token, only a token of the run's own, which opens that run's tools and nothing
//! else, and nothing once the run ended. A mutating tool waits for approval: the run pauses
//! `human_approval` when the CLI ends its turn, and the call runs once, after the approval.
//!
//! A missing CLI skips its test loudly; under `CI=true` it fails instead.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ar_test_support::mcp_server::{McpTestOptions, McpTestServer};
use ar_test_support::mock_provider::{Conversation, MockProvider, Reply, ToolCall};
use ar_test_support::service::*;
use serde_json::{json, Value};

use crate::BIN;
use ar_test_support::require_cli;

/// The model names each CLI is run with (Claude Code needs a Claude model name).
fn model_for(kind: &str) -> &'static str {
    match kind {
        "claude_code" => "claude-sonnet-4-5",
        _ => "mock-model",
    }
}

/// The service binary with run MCP on (plain HTTP and loopback allowed, for the test server).
async fn bridge_service(dir: &std::path::Path, mock: &MockProvider, extra_app: Value) -> Server {
    let mut env = sqlite_env(dir, mock);
    env.insert(
        "AGENT_RUNTIME_APP_CONFIG".into(),
        app_config(mock, extra_app).to_string(),
    );
    env.insert(
        "AGENT_RUNTIME_MCP_CREDENTIAL_ENCRYPTION_KEY".into(),
        CREDENTIAL_KEY.into(),
    );
    env.insert("AGENT_RUNTIME_MCP_ALLOW_HTTP".into(), "true".into());
    env.insert(
        "AGENT_RUNTIME_MCP_ALLOW_PRIVATE_NETWORKS".into(),
        "true".into(),
    );
    Server::start(BIN, &env).await
}

/// Polls until the run reaches one of `statuses` (bounded: 180 s; CLIs start slowly).
async fn wait_for(server: &Server, run_id: &str, statuses: &[&str]) -> Value {
    wait_for_value(
        &format!("run {run_id} to reach {statuses:?}"),
        Duration::from_secs(180),
        || async {
            let run = server.run(run_id).await;
            statuses
                .contains(&run["status"].as_str().unwrap_or_default())
                .then_some(run)
        },
    )
    .await
}

/// [`wait_for`] of the harness, re-exported under a name that does not clash.
async fn wait_for_value<T, F, Fut>(what: &str, within: Duration, probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    ar_test_support::service::wait_for(what, within, probe).await
}

/// A call of the declared bridged tool whose name ends with `suffix`, or a reply naming what
/// was declared instead (the test then fails on it). Each CLI names bridged tools its own way:
/// `mcp__agent_runtime__get_context` (Claude Code), `agent_runtime_get_context` (opencode),
/// or, from codex, `get_context` in the namespace tool `mcp__agent_runtime`.
pub(crate) fn call_bridged(conv: &Conversation<'_>, suffix: &str, arguments: &str) -> Reply {
    let flat = conv
        .tool_names()
        .into_iter()
        .find(|name| name.ends_with(suffix) && name.contains("agent_runtime"));
    if let Some(name) = flat {
        return Reply::tool_call(name, arguments);
    }
    let namespaced = conv.body["tools"].as_array().and_then(|tools| {
        tools.iter().find_map(|tool| {
            let namespace = tool["name"]
                .as_str()
                .filter(|_| tool["type"] == "namespace")?;
            let inner = tool["tools"]
                .as_array()?
                .iter()
                .find_map(|inner| inner["name"].as_str().filter(|name| name.ends_with(suffix)))?;
            Some(ToolCall::new(inner, arguments).in_namespace(namespace))
        })
    });
    match namespaced {
        Some(call) => Reply::default().with_tool_call(call),
        // Claude Code connects MCP servers in the background: a request sent before the
        // bridge is up offers a tool that waits for it instead of the bridged tools.
        None if conv.tool_names().iter().any(|name| name == WAIT_FOR_MCP) => {
            Reply::tool_call(WAIT_FOR_MCP, "{}")
        }
        None => missing(conv, suffix),
    }
}

/// Claude Code's tool that waits for its MCP servers to connect.
const WAIT_FOR_MCP: &str = "WaitForMcpServers";

/// The script's step: the tool results of this turn, but for those of [`WAIT_FOR_MCP`].
pub(crate) fn script_step(conv: &Conversation<'_>) -> usize {
    conv.tool_results_in_turn()
        .saturating_sub(conv.calls_in_turn(WAIT_FOR_MCP))
}

/// A reply that says which tool the CLI did not offer the model (the test then fails on it).
fn missing(conv: &Conversation<'_>, suffix: &str) -> Reply {
    Reply::text(format!(
        "MISSING bridged tool *{suffix} among {:?} {}",
        conv.tool_names(),
        conv.body["tools"]
    ))
}

/// The model's script: `get_context`, then the run MCP tool, then a final answer that takes a
/// few seconds (the test looks at the running CLI and its bridge meanwhile).
fn bridged_calls(conv: &Conversation<'_>) -> Option<Reply> {
    if !conv.declares_tools() {
        // A side request of the CLI (a title, a summary): answered, not part of the script.
        return Some(Reply::text("ok"));
    }
    Some(match script_step(conv) {
        0 => call_bridged(conv, "get_context", "{}"),
        1 => call_bridged(conv, "mcp__docs__lookup", r#"{"key":"k1"}"#),
        _ => Reply::text("bridged calls done").delay(Duration::from_secs(6)),
    })
}

/// The processes of the run (its CLI and the CLI's children, the bridge among them): pid →
/// (command line, environment), each with NULs as spaces and newlines.
pub(crate) fn run_processes(run_id: &str) -> HashMap<i32, (String, String)> {
    let marker = format!("AGENT_RUNTIME_RUN_ID={run_id}");
    let mut found = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let read = |file: &str| std::fs::read(entry.path().join(file)).unwrap_or_default();
        let environ = String::from_utf8_lossy(&read("environ")).replace('\0', "\n");
        if environ.lines().any(|line| line == marker) {
            let cmdline = String::from_utf8_lossy(&read("cmdline")).replace('\0', " ");
            found.insert(pid, (cmdline, environ));
        }
    }
    found
}

/// The token the run's bridge process was given (its `AGENT_RUNTIME_SERVICE_TOKEN`).
fn bridge_token(processes: &HashMap<i32, (String, String)>) -> Option<String> {
    processes.values().find_map(|(cmdline, environ)| {
        if !cmdline.contains("mcp-bridge") {
            return None;
        }
        environ
            .lines()
            .find_map(|line| line.strip_prefix("AGENT_RUNTIME_SERVICE_TOKEN="))
            .map(str::to_string)
    })
}

/// The status of `method path` with `token` as the bearer.
async fn status_with(server: &Server, token: &str, method: &str, path: &str) -> u16 {
    let request = match method {
        // A tool no run has: past authentication the gateway refuses it (400), recording
        // nothing.
        "POST" => http_client()
            .post(server.url(path))
            .json(&json!({"tool_name": "no_such_tool", "input": {}})),
        _ => http_client().get(server.url(path)),
    };
    request
        .bearer_auth(token)
        .send()
        .await
        .expect("request")
        .status()
        .as_u16()
}

/// A native run of the same app, paused asking the user (another run the token must not open).
async fn other_run(server: &Server, mock: &MockProvider) -> String {
    mock.push(Reply::tool_call(
        "request_user_input",
        json!({"questions": [{"id": "q", "question": "?"}]}).to_string(),
    ));
    let agent = server
        .agent(
            "native-neighbour",
            json!({"allowed_tools": ["get_context", "request_user_input"]}),
        )
        .await;
    let run = server.start_run(mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    wait_for(server, &run_id, &["paused"]).await;
    run_id
}

/// Every record and event of the run, as one JSON text.
async fn everything_recorded(server: &Server, run_id: &str) -> String {
    let mut all = json!({"run": server.run(run_id).await});
    for what in ["events/history", "tool-calls", "messages", "interactions"] {
        all[what] = json!(server.list(run_id, what).await);
    }
    all.to_string()
}

/// What the token the run's bridge held can open while the run runs: its own run's tools (list
/// and call), and no other run's, no other route of its run.
async fn check_the_run_token(server: &Server, run_id: &str, other: &str, token: &str) {
    assert!(token.starts_with("art_run_"), "{token}");
    assert_ne!(token, TOKEN);
    let own = format!("/v1/runs/{run_id}/tools?app_id={APP}");
    assert_eq!(status_with(server, token, "GET", &own).await, 200);
    assert_eq!(status_with(server, token, "POST", &own).await, 400);
    let refused = [
        ("GET", format!("/v1/runs/{other}/tools?app_id={APP}")),
        ("POST", format!("/v1/runs/{other}/tools?app_id={APP}")),
        ("GET", format!("/v1/runs/{run_id}/tools?app_id=v2_app")),
        ("GET", format!("/v1/runs/{run_id}?app_id={APP}")),
        ("GET", format!("/v1/runs/{run_id}/tool-calls?app_id={APP}")),
        (
            "GET",
            format!("/v1/runs/{run_id}/events/history?app_id={APP}"),
        ),
        ("GET", format!("/internal/runs/{run_id}/tools?app_id={APP}")),
        ("GET", format!("/v1/runs?app_id={APP}")),
        ("GET", "/v1/capabilities".to_string()),
    ];
    for (method, path) in refused {
        assert_eq!(
            status_with(server, token, method, &path).await,
            401,
            "{method} {path}"
        );
    }
}

/// One CLI calls a host tool and a run MCP tool through its bridge.
async fn bridged_run(program: &str, kind: &str) {
    if !require_cli(program) {
        return;
    }
    let mcp = McpTestServer::start(McpTestOptions::default()).await;
    let mock = MockProvider::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = bridge_service(dir.path(), &mock, json!({})).await;
    let other = other_run(&server, &mock).await;
    mock.respond_with(bridged_calls);
    let agent = server
        .agent(
            &format!("{kind}-bridged"),
            json!({"runtime_kind": kind, "system_prompt": "You are terse.",
                   "allowed_tools": ["get_context"]}),
        )
        .await;
    let servers = json!([{
        "server_id": "docs-1", "server_name": "docs", "transport": "streamable_http",
        "url": mcp.url(), "tools": [{"name": "lookup", "access": "read"}]
    }]);
    let run = server
        .start_run(
            &mock,
            &agent,
            json!({"model": {"provider": "openai_compatible", "model": model_for(kind),
                   "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}},
                   "mcp_servers": servers}),
        )
        .await;
    let run_id = run["id"].as_str().expect("run id").to_string();

    // Both calls went through the gateway; the CLI now waits for its model's last answer.
    let rows = wait_for_value("both bridged calls", Duration::from_secs(180), || async {
        let rows = server.list(&run_id, "tool-calls").await;
        let status = server.run(&run_id).await["status"].clone();
        if status != "running" {
            let last = mock.model_requests().last().map(|r| r.body.clone());
            let input = last.as_ref().map(|b| b.get("input").or(b.get("messages")).cloned());
            panic!("the run stopped ({status}) before its bridged calls: {rows:?} {:?}\nlast model input: {input:?}",
                server.events(&run_id).await);
        }
        (rows.iter().any(|r| r["tool_name"] == "mcp__docs__lookup")).then_some(rows)
    })
    .await;
    let processes = run_processes(&run_id);
    let token = bridge_token(&processes)
        .unwrap_or_else(|| panic!("no bridge among the run's processes: {processes:?}"));
    for (pid, (cmdline, environ)) in &processes {
        assert!(
            !cmdline.contains(TOKEN) && !environ.contains(TOKEN),
            "process {pid} ({cmdline}) holds the service token"
        );
        if !cmdline.contains("mcp-bridge") {
            assert!(
                !environ.contains(&token),
                "the CLI's own environment holds the run token: {cmdline}"
            );
        }
    }
    check_the_run_token(&server, &run_id, &other, &token).await;

    let done = wait_for(&server, &run_id, &["completed", "failed"]).await;
    let events = server.events(&run_id).await;
    assert_eq!(done["status"], "completed", "{done} {events:?}");
    assert_eq!(mcp.calls(), ["lookup"], "the MCP server was called once");
    check_recorded_once(&server, &run_id, &rows).await;
    let recorded = everything_recorded(&server, &run_id).await;
    assert!(
        !recorded.contains(&token),
        "the run token reached the records"
    );
    let own = format!("/v1/runs/{run_id}/tools?app_id={APP}");
    assert_eq!(
        status_with(&server, &token, "GET", &own).await,
        401,
        "the token outlived the run"
    );
    let bridges = dir.path().join("data/cli-runs/.bridges").join(&run_id);
    assert!(
        !bridges.exists(),
        "the bridge's config files outlived the turn"
    );
}

/// Each bridged call is one ToolCall row, with its started, result and finished events, under
/// the gateway's name of the tool; the CLI's own report of it is not recorded again.
async fn check_recorded_once(server: &Server, run_id: &str, rows_while_running: &[Value]) {
    let rows = server.list(run_id, "tool-calls").await;
    let events = server.events(run_id).await;
    assert!(
        rows.iter().all(|row| !row["tool_name"]
            .as_str()
            .unwrap_or_default()
            .contains("agent_runtime")),
        "a bridged call was recorded again under the CLI's name: {rows:?}"
    );
    for (tool, output) in [
        ("get_context", "T-42"),
        ("mcp__docs__lookup", "value of k1"),
    ] {
        let matching: Vec<&Value> = rows.iter().filter(|r| r["tool_name"] == tool).collect();
        assert_eq!(matching.len(), 1, "{tool}: {rows:?}");
        let row = matching[0];
        assert!(row["output"].to_string().contains(output), "{row}");
        let id = row["id"].as_str().unwrap_or_default();
        for kind in [
            "tool_call_started",
            "tool_call_result",
            "tool_call_finished",
        ] {
            let count = events
                .iter()
                .filter(|e| e["type"] == kind && e["data"]["tool_call_id"] == id)
                .count();
            assert_eq!(count, 1, "{kind} of {tool} ({id}): {events:?}");
        }
        assert!(rows_while_running.iter().any(|r| r["id"] == row["id"]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn codex_calls_the_runs_tools_through_the_bridge() {
    bridged_run("codex", "codex").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claude_code_calls_the_runs_tools_through_the_bridge() {
    bridged_run("claude", "claude_code").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn opencode_calls_the_runs_tools_through_the_bridge() {
    bridged_run("opencode", "opencode").await;
}

/// A CLI run with no tools of the run to offer (its agent allows none, it has no MCP servers)
/// is given no bridge: its model is offered no tool of the `agent_runtime` server.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cli_run_without_tools_gets_no_bridge() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.set_fallback(Some(Reply::text("nothing to call")));
    let dir = tempfile::tempdir().expect("tempdir");
    let server = bridge_service(dir.path(), &mock, json!({})).await;
    let agent = server
        .agent("toolless", json!({"runtime_kind": "codex"}))
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    let done = wait_for(&server, &run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    let requests = mock.model_requests();
    assert!(!requests.is_empty());
    for request in requests {
        assert!(
            !request.body["tools"].to_string().contains("agent_runtime"),
            "a bridge was offered: {}",
            request.body["tools"]
        );
    }
}

/// A host command provider that records every command it executes.
async fn command_host() -> (String, Arc<Mutex<Vec<Value>>>) {
    use axum::routing::post;
    let executed = Arc::new(Mutex::new(Vec::new()));
    let seen = executed.clone();
    let app = axum::Router::new().route(
        "/execute",
        post(move |axum::Json(body): axum::Json<Value>| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(body);
                axum::Json(json!({"output": {"closed": true}}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, executed)
}

/// The model's script around a mutating tool: call it; once told approval is pending, end
/// the turn; in the next turn (told it was approved), call it again, then finish.
fn gated_calls(conv: &Conversation<'_>) -> Option<Reply> {
    if !conv.declares_tools() {
        return Some(Reply::text("ok"));
    }
    let body = conv.body.to_string();
    let approved = body.contains("A person approved your call of close_ticket");
    Some(match (approved, script_step(conv)) {
        (_, 0) => call_bridged(conv, "close_ticket", r#"{"ticket":"T-42"}"#),
        (false, _) => Reply::text("Waiting for approval of close_ticket."),
        (true, _) => Reply::text("Closed the ticket."),
    })
}

/// A CLI's call of a mutating tool under `approval_mode: mutating_tools` waits for a person:
/// nothing runs, the run pauses `human_approval` once the CLI ended its turn, and after the
/// approval the CLI's new turn makes the call again, which runs once.
async fn gated_run(program: &str, kind: &str) {
    if !require_cli(program) {
        return;
    }
    let (host, executed) = command_host().await;
    let mock = MockProvider::start().await;
    mock.respond_with(gated_calls);
    let dir = tempfile::tempdir().expect("tempdir");
    let commands = json!({"command_provider": {"transport": "http", "base_url": host, "commands": [
        {"name": "close_ticket", "description": "Close a ticket", "mutating": true,
         "risk_level": "sensitive_mutation",
         "input_schema": {"type": "object", "properties": {"ticket": {"type": "string"}}}}
    ]}});
    let server = bridge_service(dir.path(), &mock, commands).await;
    let agent = server
        .agent(
            &format!("{kind}-gated"),
            json!({"runtime_kind": kind, "approval_mode": "mutating_tools",
                   "allowed_tools": ["close_ticket"]}),
        )
        .await;
    let run = server
        .start_run(
            &mock,
            &agent,
            json!({"model": {"provider": "openai_compatible", "model": model_for(kind),
                   "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}}}),
        )
        .await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    let paused = wait_for(&server, &run_id, &["paused", "completed", "failed"]).await;
    let events = server.events(&run_id).await;
    assert_eq!(paused["status"], "paused", "{paused} {events:?}");
    assert_eq!(paused["pause_reason"], "human_approval", "{paused}");
    assert!(executed.lock().unwrap().is_empty(), "ran before approval");
    let answers: Vec<String> = events
        .iter()
        .filter(|e| e["type"] == "assistant_message_completed")
        .map(|e| {
            e["data"]["content"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert!(
        answers.iter().any(|a| a.contains("Waiting for approval")),
        "the CLI finished its turn: {answers:?}"
    );
    let gated = server.list(&run_id, "tool-calls").await;
    assert_eq!(gated.len(), 1, "{gated:?}");
    assert_eq!(gated[0]["approval_required"], true);

    let (status, body) = server
        .post(
            &format!("/v1/runs/{run_id}/approve?app_id={APP}"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let done = wait_for(&server, &run_id, &["completed", "failed", "paused"]).await;
    let events = server.events(&run_id).await;
    assert_eq!(done["status"], "completed", "{done} {events:?}");
    let executed = executed.lock().unwrap().clone();
    assert_eq!(executed.len(), 1, "ran once, after approval: {executed:?}");
    assert_eq!(executed[0]["command_name"], "close_ticket");
    // The replay settled the gated row: one row, with the call's output.
    let rows = server.list(&run_id, "tool-calls").await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["id"], gated[0]["id"]);
    assert!(rows[0]["output"].to_string().contains("closed"), "{rows:?}");
    let finished = events
        .iter()
        .filter(|e| e["type"] == "tool_call_finished" && e["data"]["tool_call_id"] == rows[0]["id"])
        .count();
    assert_eq!(finished, 1, "{events:?}");
    assert_eq!(
        done["approval_state"], "not_required",
        "the approval was used up"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn codex_waits_for_approval_of_a_bridged_mutation() {
    gated_run("codex", "codex").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claude_code_waits_for_approval_of_a_bridged_mutation() {
    gated_run("claude", "claude_code").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn opencode_waits_for_approval_of_a_bridged_mutation() {
    gated_run("opencode", "opencode").await;
}
