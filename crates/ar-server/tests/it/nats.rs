//! The global event sinks through the real service: NATS JetStream (a stream of each test's
//! own on the machine's NATS, read by a consumer configured as the SDKs' `NATSConsumer`), a
//! NATS outage behind a proxy, and the legacy global callback.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ar_test_support::mock_provider::{MockProvider, Reply};
use ar_test_support::service::nats::{on_test_stream, NatsProxy, Received, TestStream};
use ar_test_support::service::*;
use serde_json::{json, Value};

/// The persisted events of each run as received, in order.
fn by_run(received: &[Received]) -> BTreeMap<String, Vec<Received>> {
    let mut runs: BTreeMap<String, Vec<Received>> = BTreeMap::new();
    for message in received.iter().filter(|r| r.is_persisted()) {
        let run = message.envelope["run_id"].as_str().unwrap_or_default();
        runs.entry(run.to_string())
            .or_default()
            .push(message.clone());
    }
    runs
}

/// `received` holds exactly the run's history, in order, on the family's subjects, with the
/// family's message ids and envelope form.
fn assert_matches_history(
    stream: &TestStream,
    family: &str,
    app: &str,
    history: &[Value],
    received: &[Received],
) {
    let seen: Vec<(&str, i64)> = received
        .iter()
        .map(|r| {
            let id = r.envelope["event_id"].as_str().unwrap_or_default();
            (id, r.envelope["sequence_no"].as_i64().unwrap_or_default())
        })
        .collect();
    let expected: Vec<(&str, i64)> = history
        .iter()
        .map(|e| {
            let id = e["event_id"].as_str().unwrap_or_default();
            (id, e["sequence_no"].as_i64().unwrap_or_default())
        })
        .collect();
    assert_eq!(
        seen, expected,
        "{family} of {app}: every event once, in order"
    );
    for (message, event) in received.iter().zip(history) {
        let (run, kind) = (&event["run_id"], event["type"].as_str().unwrap_or_default());
        let run = run.as_str().unwrap_or_default();
        let id = event["event_id"].as_str().unwrap_or_default();
        let (subject, message_id, schema) = match family {
            "v2" => (
                format!("{}.v2.{app}.{run}.{kind}", stream.prefix),
                format!("{id}:v2"),
                json!("2"),
            ),
            _ => (
                format!("{}.{app}.{run}.{kind}", stream.prefix),
                id.to_string(),
                Value::Null,
            ),
        };
        assert_eq!(message.subject, subject);
        assert_eq!(message.message_id, message_id);
        assert_eq!(
            message.envelope["schema_version"], schema,
            "{family} envelope"
        );
        assert_eq!(message.envelope["data"], event["data"]);
        assert_eq!(message.envelope["app_id"], app);
    }
}

fn persisted_count(received: &[Received]) -> usize {
    received.iter().filter(|r| r.is_persisted()).count()
}

async fn nats_server(mock: &MockProvider, stream: &TestStream, url: &str) -> TestServer {
    let dir = tempfile::tempdir().expect("tempdir");
    let dsn = dir.path().join("runtime.db").display().to_string();
    let mut env = env_for(mock, &dsn);
    stream.sink_env(&mut env, url);
    let mut server = TestServer::start_with(env).await;
    server.dir = Some(dir);
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_persisted_event_of_v1_and_v2_apps_reaches_its_consumers_in_order() {
    on_test_stream("nats_apps", |stream| async move {
        let mock = MockProvider::start().await;
        // Paced, so the engine publishes the deltas live rather than only the whole message.
        mock.set_fallback(Some(
            Reply::text_deltas(["Looking ", "at ", "it."]).chunk_delay(Duration::from_millis(30)),
        ));
        let server = nats_server(&mock, &stream, &stream.url()).await;
        let config = stream.wait_config().await;
        assert_eq!(config.subjects, vec![format!("{}.>", stream.prefix)]);
        assert_eq!(
            config.storage,
            async_nats::jetstream::stream::StorageType::File
        );
        assert_eq!(
            config.retention,
            async_nats::jetstream::stream::RetentionPolicy::Limits
        );
        assert_eq!(
            config.discard,
            async_nats::jetstream::stream::DiscardPolicy::Old
        );
        assert_eq!(config.duplicate_window, Duration::from_secs(120));
        assert_eq!(config.max_age, Duration::from_secs(7 * 24 * 3600));
        assert_eq!(config.max_bytes, 512 * 1024 * 1024);

        let agent = server.agent("nats-v1", json!({})).await;
        let mut v1_runs = Vec::new();
        let mut v2_runs = Vec::new();
        for _ in 0..2 {
            let run = server.start_run(&mock, &agent, json!({})).await;
            v1_runs.push(run["id"].as_str().expect("run id").to_string());
            v2_runs.push(server.start_v2_run(&mock, "nats-v2").await);
        }
        let mut histories = BTreeMap::new();
        for run in &v1_runs {
            histories.insert(run.clone(), server.completed_history(APP, run).await);
        }
        for run in &v2_runs {
            histories.insert(run.clone(), server.completed_history(V2_APP, run).await);
        }
        let total = |runs: &[String]| runs.iter().map(|r| histories[r].len()).sum::<usize>();

        for (durable, app, family, filter, runs) in [
            ("host-app", APP, "v1", stream.v1_filter(APP), &v1_runs),
            (
                "v2-app-v1",
                V2_APP,
                "v1",
                stream.v1_filter(V2_APP),
                &v2_runs,
            ),
            (
                "v2-app-v2",
                V2_APP,
                "v2",
                stream.v2_filter(V2_APP),
                &v2_runs,
            ),
        ] {
            let mut consumer = stream.consumer(durable, &filter).await;
            let expected = total(runs);
            consumer
                .take_until(WAIT, |got| persisted_count(got) >= expected)
                .await;
            // Nothing doubled: a further fetch brings no more persisted events.
            consumer.fetch(Duration::from_millis(500)).await;
            assert_eq!(persisted_count(&consumer.received), expected, "{durable}");
            assert!(
                consumer
                    .received
                    .iter()
                    .all(|r| r.envelope["app_id"] == app),
                "{durable} sees only its app's events"
            );
            let received = by_run(&consumer.received);
            assert_eq!(received.len(), runs.len(), "{durable}");
            for run in runs {
                assert_matches_history(&stream, family, app, &histories[run], &received[run]);
            }
            if durable == "host-app" {
                let deltas: Vec<&Received> = consumer
                    .received
                    .iter()
                    .filter(|r| r.envelope["type"] == "assistant_message_delta")
                    .collect();
                assert!(!deltas.is_empty(), "live deltas are published too");
                assert!(deltas.iter().all(|d| d.envelope["sequence_no"] == 0));
            }
        }
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_go_on_while_nats_is_unreachable_and_the_backlog_arrives_in_order_after() {
    on_test_stream("nats_outage", |stream| async move {
        let mock = MockProvider::start().await;
        mock.set_fallback(Some(Reply::text("done")));
        let proxy = NatsProxy::start().await;
        let server = nats_server(&mock, &stream, &proxy.url).await;
        let mut consumer = stream.consumer("outage", &stream.v1_filter(APP)).await;
        let agent = server.agent("nats-outage", json!({})).await;
        let first = server.start_run(&mock, &agent, json!({})).await;
        let first = first["id"].as_str().expect("run id").to_string();
        let first_history = server.completed_history(APP, &first).await;
        consumer
            .take_until(WAIT, |got| persisted_count(got) >= first_history.len())
            .await;

        proxy.cut();
        let cut_at = Instant::now();
        let mut later = Vec::new();
        for _ in 0..3 {
            let run = server.start_run(&mock, &agent, json!({})).await;
            later.push(run["id"].as_str().expect("run id").to_string());
        }
        let mut histories = BTreeMap::new();
        for run in &later {
            histories.insert(run.clone(), server.completed_history(APP, run).await);
        }
        assert!(
            cut_at.elapsed() < Duration::from_secs(10),
            "runs did not wait for NATS: {:?}",
            cut_at.elapsed()
        );
        consumer.fetch(Duration::from_millis(800)).await;
        assert_eq!(
            persisted_count(&consumer.received),
            first_history.len(),
            "nothing reached NATS while it was cut off"
        );

        proxy.restore();
        let expected = first_history.len() + histories.values().map(Vec::len).sum::<usize>();
        consumer
            .take_until(Duration::from_secs(60), |got| {
                persisted_count(got) >= expected
            })
            .await;
        consumer.fetch(Duration::from_millis(500)).await;
        assert_eq!(persisted_count(&consumer.received), expected, "no doubles");
        let received = by_run(&consumer.received);
        for run in &later {
            assert_matches_history(&stream, "v1", APP, &histories[run], &received[run]);
        }
        server.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_too_large_for_nats_arrives_with_its_data_omitted_and_holds_nothing_back() {
    on_test_stream("nats_large", |stream| async move {
        let mock = MockProvider::start().await;
        let server = nats_server(&mock, &stream, &stream.url()).await;
        let agent = server.agent("nats-large", json!({})).await;
        // A reply over NATS's default max_payload (1 MiB), then an ordinary run behind it.
        mock.set_fallback(Some(Reply::text("x".repeat(1_200_000))));
        let large = server.start_run(&mock, &agent, json!({})).await;
        let large = large["id"].as_str().expect("run id").to_string();
        let large_history = server.completed_history(APP, &large).await;
        mock.set_fallback(Some(Reply::text("done")));
        let next = server.start_run(&mock, &agent, json!({})).await;
        let next = next["id"].as_str().expect("run id").to_string();
        let next_history = server.completed_history(APP, &next).await;

        let mut consumer = stream.consumer("large", &stream.v1_filter(APP)).await;
        let expected = large_history.len() + next_history.len();
        consumer
            .take_until(WAIT, |got| persisted_count(got) >= expected)
            .await;
        consumer.fetch(Duration::from_millis(500)).await;
        assert_eq!(
            persisted_count(&consumer.received),
            expected,
            "every event once"
        );
        let received = by_run(&consumer.received);
        assert_matches_history(&stream, "v1", APP, &next_history, &received[&next]);

        let got = &received[&large];
        let sequence = |events: Vec<&Value>| -> Vec<(Value, Value)> {
            events
                .into_iter()
                .map(|e| (e["event_id"].clone(), e["sequence_no"].clone()))
                .collect()
        };
        assert_eq!(
            sequence(got.iter().map(|r| &r.envelope).collect()),
            sequence(large_history.iter().collect()),
            "the large run's sequence is whole"
        );
        let mut omitted = 0;
        for (message, event) in got.iter().zip(&large_history) {
            if message.envelope["data"] == event["data"] {
                continue;
            }
            omitted += 1;
            let notice = &message.envelope["data"]["omitted"];
            assert_eq!(notice["reason"], "exceeds_nats_max_payload", "{notice}");
            assert!(notice["bytes"].as_u64() > Some(1 << 20), "{notice}");
            assert!(
                event["data"].to_string().len() > 1_000_000,
                "{}",
                event["type"]
            );
        }
        assert!(omitted >= 1, "the large reply's event carries the notice");
        server.stop().await;
    })
    .await;
}

/// One delivery: its `Authorization` and `Idempotency-Key` headers and its body.
type Delivery = (Option<String>, Option<String>, Value);

/// What the global callback receiver got.
#[derive(Default)]
struct Deliveries(Mutex<Vec<Delivery>>);

async fn record(
    axum::extract::State(deliveries): axum::extract::State<Arc<Deliveries>>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> axum::http::StatusCode {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    deliveries
        .0
        .lock()
        .unwrap()
        .push((header("authorization"), header("idempotency-key"), body));
    axum::http::StatusCode::NO_CONTENT
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_legacy_global_callback_receives_every_apps_events_through_the_outbox() {
    let deliveries = Arc::new(Deliveries::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/all-events", listener.local_addr().unwrap());
    let router = axum::Router::new()
        .route("/all-events", axum::routing::post(record))
        .with_state(deliveries.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let mock = MockProvider::start().await;
    mock.set_fallback(Some(Reply::text("done")));
    let dir = tempfile::tempdir().expect("tempdir");
    let dsn = dir.path().join("runtime.db").display().to_string();
    let mut env = env_for(&mock, &dsn);
    env.insert("AGENT_RUNTIME_EVENT_SINK".into(), "log,webhook".into());
    env.insert("AGENT_RUNTIME_EVENT_CALLBACK_URL".into(), url);
    env.insert(
        "AGENT_RUNTIME_EVENT_CALLBACK_TOKEN".into(),
        "global-callback-token".into(),
    );
    let server = TestServer::start_with(env).await;
    let agent = server.agent("global-callback", json!({})).await;
    let v1_run = server.start_run(&mock, &agent, json!({})).await;
    let v1_run = v1_run["id"].as_str().expect("run id").to_string();
    let v2_run = server.start_v2_run(&mock, "nats-v2").await;
    let mut expected = BTreeSet::new();
    for (app, run) in [(APP, &v1_run), (V2_APP, &v2_run)] {
        for event in server.completed_history(app, run).await {
            expected.insert(event["event_id"].as_str().unwrap_or_default().to_string());
        }
    }
    let ids = || -> BTreeSet<String> {
        deliveries
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, _, body)| body["event_id"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    wait_for("every event of both apps", WAIT, || async {
        (ids() == expected).then_some(())
    })
    .await;
    for (authorization, key, body) in deliveries.0.lock().unwrap().iter() {
        assert_eq!(
            authorization.as_deref(),
            Some("Bearer global-callback-token")
        );
        assert_eq!(key.as_deref(), body["event_id"].as_str());
        assert!(body["sequence_no"].as_i64().unwrap_or(0) > 0, "{body}");
        assert!(body.get("schema_version").is_none(), "v1 envelopes: {body}");
    }
    server.stop().await;
}
