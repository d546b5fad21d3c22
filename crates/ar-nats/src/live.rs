//! The live half of the sink: transient deltas (never persisted) queued without waiting and published best effort; persisted events handed to the publisher.
//!
//! The bus wrapper hands each delta to a bounded queue with `try_send`: when the queue is full
//! the delta is dropped and counted, so a run never waits for NATS. The publisher sends them
//! without acknowledgement (JetStream stores what reaches a stream subject) and drops them
//! while NATS is unreachable rather than queueing stale deltas for later. Being live, a delta
//! can reach the stream before the persisted `*_started` event that opened its message, which
//! comes from the log a moment later; consumers order a run by its persisted sequence.

use std::sync::Arc;

use ar_core::event::{EventBus, LiveEvent, TransientEvent};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::handoff::Hand;
use crate::message::Routes;
use crate::sink::Stats;

/// Logs the first dropped delta and then one in this many.
const DROP_LOG_EVERY: u64 = 1000;

/// An [`EventBus`] that also queues transient deltas for NATS and hands persisted events to
/// the publisher ([`crate::handoff`]: committed, so the publisher need not read them back from
/// the log, which stays the authority), then passes every event to the bus it wraps.
pub struct LiveBus {
    inner: Arc<dyn EventBus>,
    queue: mpsc::Sender<Arc<TransientEvent>>,
    hand: Hand,
    stats: Arc<Stats>,
}

impl LiveBus {
    pub(crate) fn new(
        inner: Arc<dyn EventBus>,
        queue: mpsc::Sender<Arc<TransientEvent>>,
        hand: Hand,
        stats: Arc<Stats>,
    ) -> Self {
        LiveBus {
            inner,
            queue,
            hand,
            stats,
        }
    }

    fn dropped(&self) {
        let total = self.stats.add_delta_dropped();
        if total % DROP_LOG_EVERY == 1 {
            tracing::warn!(
                dropped = total,
                "NATS delta queue full: live deltas dropped (persisted events are not affected)"
            );
        }
    }
}

impl EventBus for LiveBus {
    fn publish(&self, event: LiveEvent) {
        match &event {
            LiveEvent::Transient(delta) => {
                if self.queue.try_send(delta.clone()).is_err() {
                    self.dropped();
                }
            }
            LiveEvent::Persisted(stored) => self.hand.hand(stored),
        }
        self.inner.publish(event);
    }
}

/// Publishes queued deltas.
pub(crate) struct LivePublisher {
    pub client: async_nats::Client,
    pub routes: Arc<Routes>,
    pub stats: Arc<Stats>,
}

impl LivePublisher {
    pub(crate) async fn run(
        self,
        mut queue: mpsc::Receiver<Arc<TransientEvent>>,
        cancel: CancellationToken,
    ) {
        loop {
            let delta = tokio::select! {
                _ = cancel.cancelled() => return,
                delta = queue.recv() => match delta {
                    Some(delta) => delta,
                    None => return,
                },
            };
            self.publish(&delta).await;
        }
    }

    async fn publish(&self, delta: &TransientEvent) {
        if self.client.connection_state() != async_nats::connection::State::Connected {
            self.stats.add_delta_dropped();
            return;
        }
        for message in self.routes.live_messages(delta) {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert(
                async_nats::header::NATS_MESSAGE_ID,
                message.message_id.as_str(),
            );
            if let Err(error) = self
                .client
                .publish_with_headers(message.subject, headers, message.payload)
                .await
            {
                tracing::debug!(%error, "publishing a live delta failed");
                self.stats.add_delta_dropped();
                return;
            }
        }
        self.stats.add_delta_published();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use ar_core::event::MessageDelta;
    use ar_core::RunEvent;

    use super::*;

    #[derive(Default)]
    struct Recorder(Mutex<usize>);

    impl EventBus for Recorder {
        fn publish(&self, _event: LiveEvent) {
            *self.0.lock().unwrap() += 1;
        }
    }

    fn delta(n: usize) -> LiveEvent {
        LiveEvent::from(TransientEvent {
            app_id: "app".into(),
            run_id: "run_1".into(),
            host_run_id: String::new(),
            event: RunEvent::AssistantMessageDelta(MessageDelta {
                message_id: "m".into(),
                text: n.to_string(),
            }),
        })
    }

    #[test]
    fn a_full_queue_drops_and_counts_deltas_and_never_blocks_the_bus() {
        let recorder = Arc::new(Recorder::default());
        let stats = Arc::new(Stats::default());
        let (sender, mut receiver) = mpsc::channel(2);
        let (hand, _handed) = crate::handoff::channel(1);
        let bus = LiveBus::new(recorder.clone(), sender, hand, stats.clone());
        for n in 0..5 {
            bus.publish(delta(n));
        }
        assert_eq!(
            *recorder.0.lock().unwrap(),
            5,
            "every event reaches the bus"
        );
        assert_eq!(stats.deltas_dropped(), 3);
        assert_eq!(receiver.try_recv().unwrap().run_id, "run_1");
    }
}
