//! Three replicas of the binary on one fresh PostgreSQL database, linked by PostgreSQL
//! `LISTEN/NOTIFY` (no NATS) or by NATS core subjects: a run started on the first streams its
//! deltas slowly; an SSE reader on the second gets them live, with every persisted event once
//! and in order; a cancel sent to the third reaches the owner at once, which aborts its model
//! request (the mock sees the stream dropped) long before the stream would have ended; so does
//! a pause.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ar_test_support::mock_provider::{MockProvider, Reply};
use ar_test_support::service::nats::on_test_stream;
use serde_json::json;

use ar_test_support::service::*;

use crate::BIN;

/// Deltas of the slow model reply, one every [`CHUNK`]: the whole reply takes 8 s.
const DELTAS: usize = 40;
const CHUNK: Duration = Duration::from_millis(200);

fn replica_env(base: &BTreeMap<String, String>, instance: &str) -> BTreeMap<String, String> {
    let mut env = base.clone();
    env.insert("AGENT_RUNTIME_INSTANCE_ID".into(), instance.into());
    env
}

/// The delta's number (`"d{n} "`), from the frame's data.
fn delta_number(frame: &Frame) -> usize {
    let text = frame.data["data"]["text"].as_str().unwrap_or_default();
    text.trim()
        .strip_prefix('d')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a delta of the mock reply: {frame:?}"))
}

/// The scenario on three replicas started from `base`; `link` is what their logs must say.
async fn live_across_replicas(base: &BTreeMap<String, String>, mock: &MockProvider, link: &str) {
    mock.push(Reply::text_deltas((0..DELTAS).map(|n| format!("d{n} "))).chunk_delay(CHUNK));
    let owner = Server::start(BIN, &replica_env(base, "inst_owner")).await;
    let reader = Server::start(BIN, &replica_env(base, "inst_reader")).await;
    let canceller = Server::start(BIN, &replica_env(base, "inst_canceller")).await;
    for server in [&owner, &reader, &canceller] {
        assert!(
            server.process.stderr().contains(link),
            "{}",
            server.process.stderr()
        );
    }
    let agent = owner.create_agent("live", &[]).await;
    let run = owner
        .start_run(mock, agent["id"].as_str().expect("agent id"), json!({}))
        .await;
    let run_id = run["id"].as_str().expect("run id").to_string();

    // Deltas exist only live, on the owner: seeing them here means the link carried them.
    let mut stream = FrameStream::new(reader.open_stream(&run_id, None).await);
    let mut frames = Vec::new();
    while frames
        .iter()
        .filter(|frame: &&Frame| frame.event == "assistant_message_delta")
        .count()
        < 3
    {
        frames.push(
            stream
                .next()
                .await
                .expect("the stream ended before any delta"),
        );
    }
    assert!(
        mock.active_streams() == 1,
        "the model stream is still going while deltas arrive"
    );

    let cancelled_at = Instant::now();
    let (status, cancelled) = canceller
        .post(&format!("/v1/runs/{run_id}/cancel?app_id={APP}"), json!({}))
        .await;
    assert_eq!(status, 200, "{cancelled}");
    while let Some(frame) = stream.next().await {
        frames.push(frame);
    }
    let stream_ended = cancelled_at.elapsed();
    wait_for(
        "the owner to drop its model stream",
        Duration::from_secs(2),
        || async { (mock.active_streams() == 0).then_some(()) },
    )
    .await;
    let aborted = cancelled_at.elapsed();
    // The rest of the reply would take seconds more; the owner was told, it did not wait.
    assert!(
        aborted < Duration::from_secs(2) && stream_ended < Duration::from_secs(2),
        "cancel took {aborted:?} to abort the model call and {stream_ended:?} to end the stream"
    );
    assert_eq!(owner.run(&run_id).await["status"], "cancelled");

    let history = owner.events(&run_id).await;
    assert_contiguous(&history);
    let persisted: Vec<(i64, String)> = frames
        .iter()
        .filter_map(|frame| Some((frame.id?, frame.event.clone())))
        .collect();
    let expected: Vec<(i64, String)> = history
        .iter()
        .map(|event| {
            (
                event["sequence_no"].as_i64().expect("sequence_no"),
                event["type"].as_str().expect("type").to_string(),
            )
        })
        .collect();
    assert_eq!(
        persisted, expected,
        "SSE on another replica = the history, once, in order"
    );
    assert_eq!(
        persisted.last().map(|(_, kind)| kind.as_str()),
        Some("run.cancelled")
    );
    let deltas: Vec<usize> = frames
        .iter()
        .filter(|frame| frame.event == "assistant_message_delta")
        .map(delta_number)
        .collect();
    assert!(
        deltas.windows(2).all(|pair| pair[0] < pair[1]),
        "deltas out of order or doubled: {deltas:?}"
    );
    assert!(deltas.len() < DELTAS, "the reply was cut short: {deltas:?}");
    let run_started = frames.iter().position(|f| f.event == "run.started");
    let first_delta = frames
        .iter()
        .position(|f| f.event == "assistant_message_delta");
    assert!(
        run_started < first_delta,
        "deltas come after the events that precede them: {frames:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_postgres_without_nats_stream_live_and_cancel_at_once() {
    on_fresh_database(
        "e2e::live_replicas::postgres_notify",
        |database_url| async move {
            let mock = MockProvider::start().await;
            let dir = tempfile::tempdir().expect("tempdir");
            let env = on_postgres(sqlite_env(dir.path(), &mock), &database_url);
            live_across_replicas(&env, &mock, "replica link on PostgreSQL LISTEN/NOTIFY").await;
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_postgres_with_nats_stream_live_and_cancel_at_once() {
    on_test_stream("live_replicas", |stream| async move {
        on_fresh_database("e2e::live_replicas::nats", |database_url| async move {
            let mock = MockProvider::start().await;
            let dir = tempfile::tempdir().expect("tempdir");
            let mut env = on_postgres(sqlite_env(dir.path(), &mock), &database_url);
            stream.sink_env(&mut env, &stream.url());
            // Outside the stream's subjects, and of this test alone.
            let prefix = format!("{}-link", stream.prefix);
            env.insert(
                "AGENT_RUNTIME_NATS_REPLICA_SUBJECT_PREFIX".into(),
                prefix.clone(),
            );
            live_across_replicas(&env, &mock, "replica link on NATS core subjects").await;
        })
        .await;
    })
    .await;
}

/// A pause sent to a replica that does not own the run reaches the owner at once: it drops
/// its model request (the mock sees the stream end) and pauses there, long before the reply
/// would have finished; a resume sent to the other replica asks the model again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_sent_to_another_replica_aborts_the_owners_model_call() {
    on_fresh_database("e2e::live_replicas::pause", |database_url| async move {
        let mock = MockProvider::start().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let env = on_postgres(sqlite_env(dir.path(), &mock), &database_url);
        mock.push(Reply::text_deltas((0..DELTAS).map(|n| format!("d{n} "))).chunk_delay(CHUNK));
        mock.push(Reply::text("finished after the pause"));
        let owner = Server::start(BIN, &replica_env(&env, "inst_owner")).await;
        let other = Server::start(BIN, &replica_env(&env, "inst_other")).await;
        let agent = owner.create_agent("pausable", &[]).await;
        let run = owner
            .start_run(&mock, agent["id"].as_str().expect("agent id"), json!({}))
            .await;
        let run_id = run["id"].as_str().expect("run id").to_string();
        wait_for("the model stream", Duration::from_secs(5), || async {
            (mock.active_streams() == 1).then_some(())
        })
        .await;

        let paused_at = Instant::now();
        let (status, body) = other
            .post(&format!("/v1/runs/{run_id}/pause?app_id={APP}"), json!({}))
            .await;
        assert_eq!(status, 200, "{body}");
        wait_for(
            "the owner to drop its model stream",
            Duration::from_secs(2),
            || async { (mock.active_streams() == 0).then_some(()) },
        )
        .await;
        let paused = other.wait_status(&run_id, &["paused"]).await;
        assert!(
            paused_at.elapsed() < Duration::from_secs(3),
            "the pause took {:?}; the reply would take 8 s",
            paused_at.elapsed()
        );
        assert_eq!(paused["pause_reason"], "manual");

        let (status, body) = other
            .post(
                &format!("/v1/runs/{run_id}/resume?app_id={APP}"),
                json!({"intent": "continue"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        other.wait_status(&run_id, &["completed"]).await;
        assert_eq!(
            mock.model_requests().len(),
            2,
            "asked again after the pause"
        );
        let history = other.events(&run_id).await;
        assert_contiguous(&history);
        let kinds: Vec<&str> = history
            .iter()
            .filter_map(|event| event["type"].as_str())
            .collect();
        let paused_event = kinds.iter().position(|kind| *kind == "run.paused");
        assert!(
            paused_event.is_some() && kinds.last() == Some(&"run.completed"),
            "{kinds:?}"
        );
    })
    .await;
}

/// Runs started on two replicas that are killed one after the other (`kill -9`) while the
/// runs stream; the third, where every SSE reader is, takes them over: every run completes,
/// each history has no gap, no duplicate and one terminal event, and each SSE stream on the
/// surviving replica equals its run's history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_survive_replicas_killed_under_load_with_every_event_once() {
    on_fresh_database("e2e::live_replicas::chaos", |database_url| async move {
        let mock = MockProvider::start().await;
        mock.set_fallback(Some(
            Reply::text_deltas((0..10).map(|n| format!("d{n} "))).chunk_delay(CHUNK / 4),
        ));
        let dir = tempfile::tempdir().expect("tempdir");
        let mut base = on_postgres(sqlite_env(dir.path(), &mock), &database_url);
        base.insert("AGENT_RUNTIME_LEASE_TTL_SECONDS".into(), "2".into());
        base.insert("AGENT_RUNTIME_SWEEP_INTERVAL_SECONDS".into(), "1".into());
        let mut first = Server::start(BIN, &replica_env(&base, "inst_one")).await;
        let mut second = Server::start(BIN, &replica_env(&base, "inst_two")).await;
        let survivor = Server::start(BIN, &replica_env(&base, "inst_three")).await;
        let agent = first.create_agent("chaos", &[]).await;
        let agent_id = agent["id"].as_str().expect("agent id").to_string();

        let mut runs = Vec::new();
        let mut readers = Vec::new();
        for phase in 0..2 {
            let starters: [&Server; 2] = if phase == 0 {
                [&first, &second]
            } else {
                [&second, &second]
            };
            for starter in starters {
                for _ in 0..3 {
                    let run = starter.start_run(&mock, &agent_id, json!({})).await;
                    let run_id = run["id"].as_str().expect("run id").to_string();
                    let response = survivor.open_stream(&run_id, None).await;
                    readers.push(tokio::spawn(read_frames(response)));
                    runs.push(run_id);
                }
            }
            // Mid-stream: each reply takes a little over half a second.
            tokio::time::sleep(CHUNK).await;
            if phase == 0 {
                first.process.kill_hard();
            } else {
                second.process.kill_hard();
            }
        }

        for (run_id, reader) in runs.iter().zip(readers) {
            let done = survivor
                .wait_status(run_id, &["completed", "failed", "cancelled"])
                .await;
            assert_eq!(done["status"], "completed", "{done}");
            let history = survivor.events(run_id).await;
            assert_contiguous(&history);
            let types = event_types(&history);
            let terminal = ["run.completed", "run.failed", "run.cancelled"];
            assert_eq!(
                types
                    .iter()
                    .filter(|t| terminal.contains(&t.as_str()))
                    .count(),
                1,
                "{run_id}: {types:?}"
            );
            let frames = reader.await.expect("SSE reader");
            let ids: Vec<i64> = frames.iter().filter_map(|frame| frame.id).collect();
            assert_eq!(
                ids,
                (1..=history.len() as i64).collect::<Vec<_>>(),
                "{run_id}: SSE on the surviving replica = the history"
            );
        }
        assert!(
            survivor.process.stderr().contains("taking over run"),
            "the survivor took over the killed replicas' runs"
        );
        drop((first, second));
    })
    .await;
}
