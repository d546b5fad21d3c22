//! The in-process event bus: a lazily created broadcast channel per run, removed when its last subscriber leaves.
//!
//! Publishing to a run nobody watches is a map lookup by `&str` and nothing else (no allocation,
//! no channel). A watched run's channel holds shared events (`Arc<LiveEvent>`): a slot is one
//! pointer, however large an event is, and each subscriber receives the event without a copy. Persisted events also bump a store-wide "something was appended" signal that the
//! callback outbox waits on, so deliveries start immediately instead of at the next poll.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use ar_core::event::{EventBus, LiveEvent};
use tokio::sync::{broadcast, watch};

/// Default number of events a slow subscriber may fall behind before it is told it lagged.
pub const DEFAULT_CAPACITY: usize = 1024;

struct Inner {
    channels: RwLock<HashMap<String, broadcast::Sender<Arc<LiveEvent>>>>,
    capacity: usize,
    /// Position of the latest persisted event published (0 before any).
    appended: watch::Sender<i64>,
    /// Bumped whenever a run gets its first subscriber (the replica link announces it).
    watched: watch::Sender<u64>,
}

/// The in-process bus. Cheap to clone; clones share the channels.
#[derive(Clone)]
pub struct Bus {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Bus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bus")
            .field("capacity", &self.inner.capacity)
            .field("channels", &self.channel_count())
            .finish()
    }
}

impl Default for Bus {
    fn default() -> Self {
        Bus::new()
    }
}

impl Bus {
    pub fn new() -> Self {
        Bus::with_capacity(DEFAULT_CAPACITY)
    }

    /// A bus whose per-run channels hold `capacity` events (at least 1).
    pub fn with_capacity(capacity: usize) -> Self {
        let (appended, _) = watch::channel(0);
        let (watched, _) = watch::channel(0);
        Bus {
            inner: Arc::new(Inner {
                channels: RwLock::new(HashMap::new()),
                capacity: capacity.max(1),
                appended,
                watched,
            }),
        }
    }

    /// Starts receiving the live events of `run_id`. Events published before this call are not
    /// seen (read them from the store; see [`crate::replay`]).
    pub fn subscribe(&self, run_id: &str) -> Subscription {
        let mut channels = write(&self.inner.channels);
        let receiver = match channels.get(run_id) {
            Some(sender) => sender.subscribe(),
            None => {
                let (sender, receiver) = broadcast::channel(self.inner.capacity);
                channels.insert(run_id.to_string(), sender);
                self.inner.watched.send_modify(|count| *count += 1);
                receiver
            }
        };
        Subscription {
            receiver: Some(receiver),
            run_id: run_id.to_string(),
            bus: self.inner.clone(),
        }
    }

    /// A signal carrying the position of the latest persisted event published here; it changes
    /// on every persisted publish (whether or not the run has subscribers).
    pub fn appended_signal(&self) -> watch::Receiver<i64> {
        self.inner.appended.subscribe()
    }

    /// A signal that changes whenever a run gets its first subscriber.
    pub fn watched_signal(&self) -> watch::Receiver<u64> {
        self.inner.watched.subscribe()
    }

    /// The runs that have subscribers now.
    pub fn watched_runs(&self) -> Vec<String> {
        read(&self.inner.channels).keys().cloned().collect()
    }

    /// Runs that currently have a channel.
    pub fn channel_count(&self) -> usize {
        read(&self.inner.channels).len()
    }

    /// Live subscribers of one run.
    pub fn subscriber_count(&self, run_id: &str) -> usize {
        read(&self.inner.channels)
            .get(run_id)
            .map_or(0, broadcast::Sender::receiver_count)
    }
}

impl EventBus for Bus {
    fn publish(&self, event: LiveEvent) {
        if let LiveEvent::Persisted(stored) = &event {
            let position = stored.position;
            // Wakes waiters on every persisted event, even one older than the latest seen.
            self.inner
                .appended
                .send_modify(|latest| *latest = (*latest).max(position));
        }
        let channels = read(&self.inner.channels);
        if let Some(sender) = channels.get(event.run_id()) {
            // An error only means every receiver is gone; the last `Subscription` drop removes
            // the channel, so there is nothing to do here.
            let _ = sender.send(Arc::new(event));
        }
    }
}

/// Poisoning only happens if a thread panicked while holding the lock; the map is still
/// consistent (every mutation is a single insert/remove), so keep using it.
fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Why [`Subscription::recv`] returned no event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecvError {
    /// The subscriber fell behind and this many events were dropped for it.
    #[error("subscriber lagged behind by {0} events")]
    Lagged(u64),
    /// The channel is gone (cannot happen while the subscription lives; kept for completeness).
    #[error("event channel closed")]
    Closed,
}

/// A subscriber of one run's live events. Dropping it may remove the run's channel.
pub struct Subscription {
    receiver: Option<broadcast::Receiver<Arc<LiveEvent>>>,
    run_id: String,
    bus: Arc<Inner>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("run_id", &self.run_id)
            .finish()
    }
}

impl Subscription {
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The next live event of the run (shared with its other subscribers).
    pub async fn recv(&mut self) -> Result<Arc<LiveEvent>, RecvError> {
        let Some(receiver) = self.receiver.as_mut() else {
            return Err(RecvError::Closed);
        };
        match receiver.recv().await {
            Ok(event) => Ok(event),
            Err(broadcast::error::RecvError::Lagged(missed)) => Err(RecvError::Lagged(missed)),
            Err(broadcast::error::RecvError::Closed) => Err(RecvError::Closed),
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        drop(self.receiver.take());
        // Under the write lock no one can subscribe concurrently, so a zero count is final.
        let mut channels = write(&self.bus.channels);
        if channels
            .get(&self.run_id)
            .is_some_and(|sender| sender.receiver_count() == 0)
        {
            channels.remove(&self.run_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transient(run_id: &str, n: i64) -> LiveEvent {
        LiveEvent::from(ar_core::event::TransientEvent {
            app_id: "app".into(),
            run_id: run_id.into(),
            host_run_id: String::new(),
            event: ar_core::RunEvent::AssistantMessageDelta(ar_core::event::MessageDelta {
                message_id: "m".into(),
                text: n.to_string(),
            }),
        })
    }

    #[tokio::test]
    async fn channels_are_lazy_and_removed_with_last_subscriber() {
        let bus = Bus::new();
        bus.publish(transient("run_a", 1));
        assert_eq!(
            bus.channel_count(),
            0,
            "publishing without subscribers creates nothing"
        );

        let mut first = bus.subscribe("run_a");
        let mut second = bus.subscribe("run_a");
        assert_eq!(bus.channel_count(), 1);
        assert_eq!(bus.subscriber_count("run_a"), 2);

        bus.publish(transient("run_a", 2));
        bus.publish(transient("run_b", 3));
        assert_eq!(*first.recv().await.unwrap(), transient("run_a", 2));
        assert_eq!(*second.recv().await.unwrap(), transient("run_a", 2));

        drop(first);
        assert_eq!(bus.channel_count(), 1);
        drop(second);
        assert_eq!(bus.channel_count(), 0);
    }

    #[tokio::test]
    async fn slow_subscriber_is_told_it_lagged() {
        let bus = Bus::with_capacity(2);
        let mut sub = bus.subscribe("run_a");
        for n in 0..5 {
            bus.publish(transient("run_a", n));
        }
        assert_eq!(sub.recv().await, Err(RecvError::Lagged(3)));
        assert_eq!(*sub.recv().await.unwrap(), transient("run_a", 3));
    }
}
