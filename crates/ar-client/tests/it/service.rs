//! The consumer with the SDKs' defaults (only the test's stream and subject prefix set) reading what the real service publishes: every persisted event of a v1 and a v2 run (on both subject families), in order, equal to the run's history, and only its app's.

use std::collections::BTreeMap;
use std::time::Duration;

use ar_client::nats::NatsConsumerConfig;
use ar_test_support::mock_provider::{MockProvider, Reply};
use ar_test_support::service::nats::{on_test_stream, TestStream};
use ar_test_support::service::*;
use ar_wire::EventEnvelope;
use serde_json::{json, Value};

use crate::running::{spawn_consumer, Answer};

/// Every persisted event `app`'s consumer on `subject` is handed, per run, in order; with
/// the SDKs' defaults but for the stream, its subjects and the filter (below the test's
/// prefix).
async fn consume_persisted(
    stream: &TestStream,
    app: &str,
    subject: String,
    expected: usize,
) -> BTreeMap<String, Vec<EventEnvelope>> {
    let config = NatsConsumerConfig {
        stream: stream.name.clone(),
        stream_subjects: vec![format!("{}.>", stream.prefix)],
        subject,
        ..NatsConsumerConfig::new(stream.url(), app)
    };
    assert_eq!(config.durable, "agent-runtime-projection");
    let mut running = spawn_consumer(config, |_| Answer::Reply(Ok(())));
    let persisted = |event: &EventEnvelope| event.sequence_no > 0;
    let mut handled = running.take(expected, WAIT, persisted).await;
    // Nothing doubled: no further persisted event comes.
    while let Some(more) = running.next(Duration::from_secs(1)).await {
        handled.push(more);
    }
    running.stop().await;
    // The next test consumer takes the same default durable name with another filter.
    let events = stream.js.get_stream(&stream.name).await.expect("stream");
    events
        .delete_consumer("agent-runtime-projection")
        .await
        .expect("delete the durable");
    let mut runs: BTreeMap<String, Vec<EventEnvelope>> = BTreeMap::new();
    for event in handled.into_iter().map(|h| h.event) {
        assert_eq!(event.app_id, app, "only its app's events: {event:?}");
        if persisted(&event) {
            runs.entry(event.run_id.clone()).or_default().push(event);
        }
    }
    runs
}

fn assert_history(received: &[EventEnvelope], history: &[Value], schema: &str) {
    let got: Vec<(&str, i64, &str)> = received
        .iter()
        .map(|e| (e.event_id.as_str(), e.sequence_no, e.event_type.as_str()))
        .collect();
    let want: Vec<(&str, i64, &str)> = history
        .iter()
        .map(|e| {
            let text = |key: &str| e[key].as_str().unwrap_or_default();
            (
                text("event_id"),
                e["sequence_no"].as_i64().unwrap_or(0),
                text("type"),
            )
        })
        .collect();
    assert_eq!(got, want, "every persisted event once, in order");
    for (event, expected) in received.iter().zip(history) {
        assert_eq!(event.schema_version, schema);
        // The history omits an empty `data`, as the envelope does.
        let data = expected.get("data").cloned().unwrap_or_else(|| json!({}));
        assert_eq!(
            Value::Object(event.data.clone()),
            data,
            "{}",
            event.event_type
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_sdks_defaults_every_persisted_event_of_v1_and_v2_runs_arrives_in_order() {
    on_test_stream("client_service", |stream| async move {
        let mock = MockProvider::start().await;
        mock.set_fallback(Some(Reply::text_deltas(["Looking ", "at ", "it."])));
        let dir = tempfile::tempdir().expect("tempdir");
        let dsn = dir.path().join("runtime.db").display().to_string();
        let mut env = env_for(&mock, &dsn);
        stream.sink_env(&mut env, &stream.url());
        let server = TestServer::start_with(env).await;
        stream.wait_config().await;

        let agent = server.agent("client-v1", json!({})).await;
        let v1_run = server.start_run(&mock, &agent, json!({})).await;
        let v1_run = v1_run["id"].as_str().expect("run id").to_string();
        let v2_run = server.start_v2_run(&mock, "client-v2").await;
        let v1_history = server.completed_history(APP, &v1_run).await;
        let v2_history = server.completed_history(V2_APP, &v2_run).await;

        let v1 = consume_persisted(&stream, APP, stream.v1_filter(APP), v1_history.len()).await;
        assert_eq!(
            v1.keys().collect::<Vec<_>>(),
            [&v1_run],
            "app A never sees app B"
        );
        assert_history(&v1[&v1_run], &v1_history, "");

        let v2 = consume_persisted(&stream, V2_APP, stream.v2_filter(V2_APP), v2_history.len());
        let v2 = v2.await;
        assert_eq!(v2.keys().collect::<Vec<_>>(), [&v2_run]);
        assert_history(&v2[&v2_run], &v2_history, "2");
        assert!(v2[&v2_run].iter().all(|e| e.revision == e.sequence_no));

        // The v2 app's events on the v1 family too (what a default consumer of it reads).
        let filter = stream.v1_filter(V2_APP);
        let v2_on_v1 = consume_persisted(&stream, V2_APP, filter, v2_history.len()).await;
        assert_eq!(v2_on_v1.keys().collect::<Vec<_>>(), [&v2_run]);
        assert_history(&v2_on_v1[&v2_run], &v2_history, "");
        server.stop().await;
    })
    .await;
}
