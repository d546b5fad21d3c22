//! App MCP providers end to end: a host's `http` provider (the stand-in `ProviderHost`, shaped
//! like the Python SDK's provider router) configured with `startup_policy: required` holds
//! `/readyz` and refuses runs until its catalogue loads; then its tools reach the model under
//! `crm__…`, calls go through the approval gate to the host with the run's meta, and
//! app-health reports the provider.

use std::time::Duration;

use ar_test_support::mock_provider::{MockProvider, Reply};
use ar_test_support::provider_host::{tool, ProviderHost};
use ar_test_support::service::*;
use serde_json::{json, Value};

async fn provider_service(mock: &MockProvider, host: &ProviderHost) -> TestServer {
    let dir = tempfile::tempdir().expect("tempdir");
    let dsn = dir.path().join("runtime.db").display().to_string();
    let mut env = env_for(mock, &dsn);
    let provider = json!({
        "name": "crm",
        "url": host.url(),
        "token_env": "CRM_PROVIDER_TOKEN",
        "startup_policy": "required",
    });
    let apps = app_config(mock, json!({"mcp_providers": [provider]}));
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), apps.to_string());
    env.insert("CRM_PROVIDER_TOKEN".into(), "prov-secret-token".into());
    let mut server = TestServer::start_with(env).await;
    server.dir = Some(dir);
    server
}

fn provider_component(health: &Value) -> Value {
    health["components"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["kind"] == "mcp_provider"))
        .cloned()
        .unwrap_or_else(|| panic!("no mcp_provider component: {health}"))
}

#[tokio::test]
async fn a_required_http_provider_gates_readiness_then_serves_runs_through_the_gate() {
    let host = ProviderHost::start(
        Some("prov-secret-token"),
        vec![
            tool("search", "Search the CRM", false),
            tool("create_note", "Add a note to a deal", true),
        ],
    )
    .await;
    host.fail_next_lists(usize::MAX);
    let mock = MockProvider::start().await;
    let server = provider_service(&mock, &host).await;
    let agent = server
        .agent(
            "crm-agent",
            json!({"allowed_tools": ["crm__search", "crm__create_note"], "approval_mode": "mutating_tools"}),
        )
        .await;

    // 1. Not ready: /readyz says so, a run is refused with 503 and nothing is stored.
    let (status, body) = server.get("/readyz").await;
    assert_eq!((status, body), (503, json!({"status": "not_ready"})));
    let (status, body) = server.post("/v1/runs", start_body(&mock, &agent)).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["error"].as_str().unwrap_or_default().contains("crm"),
        "{body}"
    );
    assert_eq!(server.run_count().await, 0);
    let (_, health) = server.get(&format!("/v1/app-health?app_id={APP}")).await;
    let component = provider_component(&health);
    assert_eq!(component["status"], "error", "{component}");
    assert!(
        !health.to_string().contains("prov-secret-token"),
        "{health}"
    );

    // 2. The catalogue loads on a retry: ready.
    host.fail_next_lists(0);
    wait_for("readiness", Duration::from_secs(30), || async {
        let (status, _) = server.get("/readyz").await;
        (status == 200).then_some(())
    })
    .await;
    let (status, body) = server.get("/readyz").await;
    assert_eq!((status, body), (200, json!({"status": "ready"})));

    // 3. A run: the read tool runs, the write tool waits for approval.
    mock.push(Reply::tool_call("crm__search", r#"{"text":"acme"}"#));
    mock.push(Reply::tool_call(
        "crm__create_note",
        r#"{"text":"call back"}"#,
    ));
    mock.push(Reply::text("done"));
    let (status, run) = server.post("/v1/runs", start_body(&mock, &agent)).await;
    assert_eq!(status, 202, "{run}");
    let id = run["id"].as_str().unwrap().to_string();
    let paused = server.wait_status(&id, &["paused", "failed"]).await;
    assert_eq!(paused["pause_reason"], "human_approval", "{paused}");
    let offered = mock.model_requests()[0].body["tools"].to_string();
    assert!(
        offered.contains("crm__search") && offered.contains("crm__create_note"),
        "{offered}"
    );
    let calls = host.calls();
    assert_eq!(calls.len(), 1, "only the read tool ran: {calls:?}");
    assert_eq!(calls[0]["tool_name"], "search");
    assert_eq!(calls[0]["meta"]["run_id"], id.as_str());
    assert_eq!(calls[0]["meta"]["app_id"], APP);
    assert_eq!(calls[0]["meta"]["target"]["type"], "ticket");
    let rows = server.list(&id, "tool-calls").await;
    assert!(
        rows.iter()
            .any(|row| row["tool_name"] == "crm__search"
                && row["output"]["content"] == "search: acme"),
        "{rows:?}"
    );

    // 4. Approved: the write tool reaches the host and the run completes.
    let (status, body) = server
        .post(&format!("/v1/runs/{id}/approve?app_id={APP}"), json!({}))
        .await;
    assert!(status < 300, "{status} {body}");
    let done = server.wait_status(&id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    let calls = host.calls();
    assert_eq!(
        calls.last().unwrap()["tool_name"],
        "create_note",
        "{calls:?}"
    );
    let events = event_types(&server.events(&id).await);
    assert!(
        events.iter().any(|e| e == "tool_call_finished"),
        "{events:?}"
    );

    // 5. App health reports the provider.
    let (status, health) = server.get(&format!("/v1/app-health?app_id={APP}")).await;
    assert_eq!(status, 200, "{health}");
    let component = provider_component(&health);
    assert_eq!(component["name"], "crm");
    assert_eq!(component["transport"], "http");
    assert_eq!(component["status"], "ok", "{component}");
    assert_eq!(component["tool_count"], 2);
    assert_eq!(component["auth_configured"], true);
    server.stop().await;
}

fn start_body(mock: &MockProvider, agent: &str) -> Value {
    json!({
        "app_id": APP,
        "agent_id": agent,
        "target": {"type": "ticket", "id": "T-1"},
        "instructions": "Look the customer up and note the call.",
        "model": {"provider": "openai_compatible", "model": "mock-model",
                  "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}},
        "model_credential": {"type": "api_key", "api_key": RUN_API_KEY},
    })
}

/// The MCP transports of providers: the reference server-everything as a stdio process the
/// runtime starts, and the authenticating rmcp test server over streamable HTTP with the
/// provider's token; both catalogues reach the model and their tools run.
#[tokio::test]
async fn stdio_and_streamable_http_providers_serve_runs() {
    use ar_test_support::mcp_everything::ServerEverything;
    use ar_test_support::mcp_server::{McpTestOptions, McpTestServer};
    let Some(entry) = ServerEverything::required_entry_point() else {
        return;
    };
    let rmcp_server = McpTestServer::start(McpTestOptions::with_token("stream-token")).await;
    let mock = MockProvider::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let dsn = dir.path().join("runtime.db").display().to_string();
    let mut env = env_for(&mock, &dsn);
    let providers = json!([
        {"name": "everything", "transport": "stdio", "command": "node",
         "args": [entry.display().to_string(), "stdio"], "allowed_tools": ["echo", "get-sum"],
         "startup_policy": "required"},
        {"name": "lookups", "transport": "streamable_http", "url": rmcp_server.url(),
         "token": "stream-token", "startup_policy": "required"},
    ]);
    let apps = app_config(&mock, json!({"mcp_providers": providers}));
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), apps.to_string());
    let mut server = TestServer::start_with(env).await;
    server.dir = Some(dir);
    wait_for("readiness", Duration::from_secs(30), || async {
        (server.get("/readyz").await.0 == 200).then_some(())
    })
    .await;
    let agent = server
        .agent(
            "mcp-providers",
            json!({"allowed_tools": ["everything__echo", "everything__get-sum", "lookups__lookup"]}),
        )
        .await;
    mock.push(Reply::tool_call("everything__echo", r#"{"message":"hi"}"#));
    mock.push(Reply::tool_call("lookups__lookup", r#"{"key":"k1"}"#));
    mock.push(Reply::text("done"));
    let run = server.start_run(&mock, &agent, json!({})).await;
    let id = run["id"].as_str().unwrap().to_string();
    let done = server
        .wait_status(&id, &["completed", "failed", "paused"])
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    let offered = mock.model_requests()[0].body["tools"].to_string();
    for name in ["everything__echo", "everything__get-sum", "lookups__lookup"] {
        assert!(offered.contains(name), "{name} not offered: {offered}");
    }
    assert!(
        !offered.contains("everything__add"),
        "allowed_tools filter: {offered}"
    );
    let rows = server.list(&id, "tool-calls").await;
    let output = |name: &str| {
        rows.iter()
            .find(|row| row["tool_name"] == name)
            .map(|row| row["output"]["content"].to_string())
            .unwrap_or_else(|| panic!("no {name} call: {rows:?}"))
    };
    assert!(output("everything__echo").contains("Echo: hi"), "{rows:?}");
    assert!(
        output("lookups__lookup").contains("value of k1"),
        "{rows:?}"
    );
    assert_eq!(rmcp_server.calls(), ["lookup"]);
    let (_, health) = server.get(&format!("/v1/app-health?app_id={APP}")).await;
    let statuses: Vec<(String, String)> = health["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "mcp_provider")
        .map(|c| {
            (
                c["name"].as_str().unwrap().into(),
                c["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("everything".to_string(), "ok".to_string()),
            ("lookups".into(), "ok".into())
        ]
    );
    server.stop().await;
}
