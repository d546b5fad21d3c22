//! NATS JetStream for the sink's tests: a stream and subject prefix of each test's own, a consumer configured as the SDKs' `NATSConsumer` is by default, and a TCP proxy that can cut NATS off.
//!
//! The server comes from `AR_TEST_NATS_URL` (default `nats://127.0.0.1:4222`). When it is
//! unreachable the test is skipped with a loud message, unless `CI=true`, where that fails.
//! Streams may not share subjects, so each test's service publishes below a prefix of its
//! own (v1 family `{prefix}.{app}.{run}.{type}`, v2 family `{prefix}.v2.…`); the stream is
//! deleted afterwards, even when the test panics.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull};
use futures::{FutureExt as _, StreamExt as _};
use serde_json::Value;
use tokio::task::AbortHandle;

use super::Env;

fn server_url() -> String {
    std::env::var("AR_TEST_NATS_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
        .unwrap_or_else(|| "nats://127.0.0.1:4222".to_string())
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value.eq_ignore_ascii_case("true") || value == "1")
}

/// Host and port of the test NATS (what a proxy forwards to).
pub fn server_addr() -> String {
    let url = server_url();
    url.split_once("://")
        .map_or(url.as_str(), |(_, rest)| rest)
        .to_string()
}

async fn connect() -> Result<async_nats::Client, String> {
    let connecting = async_nats::ConnectOptions::new()
        .name("agent-runtime-tests")
        .connect(server_url());
    match tokio::time::timeout(Duration::from_secs(5), connecting).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("connection timed out".to_string()),
    }
}

/// A stream of one test's own, named after the test.
pub struct TestStream {
    pub name: String,
    /// Every subject of this test starts with it.
    pub prefix: String,
    pub js: jetstream::Context,
}

fn unique_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.subsec_nanos())
        .unwrap_or_default();
    format!("{}_{nanos}", std::process::id())
}

/// Runs `body` with a stream and prefix of its own (the service under test creates the
/// stream), deleting the stream afterwards even when `body` panics. Skips (or fails under CI)
/// when NATS is unreachable.
pub async fn on_test_stream<F, Fut>(case: &str, body: F)
where
    F: FnOnce(TestStream) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let client = match connect().await {
        Ok(client) => client,
        Err(error) if !in_ci() => {
            eprintln!(
                "\n!!!!! SKIPPING {case}: NATS at {} is unreachable ({error}). \
                 Set AR_TEST_NATS_URL or start nats-server -js; under CI=true this fails.\n",
                server_url()
            );
            return;
        }
        Err(error) => panic!("{case}: NATS JetStream is required under CI: {error}"),
    };
    let suffix = unique_suffix();
    let js = jetstream::new(client);
    let stream = TestStream {
        name: format!("ART_{}_{suffix}", case.to_ascii_uppercase()),
        prefix: format!("art_{case}_{suffix}"),
        js: js.clone(),
    };
    let name = stream.name.clone();
    let outcome = AssertUnwindSafe(body(stream)).catch_unwind().await;
    let _ = js.delete_stream(&name).await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

impl TestStream {
    /// The service's environment for the `nats` sink on this stream, at `url` (the test NATS,
    /// or a proxy of it).
    pub fn sink_env(&self, env: &mut Env, url: &str) {
        let prefix = &self.prefix;
        for (name, value) in [
            ("AGENT_RUNTIME_EVENT_SINK", "nats".to_string()),
            ("AGENT_RUNTIME_NATS_URL", url.to_string()),
            ("AGENT_RUNTIME_NATS_STREAM", self.name.clone()),
            ("AGENT_RUNTIME_NATS_STREAM_SUBJECTS", format!("{prefix}.>")),
            (
                "AGENT_RUNTIME_NATS_SUBJECT_TEMPLATE",
                format!("{prefix}.{{app_id}}.{{run_id}}.{{event_type}}"),
            ),
            (
                "AGENT_RUNTIME_NATS_V2_SUBJECT_TEMPLATE",
                format!("{prefix}.v2.{{app_id}}.{{run_id}}.{{type}}"),
            ),
            (
                "AGENT_RUNTIME_NATS_CLIENT_NAME",
                format!("{prefix}-service"),
            ),
        ] {
            env.insert(name.to_string(), value);
        }
    }

    /// The URL of the test NATS.
    pub fn url(&self) -> String {
        server_url()
    }

    /// The filter of an app's v1 events (the SDKs' `AppEventSubject`, below the prefix).
    pub fn v1_filter(&self, app_id: &str) -> String {
        format!("{}.{}.>", self.prefix, ar_wire::nats::app_token(app_id))
    }

    /// The filter of an app's v2 events.
    pub fn v2_filter(&self, app_id: &str) -> String {
        format!("{}.v2.{}.>", self.prefix, ar_wire::nats::app_token(app_id))
    }

    /// The stream's configuration, once the service has created it (bounded wait).
    pub async fn wait_config(&self) -> jetstream::stream::Config {
        super::wait_for("the service to create the stream", super::WAIT, || async {
            let mut stream = self.js.get_stream(&self.name).await.ok()?;
            stream.info().await.ok().map(|info| info.config.clone())
        })
        .await
    }

    /// A durable pull consumer with explicit acks on `filter`, configured with the SDKs'
    /// `NATSConsumer` defaults (deliver all, ack wait 45 s, 5 deliveries, 64 acks pending,
    /// backoff 5 s, 15 s, 45 s, 120 s). The SDKs list a fifth backoff (300 s), which the server
    /// refuses ("max deliver is required to be > length of backoff values"); it only delays
    /// a fifth redelivery that max deliver never allows.
    pub async fn consumer(&self, durable: &str, filter: &str) -> Consumer {
        self.wait_config().await;
        let stream = self.js.get_stream(&self.name).await.expect("stream");
        let config = pull::Config {
            durable_name: Some(durable.to_string()),
            filter_subject: filter.to_string(),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            deliver_policy: jetstream::consumer::DeliverPolicy::All,
            ack_wait: Duration::from_secs(45),
            max_deliver: 5,
            backoff: [5, 15, 45, 120]
                .into_iter()
                .map(Duration::from_secs)
                .collect(),
            max_ack_pending: 64,
            ..Default::default()
        };
        let inner = stream
            .create_consumer(config)
            .await
            .unwrap_or_else(|error| panic!("consumer {durable}: {error}"));
        Consumer {
            inner,
            received: Vec::new(),
        }
    }
}

/// One message as a consumer received (and acknowledged) it.
#[derive(Debug, Clone)]
pub struct Received {
    pub subject: String,
    /// `Nats-Msg-Id`.
    pub message_id: String,
    pub envelope: Value,
}

impl Received {
    /// A persisted event (transient deltas carry sequence 0).
    pub fn is_persisted(&self) -> bool {
        self.envelope["sequence_no"].as_i64().unwrap_or(0) > 0
    }
}

/// A durable pull consumer that acknowledges every message it takes.
pub struct Consumer {
    inner: jetstream::consumer::Consumer<pull::Config>,
    /// Everything received so far, in delivery order.
    pub received: Vec<Received>,
}

impl Consumer {
    /// Fetches batches of 8 (the SDKs' default), acknowledging each message, until `done`
    /// holds for what was received; panics after `within`.
    pub async fn take_until(
        &mut self,
        within: Duration,
        done: impl Fn(&[Received]) -> bool,
    ) -> &[Received] {
        let deadline = tokio::time::Instant::now() + within;
        while !done(&self.received) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "gave up after {within:?} with {} messages: {:?}",
                self.received.len(),
                self.received.iter().map(|r| &r.subject).collect::<Vec<_>>()
            );
            self.fetch(Duration::from_millis(300)).await;
        }
        &self.received
    }

    /// One fetch of up to 8 messages, waiting at most `wait` for them.
    pub async fn fetch(&mut self, wait: Duration) {
        let mut batch = self
            .inner
            .fetch()
            .max_messages(8)
            .expires(wait)
            .messages()
            .await
            .expect("fetch");
        while let Some(message) = batch.next().await {
            let message = message.expect("message");
            let message_id = message
                .headers
                .as_ref()
                .and_then(|headers| headers.get(async_nats::header::NATS_MESSAGE_ID))
                .map(|id| id.as_str().to_string())
                .unwrap_or_default();
            self.received.push(Received {
                subject: message.subject.to_string(),
                message_id,
                envelope: serde_json::from_slice(&message.payload).unwrap_or(Value::Null),
            });
            message.ack().await.expect("ack");
        }
    }

    /// The persisted events received, in order.
    pub fn persisted(&self) -> Vec<Received> {
        self.received
            .iter()
            .filter(|r| r.is_persisted())
            .cloned()
            .collect()
    }
}

/// A TCP proxy in front of the test NATS whose link can be cut (every connection closed,
/// new ones closed at once) and restored: NATS "down" without stopping the machine's server.
pub struct NatsProxy {
    pub url: String,
    cut: Arc<std::sync::atomic::AtomicBool>,
    links: Arc<Mutex<Vec<AbortHandle>>>,
    accept: AbortHandle,
}

impl NatsProxy {
    pub async fn start() -> NatsProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind proxy");
        let url = format!("nats://{}", listener.local_addr().expect("proxy addr"));
        let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let links: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let upstream = server_addr();
        let (cut_flag, link_list) = (cut.clone(), links.clone());
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if cut_flag.load(std::sync::atomic::Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let upstream = upstream.clone();
                let link = tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
                lock(&link_list).push(link.abort_handle());
            }
        })
        .abort_handle();
        NatsProxy {
            url,
            cut,
            links,
            accept,
        }
    }

    /// Closes every connection through the proxy and refuses new ones until [`Self::restore`].
    pub fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        for link in lock(&self.links).drain(..) {
            link.abort();
        }
    }

    pub fn restore(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for NatsProxy {
    fn drop(&mut self) {
        self.cut();
        self.accept.abort();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
