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
        (Method::POST, "/v1/agents".into(), Some(format!(r#"{{"app_id": "host_app", "name": "{big}"}}"#)), 400),
        (Method::POST, "/v1/agents".into(), Some(r#"{"app_id": "host_app", "name": ""}"#.into()), 400),
        (Method::POST, "/v1/runs".into(), Some("[]".into()), 400),
        (Method::POST, "/v1/runs".into(), Some(format!(r#"{{"app_id": "host_app", "agent_id": "stable", "instructions": "{big}"}}"#)), 400),
        (Method::POST, "/v1/runs".into(), Some(r#"{"app_id": "host_app", "agent_id": "stable", "target": {"type": "t", "id": "1"}, "mode": "sideways"}"#.into()), 400),
        (Method::POST, "/v1/runs".into(), Some(r#"{"app_id": "host_app", "agent_id": "stable", "target": {"type": "t", "id": "1"}} trailing"#.into()), 400),
        (Method::GET, "/v1/runs".into(), None, 400),
        (Method::GET, format!("/v1/runs/{run_id}"), None, 400),
        (Method::GET, format!("/v1/runs/{run_id}?app_id=other_app"), None, 404),
        (Method::GET, "/v1/runs/run%0Aevil?app_id=host_app".into(), None, 400),
        (Method::GET, "/v1/runs/does-not-exist?app_id=host_app".into(), None, 404),
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

/// Everything a write could change: the app's agents and runs (with their versions' traces,
/// `updated_at` and status) and every record of `run_id`.
async fn everything(server: &TestServer, run_id: &str) -> Value {
    let (_, agents) = server.get(&format!("/v1/agents?app_id={APP}")).await;
    let (_, runs) = server.get(&format!("/v1/runs?app_id={APP}")).await;
    let mut records = serde_json::Map::new();
    for what in [
        "events/history",
        "messages",
        "artifacts",
        "interactions",
        "tool-calls",
    ] {
        records.insert(what.into(), Value::Array(server.list(run_id, what).await));
    }
    json!({"agents": agents, "runs": runs, "records": records})
}

/// Bodies of the wrong JSON type, at the top or in a field, on every route that takes a body
/// (or takes none): each is a 400 naming the problem, and a paused run that each of these
/// routes could change stays exactly as it was.
#[tokio::test]
async fn bodies_of_the_wrong_json_type_are_400s_on_every_write_route() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call(
        "request_approval",
        json!({"title": "Ship it?"}).to_string(),
    ));
    mock.push(Reply::text("changed"));
    let server = TestServer::start(&mock).await;
    let agent = server
        .agent(
            "typed",
            json!({"allowed_tools": ["request_approval", "get_context"]}),
        )
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap().to_string();
    server.wait_status(&run_id, &["paused"]).await;
    let before = everything(&server, &run_id).await;

    let run_path = |action: &str| format!("/v1/runs/{run_id}/{action}?app_id={APP}");
    let top_level = [r#"[]"#, r#"["x", "y"]"#, r#""text""#, "7", "true", "null"];
    let mut cases: Vec<(Method, String, String)> = Vec::new();
    let routes = [
        (Method::POST, "/v1/agents".to_string()),
        (Method::PUT, format!("/v1/agents/{agent}?app_id={APP}")),
        (Method::POST, "/v1/runs".to_string()),
        (Method::POST, run_path("messages")),
        (Method::POST, run_path("artifacts")),
        (Method::POST, run_path("tools")),
        (Method::POST, run_path("resume")),
        (Method::POST, run_path("approve")),
        (Method::POST, run_path("request-changes")),
        (Method::POST, run_path("cancel")),
        (Method::POST, run_path("pause")),
        (Method::PUT, run_path("model-credential")),
        (Method::PUT, run_path("mcp-servers/srv/credential")),
        (Method::POST, run_path("codex-auth/device-code/start")),
        (Method::POST, run_path("codex-auth/device-code/cancel")),
    ];
    for (method, path) in &routes {
        for body in top_level {
            cases.push((method.clone(), path.clone(), body.to_string()));
        }
    }
    // The fuzzer's findings, and a wrong type in a field of each body.
    let start = |field: &str, value: &str| {
        format!(
            r#"{{"app_id": "{APP}", "agent_id": "{agent}", "target": {{"type": "ticket", "id": "T-1"}}, "{field}": {value}}}"#
        )
    };
    let nested: Vec<(Method, String, String)> = vec![
        (
            Method::POST,
            run_path("request-changes"),
            r#"["change it", "u1"]"#.into(),
        ),
        (
            Method::POST,
            run_path("request-changes"),
            r#"{"content": ["change it"]}"#.into(),
        ),
        (
            Method::POST,
            run_path("messages"),
            r#"["user", "hello"]"#.into(),
        ),
        (
            Method::POST,
            run_path("messages"),
            r#"{"role": "user", "content": {"text": "hello"}}"#.into(),
        ),
        (
            Method::POST,
            run_path("artifacts"),
            r#"["note", "text", "inline", "x"]"#.into(),
        ),
        (
            Method::POST,
            run_path("artifacts"),
            r#"{"artifact_type": ["note"]}"#.into(),
        ),
        (
            Method::POST,
            run_path("tools"),
            r#"["get_context", {}]"#.into(),
        ),
        (
            Method::POST,
            run_path("tools"),
            r#"{"tool_name": "get_context", "input": "str"}"#.into(),
        ),
        (
            Method::POST,
            run_path("tools"),
            r#"{"tool_name": "get_context", "input": ["a"]}"#.into(),
        ),
        (Method::POST, run_path("resume"), r#"["approve"]"#.into()),
        (
            Method::POST,
            run_path("resume"),
            r#"{"intent": "approve", "turn_policy": ["chat"]}"#.into(),
        ),
        (
            Method::POST,
            run_path("resume"),
            r#"{"intent": "reply", "content": 5}"#.into(),
        ),
        (
            Method::POST,
            run_path("approve"),
            r#"{"external_actor_id": ["u1"]}"#.into(),
        ),
        (
            Method::PUT,
            run_path("model-credential"),
            r#"{"credential": ["api_key", "k"]}"#.into(),
        ),
        (
            Method::PUT,
            run_path("mcp-servers/srv/credential"),
            r#"{"credential": ["bearer_token", "t"]}"#.into(),
        ),
        (
            Method::POST,
            "/v1/agents".into(),
            format!(r#"{{"app_id": "{APP}", "name": "x", "skills": [["approval_protocol"]]}}"#),
        ),
        (
            Method::POST,
            "/v1/agents".into(),
            format!(r#"{{"app_id": "{APP}", "name": "x", "allowed_tools": "get_context"}}"#),
        ),
        (
            Method::PUT,
            format!("/v1/agents/{agent}?app_id={APP}"),
            r#"{"name": ["renamed"]}"#.into(),
        ),
        (
            Method::POST,
            "/v1/runs".into(),
            start("target", r#"["ticket", "T-1"]"#),
        ),
        (
            Method::POST,
            "/v1/runs".into(),
            start("turn_policy", r#"["chat"]"#),
        ),
        (
            Method::POST,
            "/v1/runs".into(),
            start("model", r#"["openai", "gpt"]"#),
        ),
        (
            Method::POST,
            "/v1/runs".into(),
            start("mcp_servers", r#"[["s", "n"]]"#),
        ),
        (
            Method::POST,
            "/v1/runs".into(),
            start("metadata", r#"["k"]"#),
        ),
    ];
    cases.extend(nested);
    for (method, path, body) in cases {
        let (status, answer) = server
            .send_raw(method.clone(), &path, Some(body.clone()))
            .await;
        assert_eq!(status, 400, "{method} {path} {body}: {answer}");
        let message = answer["error"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "{method} {path} {body}: {answer}");
    }
    // A body that is an array never reads as a request: the message says what was wrong.
    let (_, answer) = server
        .send_raw(
            Method::POST,
            &run_path("request-changes"),
            Some("[]".into()),
        )
        .await;
    let message = answer["error"].as_str().unwrap();
    assert!(
        message == "invalid request body"
            && answer["detail"]
                .as_str()
                .unwrap_or_default()
                .starts_with("invalid type: sequence, expected a JSON object"),
        "{answer}"
    );
    let (_, answer) = server
        .send_raw(
            Method::POST,
            &run_path("tools"),
            Some(r#"{"tool_name": "get_context", "input": "str"}"#.into()),
        )
        .await;
    assert!(
        answer["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("input: must be a JSON object"),
        "{answer}"
    );

    let after = everything(&server, &run_id).await;
    assert_eq!(before, after, "a refused body changed something");
    assert_eq!(server.run(&run_id).await["status"], "paused");
    // The routes themselves work: the same run still takes a well-formed request.
    let (status, changed) = server
        .post(
            &run_path("request-changes"),
            json!({"content": "change it"}),
        )
        .await;
    assert_eq!(status, 200, "{changed}");
    assert_eq!(changed["approval_state"], "rejected");
    server.stop().await;
}
