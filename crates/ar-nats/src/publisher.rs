//! The durable half of the sink: persisted events published from the event log after the sink's cursor, the cursor moved only past acknowledged events, in log order.
//!
//! The publisher tails the log: whenever there is room it takes what follows what it has read
//! so far ([`crate::flight`] holds it), handed over by the bus when this process committed it
//! ([`crate::handoff`]) and read from the log otherwise, and sends each event's messages without waiting,
//! keeping at most `max_in_flight` events unacknowledged and at most one per run: a run's next
//! event is sent only once its previous one is acknowledged, so even when a connection drops
//! with some messages lost and later ones still queued, a run's events are stored in order,
//! while the events of other runs go on. Nothing waits for a batch: an event committed while
//! others are in flight is read and sent at once. The cursor follows the acknowledged prefix;
//! it is written to the store every `cursor_interval` and when the publisher stops (a crash
//! republishes at most that much, which JetStream's duplicate window drops).
//!
//! A failed publish (NATS unreachable, a timeout, no stream) stops the stream: everything
//! after the cursor is sent again after a backoff, one event at a time until one is
//! acknowledged, and JetStream's duplicate window drops what had arrived already. While the
//! client is not connected nothing is sent, so an outage queues nothing but leaves the backlog
//! in the log.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ar_core::store::{Store, StoreError};
use async_nats::jetstream;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::acks::{Acks, Answer};
use crate::flight::Flight;
use crate::handoff::Handed;
use crate::message::Routes;
use crate::sink::{Stats, Tuning};
use crate::thread::on_store_runtime;

/// Why publishing stopped before it was cancelled.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    #[error("the NATS client is not connected")]
    NotConnected,
    #[error("sending to NATS: {0}")]
    Send(#[from] async_nats::PublishError),
    #[error("{0}")]
    Refused(String),
    #[error("JetStream did not acknowledge a message in time")]
    Unacknowledged,
    #[error("the NATS connection is closed")]
    Closed,
    #[error("reading the event log: {0}")]
    Store(#[from] StoreError),
}

/// What the publisher is built from (see [`crate::NatsSink::spawn`]).
pub(crate) struct Parts {
    pub client: async_nats::Client,
    pub js: jetstream::Context,
    /// Where JetStream answers the publishes.
    pub acks: Acks,
    pub store: Arc<dyn Store>,
    /// Where store calls run (the service's runtime, see [`crate::thread`]).
    pub store_runtime: tokio::runtime::Handle,
    pub routes: Arc<Routes>,
    pub stream: jetstream::stream::Config,
    pub ensure_stream: bool,
    pub tuning: Tuning,
    pub cursor_name: String,
    pub cursor: i64,
    pub stats: Arc<Stats>,
    /// Events this process committed, handed over by the bus.
    pub handed: Handed,
}

pub(crate) struct Publisher {
    parts: Parts,
    flight: Flight,
    /// The position of the last event read into `flight`.
    read: i64,
    /// The log may hold events after `read` that were not handed over: a gap before a handed
    /// event, the poll interval passed, or the last read filled its limit.
    more: bool,
    /// The cursor's value in the store, as far as we know.
    stored: i64,
    /// Since when a handed event has waited behind a position not handed over.
    gap_since: Option<Instant>,
    /// Events in flight allowed now: `max_in_flight`, or 1 after a failure.
    window: usize,
    backoff: Duration,
    /// Whether this sink publishes, or another replica's sink does and this one stands by.
    role: Role,
}

/// Replicas sharing a store share the sink's cursor; the one whose cursor write finds the
/// cursor moved by another stands by, watching it, and takes over when it stops moving while
/// events wait after it. (Both publishing would be correct, JetStream drops the copies, but
/// costs every replica the work, and a replica far behind could republish past the window.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Active,
    Standby {
        /// The cursor as last read from the store.
        seen: i64,
        /// Checks in a row that found it unmoved with events after it.
        stalled: u32,
    },
}

/// Stalled checks (one per poll interval) after which a standby sink takes over.
const TAKE_OVER_AFTER: u32 = 2;

/// Why [`Publisher::stream`] returned without an error.
enum Stopped {
    Cancelled,
    /// Another replica publishes: stand by.
    Standby,
}

impl Publisher {
    pub(crate) fn new(parts: Parts) -> Publisher {
        Publisher {
            flight: Flight::default(),
            read: parts.cursor,
            more: true,
            gap_since: None,
            stored: parts.cursor,
            window: parts.tuning.max_in_flight.max(1),
            backoff: parts.tuning.initial_backoff,
            role: Role::Active,
            parts,
        }
    }

    /// Ensures the stream (when asked to), then publishes until `cancel`, then flushes what is
    /// committed for at most `shutdown_flush`.
    pub(crate) async fn run(mut self, cancel: CancellationToken) {
        let parts = &self.parts;
        if parts.ensure_stream
            && !ensure_stream(&parts.js, &parts.stream, &parts.tuning, &cancel).await
        {
            return;
        }
        while !cancel.is_cancelled() {
            let error = match self.stream(&cancel).await {
                Ok(Stopped::Cancelled) => break,
                Ok(Stopped::Standby) => {
                    if !self.stand_by(&cancel).await {
                        return;
                    }
                    continue;
                }
                Err(error) => error,
            };
            if !matches!(error, PassError::NotConnected) {
                // A disconnect is logged by the connection itself; the backlog waits in the log.
                self.parts.stats.add_failure();
                tracing::warn!(
                    %error,
                    cursor = self.parts.cursor,
                    retry_in_ms = self.backoff.as_millis() as u64,
                    "publishing events to NATS failed; will retry from the cursor"
                );
            }
            self.restart_from_cursor().await;
            sleep_unless_cancelled(self.backoff, &cancel).await;
            self.backoff = (self.backoff * 2).min(self.parts.tuning.max_backoff);
        }
        self.flush_at_shutdown().await;
    }

    /// Watches the cursor another replica's sink moves, every poll interval, until it stalls
    /// with events after it (then this sink publishes from it) or `cancel` (false).
    async fn stand_by(&mut self, cancel: &CancellationToken) -> bool {
        tracing::info!(
            cursor = self.parts.cursor,
            "another replica publishes the events to NATS; this sink stands by"
        );
        while let Role::Standby { seen, stalled } = self.role {
            if !sleep_unless_cancelled(self.parts.tuning.poll_interval, cancel).await {
                return false;
            }
            let (store, name) = (self.parts.store.clone(), self.parts.cursor_name.clone());
            let checked = on_store_runtime(&self.parts.store_runtime, async move {
                let cursor = store.get_cursor(&name).await?.unwrap_or(seen);
                let waiting = !store
                    .list_events_after_position(cursor, 1)
                    .await?
                    .is_empty();
                Ok((cursor, waiting))
            })
            .await;
            self.role = match checked {
                Ok((cursor, _)) if cursor != seen => Role::Standby {
                    seen: cursor,
                    stalled: 0,
                },
                Ok((_, true)) if stalled + 1 >= TAKE_OVER_AFTER => Role::Active,
                Ok((_, true)) => Role::Standby {
                    seen,
                    stalled: stalled + 1,
                },
                // Nothing waits: an idle publisher is not a stalled one.
                Ok((_, false)) => Role::Standby { seen, stalled: 0 },
                Err(error) => {
                    tracing::warn!(%error, "reading the NATS sink's cursor failed");
                    self.role
                }
            };
            if let Role::Standby { seen, .. } = self.role {
                self.follow(seen);
            }
        }
        tracing::info!(
            cursor = self.parts.cursor,
            "the other replica's NATS sink stopped publishing; this one takes over"
        );
        self.restart_from_cursor().await;
        true
    }

    /// Takes `cursor`, written by another replica's sink, as this sink's too.
    fn follow(&mut self, cursor: i64) {
        self.parts.cursor = cursor;
        self.stored = cursor;
        self.parts.stats.set_cursor(cursor);
    }

    /// Forgets what is held (acknowledgements still outstanding are abandoned: JetStream may
    /// store those messages, and drops their next copy) and goes on from the cursor, one event
    /// in flight until one is acknowledged.
    async fn restart_from_cursor(&mut self) {
        self.flight = Flight::default();
        self.parts.acks.restart();
        self.parts.handed.clear();
        self.read = self.parts.cursor;
        self.more = true;
        self.window = 1;
        self.persist_cursor().await;
    }

    /// Publishes what is committed until it is all acknowledged, for at most `shutdown_flush`;
    /// the cursor is written either way.
    async fn flush_at_shutdown(&mut self) {
        if self.role != Role::Active {
            return;
        }
        let limit = self.parts.tuning.shutdown_flush;
        if tokio::time::timeout(limit, self.drain()).await.is_err() {
            tracing::warn!(
                cursor = self.parts.cursor,
                "shutdown before every event reached NATS; the rest is published at the next start"
            );
        }
        self.persist_cursor().await;
        let _ = tokio::time::timeout(Duration::from_secs(1), self.parts.client.flush()).await;
    }

    async fn drain(&mut self) {
        self.more = true;
        while self.step().await.is_ok() && (self.more || self.flight.held() > 0) {
            if self.flight.in_flight() == 0 {
                // Nothing to wait for yet; let the shutdown timer run before trying again.
                tokio::task::yield_now().await;
                continue;
            }
            let answer = self.parts.acks.next().await;
            if let Err(error) = self.take_answers(answer) {
                tracing::warn!(%error, "publishing events to NATS at shutdown failed");
                return;
            }
        }
    }

    /// Publishes until cancelled, until another replica's sink is found publishing, or until a
    /// publish fails.
    async fn stream(&mut self, cancel: &CancellationToken) -> Result<Stopped, PassError> {
        let mut save = tokio::time::interval(self.parts.tuning.cursor_interval);
        save.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut poll = tokio::time::interval(self.parts.tuning.poll_interval);
        poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let ack_timeout = self.parts.tuning.ack_timeout;
        let mut check = tokio::time::interval((ack_timeout / 4).max(Duration::from_millis(10)));
        check.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            if self.role != Role::Active {
                return Ok(Stopped::Standby);
            }
            self.step().await?;
            tokio::select! {
                biased;
                _ = cancel.cancelled() => return Ok(Stopped::Cancelled),
                answer = self.parts.acks.next() => self.take_answers(answer)?,
                _ = check.tick() => if self.flight.overdue(Instant::now(), ack_timeout) {
                    return Err(PassError::Unacknowledged);
                },
                // While events are in flight their answers wake the publisher, which then takes
                // what was handed over meanwhile (a run's next event could not go before its
                // previous one's answer anyway); a handed event wakes it only when nothing is in
                // flight. One wake-up per round trip instead of one per commit on the engine's
                // side, and one write to the socket.
                _ = self.parts.handed.recv(), if self.flight.in_flight() == 0
                    && self.flight.held() < self.parts.tuning.max_held => {}
                _ = gap_grace_over(self.gap_since, self.parts.tuning.gap_grace), if !self.more => {}
                _ = save.tick() => self.persist_cursor().await,
                _ = poll.tick() => self.more = true,
            }
        }
    }

    /// Takes what follows when there is room (handed over, else read from the log when it
    /// may hold some), then sends what may go.
    async fn step(&mut self) -> Result<(), PassError> {
        if self.parts.client.connection_state() != async_nats::connection::State::Connected {
            return Err(PassError::NotConnected);
        }
        self.take_handed();
        let room = self.room();
        if self.more && room > 0 {
            let limit = room.min(self.parts.tuning.batch_size.max(1) as usize);
            let (store, read) = (self.parts.store.clone(), self.read);
            let events = on_store_runtime(&self.parts.store_runtime, async move {
                store.list_events_after_position(read, limit as i64).await
            })
            .await?;
            self.more = events.len() == limit;
            if let Some(last) = events.last() {
                self.read = last.position;
            }
            self.parts.handed.forget_through(self.read);
            self.flight.extend(events.into_iter().map(Arc::new));
            // A gap the read did not close (not visible yet) waits its grace again.
            self.gap_since = None;
            self.take_handed();
        }
        let max_payload = match self.parts.client.max_payload() {
            0 => crate::message::DEFAULT_MAX_PAYLOAD,
            max => max,
        };
        while self.flight.in_flight() < self.window {
            let Some((slot, event)) = self.flight.next_to_send() else {
                break;
            };
            let mut copies = 0;
            for message in self.parts.routes.messages(&event, max_payload) {
                self.parts
                    .acks
                    .send(&self.parts.client, slot, message)
                    .await?;
                copies += 1;
            }
            self.flight.sent(slot, copies, Instant::now());
        }
        Ok(())
    }

    /// Events that may be held beyond those held now.
    fn room(&self) -> usize {
        self.parts
            .tuning
            .max_held
            .saturating_sub(self.flight.held())
    }

    /// Takes the handed events that follow what was read. A gap that outlasts its grace, or
    /// an event not handed over, sends the next step to the log.
    fn take_handed(&mut self) {
        let room = self.room();
        if room == 0 {
            return;
        }
        let taken = self.parts.handed.next_after(self.read, room);
        if let Some(last) = taken.events.last() {
            self.read = last.position;
        }
        self.flight.extend(taken.events);
        let now = Instant::now();
        self.gap_since = match (taken.gap, self.gap_since) {
            (false, _) => None,
            (true, since) => Some(since.unwrap_or(now)),
        };
        let grace_over = self
            .gap_since
            .is_some_and(|since| now.duration_since(since) >= self.parts.tuning.gap_grace);
        self.more |= taken.missed || grace_over;
    }

    /// Takes `answer` and every other one already there, then moves the cursor over what is
    /// acknowledged. Answers to sends abandoned by a restart are ignored.
    fn take_answers(&mut self, mut answer: Option<Answer>) -> Result<(), PassError> {
        let epoch = self.parts.acks.epoch();
        loop {
            match answer {
                None => return Err(PassError::Closed),
                Some(Answer::Stored { epoch: of, slot }) if of == epoch => {
                    self.flight.acknowledged(slot)
                }
                Some(Answer::Refused { epoch: of, reason }) if of == epoch => {
                    return Err(PassError::Refused(reason))
                }
                Some(_) => {}
            }
            answer = match self.parts.acks.ready() {
                Some(next) => Some(next),
                None => break,
            };
        }
        self.advance();
        Ok(())
    }

    /// Moves the cursor over the acknowledged prefix (in memory; see `persist_cursor`).
    fn advance(&mut self) {
        if let Some((events, position)) = self.flight.advance() {
            // Another replica's sink may have moved the cursor further (`persist_cursor`).
            self.parts.cursor = self.parts.cursor.max(position);
            self.parts.stats.add_published(events);
            self.parts.stats.set_cursor(self.parts.cursor);
            self.window = self.parts.tuning.max_in_flight.max(1);
            self.backoff = self.parts.tuning.initial_backoff;
        }
    }

    /// Writes the cursor (compare-and-swap). On a conflict another replica's sink moved it:
    /// stand by (see [`Role`]). A failure is logged and retried with the next write; the worst
    /// case after a crash is a republish, which JetStream drops.
    async fn persist_cursor(&mut self) {
        if self.stored >= self.parts.cursor {
            return;
        }
        let (store, name) = (self.parts.store.clone(), self.parts.cursor_name.clone());
        let (expected, cursor) = (self.stored, self.parts.cursor);
        let written = on_store_runtime(&self.parts.store_runtime, async move {
            if store.advance_cursor(&name, Some(expected), cursor).await? {
                return Ok(CursorWrite::Written);
            }
            store.get_cursor(&name).await.map(CursorWrite::Moved)
        })
        .await;
        match written {
            Ok(CursorWrite::Written) => self.stored = cursor,
            Ok(CursorWrite::Moved(Some(current))) => {
                // Another replica's sink publishes (what it passed is in the stream).
                self.flight = Flight::default();
                self.read = current;
                self.follow(current);
                self.role = Role::Standby {
                    seen: current,
                    stalled: 0,
                };
            }
            Ok(CursorWrite::Moved(None)) => {}
            Err(error) => tracing::warn!(%error, "saving the NATS sink's cursor failed"),
        }
    }
}

/// How a compare-and-swap of the cursor went.
enum CursorWrite {
    Written,
    /// Someone else moved it (to this value, if it still exists).
    Moved(Option<i64>),
}

/// Creates or updates the stream, retrying until it works. False when cancelled first.
async fn ensure_stream(
    js: &jetstream::Context,
    stream: &jetstream::stream::Config,
    tuning: &Tuning,
    cancel: &CancellationToken,
) -> bool {
    let mut backoff = tuning.initial_backoff;
    loop {
        match crate::stream::ensure(js, stream.clone()).await {
            Ok(()) => {
                tracing::info!(stream = %stream.name, "NATS stream ready");
                return true;
            }
            Err(error) => tracing::warn!(
                stream = %stream.name,
                %error,
                "cannot create or update the NATS stream yet; retrying"
            ),
        }
        if !sleep_unless_cancelled(backoff, cancel).await {
            return false;
        }
        backoff = (backoff * 2).min(tuning.max_backoff);
    }
}

/// Wakes when a gap's grace is over (pending while there is none).
async fn gap_grace_over(since: Option<Instant>, grace: Duration) {
    match since {
        Some(since) => tokio::time::sleep_until((since + grace).into()).await,
        None => std::future::pending().await,
    }
}

/// Sleeps `delay`; false when `cancel` fired first.
async fn sleep_unless_cancelled(delay: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        _ = cancel.cancelled() => false,
        _ = tokio::time::sleep(delay) => true,
    }
}
