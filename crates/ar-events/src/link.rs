//! This process's side of the replica link: the bus that also sends the live events of runs other replicas watch ([`LinkedBus`]), and the tasks that hand what they send to the local bus and to the runs' owners and announce the runs watched here ([`Replicas::spawn`]).
//!
//! A replica sends a run's events only while another replica says one of its readers watches
//! the run ([`LinkMessage::Watching`], renewed every [`ANNOUNCE_EVERY`], forgotten after
//! [`WATCH_TTL`]), so a deployment whose readers are on the owning replica (or a single
//! replica) sends nothing but owner signals. Events published between a reader's arrival and
//! its announcement reaching the owner are not sent: the reader has them from the store (it
//! read the log after subscribing), or sees the hole at the next one and reads it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ar_core::event::{EventBus, LiveEvent};
use ar_core::replica::{LinkMessage, OwnerSignal, ReplicaLink};
use ar_core::store::Store;
use futures::{Stream, StreamExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::bus::Bus;

/// How often the runs watched here are announced again.
pub const ANNOUNCE_EVERY: Duration = Duration::from_secs(1);
/// How long an announcement holds without renewal.
pub const WATCH_TTL: Duration = Duration::from_secs(3);

/// The runs other replicas watch, until when.
#[derive(Debug, Default)]
struct RemoteWatches {
    until: Mutex<HashMap<String, Instant>>,
}

impl RemoteWatches {
    fn mark(&self, run_id: String) {
        let now = Instant::now();
        let mut until = lock(&self.until);
        // Forget the expired ones now and then (an announcement is cheap; the map stays small).
        if until.len() > 64 {
            until.retain(|_, expiry| *expiry > now);
        }
        until.insert(run_id, now + WATCH_TTL);
    }

    fn is_watched(&self, run_id: &str) -> bool {
        lock(&self.until)
            .get(run_id)
            .is_some_and(|expiry| *expiry > Instant::now())
    }
}

/// A poisoned lock still holds a consistent map (every change is one insert or retain).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The link to the other replicas, with what they watch.
#[derive(Clone)]
pub struct Replicas {
    link: Arc<dyn ReplicaLink>,
    watches: Arc<RemoteWatches>,
}

impl Replicas {
    pub fn new(link: Arc<dyn ReplicaLink>) -> Replicas {
        Replicas {
            link,
            watches: Arc::default(),
        }
    }

    /// The sending side (for the engine's owner signals).
    pub fn link(&self) -> Arc<dyn ReplicaLink> {
        self.link.clone()
    }

    /// `inner`, with the events of runs other replicas watch also sent to them.
    pub fn bus(&self, inner: Arc<dyn EventBus>) -> Arc<dyn EventBus> {
        Arc::new(LinkedBus {
            inner,
            replicas: self.clone(),
        })
    }

    /// Starts handing what the other replicas send to `bus` and `to_owner` (see
    /// [`receive_from_replicas`]) and announcing the runs `bus` has readers of; both stop
    /// with `stop`.
    pub fn spawn(
        &self,
        inbound: impl Stream<Item = LinkMessage> + Send + 'static,
        bus: Arc<Bus>,
        store: Arc<dyn Store>,
        to_owner: impl Fn(&str, OwnerSignal) + Send + 'static,
        stop: CancellationToken,
    ) {
        let receive =
            receive_from_replicas(inbound, bus.clone(), store, self.watches.clone(), to_owner);
        let announce = announce_watched(bus, self.link.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = receive => {}
                () = announce => {}
                () = stop.cancelled() => {}
            }
        });
    }
}

/// `inner`, with every event of a run another replica watches also sent to the link (before
/// the local publish, so the link sees the engine's order). Events received from the link are
/// published to the local [`Bus`] alone, never back to the link.
pub struct LinkedBus {
    inner: Arc<dyn EventBus>,
    replicas: Replicas,
}

impl EventBus for LinkedBus {
    fn publish(&self, event: LiveEvent) {
        if self.replicas.watches.is_watched(event.run_id()) {
            self.replicas
                .link
                .send(LinkMessage::Live(Box::new(event.clone())));
        }
        self.inner.publish(event);
    }
}

/// Tells the other replicas which runs have readers here: a run at once when it gets its first
/// reader, and every run with readers every [`ANNOUNCE_EVERY`] (which renews them).
async fn announce_watched(bus: Arc<Bus>, link: Arc<dyn ReplicaLink>) {
    let mut watched = bus.watched_signal();
    let mut every = tokio::time::interval(ANNOUNCE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Announced since the last renewal: a new reader announces its run alone, not all of them.
    let mut announced: HashSet<String> = HashSet::new();
    loop {
        let renew = tokio::select! {
            _ = every.tick() => true,
            changed = watched.changed() => {
                if changed.is_err() {
                    return;
                }
                false
            }
        };
        if renew {
            announced.clear();
        }
        for run_id in bus.watched_runs() {
            if announced.insert(run_id.clone()) {
                link.send(LinkMessage::Watching { run_id });
            }
        }
    }
}

/// Hands the other replicas' messages, in order, to this process: live events to `bus` (whose
/// readers drop what they already have by sequence number), a wake-up for an event too large
/// for the link read from `store` and published when someone here watches the run, owner
/// signals to `to_owner` (which acts only when the run's owner is in this process), and the
/// runs other replicas watch to `watches`. Ends with `inbound`.
async fn receive_from_replicas(
    inbound: impl Stream<Item = LinkMessage> + Send,
    bus: Arc<Bus>,
    store: Arc<dyn Store>,
    watches: Arc<RemoteWatches>,
    to_owner: impl Fn(&str, OwnerSignal) + Send,
) {
    let mut inbound = std::pin::pin!(inbound);
    while let Some(message) = inbound.next().await {
        match message {
            LinkMessage::Live(event) => bus.publish(*event),
            LinkMessage::Appended {
                app_id,
                run_id,
                sequence_no,
            } => {
                if bus.subscriber_count(&run_id) > 0 {
                    read_appended(&bus, store.as_ref(), &app_id, &run_id, sequence_no).await;
                }
            }
            LinkMessage::Owner { run_id, signal } => to_owner(&run_id, signal),
            LinkMessage::Watching { run_id } => watches.mark(run_id),
        }
    }
}

/// Publishes the event another replica appended (too large for the link) from the store.
async fn read_appended(bus: &Bus, store: &dyn Store, app_id: &str, run_id: &str, sequence_no: i64) {
    match store
        .list_events_after(app_id, run_id, sequence_no - 1, Some(1))
        .await
    {
        Ok(events) => {
            for event in events {
                bus.publish(LiveEvent::from(event));
            }
        }
        // The readers' own poll of the store finds it a moment later.
        Err(error) => {
            tracing::debug!(%run_id, %error, "reading an event another replica appended")
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ar_core::EventKind;

    use super::*;
    use crate::fake_store::FakeStore;

    #[derive(Default)]
    struct Recorded(Mutex<Vec<LinkMessage>>);

    impl ReplicaLink for Recorded {
        fn send(&self, message: LinkMessage) {
            lock(&self.0).push(message);
        }
    }

    fn sent(link: &Recorded) -> Vec<LinkMessage> {
        std::mem::take(&mut *lock(&link.0))
    }

    #[tokio::test]
    async fn only_the_runs_another_replica_watches_are_sent() {
        let store = Arc::new(FakeStore::default());
        let link = Arc::new(Recorded::default());
        let replicas = Replicas::new(link.clone());
        let bus = replicas.bus(Arc::new(Bus::new()));
        let first = store.append("app", "run_1", EventKind::RunStarted);
        bus.publish(LiveEvent::from(first.clone()));
        assert_eq!(sent(&link), vec![], "nobody watches run_1 elsewhere");

        replicas.watches.mark("run_1".into());
        bus.publish(LiveEvent::from(first.clone()));
        let other = store.append("app", "run_2", EventKind::RunStarted);
        bus.publish(LiveEvent::from(other));
        assert_eq!(
            sent(&link),
            vec![LinkMessage::Live(Box::new(LiveEvent::from(first)))]
        );
    }

    #[tokio::test]
    async fn a_first_reader_is_announced_at_once_and_again_while_it_stays() {
        let link = Arc::new(Recorded::default());
        let bus = Arc::new(Bus::new());
        let announcing = tokio::spawn(announce_watched(bus.clone(), link.clone()));
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _reader = bus.subscribe("run_1");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let watching = LinkMessage::Watching {
            run_id: "run_1".into(),
        };
        assert_eq!(sent(&link), vec![watching.clone()], "at once");
        // A second run's first reader announces that run alone.
        let _second = bus.subscribe("run_2");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let second = LinkMessage::Watching {
            run_id: "run_2".into(),
        };
        assert_eq!(sent(&link), vec![second.clone()], "only the new one");
        tokio::time::sleep(ANNOUNCE_EVERY).await;
        let mut renewed = sent(&link);
        renewed.sort_by_key(|message| format!("{message:?}"));
        assert_eq!(renewed, vec![watching, second], "renewed, all of them");
        announcing.abort();
    }

    #[tokio::test]
    async fn what_comes_back_reaches_readers_owners_and_the_watch_list() {
        let store = Arc::new(FakeStore::default());
        let first = store.append("app", "run_1", EventKind::RunStarted);
        let large = store.append("app", "run_1", EventKind::RunCompleted);
        let bus = Arc::new(Bus::new());
        let mut reader = bus.subscribe("run_1");
        let inbound = futures::stream::iter(vec![
            LinkMessage::Live(Box::new(LiveEvent::from(first))),
            LinkMessage::Appended {
                app_id: "app".into(),
                run_id: "run_1".into(),
                sequence_no: large.sequence_no,
            },
            LinkMessage::Owner {
                run_id: "run_1".into(),
                signal: OwnerSignal::Cancel,
            },
            LinkMessage::Watching {
                run_id: "run_9".into(),
            },
        ]);
        let watches = Arc::new(RemoteWatches::default());
        let signals = Mutex::new(Vec::new());
        receive_from_replicas(
            inbound,
            bus.clone(),
            store,
            watches.clone(),
            |run, signal| lock(&signals).push((run.to_string(), signal)),
        )
        .await;
        let mut got = Vec::new();
        for _ in 0..2 {
            let event = tokio::time::timeout(Duration::from_secs(1), reader.recv())
                .await
                .unwrap()
                .unwrap();
            got.push(event.sequence_no());
        }
        assert_eq!(
            got,
            vec![Some(1), Some(2)],
            "the wake-up was read from the store"
        );
        assert_eq!(
            *lock(&signals),
            vec![("run_1".to_string(), OwnerSignal::Cancel)]
        );
        assert!(watches.is_watched("run_9") && !watches.is_watched("run_1"));
    }
}
