//! The native loop over Chat Completions: tool rounds, events, records, usage, credentials.

use ar_test_support::mock_provider::{AutoScript, MockProvider, Reply, Usage};
use serde_json::json;

use ar_test_support::service::*;

#[tokio::test]
async fn five_step_run_completes_with_contiguous_events_and_records() {
    let mock = MockProvider::start().await;
    mock.auto(AutoScript::five_step("get_context"));
    let server = TestServer::start(&mock).await;
    let agent = server
        .agent("five", json!({"allowed_tools": ["get_context"]}))
        .await;
    let run = server
        .start_run(&mock, &agent, json!({"host_run_id": "host-5"}))
        .await;
    assert_eq!(run["status"], "queued");
    assert_eq!(run["host_run_id"], "host-5");
    assert!(
        run.get("model_credential").is_none(),
        "credentials are never returned"
    );
    let run_id = run["id"].as_str().unwrap().to_string();
    let done = server.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["input"]["credential_source"], "app");
    assert_eq!(done["output_summary"]["usage_semantic"], "cumulative");
    assert_eq!(done["output_summary"]["usage"]["input_tokens"], 500);
    assert!(done["completed_at"].is_string() && done["started_at"].is_string());

    let events = server.events(&run_id).await;
    assert_contiguous(&events);
    let types = event_types(&events);
    assert_eq!(types.first().map(String::as_str), Some("run.queued"));
    assert_eq!(types.get(1).map(String::as_str), Some("run.started"));
    assert_eq!(types.last().map(String::as_str), Some("run.completed"));
    assert_eq!(
        types.iter().filter(|t| *t == "tool_call_started").count(),
        4
    );
    assert_eq!(
        types.iter().filter(|t| *t == "tool_call_finished").count(),
        4
    );
    assert!(
        types.iter().all(|t| !t.ends_with("_delta")),
        "deltas are never persisted: {types:?}"
    );
    for event in &events {
        assert_eq!(
            event["data"]["host_run_id"], "host-5",
            "host_run_id added to {event}"
        );
        assert_eq!(event["app_id"], APP);
    }
    let completed = events.last().unwrap();
    assert_eq!(completed["data"]["usage"]["total_tokens"], 600);

    let calls = server.list(&run_id, "tool-calls").await;
    assert_eq!(calls.len(), 4);
    assert!(calls
        .iter()
        .all(|call| call["tool_name"] == "get_context" && call["mutating"] == false));
    let messages = server.list(&run_id, "messages").await;
    let sequence: Vec<i64> = messages
        .iter()
        .map(|m| m["sequence_no"].as_i64().unwrap())
        .collect();
    assert_eq!(sequence, (1..=sequence.len() as i64).collect::<Vec<_>>());
    assert!(messages
        .iter()
        .any(|m| m["role"] == "assistant" && m["content"] == "All steps done."));

    // The run credential reached the model endpoint and nothing else.
    let requests = mock.model_requests();
    assert_eq!(requests.len(), 5);
    assert_eq!(
        requests[0].header("authorization"),
        Some(format!("Bearer {RUN_API_KEY}").as_str())
    );
    let body = serde_json::to_string(&server.run(&run_id).await).unwrap();
    assert!(!body.contains(RUN_API_KEY));
    let history = serde_json::to_string(&events).unwrap();
    assert!(!history.contains(RUN_API_KEY));
    server.stop().await;
}

#[tokio::test]
async fn update_plan_writes_an_artifact_and_event() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call(
        "update_plan",
        json!({"plan": [{"step": "look", "status": "in_progress"}], "explanation": "first"})
            .to_string(),
    ));
    mock.push(Reply::text("done").usage(Usage::new(10, 2)));
    let server = TestServer::start(&mock).await;
    let agent = server
        .agent("planner", json!({"allowed_tools": ["update_plan"]}))
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap();
    server.wait_status(run_id, &["completed"]).await;
    let artifacts = server.list(run_id, "artifacts").await;
    assert_eq!(artifacts.len(), 1);
    assert_eq!(artifacts[0]["artifact_type"], "run_plan");
    let events = server.events(run_id).await;
    let plan = events
        .iter()
        .find(|e| e["type"] == "plan_updated")
        .expect("plan_updated");
    assert_eq!(plan["data"]["plan"][0]["step"], "look");
    server.stop().await;
}

#[tokio::test]
async fn tools_outside_the_allowlist_are_refused_to_the_model() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call("delete_everything", "{}"));
    mock.push(Reply::text("ok"));
    let server = TestServer::start(&mock).await;
    let agent = server
        .agent("narrow", json!({"allowed_tools": ["get_context"]}))
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap();
    server.wait_status(run_id, &["completed"]).await;
    let second = &mock.model_requests()[1].body;
    let tool_message = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("tool result");
    assert!(
        tool_message["content"]
            .as_str()
            .unwrap()
            .contains("not available"),
        "{tool_message}"
    );
    server.stop().await;
}

#[tokio::test]
async fn provider_errors_fail_the_run_with_the_reason() {
    let mock = MockProvider::start().await;
    mock.push(Reply::error(400, "bad model"));
    let server = TestServer::start(&mock).await;
    let agent = server.agent("fails", json!({})).await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let done = server
        .wait_status(run["id"].as_str().unwrap(), &["failed"])
        .await;
    assert!(
        done["error_message"].as_str().unwrap().contains("400"),
        "{done}"
    );
    let events = server.events(done["id"].as_str().unwrap()).await;
    assert_eq!(events.last().unwrap()["type"], "run.failed");
    server.stop().await;
}

#[tokio::test]
async fn target_context_is_resolved_once_per_turn() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let app = axum::Router::new().route(
        "/context",
        axum::routing::post(move |headers: axum::http::HeaderMap, axum::Json(body): axum::Json<serde_json::Value>| {
            let counter = counter.clone();
            async move {
                let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                assert_eq!(headers["authorization"], "Bearer ctx-token");
                axum::Json(json!({"target": body["target"], "summary": format!("ticket summary v{n}"), "data": {}}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let context_url = format!("http://{}/context", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call(
        "request_user_input",
        json!({"questions": [{"id": "q", "question": "?"}]}).to_string(),
    ));
    mock.push(Reply::text("thanks"));
    let dir = tempfile::tempdir().unwrap();
    let mut env = env_for(&mock, &dir.path().join("ctx.db").display().to_string());
    let config = json!({"apps": [{
        "app_id": APP,
        "context_endpoint": context_url,
        "context_token": "ctx-token",
        "model_endpoints": [{"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key", "allow_http": true}]
    }]});
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), config.to_string());
    let server = TestServer::start_with(env).await;
    let agent = server
        .agent("ctx", json!({"allowed_tools": ["request_user_input"]}))
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    assert_eq!(
        run["input"]["context_summary"], "ticket summary v1",
        "resolved at admission"
    );
    let run_id = run["id"].as_str().unwrap();
    server.wait_status(run_id, &["paused"]).await;
    let (status, _) = server
        .post(
            &format!("/v1/runs/{run_id}/resume?app_id={APP}"),
            json!({"intent": "reply", "content": "x"}),
        )
        .await;
    assert_eq!(status, 200);
    let done = server.wait_status(run_id, &["completed"]).await;
    // Admission's answer serves the first turn; the resumed turn asks again.
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "admission + the second turn"
    );
    assert_eq!(done["input"]["context_summary"], "ticket summary v2");
    let first_system = mock.model_requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(first_system.contains("ticket summary v1"), "{first_system}");
    server.stop().await;
}

#[tokio::test]
async fn the_openai_provider_uses_the_global_key_when_the_run_brings_none() {
    let mock = MockProvider::start().await;
    mock.auto(AutoScript::new(1, "get_context", "global route works"));
    let dir = tempfile::tempdir().unwrap();
    let mut env = env_for(&mock, &dir.path().join("openai.db").display().to_string());
    env.insert("OPENAI_API_KEY".into(), "sk-global".into());
    env.insert("OPENAI_BASE_URL".into(), mock.base_url());
    let server = TestServer::start_with(env).await;
    let agent = server
        .agent(
            "openai",
            json!({"provider": "openai", "model": "gpt-test", "allowed_tools": ["get_context"]}),
        )
        .await;
    let body = json!({"app_id": APP, "agent_id": agent, "target": {"type": "ticket", "id": "1"}, "instructions": "go"});
    let (status, run) = server.post("/v1/runs", body).await;
    assert_eq!(status, 202, "{run}");
    assert_eq!(run["input"]["model"]["provider"], "openai");
    assert_eq!(run["input"]["model"]["model"], "gpt-test");
    assert!(run["input"].get("credential_source").is_none());
    let done = server
        .wait_status(run["id"].as_str().unwrap(), &["completed", "failed"])
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    let requests = mock.model_requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].path, "/v1/responses",
        "openai speaks the Responses API"
    );
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-global")
    );
    assert_eq!(requests[0].body["model"], "gpt-test");
    let (_, caps) = server.get("/v1/capabilities").await;
    let openai = caps["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "openai")
        .unwrap()
        .clone();
    assert_eq!(openai["configured"], true);
    assert_eq!(openai["base_url_overridden"], true);
    server.stop().await;
}
