//! Ownership and recovery: a run left running by a process that stopped is continued by the
//! next one from its last checkpoint, never stuck in `running`.

use std::time::Duration;

use ar_test_support::mock_provider::{MockProvider, Reply};
use serde_json::json;

use ar_test_support::service::*;

#[tokio::test]
async fn a_restarted_service_continues_a_run_from_its_checkpoint() {
    let mock = MockProvider::start().await;
    // Step 1 completes a tool round; step 2 hangs until the first process goes away.
    mock.push(Reply::tool_call("get_context", "{}"));
    mock.push(Reply::hang());
    let dir = tempfile::tempdir().unwrap();
    let dsn = dir.path().join("runtime.db").display().to_string();
    let first = TestServer::start_with(env_for(&mock, &dsn)).await;
    let agent = first
        .agent("durable-ish", json!({"allowed_tools": ["get_context"]}))
        .await;
    let run = first.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap().to_string();
    for _ in 0..1000 {
        if mock.model_requests().len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(first.run(&run_id).await["status"], "running");
    let events_before = first.events(&run_id).await.len();
    // Stop the first process (its in-flight step never reaches a checkpoint).
    mock.push(Reply::text("recovered"));
    first.stop().await;

    let second = TestServer::start_with(env_for(&mock, &dsn)).await;
    let done = second.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    let events = second.events(&run_id).await;
    assert_contiguous(&events);
    assert!(events.len() > events_before);
    // The continuation replayed the checkpointed transcript, including the first tool result.
    let last = mock.model_requests().last().unwrap().body.clone();
    let tool_results = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .count();
    assert_eq!(tool_results, 1, "{last}");
    assert_eq!(
        second.list(&run_id, "tool-calls").await.len(),
        1,
        "the finished tool call is not repeated"
    );
    second.stop().await;
}

#[tokio::test]
async fn another_replica_takes_over_a_run_whose_owner_went_away() {
    let mock = MockProvider::start().await;
    mock.push(Reply::hang());
    let dir = tempfile::tempdir().unwrap();
    let dsn = dir.path().join("shared.db").display().to_string();
    let mut env_a = env_for(&mock, &dsn);
    env_a.insert("AGENT_RUNTIME_INSTANCE_ID".into(), "replica_a".into());
    let mut env_b = env_for(&mock, &dsn);
    env_b.insert("AGENT_RUNTIME_INSTANCE_ID".into(), "replica_b".into());
    env_b.insert("AGENT_RUNTIME_SWEEP_INTERVAL_SECONDS".into(), "1".into());
    env_b.insert("AGENT_RUNTIME_LEASE_TTL_SECONDS".into(), "2".into());
    let replica_a = TestServer::start_with(env_a).await;
    let replica_b = TestServer::start_with(env_b).await;
    let agent = replica_a.agent("shared", json!({})).await;
    let run = replica_a.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap().to_string();
    for _ in 0..500 {
        if mock.active_streams() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Replica B sees the run but does not steal it while A holds a live lease.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(replica_b.run(&run_id).await["status"], "running");
    assert_eq!(
        mock.model_requests().len(),
        1,
        "only the owner called the model"
    );
    mock.push(Reply::text("finished by b"));
    replica_a.stop().await;
    let done = replica_b
        .wait_status(&run_id, &["completed", "failed"])
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    let events = replica_b.events(&run_id).await;
    assert_contiguous(&events);
    replica_b.stop().await;
}

#[tokio::test]
async fn a_run_that_pauses_or_ends_leaves_its_lease_free() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call(
        "request_user_input",
        json!({"questions": [{"id": "q", "question": "Which?"}]}).to_string(),
    ));
    mock.push(Reply::text("done"));
    let dir = tempfile::tempdir().unwrap();
    let dsn = dir.path().join("runtime.db").display().to_string();
    let server = TestServer::start_with(env_for(&mock, &dsn)).await;
    let agent = server
        .agent("asker", json!({"allowed_tools": ["request_user_input"]}))
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap().to_string();
    use ar_core::store::Store as _;
    let store = ar_store::SqliteStore::connect(&dsn).await.unwrap();
    let now = chrono::Utc::now();
    let until = now + chrono::Duration::seconds(60);

    server.wait_status(&run_id, &["paused"]).await;
    assert!(
        store
            .try_acquire_lease(&run_id, "someone_else", until, now)
            .await
            .unwrap(),
        "a paused run keeps no lease"
    );
    store.release_lease(&run_id, "someone_else").await.unwrap();
    let (status, body) = server
        .post(
            &format!("/v1/runs/{run_id}/resume?app_id={APP}"),
            json!({"intent": "reply", "content": "That one."}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    server.wait_status(&run_id, &["completed"]).await;
    // Nobody holds the finished run: anyone could take its lease at once.
    assert!(store
        .try_acquire_lease(&run_id, "someone_else", until, now)
        .await
        .unwrap());
    server.stop().await;
}
