//! Host command tools through the approval gate: a mutating command waits for approval, runs
//! exactly once after it, and the approval is consumed; routine mutations pass under
//! `risk_based`. A provider configured as for the original (no `commands`) offers the
//! original's catalogue, each tool executed under its command name.

use std::sync::{Arc, Mutex};

use ar_test_support::mock_provider::{MockProvider, Reply};
use serde_json::{json, Value};

use ar_test_support::service::*;

/// A host command provider recording every `/execute` call.
async fn command_provider() -> (String, Arc<Mutex<Vec<Value>>>) {
    let calls: Arc<Mutex<Vec<Value>>> = Arc::default();
    let seen = calls.clone();
    let app = axum::Router::new().route(
        "/execute",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, axum::Json(body): axum::Json<Value>| {
                let seen = seen.clone();
                async move {
                    assert_eq!(headers["authorization"], "Bearer cmd-token");
                    seen.lock().unwrap().push(body.clone());
                    axum::Json(json!({"output": {"done": body["command_name"]}}))
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, calls)
}

async fn server_with_commands(
    mock: &MockProvider,
    provider_url: &str,
) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut env = env_for(mock, &dir.path().join("tools.db").display().to_string());
    let config = json!({"apps": [{
        "app_id": APP,
        "model_endpoints": [{"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key", "allow_http": true}],
        "command_provider": {"transport": "http", "base_url": provider_url, "token": "cmd-token", "commands": [
            {"name": "close_ticket", "description": "Close a ticket", "mutating": true, "risk_level": "sensitive_mutation",
             "input_schema": {"type": "object", "properties": {"reason": {"type": "string"}}}},
            {"name": "tag_ticket", "description": "Tag a ticket", "mutating": true, "risk_level": "routine_mutation",
             "input_schema": {"type": "object"}}
        ]}
    }]});
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), config.to_string());
    (TestServer::start_with(env).await, dir)
}

/// A service whose app's command provider is configured as for the original: no `commands`.
async fn server_with_original_catalogue(
    mock: &MockProvider,
    provider_url: &str,
) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut env = env_for(mock, &dir.path().join("tools.db").display().to_string());
    let config = json!({"apps": [{
        "app_id": APP,
        "model_endpoints": [{"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key", "allow_http": true}],
        "command_provider": {"transport": "http", "base_url": provider_url, "token": "cmd-token"}
    }]});
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), config.to_string());
    (TestServer::start_with(env).await, dir)
}

#[tokio::test]
async fn the_original_catalogue_runs_routine_commands_and_gates_sensitive_ones_under_risk_based() {
    let (provider_url, calls) = command_provider().await;
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call(
        "create_task",
        json!({"name": "Call back", "team_id": "team-1"}).to_string(),
    ));
    mock.push(Reply::tool_call(
        "send_support_reply",
        json!({"content": "Hi", "reply_kind": "conversational", "confidence": 0.9}).to_string(),
    ));
    let (server, _dir) = server_with_original_catalogue(&mock, &provider_url).await;
    let agent = server
        .agent(
            "pm",
            json!({"approval_mode": "risk_based", "allowed_tools": ["create_task", "send_support_reply"]}),
        )
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap();
    let paused = server.wait_status(run_id, &["paused"]).await;
    assert_eq!(paused["pause_reason"], "human_approval");

    let offered = &mock.model_requests()[0].body["tools"];
    let create = offered
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t.to_string().contains("\"create_task\""))
        .unwrap_or_else(|| panic!("create_task offered: {offered}"));
    assert!(create.to_string().contains("team_id"), "{create}");

    let executed = calls.lock().unwrap().clone();
    assert_eq!(executed.len(), 1, "the routine call ran: {executed:?}");
    assert_eq!(executed[0]["command_name"], "pm.create_task");
    assert_eq!(executed[0]["input"]["team_id"], "team-1");
    assert_eq!(executed[0]["meta"]["app_id"], APP);
    assert_eq!(executed[0]["meta"]["run_id"], run_id);
    assert_eq!(executed[0]["meta"]["target_type"], "ticket");
    assert_eq!(executed[0]["meta"]["target_id"], "T-42");

    let interaction = server.list(run_id, "interactions").await[0].clone();
    assert_eq!(
        interaction["request_payload"]["tool_name"],
        "send_support_reply"
    );
    assert_eq!(
        interaction["request_payload"]["risk_level"],
        "sensitive_mutation"
    );
    mock.push(Reply::text("sent"));
    let (status, body) = server
        .post(
            &format!("/v1/runs/{run_id}/approve?app_id={APP}"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let done = server.wait_status(run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    let executed = calls.lock().unwrap().clone();
    assert_eq!(executed.len(), 2, "{executed:?}");
    assert_eq!(executed[1]["command_name"], "support.send_reply");
    server.stop().await;
}

#[tokio::test]
async fn a_mutating_host_command_waits_for_approval_and_runs_once() {
    let (provider_url, calls) = command_provider().await;
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call(
        "close_ticket",
        json!({"reason": "fixed"}).to_string(),
    ));
    mock.push(Reply::text("closed"));
    let (server, _dir) = server_with_commands(&mock, &provider_url).await;
    let agent = server
        .agent(
            "closer",
            json!({"approval_mode": "mutating_tools", "allowed_tools": ["close_ticket"]}),
        )
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap();
    let paused = server.wait_status(run_id, &["paused"]).await;
    assert_eq!(paused["pause_reason"], "human_approval");
    assert!(
        calls.lock().unwrap().is_empty(),
        "nothing ran before approval"
    );
    let interaction = server.list(run_id, "interactions").await[0].clone();
    assert_eq!(interaction["request_payload"]["tool_name"], "close_ticket");
    assert_eq!(
        interaction["request_payload"]["risk_level"],
        "sensitive_mutation"
    );
    let gated = server.list(run_id, "tool-calls").await;
    assert_eq!(gated.len(), 1);
    assert_eq!(gated[0]["approval_required"], true);

    let (status, body) = server
        .post(
            &format!("/v1/runs/{run_id}/approve?app_id={APP}"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let done = server.wait_status(run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["approval_state"], "not_required",
        "the approval was single-use"
    );
    let executed = calls.lock().unwrap().clone();
    assert_eq!(executed.len(), 1, "ran exactly once: {executed:?}");
    assert_eq!(executed[0]["command_name"], "close_ticket");
    assert_eq!(executed[0]["input"]["reason"], "fixed");
    assert_eq!(executed[0]["meta"]["run_id"], run_id);
    assert_eq!(executed[0]["meta"]["target_type"], "ticket");
    let rows = server.list(run_id, "tool-calls").await;
    assert_eq!(rows.len(), 1, "the gated row is completed in place");
    assert!(
        rows[0]["output"].to_string().contains("close_ticket"),
        "{rows:?}"
    );
    let second = &mock.model_requests()[1].body;
    let result = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert!(
        result["content"].as_str().unwrap().contains("close_ticket"),
        "{result}"
    );
    server.stop().await;
}

#[tokio::test]
async fn risk_based_lets_routine_mutations_through_and_gates_sensitive_ones() {
    let (provider_url, calls) = command_provider().await;
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call("tag_ticket", "{}"));
    mock.push(Reply::tool_call("close_ticket", "{}"));
    let (server, _dir) = server_with_commands(&mock, &provider_url).await;
    let agent = server
        .agent(
            "risky",
            json!({"approval_mode": "risk_based", "allowed_tools": ["close_ticket", "tag_ticket"]}),
        )
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap();
    let paused = server.wait_status(run_id, &["paused"]).await;
    assert_eq!(paused["pause_reason"], "human_approval");
    let executed: Vec<Value> = calls.lock().unwrap().clone();
    assert_eq!(executed.len(), 1);
    assert_eq!(executed[0]["command_name"], "tag_ticket");
    mock.push(Reply::text("ok"));
    let (status, _) = server
        .post(
            &format!("/v1/runs/{run_id}/request-changes?app_id={APP}"),
            json!({"content": "do not close"}),
        )
        .await;
    assert_eq!(status, 200);
    server.wait_status(run_id, &["completed"]).await;
    assert_eq!(
        calls.lock().unwrap().len(),
        1,
        "the rejected mutation never ran"
    );
    server.stop().await;
}

#[tokio::test]
async fn the_run_tool_gateway_lists_and_calls_tools_through_the_same_gate() {
    let (provider_url, calls) = command_provider().await;
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call(
        "request_user_input",
        json!({"questions": [{"id": "q", "question": "?"}]}).to_string(),
    ));
    let (server, _dir) = server_with_commands(&mock, &provider_url).await;
    let agent = server
        .agent(
            "gateway",
            json!({"approval_mode": "mutating_tools", "allowed_tools": ["get_context", "close_ticket", "request_user_input"]}),
        )
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap();
    server.wait_status(run_id, &["paused"]).await;
    let (status, tools) = server
        .get(&format!("/v1/runs/{run_id}/tools?app_id={APP}"))
        .await;
    assert_eq!(status, 200, "{tools}");
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"get_context") && names.contains(&"close_ticket"),
        "{names:?}"
    );
    let (status, result) = server
        .post(
            &format!("/v1/runs/{run_id}/tools?app_id={APP}"),
            json!({"tool_name": "get_context", "input": {}}),
        )
        .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["content"][0]["type"], "text");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("T-42"),
        "{result}"
    );
    let (status, gated) = server
        .post(
            &format!("/v1/runs/{run_id}/tools?app_id={APP}"),
            json!({"tool_name": "close_ticket", "input": {"reason": "x"}}),
        )
        .await;
    assert_eq!(status, 200, "{gated}");
    assert_eq!(gated["approval_required"], true);
    assert!(gated["interaction_id"]
        .as_str()
        .unwrap()
        .starts_with("int_"));
    assert!(calls.lock().unwrap().is_empty(), "gated call did not run");
    let (status, unknown) = server
        .post(
            &format!("/v1/runs/{run_id}/tools?app_id={APP}"),
            json!({"tool_name": "drop_database"}),
        )
        .await;
    assert_eq!(status, 400, "{unknown}");
    server.stop().await;
}

/// A web server on loopback with one HTML page.
async fn web_page() -> String {
    let app = axum::Router::new().route(
        "/page",
        axum::routing::get(|| async {
            axum::response::Html(
                "<html><body><h1>Release notes</h1><p>Version 2 &amp; more</p></body></html>",
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/page", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// The content of the tool result the model was sent in its second request.
fn tool_result_seen(mock: &MockProvider) -> String {
    let second = &mock.model_requests()[1].body;
    let result = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap_or_else(|| panic!("a tool result in {second}"));
    result["content"].as_str().unwrap().to_string()
}

async fn run_fetch(extra_env: &[(&str, &str)]) -> String {
    let url = web_page().await;
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call(
        "fetch_url",
        json!({"url": url}).to_string(),
    ));
    mock.push(Reply::text("read it"));
    let dir = tempfile::tempdir().unwrap();
    let mut env = env_for(&mock, &dir.path().join("fetch.db").display().to_string());
    for (key, value) in extra_env {
        env.insert(key.to_string(), value.to_string());
    }
    let server = TestServer::start_with(env).await;
    let agent = server
        .agent("reader", json!({"allowed_tools": ["fetch_url"]}))
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap();
    let done = server.wait_status(run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    let seen = tool_result_seen(&mock);
    server.stop().await;
    seen
}

#[tokio::test]
async fn fetch_url_refuses_loopback_and_plain_http_by_default() {
    let seen = run_fetch(&[]).await;
    assert!(
        seen.contains("refused") && seen.contains("plain http"),
        "{seen}"
    );
    let seen = run_fetch(&[("AGENT_RUNTIME_MCP_ALLOW_HTTP", "true")]).await;
    assert!(
        seen.contains("refused") && seen.contains("loopback"),
        "{seen}"
    );
}

#[tokio::test]
async fn fetch_url_reads_a_page_where_the_deployment_allows_it() {
    let seen = run_fetch(&[
        ("AGENT_RUNTIME_MCP_ALLOW_HTTP", "true"),
        ("AGENT_RUNTIME_MCP_ALLOW_PRIVATE_NETWORKS", "true"),
    ])
    .await;
    assert!(seen.contains("Release notes\nVersion 2 & more"), "{seen}");
}
