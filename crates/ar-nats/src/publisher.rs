//! The durable half of the sink: persisted events published from the event log after the sink's cursor, the cursor moved only past acknowledged events, in log order.
//!
//! One pass reads a batch after the cursor and sends each event's messages without waiting,
//! keeping at most `max_in_flight` events unacknowledged and at most one per run
//! ([`crate::flight`]): a run's next event is sent only once its previous one is
//! acknowledged, so even when a connection drops with some messages lost and later ones still
//! queued, a run's events are stored in order, while the events of other runs go on. The
//! cursor follows the acknowledged prefix of the batch and is written to the store after each
//! pass.
//!
//! A failed publish (NATS unreachable, a timeout, no stream) ends the pass: what followed it is
//! sent again from the cursor after a backoff, one event at a time until a pass succeeds, and
//! JetStream's duplicate window drops what had arrived already. While the client is not
//! connected nothing is sent, so an outage queues nothing but leaves the backlog in the log.

use std::sync::Arc;
use std::time::Duration;

use ar_core::event::StoredEvent;
use ar_core::store::{Store, StoreError};
use async_nats::jetstream::{self, context::PublishAckFuture};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::flight::Flight;
use crate::message::Routes;
use crate::sink::{Stats, Tuning};

/// Why a pass stopped before the end of its batch.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    #[error("the NATS client is not connected")]
    NotConnected,
    #[error("publishing to JetStream: {0}")]
    Publish(#[from] jetstream::context::PublishError),
    #[error("reading the event log: {0}")]
    Store(#[from] StoreError),
}

/// How a pass ended.
enum Pass {
    /// Events were published; there may be more.
    Published,
    /// Nothing after the cursor.
    Idle,
}

/// What the publisher is built from (see [`crate::NatsSink::spawn`]).
pub(crate) struct Parts {
    pub client: async_nats::Client,
    pub js: jetstream::Context,
    pub store: Arc<dyn Store>,
    pub routes: Arc<Routes>,
    pub stream: jetstream::stream::Config,
    pub ensure_stream: bool,
    pub tuning: Tuning,
    pub cursor_name: String,
    pub cursor: i64,
    pub stats: Arc<Stats>,
    pub wake: Option<watch::Receiver<i64>>,
}

pub(crate) struct Publisher {
    parts: Parts,
    /// The cursor's value in the store, as far as we know.
    stored: i64,
    /// Events in flight allowed now: `max_in_flight`, or 1 after a failure.
    window: usize,
}

impl Publisher {
    pub(crate) fn new(parts: Parts) -> Publisher {
        Publisher {
            stored: parts.cursor,
            window: parts.tuning.max_in_flight.max(1),
            parts,
        }
    }

    /// Ensures the stream (when asked to), then publishes until `cancel`, then flushes what is
    /// committed for at most `shutdown_flush`.
    pub(crate) async fn run(mut self, cancel: CancellationToken) {
        if self.parts.ensure_stream && !self.ensure_stream(&cancel).await {
            return;
        }
        let mut backoff = self.parts.tuning.initial_backoff;
        while !cancel.is_cancelled() {
            match self.pass().await {
                Ok(Pass::Published) => {
                    backoff = self.parts.tuning.initial_backoff;
                    self.window = self.parts.tuning.max_in_flight.max(1);
                }
                Ok(Pass::Idle) => self.idle(&cancel).await,
                Err(PassError::NotConnected) => {
                    // The connection's own log says it is down; the backlog waits in the log.
                    self.window = 1;
                    sleep_unless_cancelled(backoff, &cancel).await;
                    backoff = (backoff * 2).min(self.parts.tuning.max_backoff);
                }
                Err(error) => {
                    self.parts.stats.add_failure();
                    tracing::warn!(
                        %error,
                        cursor = self.parts.cursor,
                        retry_in_ms = backoff.as_millis() as u64,
                        "publishing events to NATS failed; will retry from the cursor"
                    );
                    self.window = 1;
                    sleep_unless_cancelled(backoff, &cancel).await;
                    backoff = (backoff * 2).min(self.parts.tuning.max_backoff);
                }
            }
        }
        self.flush_at_shutdown().await;
    }

    /// Creates or updates the stream, retrying until it works. False when cancelled first.
    async fn ensure_stream(&self, cancel: &CancellationToken) -> bool {
        let mut backoff = self.parts.tuning.initial_backoff;
        loop {
            match crate::stream::ensure(&self.parts.js, self.parts.stream.clone()).await {
                Ok(()) => {
                    tracing::info!(stream = %self.parts.stream.name, "NATS stream ready");
                    return true;
                }
                Err(error) => tracing::warn!(
                    stream = %self.parts.stream.name,
                    %error,
                    "cannot create or update the NATS stream yet; retrying"
                ),
            }
            if !sleep_unless_cancelled(backoff, cancel).await {
                return false;
            }
            backoff = (backoff * 2).min(self.parts.tuning.max_backoff);
        }
    }

    async fn flush_at_shutdown(&mut self) {
        let limit = self.parts.tuning.shutdown_flush;
        let flush = async { while let Ok(Pass::Published) = self.pass().await {} };
        if tokio::time::timeout(limit, flush).await.is_err() {
            tracing::warn!(
                cursor = self.parts.cursor,
                "shutdown before every event reached NATS; the rest is published at the next start"
            );
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), self.parts.client.flush()).await;
    }

    /// Publishes one batch after the cursor; the cursor moves past what was acknowledged, and
    /// is written to the store, whether the pass ends well or not.
    async fn pass(&mut self) -> Result<Pass, PassError> {
        if self.parts.client.connection_state() != async_nats::connection::State::Connected {
            return Err(PassError::NotConnected);
        }
        let batch = self
            .parts
            .store
            .list_events_after_position(self.parts.cursor, self.parts.tuning.batch_size)
            .await?;
        if batch.is_empty() {
            return Ok(Pass::Idle);
        }
        let result = self.publish_batch(batch).await;
        self.persist_cursor().await;
        result.map(|()| Pass::Published)
    }

    /// Sends what may be sent, then waits for one acknowledgement and moves the cursor over
    /// the acknowledged prefix, until the batch is all acknowledged.
    async fn publish_batch(&mut self, batch: Vec<StoredEvent>) -> Result<(), PassError> {
        let mut flight = Flight::new(batch);
        loop {
            while flight.in_flight() < self.window {
                let Some((slot, event)) = flight.next_to_send() else {
                    break;
                };
                let acks = self.send(&event).await?;
                flight.sent(slot, acks);
            }
            if let Some((events, position)) = flight.advance() {
                self.parts.cursor = position;
                self.parts.stats.add_published(events);
                self.parts.stats.set_cursor(position);
            }
            if flight.is_done() {
                return Ok(());
            }
            flight.next_ack().await?;
        }
    }

    /// Sends an event's messages; returns their acknowledgement futures.
    async fn send(&self, event: &StoredEvent) -> Result<Vec<PublishAckFuture>, PassError> {
        let mut acks = Vec::with_capacity(2);
        for message in self.parts.routes.messages(event) {
            let publish = jetstream::message::PublishMessage::build()
                .payload(message.payload)
                .message_id(&message.message_id);
            acks.push(self.parts.js.send_publish(message.subject, publish).await?);
        }
        Ok(acks)
    }

    /// Writes the cursor (compare-and-swap). On a conflict another replica's sink moved it:
    /// continue from the further of the two. A failure is logged and retried with the next
    /// write; the worst case after a crash is a republish, which JetStream drops.
    async fn persist_cursor(&mut self) {
        if self.stored >= self.parts.cursor {
            return;
        }
        let store = &self.parts.store;
        let name = &self.parts.cursor_name;
        match store
            .advance_cursor(name, Some(self.stored), self.parts.cursor)
            .await
        {
            Ok(true) => self.stored = self.parts.cursor,
            Ok(false) => match store.get_cursor(name).await {
                Ok(Some(current)) => {
                    self.stored = current;
                    self.parts.cursor = self.parts.cursor.max(current);
                }
                Ok(None) => {}
                Err(error) => tracing::warn!(%error, "reading the NATS sink's cursor failed"),
            },
            Err(error) => tracing::warn!(%error, "saving the NATS sink's cursor failed"),
        }
    }

    /// Waits for a commit signal, the poll interval or cancellation.
    async fn idle(&mut self, cancel: &CancellationToken) {
        let sleep = tokio::time::sleep(self.parts.tuning.poll_interval);
        match self.parts.wake.as_mut() {
            Some(wake) => {
                tokio::select! {
                    _ = cancel.cancelled() => {}
                    _ = sleep => {}
                    changed = wake.changed() => {
                        if changed.is_err() {
                            // The bus is gone; polling alone from now on.
                            self.parts.wake = None;
                        }
                    }
                }
            }
            None => {
                tokio::select! {
                    _ = cancel.cancelled() => {}
                    _ = sleep => {}
                }
            }
        }
    }
}

/// Sleeps `delay`; false when `cancel` fired first.
async fn sleep_unless_cancelled(delay: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        _ = cancel.cancelled() => false,
        _ = tokio::time::sleep(delay) => true,
    }
}
