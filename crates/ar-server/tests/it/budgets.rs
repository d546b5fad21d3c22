//! A run's budgets (`execution_config.budgets`): refused with a 400 naming the problem when
//! malformed; checked before every model call, the run pauses (`pause_reason: budget`, a
//! pending `budget` interaction saying what the next call needs) before the call that would go
//! past one, and goes on once a resume raises it.

use std::time::Duration;

use ar_test_support::mock_provider::{AutoScript, MockProvider, Usage};
use ar_test_support::service::*;
use serde_json::{json, Value};

async fn put_agent(server: &TestServer, id: &str, extra: Value) -> (u16, Value) {
    let mut body = json!({"app_id": APP, "name": id, "system_prompt": "You help.",
                          "allowed_tools": ["get_context"]});
    merge(&mut body, &extra);
    server
        .put(&format!("/v1/agents/{id}?app_id={APP}"), body)
        .await
}

/// The run's pending `budget` interaction.
async fn budget_interaction(server: &TestServer, run_id: &str) -> Value {
    server
        .list(run_id, "interactions")
        .await
        .into_iter()
        .find(|i| i["interaction_kind"] == "budget" && i["status"] == "pending")
        .expect("a pending budget interaction")
}

#[tokio::test]
async fn malformed_limits_are_refused_when_the_agent_is_saved() {
    let mock = MockProvider::start().await;
    let server = TestServer::start(&mock).await;
    for (config, says) in [
        (
            json!({"budgets": {"max_cost": 1}}),
            "unknown budget \"max_cost\"",
        ),
        (
            json!({"budgets": {"max_model_calls": 0}}),
            "budgets.max_model_calls must be a positive integer",
        ),
        (
            json!({"budgets": {"max_total_tokens": "lots"}}),
            "budgets.max_total_tokens must be a positive integer",
        ),
        (
            json!({"budgets": 5}),
            "execution_config.budgets must be an object",
        ),
        (
            json!({"max_tool_steps": 5000}),
            "max_tool_steps must be an integer from 1 to 2000",
        ),
        (
            json!({"native_context": {"enabled": true, "context_window": 100}}),
            "context_window must be between 4096",
        ),
        (
            json!({"native_context": {"enabled": true, "context_window": 8192, "size": 1}}),
            "unknown field \"size\"",
        ),
    ] {
        let (status, body) =
            put_agent(&server, "limited", json!({"execution_config": config})).await;
        assert_eq!(status, 400, "{config}: {body}");
        let error = body["error"].as_str().unwrap_or_default();
        assert!(error.contains(says), "{config}: {error}");
    }
    let (status, body) = put_agent(
        &server,
        "cli",
        json!({"runtime_kind": "codex", "execution_config": {"budgets": {"max_model_calls": 3}}}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("native_sdk agents only"),
        "{body}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_run_pauses_before_the_call_past_its_model_call_budget_and_a_raise_resumes_it() {
    let mock = MockProvider::start().await;
    mock.auto(AutoScript::new(4, "get_context", "All done."));
    let server = TestServer::start(&mock).await;
    let (status, agent) = put_agent(
        &server,
        "frugal",
        json!({"execution_config": {"budgets": {"max_model_calls": 2}}}),
    )
    .await;
    assert_eq!(status, 201, "{agent}");
    let run = server.start_run(&mock, "frugal", json!({})).await;
    let run_id = run["id"].as_str().unwrap();
    let paused = server
        .wait_status(run_id, &["paused", "completed", "failed"])
        .await;
    assert_eq!(
        (paused["status"].as_str(), paused["pause_reason"].as_str()),
        (Some("paused"), Some("budget")),
        "{paused}"
    );
    assert_eq!(mock.model_requests().len(), 2, "no third call was made");
    let interaction = budget_interaction(&server, run_id).await;
    let payload = &interaction["request_payload"];
    assert_eq!(
        (&payload["limit"], &payload["used"], &payload["needed"]),
        (&json!("max_model_calls"), &json!(2), &json!(3)),
        "{interaction}"
    );
    assert!(interaction["summary"]
        .as_str()
        .unwrap()
        .contains("2 of 2 model calls"));
    let events = event_types(&server.events(run_id).await);
    assert_eq!(
        events.last().map(String::as_str),
        Some("run.paused"),
        "{events:?}"
    );

    // Going on without more budget, or with a malformed one, is refused and changes nothing.
    let resume = format!("/v1/runs/{run_id}/resume?app_id={APP}");
    let (status, refused) = server.post(&resume, json!({"intent": "continue"})).await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("budgets.max_model_calls of at least 3"),
        "{refused}"
    );
    let (status, refused) = server
        .post(
            &resume,
            json!({"intent": "continue", "budgets": {"max_model_calls": 2}}),
        )
        .await;
    assert_eq!(status, 400, "{refused}");
    let (status, refused) = server
        .post(
            &resume,
            json!({"intent": "continue", "budgets": {"max_calls": 9}}),
        )
        .await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("unknown budget"),
        "{refused}"
    );
    assert_eq!(server.run(run_id).await["status"], "paused");

    // Raised: the run goes on from where it paused, and finishes within the new budget.
    let (status, resumed) = server
        .post(
            &resume,
            json!({"intent": "continue", "budgets": {"max_model_calls": 10}}),
        )
        .await;
    assert_eq!(status, 200, "{resumed}");
    let ended = server
        .wait_status(run_id, &["completed", "failed", "paused"])
        .await;
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(mock.model_requests().len(), 5);
    let interaction = server
        .list(run_id, "interactions")
        .await
        .into_iter()
        .find(|i| i["interaction_kind"] == "budget")
        .unwrap();
    assert_eq!(interaction["status"], "resolved", "{interaction}");
    server.stop().await;
}

#[tokio::test]
async fn token_and_running_time_budgets_pause_before_the_call_that_would_go_past_them() {
    // Tokens: each call reports 1300; after two the run has spent 2600 of 2500.
    let mock = MockProvider::start().await;
    mock.auto(AutoScript::new(4, "get_context", "All done.").usage(Usage::new(1200, 100)));
    let server = TestServer::start(&mock).await;
    put_agent(
        &server,
        "tokens",
        json!({"execution_config": {"budgets": {"max_total_tokens": 2500}}}),
    )
    .await;
    let run = server.start_run(&mock, "tokens", json!({})).await;
    let run_id = run["id"].as_str().unwrap();
    let paused = server
        .wait_status(run_id, &["paused", "completed", "failed"])
        .await;
    assert_eq!(paused["pause_reason"], "budget", "{paused}");
    assert_eq!(mock.model_requests().len(), 2);
    let payload = budget_interaction(&server, run_id).await["request_payload"].clone();
    assert_eq!(
        (&payload["limit"], &payload["used"]),
        (&json!("max_total_tokens"), &json!(2600))
    );
    assert!(payload["needed"].as_u64().unwrap() > 2600, "{payload}");
    server.stop().await;

    // Running time: a slow stream (a second or more per call) and a one-second budget.
    let mock = MockProvider::start().await;
    mock.auto(AutoScript::new(4, "get_context", "All done."));
    mock.set_chunk_delay(Duration::from_millis(200));
    let server = TestServer::start(&mock).await;
    put_agent(
        &server,
        "quick",
        json!({"execution_config": {"budgets": {"max_wall_time_seconds": 1}}}),
    )
    .await;
    let run = server.start_run(&mock, "quick", json!({})).await;
    let run_id = run["id"].as_str().unwrap();
    let paused = server
        .wait_status(run_id, &["paused", "completed", "failed"])
        .await;
    assert_eq!(paused["pause_reason"], "budget", "{paused}");
    let payload = budget_interaction(&server, run_id).await["request_payload"].clone();
    assert_eq!(payload["limit"], "max_wall_time_seconds", "{payload}");
    assert!(payload["used"].as_u64().unwrap() > 1, "{payload}");
    assert!(mock.model_requests().len() < 4);
    server.stop().await;
}
