//! NUL characters (`\u0000`) in every string of every write body, in keys of free-form maps, in
//! query parameters and in paths, on SQLite and on PostgreSQL (which refuses NULs in text and
//! jsonb): each request is answered 2xx or 4xx, never 5xx, and everything reads back.

use ar_test_support::mock_provider::{MockProvider, Reply};
use reqwest::Method;
use serde_json::{json, Value};

use ar_test_support::service::*;

/// JSON pointers of every string in `value`, and of every object key (as `(object, key)`).
fn strings(value: &Value, pointer: &str, out: &mut Vec<(String, Option<String>)>) {
    match value {
        Value::String(_) => out.push((pointer.to_string(), None)),
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                strings(item, &format!("{pointer}/{index}"), out);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                out.push((pointer.to_string(), Some(key.clone())));
                strings(item, &format!("{pointer}/{key}"), out);
            }
        }
        _ => {}
    }
}

/// One copy of `body` per string and per key, with a NUL in that one place (so every other
/// field stays valid and the NUL gets as far as it can).
fn with_one_nul(body: &Value) -> Vec<Value> {
    let mut places = Vec::new();
    strings(body, "", &mut places);
    places
        .into_iter()
        .map(|(pointer, key)| {
            let mut copy = body.clone();
            let target = copy.pointer_mut(&pointer).expect("pointer");
            match key {
                None => {
                    let text = target.as_str().unwrap_or_default();
                    *target = Value::String(format!("{text}\u{0}x"));
                }
                Some(key) => {
                    let map = target.as_object_mut().expect("object");
                    let item = map.remove(&key).unwrap_or(Value::Null);
                    map.insert(format!("{key}\u{0}"), item);
                }
            }
            copy
        })
        .collect()
}

async fn never_5xx(server: &TestServer, method: Method, path: &str, body: Option<Value>) -> u16 {
    let (status, answer) = server.send(method.clone(), path, body.clone()).await;
    assert!(
        status < 500,
        "{method} {path} {}: {status} {answer}",
        body.map(|b| b.to_string()).unwrap_or_default()
    );
    status
}

/// Every read of the app answers below 500 (stored NULs would break PostgreSQL reads too).
async fn everything_reads_back(server: &TestServer, run_ids: &[String]) {
    for path in [
        format!("/v1/agents?app_id={APP}"),
        format!("/v1/runs?app_id={APP}"),
        format!("/v1/runs/search?app_id={APP}&q=x"),
    ] {
        let (status, answer) = server.get(&path).await;
        assert_eq!(status, 200, "{path}: {answer}");
    }
    for run_id in run_ids {
        for what in [
            "",
            "/events/history",
            "/messages",
            "/artifacts",
            "/interactions",
            "/tool-calls",
            "/execution",
        ] {
            let path = format!("/v1/runs/{run_id}{what}?app_id={APP}");
            let (status, answer) = server.get(&path).await;
            assert_eq!(status, 200, "{path}: {answer}");
        }
    }
}

async fn nul_everywhere(server: &TestServer, mock: &MockProvider) {
    // Every run pauses for approval after each model call, so runs stay resumable.
    mock.set_fallback(Some(Reply::tool_call(
        "request_approval",
        json!({"title": "Go on?"}).to_string(),
    )));
    let agent = json!({
        "app_id": APP, "name": "nul agent", "runtime_kind": "native_sdk", "provider": "openai_compatible",
        "model": "mock-model", "system_prompt": "You help.", "skills": [{"key": "k", "version": "1", "config": {"a": "b"}}],
        "allowed_tools": ["request_approval", "get_context"], "allowed_targets": ["ticket"],
        "approval_mode": "never", "default_invocation_mode": "autonomous", "execution_config": {"note": "x"}
    });
    for body in with_one_nul(&agent) {
        never_5xx(server, Method::POST, "/v1/agents", Some(body.clone())).await;
        never_5xx(
            server,
            Method::PUT,
            &format!("/v1/agents/nul_agent?app_id={APP}"),
            Some(body),
        )
        .await;
    }
    let agent_id = server
        .agent(
            "nul_base",
            json!({"allowed_tools": ["request_approval", "get_context"]}),
        )
        .await;
    let start = json!({
        "app_id": APP, "host_run_id": "host-1", "agent_id": agent_id,
        "target": {"type": "ticket", "id": "T-1", "display": {"title": "t", "url": "https://x.test/t"}, "metadata": {"k": "v"}},
        "instructions": "Do it.", "allowed_tools": ["get_context", "request_approval"], "external_actor_id": "user-1",
        "mode": "autonomous", "trigger": {"kind": "manual"}, "metadata": {"k": "v"},
        "turn_policy": {"mode": "pause_after_assistant", "expired_resume_strategy": "s", "completion_mode": "implicit"},
        "model": {"provider": "openai_compatible", "model": "mock-model",
                  "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}},
        "model_credential": {"type": "api_key", "api_key": RUN_API_KEY}
    });
    for (index, mut body) in with_one_nul(&start).into_iter().enumerate() {
        // A distinct host run id per variant, so each is a new run.
        if body["host_run_id"] == "host-1" {
            body["host_run_id"] = json!(format!("host-{index}"));
        }
        never_5xx(server, Method::POST, "/v1/runs", Some(body)).await;
    }
    let run = server.start_run(mock, &agent_id, json!({})).await;
    let run_id = run["id"].as_str().unwrap().to_string();
    server.wait_status(&run_id, &["paused"]).await;
    let run_path = |action: &str| format!("/v1/runs/{run_id}/{action}?app_id={APP}");
    let records = [
        (
            "messages",
            json!({"role": "user", "content": "hello", "external_actor_id": "u"}),
        ),
        (
            "artifacts",
            json!({"artifact_type": "note", "format": "text", "storage_mode": "inline",
                            "inline_content": "body", "metadata": {"k": "v", "list": ["a"]}}),
        ),
        (
            "tools",
            json!({"tool_name": "get_context", "input": {"q": "v", "nested": {"k": ["a"]}}}),
        ),
    ];
    for (action, body) in records {
        for variant in with_one_nul(&body) {
            never_5xx(server, Method::POST, &run_path(action), Some(variant)).await;
        }
    }
    let resumes = [
        (
            "resume",
            json!({"intent": "approve", "content": "yes", "response_payload": {"k": "v"},
                         "external_actor_id": "u", "resume_id": "r", "interaction_id": "", "message_provenance": "human"}),
        ),
        ("approve", json!({"external_actor_id": "u"})),
        (
            "request-changes",
            json!({"content": "change it", "external_actor_id": "u"}),
        ),
    ];
    for (action, body) in resumes {
        for (index, mut variant) in with_one_nul(&body).into_iter().enumerate() {
            if variant.get("resume_id") == Some(&json!("r")) {
                variant["resume_id"] = json!(format!("r-{action}-{index}"));
            }
            let status = never_5xx(server, Method::POST, &run_path(action), Some(variant)).await;
            if status == 200 {
                server.wait_status(&run_id, &["paused"]).await;
            }
        }
    }
    let credentials = [
        (
            "model-credential",
            json!({"credential": {"type": "api_key", "api_key": "sk-new", "connection_id": "c", "account_id": "a"}}),
        ),
        (
            "mcp-servers/srv/credential",
            json!({"credential": {"type": "bearer_token", "access_token": "t", "headers": {"h": "v"}}}),
        ),
    ];
    for (action, body) in credentials {
        for variant in with_one_nul(&body) {
            never_5xx(server, Method::PUT, &run_path(action), Some(variant)).await;
        }
    }
    // Query parameters and paths.
    for path in [
        "/v1/agents?app_id=host%00app".to_string(),
        "/v1/agents/nul%00agent?app_id=host_app".to_string(),
        "/v1/runs?app_id=%00".to_string(),
        format!("/v1/runs/search?app_id={APP}&q=a%00b"),
        format!("/v1/runs/search?app_id={APP}&status=%00"),
        format!("/v1/runs/search?app_id={APP}&limit=%00"),
        format!("/v1/runs/{run_id}%00?app_id={APP}"),
        format!("/v1/runs/{run_id}/messages?app_id={APP}%00"),
        format!("/v2/runs/{run_id}/events?app_id={APP}&after_sequence=%00"),
        "/v1/capabilities?app_id=%00".to_string(),
        "/v1/app-health?app_id=%00".to_string(),
    ] {
        never_5xx(server, Method::GET, &path, None).await;
    }
    never_5xx(
        server,
        Method::POST,
        &format!("/v1/runs/{run_id}%00/cancel?app_id={APP}"),
        None,
    )
    .await;
    let (_, runs) = server.get(&format!("/v1/runs?app_id={APP}")).await;
    let run_ids: Vec<String> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["id"].as_str().unwrap().to_string())
        .collect();
    assert!(
        run_ids.len() > 1,
        "runs with NULs in their fields were admitted: {runs}"
    );
    everything_reads_back(server, &run_ids).await;
    // What was stored has no NUL left.
    let stored = server.list(&run_id, "messages").await;
    assert!(
        !serde_json::to_string(&stored).unwrap().contains("\\u0000"),
        "{stored:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nuls_never_cause_a_5xx_on_sqlite() {
    let mock = MockProvider::start().await;
    let server = TestServer::start(&mock).await;
    nul_everywhere(&server, &mock).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nuls_never_cause_a_5xx_on_postgres() {
    on_fresh_database(
        "it::nul::nuls_never_cause_a_5xx_on_postgres",
        |url| async move {
            let mock = MockProvider::start().await;
            let server = TestServer::start_with(on_postgres(env_for(&mock, ""), &url)).await;
            nul_everywhere(&server, &mock).await;
            server.stop().await;
        },
    )
    .await;
}
