//! Process death and restart: SIGTERM lets the in-flight step reach its checkpoint and exits 0,
//! leaving the run `running` with whole steps only; SIGKILL mid-step loses the step in flight;
//! either way a restarted binary on the same SQLite file completes the run, with events
//! contiguous and nothing done twice.

use std::path::Path;
use std::time::Duration;

use ar_core::store::Store as _;
use ar_test_support::mock_provider::{MockProvider, Reply};
use serde_json::json;

use ar_test_support::service::*;

use crate::BIN;

/// What a stopped process left in the database, read through the store after it exited.
struct OnDisk {
    status: String,
    checkpoint_step: Option<i64>,
    event_sequence: Vec<i64>,
    event_types: Vec<String>,
    tool_calls: usize,
}

async fn on_disk(dsn: &Path, run_id: &str) -> OnDisk {
    let store = ar_store::SqliteStore::connect(dsn.to_str().expect("utf-8 path"))
        .await
        .expect("open the database the binary left");
    let run = store
        .get_run(APP, run_id)
        .await
        .expect("read run")
        .expect("run exists");
    let events = store
        .list_events_after(APP, run_id, 0, None)
        .await
        .expect("read events");
    let checkpoint = store.latest_checkpoint(run_id).await.expect("checkpoint");
    let tool_calls = store
        .list_tool_calls(APP, run_id)
        .await
        .expect("tool calls")
        .len();
    store.close().await;
    OnDisk {
        status: run.status().to_string(),
        checkpoint_step: checkpoint.map(|c| c.step),
        event_sequence: events.iter().map(|e| e.sequence_no).collect(),
        event_types: events.iter().map(|e| e.kind.as_str().to_string()).collect(),
        tool_calls,
    }
}

/// Counts the tool results in the transcript of a model request.
fn tool_results(body: &serde_json::Value) -> usize {
    body["messages"]
        .as_array()
        .map(|messages| messages.iter().filter(|m| m["role"] == "tool").count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_step_reach_its_checkpoint_and_a_restart_completes_the_run() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call("get_context", "{}"));
    // The second round is slow: SIGTERM arrives while its model request is in flight. The
    // final answer is only scripted after the first process exited, so it cannot consume it.
    mock.push(
        Reply::tool_call("get_context", json!({"part": 2}).to_string())
            .delay(Duration::from_secs(4)),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let env = sqlite_env(dir.path(), &mock);
    let dsn = dir.path().join("data").join("runtime.db");

    let mut first = Server::start(BIN, &env).await;
    let agent = first.create_agent("durable", &["get_context"]).await;
    let run = first
        .start_run(&mock, agent["id"].as_str().expect("agent id"), json!({}))
        .await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    wait_model_requests(&mock, 2).await;
    first.process.terminate();
    let status = first.process.wait_exit(WAIT).await;
    assert!(
        status.success(),
        "SIGTERM must exit 0, got {status}; stderr:\n{}",
        first.process.stderr()
    );
    assert!(first.process.stderr().contains("shutdown requested"));
    drop(first);

    // The slow step finished and was checkpointed; the run waits, running, for an owner.
    let left = on_disk(&dsn, &run_id).await;
    assert_eq!(left.status, "running", "{:?}", left.event_types);
    assert_eq!(
        left.checkpoint_step,
        Some(2),
        "both rounds are checkpointed"
    );
    assert_eq!(left.tool_calls, 2);
    assert_eq!(
        left.event_sequence,
        (1..=left.event_sequence.len() as i64).collect::<Vec<_>>()
    );
    assert_eq!(
        left.event_types.last().map(String::as_str),
        Some("tool_call_finished"),
        "the log ends on a whole step: {:?}",
        left.event_types
    );
    assert_eq!(mock.model_requests().len(), 2);

    mock.push(Reply::text("finished after the restart"));
    let second = Server::start(BIN, &env).await;
    let done = second.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    let events = second.events(&run_id).await;
    assert_contiguous(&events);
    assert_eq!(
        &event_types(&events)[..left.event_types.len()],
        &left.event_types[..],
        "the restart appended to the log, it did not rewrite it"
    );
    let requests = mock.model_requests();
    assert_eq!(requests.len(), 3, "no round was asked twice");
    assert_eq!(tool_results(&requests[2].body), 2, "the transcript resumed");
    assert_eq!(second.list(&run_id, "tool-calls").await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_kill_9_the_restarted_binary_takes_the_run_over_at_once() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call("get_context", "{}"));
    // The second model call starts streaming and never finishes: the process dies mid-step.
    mock.push(Reply::hang());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = sqlite_env(dir.path(), &mock);
    // A lease that outlives the test: only adoption by the same instance can continue the run.
    env.insert("AGENT_RUNTIME_LEASE_TTL_SECONDS".into(), "3600".into());
    let dsn = dir.path().join("data").join("runtime.db");

    let mut first = Server::start(BIN, &env).await;
    let agent = first.create_agent("crashy", &["get_context"]).await;
    let run = first
        .start_run(&mock, agent["id"].as_str().expect("agent id"), json!({}))
        .await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    let stream = first.open_stream(&run_id, None).await;
    let reader = tokio::spawn(read_frames_until_cut(stream));
    wait_model_requests(&mock, 2).await;
    first.process.kill_hard();
    drop(first);
    let (before_kill, _) = reader.await.expect("reader");
    let seen: Vec<i64> = before_kill.iter().filter_map(|frame| frame.id).collect();
    assert_eq!(seen, (1..=seen.len() as i64).collect::<Vec<_>>());

    let left = on_disk(&dsn, &run_id).await;
    assert_eq!(left.status, "running");
    assert_eq!(left.checkpoint_step, Some(1));
    assert_eq!(left.tool_calls, 1);
    mock.push(Reply::text("recovered"));

    // Same data directory → same persisted instance id → the lease is this process's own, so
    // the run is adopted at start instead of waiting an hour for the lease to expire.
    let second = Server::start(BIN, &env).await;
    let done = second.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(second.process.stderr().contains("taking over run"));
    let events = second.events(&run_id).await;
    assert_contiguous(&events);
    let types = event_types(&events);
    assert_eq!(&types[..left.event_types.len()], &left.event_types[..]);
    // A client that lost its stream with the process resumes from its last id: exactly the rest.
    let last_seen = seen.last().copied().unwrap_or(0);
    let resumed = read_frames(second.open_stream(&run_id, Some(last_seen)).await).await;
    let rest: Vec<i64> = resumed.iter().filter_map(|frame| frame.id).collect();
    assert_eq!(
        rest,
        ((last_seen + 1)..=events.len() as i64).collect::<Vec<_>>(),
        "resume after the crash: no gap, no duplicate"
    );
    assert_eq!(
        types.iter().filter(|t| *t == "run.completed").count(),
        1,
        "{types:?}"
    );
    let requests = mock.model_requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        tool_results(&requests[2].body),
        1,
        "the finished round was kept"
    );
    assert_eq!(second.list(&run_id, "tool-calls").await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_an_open_event_stream_still_exits() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call(
        "request_approval",
        json!({"title": "Go?"}).to_string(),
    ));
    mock.push(Reply::text("went"));
    let dir = tempfile::tempdir().expect("tempdir");
    let env = sqlite_env(dir.path(), &mock);
    let mut first = Server::start(BIN, &env).await;
    let agent = first.create_agent("waiter", &["request_approval"]).await;
    let run = first
        .start_run(&mock, agent["id"].as_str().expect("agent id"), json!({}))
        .await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    first.wait_status(&run_id, &["paused"]).await;
    // A client follows the paused run's stream; the stream has no end of its own. The
    // server is stopped once the client has seen the replay up to `run.paused`.
    let stream = first.open_stream(&run_id, None).await;
    let (seen_tx, seen_rx) = tokio::sync::oneshot::channel::<()>();
    let reader = tokio::spawn(async move {
        use futures::StreamExt as _;
        let mut seen_tx = Some(seen_tx);
        let mut text = String::new();
        let mut body = stream.bytes_stream();
        while let Some(Ok(chunk)) = body.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
            if text.contains("event: run.paused") {
                if let Some(seen) = seen_tx.take() {
                    let _ = seen.send(());
                }
            }
        }
        text
    });
    tokio::time::timeout(WAIT, seen_rx)
        .await
        .expect("the replay reached run.paused")
        .expect("reader alive");
    first.process.terminate();
    let status = first.process.wait_exit(WAIT).await;
    assert!(status.success(), "{status}");
    let text = tokio::time::timeout(WAIT, reader)
        .await
        .expect("the stream ended with the server")
        .expect("reader");
    assert!(text.contains("event: run.paused"), "{text}");
    drop(first);

    // The paused run survives the restart and can be approved there.
    let second = Server::start(BIN, &env).await;
    let (status, body) = second
        .post(
            &format!("/v1/runs/{run_id}/approve?app_id={APP}"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let done = second.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_contiguous(&second.events(&run_id).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_abandons_a_step_that_misses_the_grace_period_without_half_writing_it() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call("get_context", "{}"));
    // This model call never ends: shutdown waits out its grace period, then abandons the step.
    mock.push(Reply::hang());
    let dir = tempfile::tempdir().expect("tempdir");
    let env = sqlite_env(dir.path(), &mock);
    let dsn = dir.path().join("data").join("runtime.db");

    let mut first = Server::start(BIN, &env).await;
    let agent = first.create_agent("stuck", &["get_context"]).await;
    let run = first
        .start_run(&mock, agent["id"].as_str().expect("agent id"), json!({}))
        .await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    wait_model_requests(&mock, 2).await;
    first.process.terminate();
    // The service's grace period is 20 s; allow for it plus the abandon and exit.
    let status = first
        .process
        .wait_exit(WAIT + Duration::from_secs(15))
        .await;
    assert!(status.success(), "{status}\n{}", first.process.stderr());
    assert!(first.process.stderr().contains("abandoning"));
    drop(first);

    let left = on_disk(&dsn, &run_id).await;
    assert_eq!(left.status, "running", "{:?}", left.event_types);
    assert_eq!(left.checkpoint_step, Some(1));
    assert_eq!(left.tool_calls, 1);
    assert_eq!(
        left.event_types.last().map(String::as_str),
        Some("tool_call_finished"),
        "{:?}",
        left.event_types
    );

    mock.push(Reply::text("done at last"));
    let second = Server::start(BIN, &env).await;
    let done = second.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_contiguous(&second.events(&run_id).await);
    let requests = mock.model_requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(tool_results(&requests[2].body), 1);
}
