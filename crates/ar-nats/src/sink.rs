//! The sink's settings, its counters, and [`NatsSink`]: the connection, the cursor and the two publishing tasks.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ar_core::event::{EventBus, TransientEvent};
use ar_core::secret::Secret;
use ar_core::store::{Store, StoreError};
use ar_events::StartPosition;
use async_nats::jetstream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::message::Routes;
use crate::thread::SinkThread;

/// How the sink reaches NATS and which stream it writes.
#[derive(Debug, Clone)]
pub struct NatsOptions {
    /// One server URL or several, comma separated (may carry credentials).
    pub servers: Secret,
    pub client_name: String,
    pub stream: String,
    pub stream_subjects: Vec<String>,
    /// Create or update the stream before publishing.
    pub ensure_stream: bool,
    pub tuning: Tuning,
}

/// Bounds and delays of the sink.
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    /// Events read from the log per store query.
    pub batch_size: i64,
    /// Events read and not yet acknowledged, at most (reading waits beyond it).
    pub max_held: usize,
    /// Events whose acknowledgements may be outstanding at once.
    pub max_in_flight: usize,
    /// How often the cursor is written to the store while it moves (and when the publisher
    /// stops): a crash republishes at most this much, which JetStream's duplicate window drops.
    pub cursor_interval: Duration,
    /// Store poll interval when the bus does not wake the publisher (events committed by
    /// another replica).
    pub poll_interval: Duration,
    /// How long JetStream has to acknowledge a publish.
    pub ack_timeout: Duration,
    /// First delay after a failed publish; doubles per failure up to `max_backoff`.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Transient deltas queued for publishing; beyond it they are dropped and counted.
    pub live_capacity: usize,
    /// Wait between reconnect attempts (the contract's 2 s; attempts never stop).
    pub reconnect_wait: Duration,
    /// How long shutdown waits for committed events to be published.
    pub shutdown_flush: Duration,
    /// How long a persisted event handed over by the bus may wait behind a position not
    /// handed over before the publisher reads the log for it (see [`crate::handoff`]): runs
    /// hand their commits over as their tasks resume, not always in position order.
    pub gap_grace: Duration,
    /// How long the sink's thread sleeps when it runs out of work, gathering what arrives
    /// meanwhile into one wake-up (see [`crate::thread`]); adds at most this to the lag.
    pub pace: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            batch_size: 512,
            max_held: 2048,
            max_in_flight: 256,
            cursor_interval: Duration::from_millis(250),
            poll_interval: Duration::from_secs(1),
            ack_timeout: Duration::from_secs(5),
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            live_capacity: 4096,
            reconnect_wait: Duration::from_secs(2),
            shutdown_flush: Duration::from_secs(5),
            gap_grace: Duration::from_millis(5),
            pace: Duration::from_millis(2),
        }
    }
}

/// What the sink did, for logs, tests and the benchmark.
#[derive(Debug, Default)]
pub struct Stats {
    published: AtomicU64,
    failures: AtomicU64,
    deltas_published: AtomicU64,
    deltas_dropped: AtomicU64,
    cursor: AtomicI64,
}

impl Stats {
    /// Persisted events JetStream acknowledged (a republish counts again).
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Relaxed)
    }

    /// Publish attempts that failed (each is retried).
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    pub fn deltas_published(&self) -> u64 {
        self.deltas_published.load(Ordering::Relaxed)
    }

    /// Deltas not published: the queue was full or NATS was unreachable.
    pub fn deltas_dropped(&self) -> u64 {
        self.deltas_dropped.load(Ordering::Relaxed)
    }

    /// The store position up to which every event is acknowledged.
    pub fn cursor(&self) -> i64 {
        self.cursor.load(Ordering::Relaxed)
    }

    pub(crate) fn add_published(&self, events: u64) {
        self.published.fetch_add(events, Ordering::Relaxed);
    }

    pub(crate) fn add_failure(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn add_delta_published(&self) {
        self.deltas_published.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a dropped delta; returns the new total.
    pub(crate) fn add_delta_dropped(&self) -> u64 {
        self.deltas_dropped.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub(crate) fn set_cursor(&self, position: i64) {
        self.cursor.store(position, Ordering::Relaxed);
    }
}

/// Why the sink could not start.
#[derive(Debug, thiserror::Error)]
pub enum NatsError {
    /// The message names the server by its place in the list: the URL may carry a password.
    #[error("NATS server address #{index} is not valid: {source}")]
    ServerAddress {
        index: usize,
        #[source]
        source: std::io::Error,
    },
    #[error("NATS client: {0}")]
    Connect(#[from] async_nats::ConnectError),
    #[error("subscribing to the replica link: {0}")]
    Subscribe(#[from] async_nats::SubscribeError),
    #[error("confirming the replica link's subscription: {0}")]
    Confirm(#[source] async_nats::RequestError),
    #[error("the NATS sink's cursor: {0}")]
    Cursor(#[from] StoreError),
    #[error("starting the NATS sink's thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// The NATS JetStream sink, connected and with its cursor in the store; [`NatsSink::spawn`]
/// starts publishing.
pub struct NatsSink {
    client: async_nats::Client,
    js: jetstream::Context,
    acks: crate::acks::Acks,
    store: Arc<dyn Store>,
    routes: Arc<Routes>,
    options: NatsOptions,
    cursor_name: String,
    cursor: i64,
    stats: Arc<Stats>,
    live_sender: mpsc::Sender<Arc<TransientEvent>>,
    live_receiver: mpsc::Receiver<Arc<TransientEvent>>,
    hand: crate::handoff::Hand,
    handed: crate::handoff::Handed,
    thread: SinkThread,
}

impl std::fmt::Debug for NatsSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsSink")
            .field("stream", &self.options.stream)
            .field("cursor", &self.cursor_name)
            .finish()
    }
}

/// The cursor of the sink writing `stream`: another stream starts a cursor of its own.
pub fn cursor_name(stream: &str) -> String {
    format!("nats:{stream}")
}

fn servers(list: &str) -> Result<Vec<async_nats::ServerAddr>, NatsError> {
    list.split(',')
        .map(str::trim)
        .filter(|server| !server.is_empty())
        .enumerate()
        .map(|(index, server)| {
            server.parse().map_err(|source| NatsError::ServerAddress {
                index: index + 1,
                source,
            })
        })
        .collect()
}

/// Logs the connection's changes (never its address, which may carry credentials).
async fn log_connection_event(event: async_nats::Event) {
    match event {
        async_nats::Event::Connected => tracing::info!("connected to NATS"),
        async_nats::Event::Disconnected => {
            tracing::warn!("disconnected from NATS; reconnecting (events wait in the log)")
        }
        async_nats::Event::Closed => tracing::info!("NATS connection closed"),
        other => tracing::warn!(event = %other, "NATS connection"),
    }
}

impl NatsSink {
    /// Connects (in the background: an unreachable NATS is retried forever, every
    /// `reconnect_wait`) and loads or creates the cursor, at the end of the log the first time
    /// (a new sink does not publish the whole history).
    pub async fn connect(
        options: NatsOptions,
        routes: Routes,
        store: Arc<dyn Store>,
    ) -> Result<NatsSink, NatsError> {
        let servers = servers(options.servers.expose())?;
        let thread = SinkThread::start(options.tuning.pace).map_err(NatsError::Thread)?;
        // Connected on the sink's thread: the connection's tasks and the acknowledgement
        // tracker run there.
        let (client, js, acks) = thread
            .handle()
            .spawn(open_connection(
                servers,
                options.client_name.clone(),
                options.tuning,
            ))
            .await
            .map_err(|error| NatsError::Thread(std::io::Error::other(error.to_string())))??;
        let cursor_name = cursor_name(&options.stream);
        let cursor =
            ar_events::load_or_create_cursor(store.as_ref(), &cursor_name, StartPosition::End)
                .await?;
        let stats = Arc::new(Stats::default());
        stats.set_cursor(cursor);
        let (live_sender, live_receiver) = mpsc::channel(options.tuning.live_capacity.max(1));
        let (hand, handed) = crate::handoff::channel(options.tuning.max_held);
        Ok(NatsSink {
            client,
            js,
            acks,
            store,
            routes: Arc::new(routes),
            options,
            cursor_name,
            cursor,
            stats,
            live_sender,
            live_receiver,
            hand,
            handed,
            thread,
        })
    }

    /// The sink's connection (the replica link shares it).
    pub fn client(&self) -> async_nats::Client {
        self.client.clone()
    }

    /// `inner` with transient deltas also queued for NATS and persisted events handed to the
    /// publisher (neither ever blocks the engine). Events committed in this process without
    /// this bus reach NATS from the log, at the latest one poll interval later.
    pub fn live_bus(&self, inner: Arc<dyn EventBus>) -> Arc<dyn EventBus> {
        Arc::new(crate::live::LiveBus::new(
            inner,
            self.live_sender.clone(),
            self.hand.clone(),
            self.stats.clone(),
        ))
    }

    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// Publishes until `cancel` fires, then for at most `shutdown_flush` more, what is
    /// committed.
    pub fn spawn(self, cancel: CancellationToken) -> JoinHandle<()> {
        let live = crate::live::LivePublisher {
            client: self.client.clone(),
            routes: self.routes.clone(),
            stats: self.stats.clone(),
        };
        let runtime = self.thread.handle().clone();
        // Both publishers run unconstrained by tokio's cooperative budget: a round trip's
        // answers and sends take a few hundred channel operations, and a budget spent midway
        // would make the task yield and the connection write each part separately (each write
        // wakes the NATS server). Each still waits whenever it has nothing to do, so the
        // connection's task runs between their rounds.
        let live_task = runtime.spawn(tokio::task::unconstrained(
            live.run(self.live_receiver, cancel.clone()),
        ));
        let publisher = crate::publisher::Publisher::new(crate::publisher::Parts {
            client: self.client,
            js: self.js,
            acks: self.acks,
            store: self.store,
            store_runtime: tokio::runtime::Handle::current(),
            routes: self.routes,
            stream: crate::stream::config(&self.options.stream, &self.options.stream_subjects),
            ensure_stream: self.options.ensure_stream,
            tuning: self.options.tuning,
            cursor_name: self.cursor_name,
            cursor: self.cursor,
            stats: self.stats,
            handed: self.handed,
        });
        let thread = self.thread;
        runtime.spawn(tokio::task::unconstrained(async move {
            publisher.run(cancel).await;
            let _ = live_task.await;
            // The thread ends with the sink's last task.
            drop(thread);
        }))
    }
}

/// The connection (reconnecting forever, the first attempt at once and then every
/// `reconnect_wait`) and its JetStream context; runs on the sink's thread.
async fn open_connection(
    servers: Vec<async_nats::ServerAddr>,
    client_name: String,
    tuning: Tuning,
) -> Result<(async_nats::Client, jetstream::Context, crate::acks::Acks), NatsError> {
    let wait = tuning.reconnect_wait;
    // No echo: the replica link subscribes to its own subjects, and what this connection
    // publishes there would come back only to be dropped by its origin (JetStream's answers
    // are the server's messages, not ours, so they still arrive).
    let client = async_nats::ConnectOptions::new()
        .name(&client_name)
        .no_echo()
        .retry_on_initial_connect()
        .max_reconnects(None)
        .reconnect_delay_callback(
            move |attempts| {
                if attempts <= 1 {
                    Duration::ZERO
                } else {
                    wait
                }
            },
        )
        .event_callback(log_connection_event)
        .connect(servers)
        .await?;
    let js = jetstream::ContextBuilder::new()
        .timeout(tuning.ack_timeout)
        .build(client.clone());
    let acks = crate::acks::Acks::subscribe(&client).await?;
    Ok((client, js, acks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_lists_and_their_errors_never_show_the_address() {
        assert_eq!(
            servers("nats://a:4222, tls://b:4223,127.0.0.1:4222")
                .unwrap()
                .len(),
            3
        );
        let error = servers("nats://a:4222,nats://user:pw@:bad:port").unwrap_err();
        let text = error.to_string();
        assert!(text.contains("#2"), "{text}");
        assert!(!text.contains("pw"), "{text}");
    }

    #[test]
    fn each_stream_has_its_own_cursor() {
        assert_eq!(
            cursor_name("AGENT_RUNTIME_EVENTS"),
            "nats:AGENT_RUNTIME_EVENTS"
        );
    }
}
