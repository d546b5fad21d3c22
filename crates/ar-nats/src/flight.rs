//! The events read from the log and not yet acknowledged by JetStream, in log order: which may be sent now (at most one per run, at most a window in all), and how far the acknowledged prefix reaches.
//!
//! The publisher appends what it reads from the log as it goes; nothing waits for a batch to
//! finish. Each run's events wait in a queue of their own; a run whose previous event is
//! acknowledged is ready to send its next one. Acknowledgements complete in any order; the
//! cursor only moves over the prefix whose events are all acknowledged, so it never passes an
//! event JetStream may not have. This is plain state: the answers themselves arrive on the
//! publisher's acknowledgement subscription ([`crate::acks`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ar_core::event::StoredEvent;

/// One event between the log and its acknowledgement.
struct Slot {
    position: i64,
    run: Arc<str>,
    /// Taken when sent.
    event: Option<Arc<StoredEvent>>,
    acked: bool,
}

#[derive(Default)]
pub(crate) struct Flight {
    /// Read and not yet passed by the acknowledged prefix; `slots[0]` is slot `first`.
    slots: VecDeque<Slot>,
    first: u64,
    /// Per run, its slots not sent yet, in log order (no entry when none wait).
    waiting: HashMap<Arc<str>, VecDeque<u64>>,
    /// Runs with an event in flight.
    busy: HashSet<Arc<str>>,
    /// Runs with nothing in flight and an event waiting, in the order they became ready.
    ready: VecDeque<Arc<str>>,
    /// Sent and not yet acknowledged, by slot.
    sent: HashMap<u64, Sent>,
}

/// A sent event: how many of its copies JetStream has still to acknowledge, and since when.
struct Sent {
    unanswered: usize,
    at: Instant,
}

impl Flight {
    /// Appends events read from the log (or handed over after it) after everything held.
    pub(crate) fn extend(&mut self, events: impl IntoIterator<Item = Arc<StoredEvent>>) {
        for event in events {
            let slot = self.first + self.slots.len() as u64;
            let run: Arc<str> = Arc::from(event.run_id.as_str());
            let queue = self.waiting.entry(run.clone()).or_default();
            if queue.is_empty() && !self.busy.contains(&run) {
                self.ready.push_back(run.clone());
            }
            queue.push_back(slot);
            self.slots.push_back(Slot {
                position: event.position,
                run,
                event: Some(event),
                acked: false,
            });
        }
    }

    /// Events read and not yet acknowledged.
    pub(crate) fn held(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.sent.len()
    }

    /// The next event that may be sent (its run has nothing in flight), taken out of its slot.
    pub(crate) fn next_to_send(&mut self) -> Option<(u64, Arc<StoredEvent>)> {
        let run = self.ready.pop_front()?;
        let queue = self.waiting.get_mut(&run)?;
        let slot = queue.pop_front()?;
        if queue.is_empty() {
            self.waiting.remove(&run);
        }
        let event = self.slots[(slot - self.first) as usize].event.take()?;
        self.busy.insert(run);
        Some((slot, event))
    }

    /// Records that `slot` was sent as `copies` messages, each to be acknowledged.
    pub(crate) fn sent(&mut self, slot: u64, copies: usize, now: Instant) {
        if copies == 0 {
            self.acknowledge(slot);
            return;
        }
        self.sent.insert(
            slot,
            Sent {
                unanswered: copies,
                at: now,
            },
        );
    }

    /// Records one copy of `slot` acknowledged; the last one frees its run to send its next
    /// event. An answer for a slot not in flight (a duplicate) is ignored.
    pub(crate) fn acknowledged(&mut self, slot: u64) {
        let Some(sent) = self.sent.get_mut(&slot) else {
            return;
        };
        sent.unanswered -= 1;
        if sent.unanswered == 0 {
            self.sent.remove(&slot);
            self.acknowledge(slot);
        }
    }

    fn acknowledge(&mut self, slot: u64) {
        let Some(entry) = slot
            .checked_sub(self.first)
            .and_then(|index| self.slots.get_mut(index as usize))
        else {
            return;
        };
        entry.acked = true;
        let run = entry.run.clone();
        self.busy.remove(&run);
        if self.waiting.contains_key(&run) {
            self.ready.push_back(run);
        }
    }

    /// Whether an event sent before `now - timeout` is still unacknowledged.
    pub(crate) fn overdue(&self, now: Instant, timeout: Duration) -> bool {
        self.sent
            .values()
            .any(|sent| now.duration_since(sent.at) >= timeout)
    }

    /// Moves over the acknowledged prefix; returns how many events it passed and the position
    /// of the last one.
    pub(crate) fn advance(&mut self) -> Option<(u64, i64)> {
        let mut passed = 0;
        let mut position = None;
        while self.slots.front().is_some_and(|slot| slot.acked) {
            if let Some(slot) = self.slots.pop_front() {
                position = Some(slot.position);
            }
            self.first += 1;
            passed += 1;
        }
        position.map(|position| (passed, position))
    }
}

#[cfg(test)]
mod tests {
    use ar_core::EventKind;

    use super::*;

    fn event(position: i64, run: &str) -> Arc<StoredEvent> {
        Arc::new(StoredEvent {
            position,
            event_id: format!("evt_{position}"),
            app_id: "app".into(),
            run_id: run.into(),
            host_run_id: String::new(),
            sequence_no: position,
            kind: EventKind::PlanUpdated,
            data: Default::default(),
            created_at: chrono::Utc::now(),
        })
    }

    fn sendable(flight: &mut Flight) -> Vec<i64> {
        let mut positions = Vec::new();
        while let Some((slot, event)) = flight.next_to_send() {
            flight.sent(slot, 1, Instant::now());
            positions.push(event.position);
        }
        positions
    }

    /// The slot of the event at `position` (positions and slots both count from the start here).
    fn ack(flight: &mut Flight, position: i64) {
        flight.acknowledged(position as u64 - 1);
    }

    #[test]
    fn one_event_per_run_is_in_flight_at_a_time_in_log_order() {
        let mut flight = Flight::default();
        flight.extend(vec![event(1, "a"), event(2, "a"), event(3, "b")]);
        assert_eq!(sendable(&mut flight), vec![1, 3], "a's second waits");
        // Read while a's first is in flight: a stays behind it, c may go.
        flight.extend(vec![event(4, "a"), event(5, "c")]);
        assert_eq!(sendable(&mut flight), vec![5]);
        assert!(flight.advance().is_none());
        ack(&mut flight, 1);
        assert_eq!(
            flight.advance(),
            Some((1, 1)),
            "1 is acknowledged; 2 is not sent yet"
        );
        assert_eq!(sendable(&mut flight), vec![2], "a's next after its first");
        ack(&mut flight, 3);
        ack(&mut flight, 5);
        ack(&mut flight, 2);
        ack(&mut flight, 2);
        assert_eq!(sendable(&mut flight), vec![4]);
        ack(&mut flight, 4);
        assert_eq!(flight.advance(), Some((4, 5)));
        assert_eq!(flight.held(), 0);
        assert_eq!(flight.in_flight(), 0);
    }

    #[test]
    fn an_event_sent_twice_waits_for_both_copies_and_a_late_one_is_overdue() {
        let mut flight = Flight::default();
        flight.extend(vec![event(1, "a")]);
        let (slot, _) = flight.next_to_send().unwrap();
        let start = Instant::now();
        flight.sent(slot, 2, start);
        flight.acknowledged(slot);
        assert!(flight.advance().is_none(), "one copy of two");
        let timeout = Duration::from_secs(5);
        assert!(!flight.overdue(start + Duration::from_secs(1), timeout));
        assert!(flight.overdue(start + timeout, timeout));
        flight.acknowledged(slot);
        assert_eq!(flight.advance(), Some((1, 1)));
        assert!(!flight.overdue(start + timeout, timeout));
    }
}
