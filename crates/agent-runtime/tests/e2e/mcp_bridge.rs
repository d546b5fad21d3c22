//! `agent-runtime mcp-bridge` against the real service (in this process): the built binary is
//! spoken to over its stdin and stdout in both stdio framings, and its tool calls go through
//! the run tool gateway, gated and recorded like native calls.

use std::process::Stdio;
use std::time::Duration;

use ar_test_support::mock_provider::{MockProvider, Reply};
use ar_test_support::service::{env_for, TestServer, APP, TOKEN, WAIT};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::BIN;

/// A bridge process and its two pipes.
struct Bridge {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Bridge {
    fn start(server: &TestServer, run_id: &str) -> Bridge {
        let mut child = tokio::process::Command::new(BIN)
            .arg("mcp-bridge")
            .env_clear()
            .env("AGENT_RUNTIME_API_BASE_URL", server.url(""))
            .env("AGENT_RUNTIME_APP_ID", APP)
            .env("AGENT_RUNTIME_RUN_ID", run_id)
            .env("AGENT_RUNTIME_SERVICE_TOKEN", TOKEN)
            .env("AGENT_RUNTIME_MCP_BRIDGE_HTTP_TIMEOUT_SECONDS", "20")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn the bridge");
        Bridge {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// Sends `message` as one line and reads one line back.
    async fn line(&mut self, message: &str) -> Value {
        self.send_raw(format!("{message}\n").as_bytes()).await;
        let mut line = String::new();
        bounded(self.stdout.read_line(&mut line)).await.unwrap();
        assert!(line.ends_with('\n'), "one answer per line: {line:?}");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    /// Sends `message` with a `Content-Length` header and reads one framed answer back.
    async fn framed(&mut self, message: &Value) -> Value {
        let body = message.to_string();
        let frame = format!("Content-Length: {}\r\n\r\n{body}", body.len());
        self.send_raw(frame.as_bytes()).await;
        let mut length = None;
        loop {
            let mut header = String::new();
            bounded(self.stdout.read_line(&mut header)).await.unwrap();
            let header = header.trim();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').expect("a header");
            assert!(name.eq_ignore_ascii_case("content-length"), "{header}");
            length = Some(value.trim().parse::<usize>().unwrap());
        }
        let mut body = vec![0; length.expect("Content-Length")];
        bounded(self.stdout.read_exact(&mut body)).await.unwrap();
        serde_json::from_slice(&body).unwrap()
    }

    /// Ends the session (stdin closed) and checks the bridge exits cleanly.
    async fn finish(mut self) {
        drop(self.stdin);
        let status = bounded(self.child.wait()).await.unwrap();
        assert!(status.success(), "{status}");
    }
}

async fn bounded<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .expect("the bridge answered in time")
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A run of an agent with `settings` that pauses on its first step (it asks the user).
async fn paused_run(
    server: &TestServer,
    mock: &MockProvider,
    agent: &str,
    settings: Value,
) -> String {
    mock.push(Reply::tool_call(
        "request_user_input",
        json!({"questions": [{"id": "q", "question": "?"}]}).to_string(),
    ));
    let agent = server.agent(agent, settings).await;
    let run = server.start_run(mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap().to_owned();
    server.wait_status(&run_id, &["paused"]).await;
    run_id
}

#[tokio::test]
async fn the_bridge_serves_a_runs_tools_over_stdio_in_both_framings() {
    let mock = MockProvider::start().await;
    let server = TestServer::start(&mock).await;
    let settings = json!({"approval_mode": "mutating_tools",
        "allowed_tools": ["get_context", "request_user_input"]});
    let run_id = paused_run(&server, &mock, "bridged", settings).await;
    let mut bridge = Bridge::start(&server, &run_id);

    let init = request(
        1,
        "initialize",
        json!({"protocolVersion": "2024-11-05",
        "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
    );
    let init = bridge.line(&init.to_string()).await;
    assert_eq!(init["id"], 1);
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05");
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init}"
    );
    // A notification gets no answer: the next line read is the next request's.
    bridge
        .send_raw(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await;

    let listed = bridge
        .line(&request(2, "tools/list", json!({})).to_string())
        .await;
    let tools = listed["result"]["tools"].as_array().expect("tools");
    let context = tools
        .iter()
        .find(|tool| tool["name"] == "get_context")
        .unwrap_or_else(|| panic!("get_context listed: {listed}"));
    assert!(context["inputSchema"].is_object(), "{context}");
    assert!(context["description"].is_string(), "{context}");

    let called = bridge
        .framed(&request(
            3,
            "tools/call",
            json!({"name": "get_context", "arguments": {}}),
        ))
        .await;
    assert_eq!(called["id"], 3);
    let text = called["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("T-42"), "{called}");
    assert_eq!(called["result"]["content"][0]["type"], "text");
    assert!(called["result"].get("isError").is_none(), "{called}");

    let unknown = bridge
        .framed(&request(4, "tools/call", json!({"name": "drop_database"})))
        .await;
    assert_eq!(unknown["error"]["code"], -32000, "{unknown}");
    assert!(unknown["error"]["message"]
        .as_str()
        .unwrap()
        .contains("drop_database"));

    let framed_list = bridge.framed(&request(5, "tools/list", json!({}))).await;
    assert_eq!(framed_list["result"], listed["result"]);

    let malformed = bridge.line("this is not json").await;
    assert_eq!(malformed["error"]["code"], -32700, "{malformed}");
    assert_eq!(malformed["id"], Value::Null);
    let no_method = bridge
        .line(&request(6, "resources/list", json!({})).to_string())
        .await;
    assert_eq!(no_method["error"]["code"], -32601, "{no_method}");
    assert_eq!(no_method["id"], 6);
    let no_name = bridge
        .line(&request(7, "tools/call", json!({})).to_string())
        .await;
    assert_eq!(no_name["error"]["code"], -32602, "{no_name}");
    bridge.finish().await;

    let (status, records) = server
        .get(&format!("/v1/runs/{run_id}/tool-calls?app_id={APP}"))
        .await;
    assert_eq!(status, 200, "{records}");
    let recorded = records.as_array().unwrap();
    assert!(
        recorded
            .iter()
            .any(|call| call["tool_name"] == "get_context"),
        "the bridged call is recorded: {records}"
    );
    server.stop().await;
}

/// A service whose app offers the mutating host command `close_ticket` (never reached here:
/// the gate stops the call first).
async fn server_with_a_mutating_tool(mock: &MockProvider) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut env = env_for(mock, &dir.path().join("bridge.db").display().to_string());
    let config = json!({"apps": [{
        "app_id": APP,
        "model_endpoints": [{"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key", "allow_http": true}],
        "command_provider": {"transport": "http", "base_url": "http://127.0.0.1:9", "commands": [
            {"name": "close_ticket", "description": "Close a ticket", "mutating": true,
             "risk_level": "sensitive_mutation", "input_schema": {"type": "object"}}
        ]}
    }]});
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), config.to_string());
    (TestServer::start_with(env).await, dir)
}

#[tokio::test]
async fn a_gated_call_tells_the_agent_that_approval_is_pending() {
    let mock = MockProvider::start().await;
    let (server, _dir) = server_with_a_mutating_tool(&mock).await;
    let settings = json!({"approval_mode": "mutating_tools",
        "allowed_tools": ["close_ticket", "request_user_input"]});
    let run_id = paused_run(&server, &mock, "gated", settings).await;
    let mut bridge = Bridge::start(&server, &run_id);
    let call = request(
        1,
        "tools/call",
        json!({"name": "close_ticket", "arguments": {}}),
    );
    let called = bridge.line(&call.to_string()).await;
    let text = called["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with("Approval pending"), "{called}");
    assert!(called["result"].get("isError").is_none(), "{called}");
    bridge.finish().await;
    let (_, interactions) = server
        .get(&format!("/v1/runs/{run_id}/interactions?app_id={APP}"))
        .await;
    assert!(
        interactions
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["interaction_kind"] == "approval_request"),
        "{interactions}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_missing_setting_is_named_and_fails() {
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new(BIN)
            .arg("mcp-bridge")
            .env_clear()
            .env("AGENT_RUNTIME_API_BASE_URL", "http://127.0.0.1:9")
            .env("AGENT_RUNTIME_APP_ID", APP)
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("AGENT_RUNTIME_RUN_ID is required"),
        "{stderr}"
    );
}
