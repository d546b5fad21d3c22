//! The NATS sink of the real binary across a crash: events committed while NATS was cut off
//! and the process was killed (SIGKILL) reach the stream after the restart, and events
//! published twice (the sink's cursor rewound while the process was down) are dropped by
//! JetStream's duplicate window: a consumer sees each persisted event exactly once, in order.

use std::time::Duration;

use ar_core::store::Store as _;
use ar_test_support::mock_provider::{MockProvider, Reply};
use ar_test_support::service::nats::{on_test_stream, NatsProxy, Received};
use serde_json::json;

use ar_test_support::service::*;

use crate::BIN;

fn persisted(received: &[Received]) -> usize {
    received.iter().filter(|r| r.is_persisted()).count()
}

/// Moves the sink's cursor of `stream` in the database the stopped binary left back to 0.
async fn rewind_cursor(dsn: &std::path::Path, stream: &str) {
    let store = ar_store::SqliteStore::connect(dsn.to_str().expect("utf-8 path"))
        .await
        .expect("open the database the binary left");
    let name = format!("nats:{stream}");
    let current = store.get_cursor(&name).await.expect("read cursor");
    assert!(current.is_some_and(|c| c > 0), "the sink kept a cursor");
    assert!(store
        .advance_cursor(&name, current, 0)
        .await
        .expect("rewind cursor"));
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_kill_9_and_a_republish_the_stream_holds_each_persisted_event_once() {
    on_test_stream("nats_crash", |stream| async move {
        let mock = MockProvider::start().await;
        // The first round waits, so the run's first events reach NATS before it is cut off;
        // the second model call never ends: the process dies mid-step.
        mock.push(Reply::tool_call("get_context", "{}").delay(Duration::from_millis(1500)));
        mock.push(Reply::hang());
        let proxy = NatsProxy::start().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut env = sqlite_env(dir.path(), &mock);
        env.insert("AGENT_RUNTIME_LEASE_TTL_SECONDS".into(), "3600".into());
        stream.sink_env(&mut env, &proxy.url);
        let dsn = dir.path().join("data").join("runtime.db");

        let mut first = Server::start(BIN, &env).await;
        let mut consumer = stream.consumer("crash", &stream.v1_filter(APP)).await;
        let agent = first.create_agent("crashy", &["get_context"]).await;
        let run = first
            .start_run(&mock, agent["id"].as_str().expect("agent id"), json!({}))
            .await;
        let run_id = run["id"].as_str().expect("run id").to_string();
        consumer.take_until(WAIT, |got| persisted(got) >= 2).await;
        proxy.cut();
        wait_model_requests(&mock, 2).await;
        let committed = first.events(&run_id).await;
        consumer.fetch(Duration::from_millis(500)).await;
        let before_kill = persisted(&consumer.received);
        assert!(
            before_kill < committed.len(),
            "events were committed that NATS has not seen ({before_kill} of {})",
            committed.len()
        );
        first.process.kill_hard();
        drop(first);

        // Everything is published again from the start of the log: the copies already in the
        // stream must be dropped by message id.
        rewind_cursor(&dsn, &stream.name).await;
        proxy.restore();
        mock.push(Reply::text("recovered"));
        let second = Server::start(BIN, &env).await;
        let done = second.wait_status(&run_id, &["completed", "failed"]).await;
        assert_eq!(done["status"], "completed", "{done}");
        let history = second.events(&run_id).await;
        assert_contiguous(&history);
        consumer
            .take_until(Duration::from_secs(60), |got| {
                persisted(got) >= history.len()
            })
            .await;
        consumer.fetch(Duration::from_millis(800)).await;
        let seen: Vec<(String, i64)> = consumer
            .persisted()
            .iter()
            .map(|r| {
                (
                    r.envelope["event_id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    r.envelope["sequence_no"].as_i64().unwrap_or_default(),
                )
            })
            .collect();
        let expected: Vec<(String, i64)> = history
            .iter()
            .map(|e| {
                (
                    e["event_id"].as_str().unwrap_or_default().to_string(),
                    e["sequence_no"].as_i64().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(seen, expected, "each persisted event once, in order");
        drop(second);
    })
    .await;
}
