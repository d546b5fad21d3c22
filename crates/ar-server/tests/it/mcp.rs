//! Run-scoped MCP servers over HTTP: admission's rules (400 naming the field, nothing stored),
//! the host_run_id lookup before them, and the credential rotation route.

use ar_test_support::mock_provider::{MockProvider, Reply};
use serde_json::{json, Value};

use ar_test_support::service::*;

/// A service with run MCP configured (a credential key; plain HTTP and loopback allowed so the
/// tests' own servers are reachable).
async fn mcp_service(mock: &MockProvider) -> TestServer {
    let dir = tempfile::tempdir().expect("tempdir");
    let dsn = dir.path().join("runtime.db").display().to_string();
    let mut env = env_for(mock, &dsn);
    env.insert(
        "AGENT_RUNTIME_MCP_CREDENTIAL_ENCRYPTION_KEY".into(),
        CREDENTIAL_KEY.into(),
    );
    env.insert("AGENT_RUNTIME_MCP_ALLOW_HTTP".into(), "true".into());
    env.insert(
        "AGENT_RUNTIME_MCP_ALLOW_PRIVATE_NETWORKS".into(),
        "true".into(),
    );
    let mut server = TestServer::start_with(env).await;
    server.dir = Some(dir);
    server
}

fn valid_server() -> Value {
    json!({
        "server_id": "docs-1",
        "server_name": "docs",
        "transport": "streamable_http",
        "url": "https://mcp.example.com/mcp",
        "tools": [{"name": "search", "access": "read"}],
        "credential": {"type": "bearer_token", "access_token": "mcp-secret-token"}
    })
}

fn with(mut base: Value, path: &[&str], value: Value) -> Value {
    let mut at = &mut base;
    for key in &path[..path.len() - 1] {
        at = &mut at[*key];
    }
    at[path[path.len() - 1]] = value;
    base
}

fn start_body(mock: &MockProvider, agent: &str, servers: Value) -> Value {
    json!({
        "app_id": APP,
        "agent_id": agent,
        "target": {"type": "ticket", "id": "T-1"},
        "instructions": "Use the docs.",
        "model": {"provider": "openai_compatible", "model": "mock-model",
                  "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}},
        "model_credential": {"type": "api_key", "api_key": RUN_API_KEY},
        "mcp_servers": servers
    })
}

#[tokio::test]
async fn every_admission_rule_is_a_400_naming_the_field_and_stores_nothing() {
    let mock = MockProvider::start().await;
    let server = mcp_service(&mock).await;
    let agent = server.agent("mcp-agent", json!({})).await;
    let cases: Vec<(Value, &str)> = vec![
        (
            json!([with(valid_server(), &["server_id"], json!(""))]),
            "mcp_servers[0].server_id",
        ),
        (
            json!([with(valid_server(), &["server_name"], json!("a b"))]),
            "mcp_servers[0].server_name",
        ),
        (
            json!([with(valid_server(), &["transport"], json!("stdio"))]),
            "mcp_servers[0].transport",
        ),
        (
            json!([with(valid_server(), &["url"], json!("ftp://x/"))]),
            "mcp_servers[0].url",
        ),
        (
            json!([with(
                valid_server(),
                &["url"],
                json!("https://u:p@x.example/")
            )]),
            "user info",
        ),
        (
            json!([with(
                valid_server(),
                &["url"],
                json!("https://x.example/?a=1")
            )]),
            "query",
        ),
        (
            json!([with(valid_server(), &["tools"], json!([]))]),
            "mcp_servers[0].tools",
        ),
        (
            json!([with(
                valid_server(),
                &["tools"],
                json!([{"name": "-x", "access": "read"}])
            )]),
            "tools[0].name",
        ),
        (
            json!([with(
                valid_server(),
                &["tools"],
                json!([{"name": "x", "access": "all"}])
            )]),
            "tools[0].access",
        ),
        (
            json!([with(
                valid_server(),
                &["credential", "type"],
                json!("oauth")
            )]),
            "credential.type",
        ),
        (
            json!([with(
                valid_server(),
                &["credential", "expires_at"],
                json!("2001-01-01T00:00:00Z")
            )]),
            "credential.expires_at",
        ),
        (
            json!([with(
                valid_server(),
                &["credential"],
                json!({"type": "headers", "headers": {"Mcp-Session-Id": "x"}})
            )]),
            "may not be set",
        ),
        (
            json!([valid_server(), valid_server()]),
            "duplicate server_id",
        ),
        (
            json!((0..17)
                .map(|i| with(
                    with(valid_server(), &["server_id"], json!(format!("s{i}"))),
                    &["server_name"],
                    json!(format!("n{i}"))
                ))
                .collect::<Vec<_>>()),
            "at most 16",
        ),
        // Strict decoding: an unknown field or an array where an object belongs.
        (json!([with(valid_server(), &["extra"], json!(1))]), "extra"),
        (json!([["docs-1", "docs"]]), "mcp_servers"),
    ];
    for (servers, wanted) in cases {
        let (status, body) = server
            .post("/v1/runs", start_body(&mock, &agent, servers.clone()))
            .await;
        assert_eq!(status, 400, "{servers} -> {body}");
        let message = body.to_string();
        assert!(
            message.contains(wanted),
            "{servers}: {message} should name {wanted}"
        );
        assert!(
            !message.contains("mcp-secret-token"),
            "the secret is echoed: {message}"
        );
    }
    assert_eq!(server.run_count().await, 0, "a refused run was stored");
    server.stop().await;
}

#[tokio::test]
async fn a_retried_start_returns_the_existing_run_before_checking_servers() {
    let mock = MockProvider::start().await;
    let server = mcp_service(&mock).await;
    let agent = server.agent("mcp-agent", json!({})).await;
    let mut first = start_body(&mock, &agent, json!([]));
    first["host_run_id"] = json!("host-1");
    first.as_object_mut().unwrap().remove("mcp_servers");
    let (status, run) = server.post("/v1/runs", first.clone()).await;
    assert_eq!(status, 202, "{run}");
    let mut retry = first;
    retry["mcp_servers"] = json!([with(valid_server(), &["transport"], json!("stdio"))]);
    let (status, again) = server.post("/v1/runs", retry).await;
    assert!(status < 300, "{status} {again}");
    assert_eq!(again["id"], run["id"]);
    server.stop().await;
}

#[tokio::test]
async fn rotating_a_credential_needs_an_attached_server_and_never_echoes_it() {
    let mock = MockProvider::start().await;
    let server = mcp_service(&mock).await;
    let agent = server.agent("mcp-agent", json!({})).await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let id = run["id"].as_str().unwrap();
    let (status, body) = server
        .put(
            &format!("/v1/runs/{id}/mcp-servers/ghost/credential?app_id={APP}"),
            json!({"credential": {"type": "bearer_token", "access_token": "new-secret"}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.to_string().contains("run MCP server not found"),
        "{body}"
    );
    assert!(!body.to_string().contains("new-secret"));
    server.stop().await;
}

#[tokio::test]
async fn capabilities_report_run_mcp_when_a_key_is_set() {
    let mock = MockProvider::start().await;
    let server = mcp_service(&mock).await;
    let (status, caps) = server.get("/v1/capabilities").await;
    assert_eq!(status, 200, "{caps}");
    assert_eq!(caps["run_mcp"]["supported"], true);
    assert_eq!(caps["run_mcp"]["credential_encryption_configured"], true);
    assert_eq!(caps["run_mcp"]["transports"], json!(["streamable_http"]));
    assert_eq!(caps["run_mcp"]["max_servers_per_run"], 16);
    assert_eq!(caps["run_mcp"]["max_tools_per_server"], 128);
    assert_eq!(caps["run_mcp"]["allow_http"], true);
    assert_eq!(caps["run_mcp"]["allow_private_networks"], true);
    server.stop().await;
}

/// A run attaching `url` as server `server_name` with `tools`, and optionally a bearer token.
fn attach(server_name: &str, url: &str, tools: Value, token: Option<&str>) -> Value {
    let mut server = json!({
        "server_id": format!("{server_name}-1"),
        "server_name": server_name,
        "transport": "streamable_http",
        "url": url,
        "tools": tools
    });
    if let Some(token) = token {
        server["credential"] = json!({"type": "bearer_token", "access_token": token});
    }
    json!({ "mcp_servers": [server] })
}

fn tool_rows<'a>(rows: &'a [Value], name: &str) -> Vec<&'a Value> {
    rows.iter().filter(|row| row["tool_name"] == name).collect()
}

/// `@modelcontextprotocol/server-everything` (a real MCP server from npm) through a run: a
/// read tool runs at once, a write tool waits for approval, and the run tool gateway lists
/// and calls the server's tools while the run is paused.
#[tokio::test]
async fn server_everything_tools_run_through_the_gate_and_the_gateway() {
    let Some(everything) = ar_test_support::mcp_everything::ServerEverything::start().await else {
        return;
    };
    let mock = MockProvider::start().await;
    let server = mcp_service(&mock).await;
    let agent = server
        .agent("mcp-agent", json!({"approval_mode": "mutating_tools"}))
        .await;
    mock.push(Reply::tool_call(
        "mcp__everything__echo",
        r#"{"message":"hi"}"#,
    ));
    mock.push(Reply::tool_call(
        "mcp__everything__get-sum",
        r#"{"a":2,"b":3}"#,
    ));
    mock.push(Reply::text("done"));
    let tools = json!([{"name": "echo", "access": "read"}, {"name": "get-sum", "access": "write"}]);
    let run = server
        .start_run(
            &mock,
            &agent,
            attach("everything", &everything.url(), tools, None),
        )
        .await;
    let id = run["id"].as_str().unwrap();
    let paused = server.wait_status(id, &["paused", "failed"]).await;
    assert_eq!(paused["pause_reason"], "human_approval", "{paused}");
    // The model saw the server's tools under their aliases, with the server's schemas.
    let offered = &mock.model_requests()[0].body["tools"];
    let names: Vec<&str> = offered
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["function"]["name"].as_str())
        .collect();
    assert!(names.contains(&"mcp__everything__echo"), "{names:?}");
    let calls = server.list(id, "tool-calls").await;
    let echo = tool_rows(&calls, "mcp__everything__echo");
    assert_eq!(echo.len(), 1, "{calls:?}");
    assert_eq!(echo[0]["output"]["content"], "Echo: hi", "{calls:?}");
    // The gateway lists the aliases and calls a read tool through the server.
    let (status, listed) = server
        .get(&format!("/v1/runs/{id}/tools?app_id={APP}"))
        .await;
    assert_eq!(status, 200, "{listed}");
    assert!(
        listed.to_string().contains("mcp__everything__get-sum"),
        "{listed}"
    );
    let (status, called) = server
        .post(
            &format!("/v1/runs/{id}/tools?app_id={APP}"),
            json!({"tool_name": "mcp__everything__echo", "input": {"message": "gw"}}),
        )
        .await;
    assert_eq!(status, 200, "{called}");
    assert!(called.to_string().contains("Echo: gw"), "{called}");
    // The write tool ran only after approval.
    let (status, body) = server
        .post(&format!("/v1/runs/{id}/approve?app_id={APP}"), json!({}))
        .await;
    assert!(status < 300, "{status} {body}");
    let done = server.wait_status(id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    let calls = server.list(id, "tool-calls").await;
    let sum = tool_rows(&calls, "mcp__everything__get-sum");
    assert!(
        sum.iter()
            .any(|row| row["output"]["content"].to_string().contains('5')),
        "{calls:?}"
    );
    server.stop().await;
}

/// A server that refuses the credential pauses the run for authentication; a rotated
/// credential and `auth_completed` continue it, and a call refused mid-run is retried once
/// the credential is rotated again.
#[tokio::test]
async fn a_refused_credential_pauses_and_a_rotated_one_resumes_with_the_call_retried() {
    use ar_test_support::mcp_server::{McpTestOptions, McpTestServer};
    let mcp = McpTestServer::start(McpTestOptions::with_token("tok-1")).await;
    let mock = MockProvider::start().await;
    let server = mcp_service(&mock).await;
    let agent = server.agent("mcp-agent", json!({})).await;
    let tools = json!([{"name": "lookup", "access": "read"}]);
    let run = server
        .start_run(
            &mock,
            &agent,
            attach("auth", &mcp.url(), tools, Some("tok-0")),
        )
        .await;
    let id = run["id"].as_str().unwrap();
    // 1. The tool list is refused before any model call.
    let paused = server.wait_status(id, &["paused", "failed"]).await;
    assert_eq!(paused["pause_reason"], "authentication", "{paused}");
    assert_eq!(
        mock.request_count(),
        0,
        "no model call without the server's tools"
    );
    let interactions = server.list(id, "interactions").await;
    let auth = interactions
        .iter()
        .find(|i| i["interaction_kind"] == "authentication")
        .unwrap_or_else(|| panic!("{interactions:?}"));
    assert_eq!(auth["request_payload"]["provider"], "mcp", "{auth}");
    assert_eq!(auth["request_payload"]["server_id"], "auth-1", "{auth}");
    let events = server.events(id).await;
    let paused_event = events
        .iter()
        .rev()
        .find(|e| e["type"] == "run.paused")
        .unwrap();
    assert_eq!(
        paused_event["data"]["authentication"]["server_name"], "auth",
        "{paused_event}"
    );
    // 2. Rotate and resume; the model's call is refused because the server moved on.
    let rotate = |token: &'static str| {
        let server = &server;
        async move {
            server
                .put(
                    &format!("/v1/runs/{id}/mcp-servers/auth-1/credential?app_id={APP}"),
                    json!({"credential": {"type": "bearer_token", "access_token": token}}),
                )
                .await
        }
    };
    let (status, rotated) = rotate("tok-1").await;
    assert_eq!(status, 200, "{rotated}");
    assert_eq!(
        (rotated["run_id"].as_str(), rotated["server_id"].as_str()),
        (Some(id), Some("auth-1"))
    );
    assert!(!rotated.to_string().contains("tok-1"), "{rotated}");
    mock.push(
        Reply::tool_call("mcp__auth__lookup", r#"{"key":"k1"}"#)
            .delay(std::time::Duration::from_millis(400)),
    );
    mock.push(Reply::text("found it"));
    let (status, body) = server
        .post(
            &format!("/v1/runs/{id}/resume?app_id={APP}"),
            json!({"intent": "auth_completed"}),
        )
        .await;
    assert!(status < 300, "{status} {body}");
    wait_for("the resumed turn to list tools", WAIT, || async {
        (mcp.initializations() >= 1 && mock.request_count() >= 1).then_some(())
    })
    .await;
    mcp.set_token(Some("tok-2"));
    let paused = server
        .wait_status(id, &["paused", "failed", "completed"])
        .await;
    assert_eq!(paused["pause_reason"], "authentication", "{paused}");
    assert!(
        mcp.calls().is_empty(),
        "the refused call did not run: {:?}",
        mcp.calls()
    );
    // 3. Rotate again: the call runs once, and the run completes.
    let (status, _) = rotate("tok-2").await;
    assert_eq!(status, 200);
    let (status, body) = server
        .post(
            &format!("/v1/runs/{id}/resume?app_id={APP}"),
            json!({"intent": "auth_completed"}),
        )
        .await;
    assert!(status < 300, "{status} {body}");
    let done = server.wait_status(id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(mcp.calls(), ["lookup"]);
    let events = server.events(id).await;
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "run.mcp_credential_updated")
            .count(),
        2
    );
    let all = serde_json::to_string(&events).unwrap();
    assert!(
        !all.contains("tok-1") && !all.contains("tok-2"),
        "a token reached the events"
    );
    server.stop().await;
}

/// A granted tool the server does not advertise fails the run when it starts executing; a
/// 10 MB tool result reaches the model cut, and the run goes on.
#[tokio::test]
async fn unadvertised_tools_fail_the_run_and_huge_results_are_cut() {
    use ar_test_support::mcp_server::{McpTestOptions, McpTestServer, Misbehaviour, TEN_MB};
    let mcp = McpTestServer::start(McpTestOptions::default()).await;
    let mock = MockProvider::start().await;
    let server = mcp_service(&mock).await;
    let agent = server.agent("mcp-agent", json!({})).await;
    let missing =
        json!([{"name": "lookup", "access": "read"}, {"name": "ghost", "access": "read"}]);
    let run = server
        .start_run(&mock, &agent, attach("auth", &mcp.url(), missing, None))
        .await;
    let failed = server
        .wait_status(run["id"].as_str().unwrap(), &["failed", "completed"])
        .await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["error_message"]
            .as_str()
            .unwrap_or_default()
            .contains("does not advertise tool \"ghost\""),
        "{failed}"
    );
    mcp.set_misbehaviour(Misbehaviour::HugeText(TEN_MB));
    mock.push(Reply::tool_call("mcp__auth__lookup", r#"{"key":"k"}"#));
    mock.push(Reply::text("read it"));
    let tools = json!([{"name": "lookup", "access": "read"}]);
    let run = server
        .start_run(&mock, &agent, attach("auth", &mcp.url(), tools, None))
        .await;
    let done = server
        .wait_status(run["id"].as_str().unwrap(), &["failed", "completed"])
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    let second = &mock.model_requests()[1].body;
    let sent = second.to_string();
    assert!(
        sent.len() < 2 * 1024 * 1024,
        "the transcript grew to {} bytes",
        sent.len()
    );
    assert!(
        sent.contains("output cut"),
        "no cut marker in what the model saw"
    );
    server.stop().await;
}

/// An agent CLI sees a run's MCP servers through its MCP bridge, which only the real binary
/// offers (it starts itself as the bridge; agent-runtime's e2e tests run CLI runs with MCP
/// servers through it). A service built without one, as here, would start the CLI without the
/// run's servers, so such a run is refused, not started without them.
#[tokio::test]
async fn cli_runs_without_a_bridge_refuse_run_scoped_servers() {
    let mock = MockProvider::start().await;
    let server = mcp_service(&mock).await;
    let (_, caps) = server.get("/v1/capabilities").await;
    if !caps["runtime_kinds"].to_string().contains("codex") {
        assert!(
            std::env::var("CI").is_err(),
            "codex is missing under CI=true"
        );
        eprintln!(
            "!!!!!! SKIPPING: codex is not installed (run .ci/steps/install-agent-clis.sh) !!!!!!"
        );
        return;
    }
    let agent = server
        .agent("cli-agent", json!({"runtime_kind": "codex"}))
        .await;
    let (status, body) = server
        .post(
            "/v1/runs",
            start_body(&mock, &agent, json!([valid_server()])),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.to_string().contains(
            "cannot use run-scoped MCP servers on this runtime (its agent CLIs get no MCP bridge"
        ),
        "{body}"
    );
    assert_eq!(server.run_count().await, 0);
    server.stop().await;
}

/// A server that echoes the run's MCP credential back puts no trace of it in the run's
/// records or events: the credential is one of the secrets the run holds.
#[tokio::test]
async fn an_echoed_credential_is_scrubbed_from_the_records() {
    use ar_test_support::mcp_server::{McpTestOptions, McpTestServer};
    const SECRET: &str = "tok-echo-5ecret-77";
    let mcp = McpTestServer::start(McpTestOptions::with_token(SECRET)).await;
    let mock = MockProvider::start().await;
    let server = mcp_service(&mock).await;
    let agent = server.agent("mcp-agent", json!({})).await;
    mock.push(Reply::tool_call(
        "mcp__auth__lookup",
        format!(r#"{{"key":"{SECRET}"}}"#),
    ));
    mock.push(Reply::text("done"));
    let tools = json!([{"name": "lookup", "access": "read"}]);
    let run = server
        .start_run(
            &mock,
            &agent,
            attach("auth", &mcp.url(), tools, Some(SECRET)),
        )
        .await;
    let id = run["id"].as_str().unwrap();
    let done = server.wait_status(id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(mcp.calls(), ["lookup"]);
    for what in ["events/history", "tool-calls", "messages"] {
        let rows = serde_json::to_string(&server.list(id, what).await).unwrap();
        assert!(
            !rows.contains(SECRET),
            "{what} holds the credential: {rows}"
        );
    }
    server.stop().await;
}
