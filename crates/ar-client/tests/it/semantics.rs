//! The consumer's settlement of each delivery on a real JetStream, with events published straight to a stream of the test's own: retry after the schedule's delay, drop, the last delivery, an undecodable body, durability across a restart, redelivery after a crash, a reconnect after NATS was cut off, a retry falling due beside a pull request another instance left behind.

use std::collections::BTreeMap;
use std::time::Duration;

use ar_client::nats::{stream_config, HandlerError, NatsConsumerConfig};
use ar_test_support::service::nats::{on_test_stream, NatsProxy, TestStream};
use ar_wire::EventEnvelope;
use async_nats::jetstream::consumer;
use serde_json::json;

use crate::running::{spawn_consumer, Answer, Handled};

const APP: &str = "host_app";

/// A consumer of the test's stream (created by the consumer, as the SDKs' default does when
/// it opens its own connection) with a fast schedule.
fn config(stream: &TestStream, durable: &str, backoff: &[u64]) -> NatsConsumerConfig {
    NatsConsumerConfig {
        stream: stream.name.clone(),
        stream_subjects: vec![format!("{}.>", stream.prefix)],
        subject: stream.v1_filter(APP),
        durable: durable.to_string(),
        max_wait: Duration::from_secs(1),
        backoff: backoff.iter().copied().map(Duration::from_millis).collect(),
        ..NatsConsumerConfig::new(stream.url(), APP)
    }
}

/// Publishes a v1 envelope of event `id` (sequence `seq`) of run `run`, waiting for the ack.
async fn publish(stream: &TestStream, run: &str, seq: i64, id: &str) {
    let body = json!({
        "event_id": id, "sent_at": "2026-12-01T00:00:00Z", "sequence_no": seq,
        "app_id": APP, "run_id": run, "type": "run.started", "data": {}
    });
    publish_raw(stream, run, body.to_string().into_bytes()).await;
}

async fn publish_raw(stream: &TestStream, run: &str, body: Vec<u8>) {
    let subject = format!("{}.{APP}.{run}.run.started", stream.prefix);
    let ack = stream
        .js
        .publish(subject, body.into())
        .await
        .expect("publish");
    ack.await.expect("stored");
}

async fn create_stream(stream: &TestStream) {
    let config = config(stream, "unused", &[100]);
    stream
        .js
        .create_stream(stream_config(&config))
        .await
        .expect("stream");
}

fn ids(handled: &[Handled]) -> Vec<&str> {
    handled.iter().map(|h| h.event.event_id.as_str()).collect()
}

/// The durable as the server sees it.
async fn info(stream: &TestStream, durable: &str) -> consumer::Info {
    let mut consumer = stream
        .js
        .get_stream(&stream.name)
        .await
        .expect("stream")
        .get_consumer::<consumer::pull::Config>(durable)
        .await
        .expect("consumer");
    consumer.info().await.expect("info").clone()
}

/// Acknowledged and pending counts of the durable, as the server sees it.
async fn acked(stream: &TestStream, durable: &str) -> (u64, usize) {
    let info = info(stream, durable).await;
    (info.ack_floor.stream_sequence, info.num_ack_pending)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_event_comes_again_after_its_delay_and_a_dropped_one_never() {
    on_test_stream("client_retry", |stream| async move {
        create_stream(&stream).await;
        let mut tries: BTreeMap<String, usize> = BTreeMap::new();
        let mut running = spawn_consumer(config(&stream, "retry", &[1000, 2000]), move |event| {
            let seen = tries.entry(event.event_id.clone()).or_default();
            *seen += 1;
            Answer::Reply(match (event.event_id.as_str(), *seen) {
                ("retry", 1) => Err(HandlerError::Retry),
                ("fail", 1) => Err(HandlerError::failed("projection store down")),
                ("drop", _) => Err(HandlerError::Drop),
                _ => Ok(()),
            })
        });
        for (seq, id) in ["retry", "drop", "fail", "ok"].into_iter().enumerate() {
            publish(&stream, "r1", seq as i64 + 1, id).await;
        }
        let handled = running.take(6, Duration::from_secs(15), |_| true).await;
        let first_retry = handled.iter().position(|h| h.event.event_id == "retry");
        let second = handled.iter().rposition(|h| h.event.event_id == "retry");
        let (first, second) = (first_retry.expect("first"), second.expect("second"));
        assert_ne!(first, second, "retry delivered twice: {:?}", ids(&handled));
        let waited = handled[second].at - handled[first].at;
        assert!(
            waited >= Duration::from_millis(900),
            "the schedule's first delay: {waited:?}"
        );
        // Nothing more: the drop is not redelivered, the handled ones are acknowledged.
        let more = running.next(Duration::from_secs(3)).await;
        assert!(
            more.is_none(),
            "unexpected {:?}",
            more.map(|h| h.event.event_id)
        );
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for id in ids(&handled) {
            *counts.entry(id).or_default() += 1;
        }
        assert_eq!(
            counts,
            BTreeMap::from([("drop", 1), ("fail", 2), ("ok", 1), ("retry", 2)])
        );
        assert_eq!(acked(&stream, "retry").await, (4, 0));
        running.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_failing_its_last_delivery_and_an_undecodable_body_are_acknowledged() {
    on_test_stream("client_exhaust", |stream| async move {
        create_stream(&stream).await;
        let config = NatsConsumerConfig {
            max_deliver: 2,
            ..config(&stream, "exhaust", &[300])
        };
        let mut running = spawn_consumer(config, |event| {
            Answer::Reply(match event.event_id.as_str() {
                "always-fails" => Err(HandlerError::failed("bug")),
                _ => Ok(()),
            })
        });
        publish_raw(&stream, "r1", b"not an envelope".to_vec()).await;
        publish_raw(
            &stream,
            "r1",
            br#"{"app_id":"host_app","type":"run.started"}"#.to_vec(),
        )
        .await;
        publish(&stream, "r1", 1, "always-fails").await;
        publish(&stream, "r1", 2, "after").await;
        let handled = running.take(3, Duration::from_secs(10), |_| true).await;
        assert!(
            running.next(Duration::from_secs(2)).await.is_none(),
            "no third delivery"
        );
        let mut got = ids(&handled);
        got.sort_unstable();
        assert_eq!(got, ["after", "always-fails", "always-fails"]);
        assert_eq!(
            acked(&stream, "exhaust").await,
            (4, 0),
            "all four acknowledged"
        );
        running.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_events_stay_acknowledged_across_restarts_and_a_crash_redelivers() {
    on_test_stream("client_durable", |stream| async move {
        create_stream(&stream).await;
        let durable = "durable";
        // A short ack wait, so the crashed delivery comes again within the test.
        let config = || NatsConsumerConfig {
            ack_wait: Duration::from_secs(2),
            ..config(&stream, durable, &[1000])
        };
        publish(&stream, "r1", 1, "e1").await;
        publish(&stream, "r1", 2, "e2").await;
        let mut first = spawn_consumer(config(), |_| Answer::Reply(Ok(())));
        let handled = first.take(2, Duration::from_secs(10), |_| true).await;
        assert_eq!(ids(&handled), ["e1", "e2"]);
        first.stop().await;

        // Restarted: only the new event, and this instance crashes while handling it.
        publish(&stream, "r1", 3, "e3").await;
        let mut second = spawn_consumer(config(), |_| Answer::Hang);
        let handled = second.take(1, Duration::from_secs(10), |_| true).await;
        assert_eq!(ids(&handled), ["e3"]);
        // A second instance of the durable: while the first one's handler runs past the ack
        // wait, in-progress acks keep the message from being handed to it.
        let mut other = spawn_consumer(config(), |_: &EventEnvelope| Answer::Reply(Ok(())));
        assert!(
            other.next(Duration::from_secs(4)).await.is_none(),
            "no second copy while the handler runs"
        );
        second.crash().await;

        let handled = other.take(1, Duration::from_secs(10), |_| true).await;
        assert_eq!(ids(&handled), ["e3"], "redelivered after the crash");
        assert!(
            other.next(Duration::from_secs(2)).await.is_none(),
            "e1, e2 stay acknowledged"
        );
        assert_eq!(acked(&stream, durable).await, (3, 0));
        other.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consumer_reconnects_after_nats_was_cut_off_and_goes_on_from_its_durable() {
    on_test_stream("client_reconnect", |stream| async move {
        create_stream(&stream).await;
        let proxy = NatsProxy::start().await;
        let config = NatsConsumerConfig {
            url: proxy.url.clone(),
            ..config(&stream, "reconnect", &[500])
        };
        let mut running = spawn_consumer(config, |_| Answer::Reply(Ok(())));
        publish(&stream, "r1", 1, "before").await;
        let handled = running.take(1, Duration::from_secs(10), |_| true).await;
        assert_eq!(ids(&handled), ["before"]);
        // The handler's return is not the server's record of the ack: cut only once the
        // server has it, or the ack is lost with the link and "before" comes back only after
        // the ack wait (at least once, but not what this test is about).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while acked(&stream, "reconnect").await != (1, 0) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the first ack never reached the server"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        proxy.cut();
        // Published only once the server holds no pull request of the cut connection: until
        // it notices the connection is gone, it would hand the event to one of them, into the
        // void, and send it again only after the ack wait (at least once, as JetStream
        // promises, but not what this test is about).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while info(&stream, "reconnect").await.num_waiting > 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the server still holds the cut connection's pull requests"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        publish(&stream, "r1", 2, "during").await;
        assert!(
            running.next(Duration::from_secs(2)).await.is_none(),
            "cut off"
        );
        proxy.restore();
        // The client reconnects within its 2 s retry wait and the consumer asks again at once.
        let handled = running.take(1, Duration::from_secs(8), |_| true).await;
        assert_eq!(ids(&handled), ["during"], "after the reconnect");
        assert!(running.next(Duration::from_secs(1)).await.is_none());
        assert_eq!(acked(&stream, "reconnect").await, (2, 0));
        running.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_due_while_another_instance_left_its_pull_request_behind_comes_once() {
    on_test_stream("client_left_behind", |stream| async move {
        create_stream(&stream).await;
        let durable = "left_behind";
        let mut tries = 0;
        let answer = move |event: &EventEnvelope| match event.event_id.as_str() {
            "retry" if tries == 0 => {
                tries += 1;
                Answer::Reply(Err(HandlerError::Retry))
            }
            "slow" => Answer::After(Duration::from_secs(2), Ok(())),
            _ => Answer::Reply(Ok(())),
        };
        let mut running = spawn_consumer(config(&stream, durable, &[1000]), answer);
        for (seq, id) in ["ok", "retry", "slow"].into_iter().enumerate() {
            publish(&stream, "r1", seq as i64 + 1, id).await;
        }
        let handled = running.take(3, Duration::from_secs(10), |_| true).await;
        assert_eq!(ids(&handled), ["ok", "retry", "slow"]);
        // While "slow" is handled, the retry falls due (1 s) with a request of a stopped
        // instance of the durable still on the server.
        leave_a_pull_request_behind(&stream, durable).await;
        let handled = running.take(1, Duration::from_secs(10), |_| true).await;
        assert_eq!(
            ids(&handled),
            ["retry"],
            "the retry, once the slow one is done"
        );
        let more = running.next(Duration::from_secs(2)).await;
        assert!(
            more.is_none(),
            "an acknowledged event came again: {:?}",
            more.map(|h| (h.event.event_id, h.at))
        );
        assert_eq!(acked(&stream, durable).await, (3, 0));
        running.stop().await;
    })
    .await;
}

/// What an instance of the durable that stops leaves on the server: a pull request it no
/// longer listens to, which the server keeps until it next looks at its requests.
async fn leave_a_pull_request_behind(stream: &TestStream, durable: &str) {
    let consumer = stream
        .js
        .get_stream(&stream.name)
        .await
        .expect("stream")
        .get_consumer::<consumer::pull::Config>(durable)
        .await
        .expect("consumer");
    let client = stream.js.client();
    let inbox = client.new_inbox();
    let subscription = client.subscribe(inbox.clone()).await.expect("subscribe");
    let request = consumer::pull::BatchConfig {
        batch: 1,
        expires: Some(Duration::from_secs(30)),
        ..Default::default()
    };
    consumer
        .request_batch(request, inbox.into())
        .await
        .expect("pull request");
    client.flush().await.expect("flush");
    // Gone only once the server has queued the request (it drops one without a listener).
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(subscription);
    client.flush().await.expect("flush");
}
