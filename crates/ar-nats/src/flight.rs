//! One batch of the log on its way to JetStream: which events may be sent now (at most one per run, at most a window in all), and how far the acknowledged prefix reaches.
//!
//! Each run's events wait in a queue of their own; a run whose previous event is acknowledged
//! is ready to send its next one. Acknowledgements complete in any order; the cursor only
//! moves over the prefix of the batch whose events are all acknowledged, so it never passes an
//! event JetStream may not have.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;

use ar_core::event::StoredEvent;
use async_nats::jetstream::context::{PublishAckFuture, PublishError};
use futures::stream::FuturesUnordered;
use futures::StreamExt as _;

type AckOf = Pin<Box<dyn Future<Output = (usize, Result<(), PublishError>)> + Send>>;

pub(crate) struct Flight {
    positions: Vec<i64>,
    runs: Vec<String>,
    /// Taken when sent.
    events: Vec<Option<StoredEvent>>,
    acked: Vec<bool>,
    /// Slots before it are all acknowledged.
    prefix: usize,
    /// Per run, its slots not sent yet, in log order.
    waiting: HashMap<String, VecDeque<usize>>,
    /// Runs with nothing in flight and an event waiting, in the order they became ready.
    ready: VecDeque<String>,
    in_flight: usize,
    acks: FuturesUnordered<AckOf>,
}

impl Flight {
    pub(crate) fn new(batch: Vec<StoredEvent>) -> Flight {
        let mut waiting: HashMap<String, VecDeque<usize>> = HashMap::new();
        let mut ready = VecDeque::new();
        let mut positions = Vec::with_capacity(batch.len());
        let mut runs = Vec::with_capacity(batch.len());
        for (slot, event) in batch.iter().enumerate() {
            let queue = waiting.entry(event.run_id.clone()).or_default();
            if queue.is_empty() {
                ready.push_back(event.run_id.clone());
            }
            queue.push_back(slot);
            positions.push(event.position);
            runs.push(event.run_id.clone());
        }
        Flight {
            acked: vec![false; batch.len()],
            events: batch.into_iter().map(Some).collect(),
            positions,
            runs,
            prefix: 0,
            waiting,
            ready,
            in_flight: 0,
            acks: FuturesUnordered::new(),
        }
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The next event that may be sent (its run has nothing in flight), taken out of the batch.
    pub(crate) fn next_to_send(&mut self) -> Option<(usize, StoredEvent)> {
        let run = self.ready.pop_front()?;
        let slot = self.waiting.get_mut(&run)?.pop_front()?;
        let event = self.events[slot].take()?;
        Some((slot, event))
    }

    /// Records that `slot` was sent; `acks` are its messages' acknowledgements.
    pub(crate) fn sent(&mut self, slot: usize, acks: Vec<PublishAckFuture>) {
        self.in_flight += 1;
        self.acks.push(Box::pin(async move {
            for ack in acks {
                if let Err(error) = ack.await {
                    return (slot, Err(error));
                }
            }
            (slot, Ok(()))
        }));
    }

    /// Waits for one event's acknowledgements; its run may send its next event.
    pub(crate) async fn next_ack(&mut self) -> Result<(), PublishError> {
        let Some((slot, result)) = self.acks.next().await else {
            return Ok(());
        };
        result?;
        self.in_flight -= 1;
        self.acked[slot] = true;
        let run = &self.runs[slot];
        if self.waiting.get(run).is_some_and(|queue| !queue.is_empty()) {
            self.ready.push_back(run.clone());
        }
        Ok(())
    }

    /// Moves over the acknowledged prefix; returns how many events it passed and the position
    /// of the last one.
    pub(crate) fn advance(&mut self) -> Option<(u64, i64)> {
        let start = self.prefix;
        while self.prefix < self.acked.len() && self.acked[self.prefix] {
            self.prefix += 1;
        }
        (self.prefix > start).then(|| {
            (
                (self.prefix - start) as u64,
                self.positions[self.prefix - 1],
            )
        })
    }

    pub(crate) fn is_done(&self) -> bool {
        self.prefix == self.acked.len()
    }
}

#[cfg(test)]
mod tests {
    use ar_core::EventKind;

    use super::*;

    fn event(position: i64, run: &str) -> StoredEvent {
        StoredEvent {
            position,
            event_id: format!("evt_{position}"),
            app_id: "app".into(),
            run_id: run.into(),
            host_run_id: String::new(),
            sequence_no: position,
            kind: EventKind::PlanUpdated,
            data: Default::default(),
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn one_event_per_run_is_ready_at_a_time_in_log_order() {
        let mut flight = Flight::new(vec![
            event(1, "a"),
            event(2, "a"),
            event(3, "b"),
            event(4, "a"),
        ]);
        let first: Vec<i64> = std::iter::from_fn(|| flight.next_to_send())
            .map(|(_, e)| e.position)
            .collect();
        assert_eq!(first, vec![1, 3], "a's second event waits for its first");
        assert!(flight.advance().is_none());
        assert!(!flight.is_done());
    }
}
