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

/// Two replicas on one store, both with the NATS sink: one publishes, the other finds the
/// shared cursor moved by it and stands by; when the publishing one is killed, the other takes
/// over and the events committed meanwhile reach the stream, each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_publishes_and_another_takes_over_when_it_dies() {
    on_test_stream("nats_standby", |stream| async move {
        let mock = MockProvider::start().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut env = sqlite_env(dir.path(), &mock);
        stream.sink_env(&mut env, &stream.url());
        let mut replicas = Vec::new();
        for instance in ["inst_a", "inst_b"] {
            let mut env = env.clone();
            env.insert("AGENT_RUNTIME_INSTANCE_ID".into(), instance.into());
            replicas.push(Server::start(BIN, &env).await);
        }
        let mut consumer = stream.consumer("standby", &stream.v1_filter(APP)).await;
        let agent = replicas[0].create_agent("busy", &[]).await;
        let agent_id = agent["id"].as_str().expect("agent id").to_string();
        let mut expected = 0;
        // Runs on both replicas until one of them has stood by (bounded: 20 rounds).
        let mut standby = None;
        for _ in 0..20 {
            for server in &replicas {
                mock.push(Reply::text("done"));
                let run = server.start_run(&mock, &agent_id, json!({})).await;
                let run_id = run["id"].as_str().expect("run id");
                server.wait_status(run_id, &["completed"]).await;
                expected += server.events(run_id).await.len();
            }
            standby = replicas
                .iter()
                .position(|s| s.process.stderr().contains("this sink stands by"));
            if standby.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let standby = standby.expect("one of the two sinks stands by");
        let active = 1 - standby;
        replicas[active].process.kill_hard();

        mock.push(Reply::text("after the failover"));
        let survivor = &replicas[standby];
        let run = survivor.start_run(&mock, &agent_id, json!({})).await;
        let run_id = run["id"].as_str().expect("run id").to_string();
        survivor.wait_status(&run_id, &["completed"]).await;
        let history = survivor.events(&run_id).await;
        expected += history.len();
        consumer
            .take_until(Duration::from_secs(30), |got| persisted(got) >= expected)
            .await;
        consumer.fetch(Duration::from_millis(800)).await;
        assert!(
            survivor.process.stderr().contains("this one takes over"),
            "{}",
            survivor.process.stderr()
        );
        let received = consumer.persisted();
        let ids: Vec<&str> = received
            .iter()
            .filter_map(|r| r.envelope["event_id"].as_str())
            .collect();
        let unique: std::collections::BTreeSet<&str> = ids.iter().copied().collect();
        assert_eq!(ids.len(), unique.len(), "each event once");
        assert_eq!(ids.len(), expected, "every event of every run");
        let last: Vec<&str> = history
            .iter()
            .filter_map(|e| e["event_id"].as_str())
            .collect();
        assert!(
            last.iter().all(|id| unique.contains(id)),
            "the run after the failover reached the stream"
        );
    })
    .await;
}
