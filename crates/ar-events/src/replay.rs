//! Gap-free stitching of a run's persisted log and its live events into one ordered stream.
//!
//! Order of operations (the invariant that makes it gap-free): subscribe to the bus first, then
//! read the log after the cursor in pages, then switch to live events, skipping persisted ones
//! already yielded. Whenever the live side shows a hole (a sequence jump or a broadcast lag) the
//! missing range is read from the store; the store is also polled every second so events written
//! by another replica (which never reach this process's bus) still arrive. Transient events are
//! only ever live. The stream ends right after it yields a terminal event, and a stream of a
//! run that had already ended when it was opened ends with its log, so a cursor at or past the
//! terminal event ends it at once.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use ar_core::event::LiveEvent;
use ar_core::store::Store;
use futures::Stream;
use tokio::time::{Instant, MissedTickBehavior};

use crate::bus::{Bus, RecvError, Subscription};

/// Tuning of [`stream_run_events_with`].
#[derive(Debug, Clone, Copy)]
pub struct ReplayOptions {
    /// Events read from the store per query.
    pub page_size: i64,
    /// How often the store is re-read while live (covers other replicas' writes).
    pub poll_interval: Duration,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            page_size: 500,
            poll_interval: Duration::from_secs(1),
        }
    }
}

/// What the caller knew of the run when it opened the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// Still running (or paused): more events may come.
    Active,
    /// Already ended: its terminal event is in the log (status and terminal event are written
    /// in one commit), so the stream is the log after the cursor and waits for nothing.
    Ended,
}

/// The events of `run_id` with `sequence_no > after`, then its live events, without gaps or
/// duplicates; ends after a terminal event, or at the end of the log of an [`RunState::Ended`]
/// run. Subscribes to `bus` before returning, so nothing published after this call can be
/// missed.
pub fn stream_run_events(
    store: Arc<dyn Store>,
    bus: &Bus,
    app_id: &str,
    run_id: &str,
    after: i64,
    run: RunState,
) -> impl Stream<Item = Arc<LiveEvent>> + Send + 'static {
    stream_run_events_with(
        store,
        bus,
        app_id,
        run_id,
        after,
        run,
        ReplayOptions::default(),
    )
}

/// [`stream_run_events`] with explicit options.
pub fn stream_run_events_with(
    store: Arc<dyn Store>,
    bus: &Bus,
    app_id: &str,
    run_id: &str,
    after: i64,
    run: RunState,
    options: ReplayOptions,
) -> impl Stream<Item = Arc<LiveEvent>> + Send + 'static {
    // Subscribing here, synchronously, is the "subscribe first" of the algorithm.
    let subscription = bus.subscribe(run_id);
    let state = Replay {
        store,
        subscription,
        live_closed: false,
        app_id: app_id.to_string(),
        run_id: run_id.to_string(),
        last: after.max(0),
        ended: run == RunState::Ended,
        read_failed: false,
        caught_up: false,
        buffer: VecDeque::new(),
        done: false,
        options: ReplayOptions {
            page_size: options.page_size.max(1),
            ..options
        },
        poll: None,
    };
    futures::stream::unfold(state, |mut state| async move {
        let event = state.next().await?;
        Some((event, state))
    })
}

struct Replay {
    store: Arc<dyn Store>,
    subscription: Subscription,
    live_closed: bool,
    app_id: String,
    run_id: String,
    /// Sequence of the last persisted event yielded (or the caller's cursor).
    last: i64,
    /// The run had ended when the stream was opened: the log is complete.
    ended: bool,
    /// The last read of the log failed (it is retried at the next poll).
    read_failed: bool,
    /// The store has been read up to its end since the last sign of a gap.
    caught_up: bool,
    buffer: VecDeque<Arc<LiveEvent>>,
    done: bool,
    options: ReplayOptions,
    /// Created on first use (so building the stream needs no runtime) and reset after every
    /// store read, so the store is polled only after a second without reading it.
    poll: Option<tokio::time::Interval>,
}

impl Replay {
    async fn next(&mut self) -> Option<Arc<LiveEvent>> {
        loop {
            if self.done {
                return None;
            }
            if let Some(event) = self.buffer.pop_front() {
                if let LiveEvent::Persisted(stored) = &*event {
                    if stored.sequence_no <= self.last {
                        continue;
                    }
                    self.last = stored.sequence_no;
                    if stored.kind.is_terminal() {
                        self.done = true;
                    }
                }
                return Some(event);
            }
            if !self.caught_up {
                self.read_store().await;
                continue;
            }
            if self.ended && !self.read_failed {
                // The whole log after the cursor is out and its terminal event (if it was
                // after the cursor) ended the stream above; nothing else will come.
                self.done = true;
                continue;
            }
            self.wait_live().await;
        }
    }

    /// Reads one page after `last` into the buffer; marks caught up when the page is short.
    async fn read_store(&mut self) {
        match self
            .store
            .list_events_after(
                &self.app_id,
                &self.run_id,
                self.last,
                Some(self.options.page_size),
            )
            .await
        {
            Ok(page) => {
                self.read_failed = false;
                if let Some(poll) = self.poll.as_mut() {
                    poll.reset();
                }
                if (page.len() as i64) < self.options.page_size {
                    self.caught_up = true;
                }
                self.buffer.extend(
                    page.into_iter()
                        .map(|stored| Arc::new(LiveEvent::from(stored))),
                );
            }
            Err(err) => {
                tracing::warn!(run_id = %self.run_id, error = %err, "reading run events failed; retrying at next poll");
                // Retry on the next poll tick; live transient events keep flowing meanwhile.
                self.read_failed = true;
                self.caught_up = true;
            }
        }
    }

    /// Buffers a live event that continues the stream; a persisted one that skips ahead marks
    /// a gap to read from the store.
    fn take_live(&mut self, event: Arc<LiveEvent>) {
        match &*event {
            LiveEvent::Persisted(stored) => {
                if stored.app_id != self.app_id {
                    return;
                }
                if stored.sequence_no <= self.last {
                    // Behind the cursor: a terminal event there still ends the stream.
                    self.done = stored.kind.is_terminal();
                    return;
                }
                if stored.sequence_no == self.last + 1 {
                    self.buffer.push_back(event);
                } else {
                    // Something between `last` and this event never reached us live.
                    self.caught_up = false;
                }
            }
            LiveEvent::Transient(transient) => {
                if transient.app_id == self.app_id {
                    self.buffer.push_back(event);
                }
            }
        }
    }

    /// Waits for the next live event or poll tick and acts on it.
    async fn wait_live(&mut self) {
        let interval = self.options.poll_interval;
        let poll = self.poll.get_or_insert_with(|| {
            let mut poll = tokio::time::interval_at(Instant::now() + interval, interval);
            poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
            poll
        });
        if self.live_closed {
            poll.tick().await;
            self.caught_up = false;
            return;
        }
        tokio::select! {
            received = self.subscription.recv() => match received {
                Ok(event) => self.take_live(event),
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(run_id = %self.run_id, missed, "live subscriber lagged; re-reading the log");
                    self.caught_up = false;
                }
                Err(RecvError::Closed) => {
                    self.live_closed = true;
                }
            },
            _ = poll.tick() => {
                self.caught_up = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ar_core::event::EventBus;
    use ar_core::EventKind;
    use futures::StreamExt;

    use super::*;
    use crate::fake_store::FakeStore;

    fn transient(run_id: &str) -> LiveEvent {
        LiveEvent::from(ar_core::event::TransientEvent {
            app_id: "app".into(),
            run_id: run_id.into(),
            host_run_id: String::new(),
            event: ar_core::RunEvent::AssistantMessageDelta(ar_core::event::MessageDelta {
                message_id: "m".into(),
                text: "x".into(),
            }),
        })
    }

    fn sequences<E: std::borrow::Borrow<LiveEvent>>(events: &[E]) -> Vec<Option<i64>> {
        events
            .iter()
            .map(|event| event.borrow().sequence_no())
            .collect()
    }

    async fn next(stream: &mut (impl Stream<Item = Arc<LiveEvent>> + Unpin)) -> Option<LiveEvent> {
        tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .expect("stream stalled")
            .map(Arc::unwrap_or_clone)
    }

    /// Appends to the store and publishes, as the engine does.
    fn emit(store: &FakeStore, bus: &Bus, kind: EventKind) {
        let stored = store.append("app", "run_1", kind);
        bus.publish(LiveEvent::from(stored));
    }

    #[tokio::test]
    async fn before_during_and_after_subscription_exactly_once_in_order() {
        let store = Arc::new(FakeStore::default());
        let bus = Bus::new();
        // Before: only in the store (published while nobody listened).
        for _ in 0..3 {
            emit(&store, &bus, EventKind::RunStarted);
        }
        let stream = stream_run_events(store.clone(), &bus, "app", "run_1", 0, RunState::Active);
        // During: after subscribing, before the stream reads the log: both in store and live.
        emit(&store, &bus, EventKind::ToolCallStarted);
        bus.publish(transient("run_1"));
        let mut stream = Box::pin(stream);
        let mut got = Vec::new();
        for _ in 0..4 {
            got.push(next(&mut stream).await.unwrap());
        }
        // After: live only while the stream waits.
        emit(&store, &bus, EventKind::ToolCallFinished);
        emit(&store, &bus, EventKind::RunCompleted);
        while let Some(event) = next(&mut stream).await {
            got.push(event);
        }
        let persisted: Vec<_> = sequences(&got).into_iter().flatten().collect();
        assert_eq!(persisted, vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(
            got.iter().filter(|e| e.sequence_no().is_none()).count(),
            1,
            "transient passes through once"
        );
        assert!(
            matches!(got.last(), Some(LiveEvent::Persisted(e)) if e.kind == EventKind::RunCompleted)
        );
    }

    #[tokio::test]
    async fn resumes_after_cursor() {
        let store = Arc::new(FakeStore::default());
        let bus = Bus::new();
        for _ in 0..5 {
            emit(&store, &bus, EventKind::RunStarted);
        }
        emit(&store, &bus, EventKind::RunFailed);
        let events: Vec<_> =
            stream_run_events(store.clone(), &bus, "app", "run_1", 3, RunState::Active)
                .collect()
                .await;
        assert_eq!(sequences(&events), vec![Some(4), Some(5), Some(6)]);
    }

    /// Collects a stream that must end by itself (bounded: a stream left open fails the test).
    async fn collect_ended(stream: impl Stream<Item = Arc<LiveEvent>>) -> Vec<Arc<LiveEvent>> {
        tokio::time::timeout(Duration::from_secs(5), stream.collect())
            .await
            .expect("the stream did not end")
    }

    #[tokio::test]
    async fn an_ended_run_streams_its_log_after_the_cursor_and_ends() {
        let store = Arc::new(FakeStore::default());
        let bus = Bus::new();
        for _ in 0..5 {
            emit(&store, &bus, EventKind::PlanUpdated);
        }
        emit(&store, &bus, EventKind::RunCompleted);
        let ended =
            |after| stream_run_events(store.clone(), &bus, "app", "run_1", after, RunState::Ended);
        assert_eq!(
            sequences(&collect_ended(ended(4)).await),
            vec![Some(5), Some(6)]
        );
        // At the terminal event, and past the end of the log: nothing, and the stream ends.
        for after in [6, 7, 1_000] {
            let events = collect_ended(ended(after)).await;
            assert!(events.is_empty(), "after {after}: {events:?}");
        }
    }

    #[tokio::test]
    async fn a_terminal_event_behind_the_cursor_ends_a_live_stream() {
        let store = Arc::new(FakeStore::default());
        let bus = Bus::new();
        let stream = stream_run_events(store.clone(), &bus, "app", "run_1", 50, RunState::Active);
        let waiter = tokio::spawn(collect_ended(stream));
        tokio::task::yield_now().await;
        emit(&store, &bus, EventKind::RunStarted);
        emit(&store, &bus, EventKind::RunFailed);
        let events = waiter.await.unwrap();
        assert!(events.is_empty(), "{events:?}");
    }

    #[tokio::test]
    async fn pages_through_a_long_log() {
        let store = Arc::new(FakeStore::default());
        let bus = Bus::new();
        for _ in 0..25 {
            emit(&store, &bus, EventKind::PlanUpdated);
        }
        emit(&store, &bus, EventKind::RunCancelled);
        let options = ReplayOptions {
            page_size: 4,
            poll_interval: Duration::from_secs(1),
        };
        let events: Vec<_> =
            stream_run_events_with(store, &bus, "app", "run_1", 0, RunState::Active, options)
                .collect()
                .await;
        assert_eq!(sequences(&events), (1..=26).map(Some).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn sequence_gap_on_the_live_side_is_filled_from_the_store() {
        let store = Arc::new(FakeStore::default());
        let bus = Bus::new();
        let mut stream = Box::pin(stream_run_events(
            store.clone(),
            &bus,
            "app",
            "run_1",
            0,
            RunState::Active,
        ));
        emit(&store, &bus, EventKind::RunStarted);
        assert_eq!(next(&mut stream).await.unwrap().sequence_no(), Some(1));
        // Two events persisted but never published (e.g. a publish was lost), then one published.
        store.append("app", "run_1", EventKind::ToolCallStarted);
        store.append("app", "run_1", EventKind::ToolCallFinished);
        emit(&store, &bus, EventKind::RunCompleted);
        let rest: Vec<_> = stream.collect().await;
        assert_eq!(sequences(&rest), vec![Some(2), Some(3), Some(4)]);
    }

    #[tokio::test]
    async fn lagged_subscriber_recovers_from_the_store() {
        let store = Arc::new(FakeStore::default());
        let bus = Bus::with_capacity(2);
        let mut stream = Box::pin(stream_run_events(
            store.clone(),
            &bus,
            "app",
            "run_1",
            0,
            RunState::Active,
        ));
        emit(&store, &bus, EventKind::RunStarted);
        assert_eq!(next(&mut stream).await.unwrap().sequence_no(), Some(1));
        for _ in 0..10 {
            emit(&store, &bus, EventKind::PlanUpdated);
        }
        emit(&store, &bus, EventKind::RunCompleted);
        let rest: Vec<_> = stream.collect().await;
        assert_eq!(sequences(&rest), (2..=12).map(Some).collect::<Vec<_>>());
    }

    #[tokio::test(start_paused = true)]
    async fn polling_finds_events_written_by_another_replica() {
        let store = Arc::new(FakeStore::default());
        let bus = Bus::new();
        let mut stream = Box::pin(stream_run_events(
            store.clone(),
            &bus,
            "app",
            "run_1",
            0,
            RunState::Active,
        ));
        let waiter = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(event) = stream.next().await {
                got.push(event);
            }
            got
        });
        tokio::task::yield_now().await;
        // Never published on this bus.
        store.append("app", "run_1", EventKind::RunStarted);
        store.append("app", "run_1", EventKind::RunCompleted);
        tokio::time::advance(Duration::from_millis(1100)).await;
        let got = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(sequences(&got), vec![Some(1), Some(2)]);
    }

    #[tokio::test]
    async fn other_runs_and_apps_are_ignored() {
        let store = Arc::new(FakeStore::default());
        let bus = Bus::new();
        let mut stream = Box::pin(stream_run_events(
            store.clone(),
            &bus,
            "app",
            "run_1",
            0,
            RunState::Active,
        ));
        bus.publish(LiveEvent::from(store.append(
            "app",
            "run_2",
            EventKind::RunStarted,
        )));
        let mut foreign = store.append("app", "run_x", EventKind::RunStarted);
        foreign.run_id = "run_1".into();
        foreign.app_id = "other".into();
        bus.publish(LiveEvent::from(foreign));
        emit(&store, &bus, EventKind::RunCompleted);
        let got: Vec<_> = (&mut stream).collect().await;
        assert_eq!(got.len(), 1);
        assert!(
            matches!(&*got[0], LiveEvent::Persisted(e) if e.run_id == "run_1" && e.app_id == "app")
        );
        drop(stream);
        assert_eq!(bus.channel_count(), 0, "dropping the stream unsubscribes");
    }
}
