//! This process's side of the replica link: the bus that also sends every live event to the other replicas ([`LinkedBus`]), and the loop that hands what they send to the local bus and to the runs' owners ([`receive_from_replicas`]).

use std::sync::Arc;

use ar_core::event::{EventBus, LiveEvent};
use ar_core::replica::{LinkMessage, OwnerSignal, ReplicaLink};
use ar_core::store::Store;
use futures::{Stream, StreamExt};

use crate::bus::Bus;

/// `inner`, with every event also sent to the other replicas (before the local publish, so the
/// link sees the engine's order). Events received from the link are published to the local
/// [`Bus`] alone, never back to the link.
pub struct LinkedBus {
    inner: Arc<dyn EventBus>,
    link: Arc<dyn ReplicaLink>,
}

impl LinkedBus {
    pub fn new(inner: Arc<dyn EventBus>, link: Arc<dyn ReplicaLink>) -> LinkedBus {
        LinkedBus { inner, link }
    }
}

impl EventBus for LinkedBus {
    fn publish(&self, event: LiveEvent) {
        self.link.send(LinkMessage::Live(Box::new(event.clone())));
        self.inner.publish(event);
    }
}

/// Hands the other replicas' messages, in order, to this process: live events to `bus` (whose
/// readers drop what they already have by sequence number), a wake-up for an event too large
/// for the link read from `store` and published when someone here watches the run, and owner
/// signals to `to_owner` (which acts only when the run's owner is in this process). Ends with
/// `inbound`.
pub async fn receive_from_replicas(
    inbound: impl Stream<Item = LinkMessage> + Send,
    bus: Arc<Bus>,
    store: Arc<dyn Store>,
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
                if bus.subscriber_count(&run_id) == 0 {
                    continue;
                }
                match store
                    .list_events_after(&app_id, &run_id, sequence_no - 1, Some(1))
                    .await
                {
                    Ok(events) => {
                        for event in events {
                            bus.publish(LiveEvent::Persisted(event));
                        }
                    }
                    // The readers' own poll of the store finds it a moment later.
                    Err(error) => {
                        tracing::debug!(%run_id, %error, "reading an event another replica appended")
                    }
                }
            }
            LinkMessage::Owner { run_id, signal } => to_owner(&run_id, signal),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use ar_core::EventKind;

    use super::*;
    use crate::fake_store::FakeStore;

    #[derive(Default)]
    struct Recorded(Mutex<Vec<LinkMessage>>);

    impl ReplicaLink for Recorded {
        fn send(&self, message: LinkMessage) {
            self.0.lock().unwrap().push(message);
        }
    }

    #[tokio::test]
    async fn what_is_published_goes_to_the_link_and_what_comes_back_reaches_readers_and_owners() {
        let store = Arc::new(FakeStore::default());
        let sent = Arc::new(Recorded::default());
        let here = Arc::new(Bus::new());
        let linked = LinkedBus::new(here.clone(), sent.clone());
        let first = store.append("app", "run_1", EventKind::RunStarted);
        linked.publish(LiveEvent::Persisted(first.clone()));
        assert_eq!(
            *sent.0.lock().unwrap(),
            vec![LinkMessage::Live(Box::new(LiveEvent::Persisted(
                first.clone()
            )))]
        );

        // Another replica's bus: a reader of run_1 there, fed by the link.
        let there = Arc::new(Bus::new());
        let mut reader = there.subscribe("run_1");
        let large = store.append("app", "run_1", EventKind::RunCompleted);
        let inbound = futures::stream::iter(vec![
            LinkMessage::Live(Box::new(LiveEvent::Persisted(first.clone()))),
            LinkMessage::Appended {
                app_id: "app".into(),
                run_id: "run_1".into(),
                sequence_no: large.sequence_no,
            },
            LinkMessage::Owner {
                run_id: "run_1".into(),
                signal: OwnerSignal::Cancel,
            },
        ]);
        let signals = Mutex::new(Vec::new());
        receive_from_replicas(inbound, there.clone(), store.clone(), |run, signal| {
            signals.lock().unwrap().push((run.to_string(), signal))
        })
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
            *signals.lock().unwrap(),
            vec![("run_1".to_string(), OwnerSignal::Cancel)]
        );
    }
}
