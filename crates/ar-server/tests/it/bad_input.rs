//! A corpus of bad requests: each gets a 4xx with a clear `{"error"}` and changes nothing.

use ar_test_support::mock_provider::{MockProvider, Reply};
use reqwest::Method;
use serde_json::{json, Value};

use ar_test_support::service::*;

async fn snapshot(server: &TestServer, run_id: &str) -> Value {
    let (_, agents) = server.get(&format!("/v1/agents?app_id={APP}")).await;
    let (_, runs) = server.get(&format!("/v1/runs?app_id={APP}")).await;
    let events = server.events(run_id).await;
    let messages = server.list(run_id, "messages").await;
    let interactions = server.list(run_id, "interactions").await;
    json!({"agents": agents, "runs": runs, "events": events, "messages": messages, "interactions": interactions})
}

#[tokio::test]
async fn bad_requests_get_clear_4xx_and_change_nothing() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("done"));
    let server = TestServer::start(&mock).await;
    let agent = server.agent("stable", json!({})).await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap().to_string();
    server.wait_status(&run_id, &["completed"]).await;
    let before = snapshot(&server, &run_id).await;

    let big = "x".repeat(2 * 1024 * 1024);
    let raw: Vec<(Method, String, Option<String>, u16)> = vec![
        (Method::POST, "/v1/agents".into(), Some("{not json".into()), 400),
        (Method::POST, "/v1/agents".into(), Some(r#"{"app_id": 5, "name": "x"}"#.into()), 400),
        (Method::POST, "/v1/agents".into(), Some(r#"{"name": "no app"}"#.into()), 400),
        (Method::POST, "/v1/agents".into(), Some(r#"{"app_id": "host_app", "name": "x", "approval_mode": "sometimes"}"#.into()), 400),
        (Method::POST, "/v1/agents".into(), Some(r#"{"app_id": "host_app", "name": "x", "runtime_kind": "gpt"}"#.into()), 400),
        (Method::POST, "/v1/agents".into(), Some(format!(r#"{{"app_id": "host_app", "name": "{big}"}}"#)), 413),
        (Method::POST, "/v1/agents".into(), Some(r#"{"app_id": "host_app", "name": ""}"#.into()), 400),
        (Method::POST, "/v1/runs".into(), Some("[]".into()), 400),
        (Method::POST, "/v1/runs".into(), Some(format!(r#"{{"app_id": "host_app", "agent_id": "stable", "instructions": "{big}"}}"#)), 413),
        (Method::POST, "/v1/runs".into(), Some(r#"{"app_id": "host_app", "agent_id": "stable", "target": {"type": "t", "id": "1"}, "mode": "sideways"}"#.into()), 400),
        (Method::POST, "/v1/runs".into(), Some(r#"{"app_id": "host_app", "agent_id": "stable", "target": {"type": "t", "id": "1"}} trailing"#.into()), 400),
        (Method::GET, "/v1/runs".into(), None, 400),
        (Method::GET, format!("/v1/runs/{run_id}"), None, 400),
        (Method::GET, format!("/v1/runs/{run_id}?app_id=other_app"), None, 404),
        (Method::GET, "/v1/runs/run%0Aevil?app_id=host_app".into(), None, 400),
        (Method::GET, "/v1/runs/does-not-exist?app_id=host_app".into(), None, 404),
        (Method::GET, "/v1/runs/search?app_id=host_app&limit=abc".into(), None, 400),
        (Method::GET, "/v1/runs/search?app_id=host_app&status=sleeping".into(), None, 400),
        (Method::POST, format!("/v1/runs/{run_id}/resume?app_id=host_app"), Some(r#"{"intent": "reply", "content": "hi"}"#.into()), 400),
        (Method::POST, format!("/v1/runs/{run_id}/resume?app_id=host_app"), Some(r#"{"intent": "dance"}"#.into()), 400),
        (Method::POST, format!("/v1/runs/{run_id}/resume?app_id=host_app"), Some(r#"{"intent": "reply", "message_provenance": "human"}"#.into()), 400),
        (Method::POST, format!("/v1/runs/{run_id}/resume?app_id=host_app"), Some(r#"{"intent": 7}"#.into()), 400),
        (Method::POST, format!("/v1/runs/{run_id}/approve?app_id=host_app"), None, 400),
        (Method::POST, format!("/v1/runs/{run_id}/approve?app_id=host_app"), None, 400),
        (Method::POST, format!("/v1/runs/{run_id}/pause?app_id=host_app"), None, 400),
        (Method::POST, format!("/v1/runs/{run_id}/messages?app_id=host_app"), Some(r#"{"content": "   "}"#.into()), 400),
        (Method::POST, format!("/v1/runs/{run_id}/messages?app_id=host_app"), Some(r#"{"content": "x", "role": "robot"}"#.into()), 400),
        (Method::POST, format!("/v1/runs/{run_id}/artifacts?app_id=host_app"), Some(r#"{"inline_content": "x"}"#.into()), 400),
        (Method::POST, format!("/v1/runs/{run_id}/tools?app_id=host_app"), Some(r#"{"tool_name": "get_context"}"#.into()), 400),
        (Method::GET, format!("/v1/runs/{run_id}/tools?app_id=host_app"), None, 400),
        (Method::PUT, format!("/v1/runs/{run_id}/model-credential?app_id=host_app"), Some(r#"{"credential": {"type": "api_key", "api_key": "k"}}"#.into()), 400),
        (Method::POST, format!("/v1/runs/{run_id}/codex-auth/device-code/start?app_id=host_app"), None, 400),
        (Method::DELETE, "/v1/agents/stable?app_id=host_app".into(), None, 405),
        (Method::GET, "/v1/nothing-here".into(), None, 404),
        (Method::GET, format!("/v2/runs/{run_id}/events?app_id=host_app"), None, 404),
    ];
    for (method, path, body, expected) in raw {
        let mut request = server
            .client
            .request(method.clone(), server.url(&path))
            .bearer_auth(TOKEN);
        if let Some(body) = body.clone() {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap_or_default().to_string());
        let text = response.text().await.unwrap_or_default();
        assert_eq!(status, expected, "{method} {path}: {text}");
        assert_eq!(
            content_type.as_deref(),
            Some("application/json"),
            "{method} {path}"
        );
        let parsed: Value = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("{method} {path}: not JSON: {text}"));
        let message = parsed["error"].as_str().unwrap_or_default();
        assert!(
            !message.is_empty(),
            "{method} {path}: no error message: {text}"
        );
        assert!(!message.contains("panicked"), "{method} {path}: {message}");
    }
    let after = snapshot(&server, &run_id).await;
    assert_eq!(before, after, "bad requests changed state");
    server.stop().await;
}
