//! Event callbacks through the durable outbox: a local receiver gets the app's events with its
//! bearer token, filtered by type; while it fails, the binary is killed and restarted, and
//! once it recovers every accepted event has arrived at least once.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ar_test_support::mock_provider::{AutoScript, MockProvider, Reply};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{json, Value};

use ar_test_support::service::*;

use crate::shapes;
use crate::BIN;

const CALLBACK_TOKEN: &str = "callback-token-e2e";
const ACCEPTED: [&str; 3] = ["run.started", "tool_call_finished", "run.completed"];

/// One accepted delivery.
#[derive(Debug, Clone)]
struct Delivery {
    authorization: Option<String>,
    idempotency_key: Option<String>,
    body: Value,
}

#[derive(Default)]
struct Receiver {
    healthy: AtomicBool,
    failed_attempts: AtomicUsize,
    deliveries: Mutex<Vec<Delivery>>,
}

impl Receiver {
    fn deliveries(&self) -> Vec<Delivery> {
        self.deliveries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn delivered_ids(&self) -> BTreeSet<String> {
        self.deliveries()
            .iter()
            .filter_map(|d| d.body["event_id"].as_str().map(str::to_string))
            .collect()
    }
}

async fn receive(
    State(receiver): State<Arc<Receiver>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    if !receiver.healthy.load(Ordering::SeqCst) {
        receiver.failed_attempts.fetch_add(1, Ordering::SeqCst);
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string)
    };
    let delivery = Delivery {
        authorization: header("authorization"),
        idempotency_key: header("idempotency-key"),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    receiver
        .deliveries
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(delivery);
    StatusCode::NO_CONTENT
}

/// Serves the receiver on 127.0.0.1:0 for the rest of the test; returns its callback URL.
async fn start_receiver(receiver: Arc<Receiver>) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind receiver");
    let addr: SocketAddr = listener.local_addr().expect("receiver addr");
    let router = axum::Router::new()
        .route("/hooks/runtime", axum::routing::post(receive))
        .with_state(receiver);
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (format!("http://{addr}/hooks/runtime"), task)
}

fn callback_env(dir: &std::path::Path, mock: &MockProvider, url: &str) -> BTreeMap<String, String> {
    let mut env = sqlite_env(dir, mock);
    let callbacks = json!({"event_callbacks": [
        {"url": url, "token": CALLBACK_TOKEN, "event_types": ACCEPTED}
    ]});
    env.insert(
        "AGENT_RUNTIME_APP_CONFIG".into(),
        app_config(mock, callbacks).to_string(),
    );
    env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_survive_a_failing_receiver_and_a_crash_without_losing_events() {
    let mock = MockProvider::start().await;
    let receiver = Arc::new(Receiver::default());
    receiver.healthy.store(true, Ordering::SeqCst);
    let (url, receiver_task) = start_receiver(receiver.clone()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let env = callback_env(dir.path(), &mock, &url);

    let mut first = Server::start(BIN, &env).await;
    let agent = first.create_agent("notifier", &["get_context"]).await;
    let agent_id = agent["id"].as_str().expect("agent id").to_string();

    // Run A, receiver healthy: its accepted events arrive.
    mock.push(Reply::tool_call("get_context", "{}"));
    mock.push(Reply::text("A done"));
    let run_a = first.start_run(&mock, &agent_id, json!({})).await;
    let run_a = run_a["id"].as_str().expect("run id").to_string();
    first.wait_status(&run_a, &["completed"]).await;
    wait_for("run A's completion callback", WAIT, || async {
        receiver
            .deliveries()
            .iter()
            .any(|d| d.body["run_id"] == run_a.as_str() && d.body["type"] == "run.completed")
            .then_some(())
    })
    .await;

    // The receiver fails. Run B completes and run C is mid-step when the binary is killed.
    receiver.healthy.store(false, Ordering::SeqCst);
    mock.push(Reply::tool_call("get_context", "{}"));
    mock.push(Reply::tool_call("get_context", "{}"));
    mock.push(Reply::text("B done"));
    let run_b = first.start_run(&mock, &agent_id, json!({})).await;
    let run_b = run_b["id"].as_str().expect("run id").to_string();
    first.wait_status(&run_b, &["completed"]).await;
    wait_for("failed delivery attempts", WAIT, || async {
        (receiver.failed_attempts.load(Ordering::SeqCst) >= 2).then_some(())
    })
    .await;
    let requests_before_c = mock.model_requests().len();
    mock.push(Reply::tool_call("get_context", "{}"));
    mock.push(Reply::hang());
    let run_c = first.start_run(&mock, &agent_id, json!({})).await;
    let run_c = run_c["id"].as_str().expect("run id").to_string();
    wait_model_requests(&mock, requests_before_c + 2).await;
    first.process.kill_hard();
    drop(first);
    mock.push(Reply::text("C done"));

    // The restarted binary retries from its durable cursor while the receiver still fails…
    let failures_before_restart = receiver.failed_attempts.load(Ordering::SeqCst);
    let second = Server::start(BIN, &env).await;
    wait_for("a failed attempt by the restarted binary", WAIT, || async {
        (receiver.failed_attempts.load(Ordering::SeqCst) > failures_before_restart).then_some(())
    })
    .await;
    // …and once the receiver is back, everything arrives.
    receiver.healthy.store(true, Ordering::SeqCst);
    second.wait_status(&run_c, &["completed"]).await;

    let mut expected: BTreeMap<String, Value> = BTreeMap::new();
    let mut all_ids = BTreeSet::new();
    for run_id in [&run_a, &run_b, &run_c] {
        for event in second.events(run_id).await {
            let id = event["event_id"].as_str().expect("event id").to_string();
            all_ids.insert(id.clone());
            if ACCEPTED.contains(&event["type"].as_str().unwrap_or_default()) {
                expected.insert(id, event);
            }
        }
    }
    assert!(
        expected.len() >= 9,
        "three runs' accepted events: {expected:?}"
    );
    wait_for("every accepted event delivered", WAIT, || async {
        let delivered = receiver.delivered_ids();
        expected
            .keys()
            .all(|id| delivered.contains(id))
            .then_some(())
    })
    .await;

    for delivery in receiver.deliveries() {
        let body = &delivery.body;
        assert_eq!(
            delivery.authorization.as_deref(),
            Some(format!("Bearer {CALLBACK_TOKEN}").as_str())
        );
        shapes::check("callback body", shapes::EVENT, body);
        let id = body["event_id"].as_str().expect("event id");
        assert!(all_ids.contains(id), "delivered an unknown event: {body}");
        let stored = expected
            .get(id)
            .unwrap_or_else(|| panic!("delivered an event outside the filter: {body}"));
        assert_eq!(body["type"], stored["type"]);
        assert_eq!(body["sequence_no"], stored["sequence_no"]);
        assert_eq!(body["run_id"], stored["run_id"]);
        if let Some(key) = &delivery.idempotency_key {
            assert_eq!(key, id, "Idempotency-Key carries the event id");
        }
    }
    receiver_task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_started_right_after_startup_is_delivered() {
    // A newly configured callback starts at the end of the log; events committed while its
    // worker is still starting must not fall before that starting point.
    let mock = MockProvider::start().await;
    let receiver = Arc::new(Receiver::default());
    receiver.healthy.store(true, Ordering::SeqCst);
    let (url, receiver_task) = start_receiver(receiver.clone()).await;
    for attempt in 0..3 {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = Server::start(BIN, &callback_env(dir.path(), &mock, &url)).await;
        mock.push(Reply::text("quick"));
        let agent = server.create_agent("quick", &[]).await;
        let run = server
            .start_run(&mock, agent["id"].as_str().expect("agent id"), json!({}))
            .await;
        let run_id = run["id"].as_str().expect("run id").to_string();
        server.wait_status(&run_id, &["completed"]).await;
        let expected: BTreeSet<String> = server
            .events(&run_id)
            .await
            .iter()
            .filter(|e| ACCEPTED.contains(&e["type"].as_str().unwrap_or_default()))
            .filter_map(|e| e["event_id"].as_str().map(str::to_string))
            .collect();
        wait_for(
            &format!("attempt {attempt}: the first run's events"),
            WAIT,
            || async {
                let delivered = receiver.delivered_ids();
                expected
                    .iter()
                    .all(|id| delivered.contains(id))
                    .then_some(())
            },
        )
        .await;
    }
    receiver_task.abort();
}

/// Concurrent five-step runs against a callback without a type filter: every persisted event
/// of every run arrives, each run's events in sequence order. `base` picks the store.
pub async fn concurrent_runs_deliver_every_event(
    base: &BTreeMap<String, String>,
    mock: &MockProvider,
) {
    const RUNS: usize = 8;
    mock.auto(AutoScript::five_step("get_context"));
    let receiver = Arc::new(Receiver::default());
    receiver.healthy.store(true, Ordering::SeqCst);
    let (url, receiver_task) = start_receiver(receiver.clone()).await;
    let mut env = base.clone();
    let callbacks = json!({"event_callbacks": [{"url": url, "token": CALLBACK_TOKEN}]});
    env.insert(
        "AGENT_RUNTIME_APP_CONFIG".into(),
        app_config(mock, callbacks).to_string(),
    );
    let server = Server::start(BIN, &env).await;
    let agent = server.create_agent("busy", &["get_context"]).await;
    let agent_id = agent["id"].as_str().expect("agent id");
    let starts = (0..RUNS).map(|_| server.start_run(mock, agent_id, json!({})));
    let run_ids: Vec<String> = futures::future::join_all(starts)
        .await
        .iter()
        .map(|run| run["id"].as_str().expect("run id").to_string())
        .collect();
    let mut expected = BTreeSet::new();
    for run_id in &run_ids {
        let done = server.wait_status(run_id, &["completed", "failed"]).await;
        assert_eq!(done["status"], "completed", "{done}");
        let events = server.events(run_id).await;
        assert_contiguous(&events);
        expected.extend(
            events
                .iter()
                .filter_map(|e| e["event_id"].as_str().map(str::to_string)),
        );
    }
    wait_for("every event of every run delivered", WAIT, || async {
        let delivered = receiver.delivered_ids();
        expected
            .iter()
            .all(|id| delivered.contains(id))
            .then_some(())
    })
    .await;
    let deliveries = receiver.deliveries();
    for run_id in &run_ids {
        let mut order: Vec<i64> = Vec::new();
        for delivery in &deliveries {
            if delivery.body["run_id"] == run_id.as_str() {
                let sequence = delivery.body["sequence_no"].as_i64().expect("sequence_no");
                if !order.contains(&sequence) {
                    order.push(sequence);
                }
            }
        }
        assert_eq!(
            order,
            (1..=order.len() as i64).collect::<Vec<_>>(),
            "run {run_id}: callbacks in log order"
        );
    }
    receiver_task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_deliver_every_event_on_sqlite() {
    let mock = MockProvider::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    concurrent_runs_deliver_every_event(&sqlite_env(dir.path(), &mock), &mock).await;
}
