//! Pause, approve, request changes, reply, cancel, chat turns and explicit completion.

use std::time::Duration;

use ar_test_support::mock_provider::{MockProvider, Reply};
use serde_json::json;

use ar_test_support::service::*;

#[tokio::test]
async fn request_approval_pauses_and_approve_continues_once() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call(
        "request_approval",
        json!({"title": "Ship it?"}).to_string(),
    ));
    mock.push(Reply::text("shipped"));
    let server = TestServer::start(&mock).await;
    let agent = server
        .agent("approver", json!({"allowed_tools": ["request_approval"]}))
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap();
    let paused = server.wait_status(run_id, &["paused"]).await;
    assert_eq!(paused["pause_reason"], "human_approval");
    let interactions = server.list(run_id, "interactions").await;
    assert_eq!(interactions.len(), 1);
    assert_eq!(interactions[0]["status"], "pending");
    assert_eq!(interactions[0]["interaction_kind"], "approval_request");
    assert_eq!(interactions[0]["title"], "Ship it?");

    let (status, approved) = server
        .post(
            &format!("/v1/runs/{run_id}/approve?app_id={APP}"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{approved}");
    assert_eq!(approved["approval_state"], "approved");
    let done = server.wait_status(run_id, &["completed"]).await;
    assert_eq!(done["status"], "completed");
    let interactions = server.list(run_id, "interactions").await;
    assert_eq!(interactions[0]["status"], "resolved");
    assert_eq!(interactions[0]["response_payload"]["intent"], "approve");
    let events = event_types(&server.events(run_id).await);
    assert!(
        events.contains(&"run.paused".to_string()) && events.contains(&"run.resumed".to_string())
    );

    // A second approval of an ended run changes nothing.
    let before = server.events(run_id).await.len();
    let (status, body) = server
        .post(
            &format!("/v1/runs/{run_id}/approve?app_id={APP}"),
            json!({}),
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"], "run is terminal");
    assert_eq!(server.events(run_id).await.len(), before);
    server.stop().await;
}

#[tokio::test]
async fn request_user_input_reply_reaches_the_model_and_resume_is_idempotent() {
    let mock = MockProvider::start().await;
    let question = json!({"questions": [{"id": "color", "question": "Which color?"}]});
    mock.push(Reply::tool_call("request_user_input", question.to_string()));
    mock.push(Reply::text("blue it is").delay(Duration::from_millis(200)));
    let server = TestServer::start(&mock).await;
    let agent = server
        .agent("asker", json!({"allowed_tools": ["request_user_input"]}))
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap();
    let paused = server.wait_status(run_id, &["paused"]).await;
    assert_eq!(paused["pause_reason"], "human_input");
    let resume = json!({"intent": "reply", "content": "blue", "resume_id": "r-1", "external_actor_id": "user-9", "message_provenance": "human"});
    let (status, resumed) = server
        .post(
            &format!("/v1/runs/{run_id}/resume?app_id={APP}"),
            resume.clone(),
        )
        .await;
    assert_eq!(status, 200, "{resumed}");
    // The same resume again (same resume_id) is answered without a second turn.
    let (status, again) = server
        .post(&format!("/v1/runs/{run_id}/resume?app_id={APP}"), resume)
        .await;
    assert_eq!(status, 200, "{again}");
    server.wait_status(run_id, &["completed"]).await;
    let second = &mock.model_requests()[1].body;
    let answered = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["role"] == "tool" && m["content"] == "blue");
    assert!(answered, "the reply is the tool result: {second}");
    let messages = server.list(run_id, "messages").await;
    assert_eq!(
        messages
            .iter()
            .filter(|m| m["content"] == "blue" && m["role"] == "user")
            .count(),
        1
    );
    assert_eq!(
        event_types(&server.events(run_id).await)
            .iter()
            .filter(|t| *t == "run.resumed")
            .count(),
        1
    );
    let interaction = &server.list(run_id, "interactions").await[0];
    assert_eq!(interaction["resolved_by_external_id"], "user-9");
    server.stop().await;
}

#[tokio::test]
async fn request_changes_answers_the_parked_call_as_rejected() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call(
        "request_approval",
        json!({"title": "Deploy?"}).to_string(),
    ));
    mock.push(Reply::text("ok, not deploying"));
    let server = TestServer::start(&mock).await;
    let agent = server
        .agent("rejecter", json!({"allowed_tools": ["request_approval"]}))
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap();
    server.wait_status(run_id, &["paused"]).await;
    let (status, body) = server
        .post(
            &format!("/v1/runs/{run_id}/request-changes?app_id={APP}"),
            json!({"content": "not on Fridays"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["approval_state"], "rejected");
    server.wait_status(run_id, &["completed"]).await;
    let second = &mock.model_requests()[1].body;
    let rejected = second["messages"].as_array().unwrap().iter().any(|m| {
        m["role"] == "tool"
            && m["content"]
                .as_str()
                .unwrap_or_default()
                .contains("not on Fridays")
    });
    assert!(rejected, "{second}");
    server.stop().await;
}

#[tokio::test]
async fn cancel_aborts_the_in_flight_model_request_and_is_idempotent() {
    let mock = MockProvider::start().await;
    mock.push(Reply::hang());
    let server = TestServer::start(&mock).await;
    let agent = server.agent("slow", json!({})).await;
    let run = server
        .start_run(&mock, &agent, json!({"host_run_id": "cancel-me"}))
        .await;
    let run_id = run["id"].as_str().unwrap();
    server.wait_status(run_id, &["running"]).await;
    for _ in 0..500 {
        if mock.active_streams() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(mock.active_streams(), 1, "the model request is in flight");
    // Cancel by the host's id.
    let (status, cancelled) = server
        .post(
            &format!("/v1/runs/cancel-me/cancel?app_id={APP}"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled");
    for _ in 0..500 {
        if mock.active_streams() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        mock.active_streams(),
        0,
        "the in-flight request was aborted"
    );
    let (status, again) = server
        .post(&format!("/v1/runs/{run_id}/cancel?app_id={APP}"), json!({}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(again["status"], "cancelled");
    let events = event_types(&server.events(run_id).await);
    assert_eq!(events.iter().filter(|t| *t == "run.cancelled").count(), 1);
    assert_eq!(events.last().map(String::as_str), Some("run.cancelled"));
    server.stop().await;
}

#[tokio::test]
async fn pause_aborts_the_model_call_in_flight_and_continue_asks_again() {
    let mock = MockProvider::start().await;
    // An answer that would take 20 s: the pause must not wait for it.
    mock.push(Reply::tool_call("get_context", "{}").delay(Duration::from_secs(20)));
    mock.push(Reply::text("finished"));
    let server = TestServer::start(&mock).await;
    let agent = server
        .agent("pausable", json!({"allowed_tools": ["get_context"]}))
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap();
    server.wait_status(run_id, &["running"]).await;
    wait_for("the model call", Duration::from_secs(5), || async {
        (!mock.model_requests().is_empty()).then_some(())
    })
    .await;
    let paused_at = std::time::Instant::now();
    let (status, body) = server
        .post(&format!("/v1/runs/{run_id}/pause?app_id={APP}"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let paused = server.wait_status(run_id, &["paused"]).await;
    assert!(
        paused_at.elapsed() < Duration::from_secs(5),
        "the pause waited for the answer: {:?}",
        paused_at.elapsed()
    );
    assert_eq!(paused["pause_reason"], "manual");
    let events = event_types(&server.events(run_id).await);
    assert!(
        !events.iter().any(|kind| kind.starts_with("tool_call.")),
        "nothing of the interrupted answer is kept: {events:?}"
    );
    let (status, body) = server
        .post(
            &format!("/v1/runs/{run_id}/resume?app_id={APP}"),
            json!({"intent": "continue"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    server.wait_status(run_id, &["completed"]).await;
    assert_eq!(mock.model_requests().len(), 2, "the model is asked again");
    server.stop().await;
}

#[tokio::test]
async fn chat_turns_pause_after_each_answer_and_idle_timeout_completes() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("hello"));
    mock.push(Reply::text("second answer"));
    let server = TestServer::start(&mock).await;
    let agent = server.agent("chat", json!({})).await;
    let policy =
        json!({"turn_policy": {"mode": "pause_after_assistant", "idle_timeout_seconds": 1}});
    let run = server.start_run(&mock, &agent, policy).await;
    let run_id = run["id"].as_str().unwrap();
    let paused = server.wait_status(run_id, &["paused"]).await;
    assert_eq!(paused["pause_reason"], "awaiting_user_message");
    let (status, body) = server
        .post(
            &format!("/v1/runs/{run_id}/resume?app_id={APP}"),
            json!({"intent": "reply", "content": "again"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    for _ in 0..500 {
        if mock.model_requests().len() == 2 && server.run(run_id).await["status"] == "paused" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let second = &mock.model_requests()[1].body;
    let last = second["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"], "again");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let (status, body) = server
        .post(
            &format!("/v1/runs/{run_id}/resume?app_id={APP}"),
            json!({"intent": "reply", "content": "late"}),
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"], "run idle timeout expired");
    let run = server.run(run_id).await;
    assert_eq!(run["status"], "completed");
    let events = server.events(run_id).await;
    assert_eq!(events.last().unwrap()["data"]["reason"], "idle_timeout");
    server.stop().await;
}

#[tokio::test]
async fn explicit_completion_corrects_then_fails_when_exhausted() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("I think I'm done"));
    mock.push(Reply::tool_call(
        "finish_turn",
        json!({"outcome": "completed", "summary": "did it"}).to_string(),
    ));
    let server = TestServer::start(&mock).await;
    let agent = server.agent("explicit", json!({})).await;
    let policy = json!({"turn_policy": {"completion_mode": "explicit"}});
    let run = server.start_run(&mock, &agent, policy.clone()).await;
    let run_id = run["id"].as_str().unwrap();
    let done = server.wait_status(run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["output_summary"]["finish_turn"]["summary"], "did it");
    let second = &mock.model_requests()[1].body;
    let correction = second["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        correction.starts_with("Runtime completion correction 1/2"),
        "{correction}"
    );

    mock.push_all([Reply::text("a"), Reply::text("b"), Reply::text("c")]);
    let run = server.start_run(&mock, &agent, policy).await;
    let failed = server
        .wait_status(run["id"].as_str().unwrap(), &["failed", "completed"])
        .await;
    assert_eq!(failed["status"], "failed");
    assert!(
        failed["error_message"]
            .as_str()
            .unwrap()
            .starts_with("turn_completion_guard_exhausted"),
        "{failed}"
    );
    server.stop().await;
}

#[tokio::test]
async fn model_authentication_failure_pauses_until_a_new_credential() {
    let mock = MockProvider::start().await;
    mock.push(Reply::unauthorized());
    mock.push(Reply::text("works now"));
    let server = TestServer::start(&mock).await;
    let agent = server.agent("auth", json!({})).await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap();
    let paused = server.wait_status(run_id, &["paused"]).await;
    assert_eq!(paused["pause_reason"], "authentication");
    let (status, body) = server
        .put(
            &format!("/v1/runs/{run_id}/model-credential?app_id={APP}"),
            json!({"credential": {"type": "api_key", "api_key": "sk-new"}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["run_id"], run_id);
    assert!(!body.to_string().contains("sk-new"));
    let (status, body) = server
        .post(
            &format!("/v1/runs/{run_id}/resume?app_id={APP}"),
            json!({"intent": "auth_completed"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    server.wait_status(run_id, &["completed"]).await;
    assert_eq!(
        mock.model_requests()[1].header("authorization"),
        Some("Bearer sk-new")
    );
    server.stop().await;
}

/// A service whose run's first model call takes `delay`, so the test can act while it runs;
/// returns once the run is running.
async fn run_with_slow_first_step(
    delay: Duration,
    credential: serde_json::Value,
) -> (MockProvider, TestServer, String) {
    let mock = MockProvider::start().await;
    let server = TestServer::start(&mock).await;
    mock.push(Reply::tool_call("get_context", "{}").delay(delay));
    mock.push(Reply::text("done"));
    let agent = server
        .agent("slow", json!({"allowed_tools": ["get_context"]}))
        .await;
    let run = server
        .start_run(&mock, &agent, json!({"model_credential": credential}))
        .await;
    let run_id = run["id"].as_str().unwrap().to_string();
    server.wait_status(&run_id, &["running"]).await;
    // The first call is in flight (the mock holds it for `delay`).
    wait_model_requests(&mock, 1).await;
    (mock, server, run_id)
}

#[tokio::test]
async fn a_credential_replaced_mid_run_is_used_by_the_next_model_call() {
    let (mock, server, run_id) = run_with_slow_first_step(
        Duration::from_millis(800),
        json!({"type": "api_key", "api_key": "sk-old"}),
    )
    .await;
    let (status, body) = server
        .put(
            &format!("/v1/runs/{run_id}/model-credential?app_id={APP}"),
            json!({"credential": {"type": "api_key", "api_key": "sk-rotated"}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    server.wait_status(&run_id, &["completed"]).await;
    let requests = mock.model_requests();
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-old"));
    assert_eq!(
        requests[1].header("authorization"),
        Some("Bearer sk-rotated")
    );
    server.stop().await;
}

#[tokio::test]
async fn a_credential_revoked_mid_run_pauses_before_the_next_model_call() {
    let (mock, server, run_id) = run_with_slow_first_step(
        Duration::from_millis(800),
        json!({"type": "api_key", "api_key": "sk-old"}),
    )
    .await;
    let (status, body) = server.revoke_model_credential(&run_id).await;
    assert_eq!(status, 204, "{body}");
    let paused = server.wait_status(&run_id, &["paused"]).await;
    assert_eq!(paused["pause_reason"], "authentication");
    assert_eq!(mock.model_requests().len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn a_credential_that_expires_mid_run_pauses_before_the_next_model_call() {
    let expires_at = chrono::Utc::now() + chrono::Duration::milliseconds(1500);
    let (mock, server, run_id) = run_with_slow_first_step(
        Duration::from_millis(2000),
        json!({"type": "api_key", "api_key": "sk-short", "expires_at": expires_at.to_rfc3339()}),
    )
    .await;
    let paused = server.wait_status(&run_id, &["paused"]).await;
    assert_eq!(paused["pause_reason"], "authentication");
    assert_eq!(mock.model_requests().len(), 1);
    server.stop().await;
}
