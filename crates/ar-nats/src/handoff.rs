//! Committed events handed from the bus to the publisher, so that what this process commits is published without being read back from the log.
//!
//! The bus ([`crate::live::LiveBus`]) hands each persisted event over once it is committed.
//! The publisher takes a handed event only when it is the next position after what it has read
//! (`read + 1`), so the log stays the authority and nothing is skipped. Events are handed over
//! as their runs' tasks resume after the commit, not always in position order, so a gap is
//! first given a moment to fill (`Tuning::gap_grace`); one that stays sends the publisher back
//! to the log, which it reads as before: an event committed by another replica, or on
//! PostgreSQL a position no commit used or one not visible yet. An event the full queue could
//! not take sends it to the log at once. Handed events the log read passes are dropped as read.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ar_core::event::StoredEvent;
use tokio::sync::mpsc;

/// The bus's end: hands events over without ever waiting.
#[derive(Clone)]
pub(crate) struct Hand {
    sender: mpsc::Sender<Arc<StoredEvent>>,
    missed: Arc<AtomicBool>,
}

impl Hand {
    /// Hands `event` over; when the queue is full it is left to the log read.
    pub(crate) fn hand(&self, event: &Arc<StoredEvent>) {
        if self.sender.try_send(event.clone()).is_err() {
            self.missed.store(true, Ordering::Relaxed);
        }
    }
}

/// The publisher's end: what was handed over, in position order.
pub(crate) struct Handed {
    /// `None` once every [`Hand`] is gone (the publisher then reads the log alone).
    receiver: Option<mpsc::Receiver<Arc<StoredEvent>>>,
    /// An event was not handed over (the queue was full): read the log.
    missed: Arc<AtomicBool>,
    /// Handed events not yet taken, by position.
    held: BTreeMap<i64, Arc<StoredEvent>>,
    capacity: usize,
}

/// What [`Handed::next_after`] found.
pub(crate) struct Taken {
    /// The handed events that follow what was read, in order.
    pub events: Vec<Arc<StoredEvent>>,
    /// A handed event waits behind a position not handed (yet).
    pub gap: bool,
    /// An event was not handed over (the queue was full): read the log.
    pub missed: bool,
}

/// A queue of `capacity` events (at least 1) between the bus and the publisher.
pub(crate) fn channel(capacity: usize) -> (Hand, Handed) {
    let capacity = capacity.max(1);
    let (sender, receiver) = mpsc::channel(capacity);
    let missed = Arc::new(AtomicBool::new(false));
    let hand = Hand {
        sender,
        missed: missed.clone(),
    };
    let handed = Handed {
        receiver: Some(receiver),
        missed,
        held: BTreeMap::new(),
        capacity,
    };
    (hand, handed)
}

impl Handed {
    /// Waits for the next handed event; pending forever once the bus is gone.
    pub(crate) async fn recv(&mut self) {
        let Some(receiver) = self.receiver.as_mut() else {
            return std::future::pending().await;
        };
        match receiver.recv().await {
            Some(event) => self.keep(event),
            None => self.receiver = None,
        }
    }

    /// The handed events that follow `read` without a gap, at most `limit`; whether a gap
    /// stops them, and whether an event was not handed over.
    pub(crate) fn next_after(&mut self, read: i64, limit: usize) -> Taken {
        self.drain();
        self.forget_through(read);
        let mut next = Vec::new();
        let mut expected = read + 1;
        while next.len() < limit {
            let Some(entry) = self.held.first_entry() else {
                break;
            };
            if *entry.key() != expected {
                break;
            }
            next.push(entry.remove());
            expected += 1;
        }
        Taken {
            gap: next.len() < limit && !self.held.is_empty(),
            missed: self.missed.swap(false, Ordering::Relaxed),
            events: next,
        }
    }

    /// Drops what is at or before `read` (the log read passed it).
    pub(crate) fn forget_through(&mut self, read: i64) {
        self.held = self.held.split_off(&read.saturating_add(1));
    }

    /// Drops everything held (a restart from the cursor reads the log again).
    pub(crate) fn clear(&mut self) {
        self.drain();
        self.held.clear();
    }

    /// Takes what is queued without waiting.
    fn drain(&mut self) {
        while let Some(event) = self.receiver.as_mut().and_then(|r| r.try_recv().ok()) {
            self.keep(event);
        }
    }

    fn keep(&mut self, event: Arc<StoredEvent>) {
        if self.held.len() < self.capacity {
            self.held.insert(event.position, event);
        } else {
            self.missed.store(true, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use ar_core::EventKind;

    use super::*;

    fn event(position: i64) -> Arc<StoredEvent> {
        Arc::new(StoredEvent {
            position,
            event_id: format!("evt_{position}"),
            app_id: "app".into(),
            run_id: "run".into(),
            host_run_id: String::new(),
            sequence_no: position,
            kind: EventKind::PlanUpdated,
            data: Default::default(),
            created_at: chrono::Utc::now(),
        })
    }

    fn positions(events: &[Arc<StoredEvent>]) -> Vec<i64> {
        events.iter().map(|event| event.position).collect()
    }

    #[test]
    fn only_the_events_right_after_what_was_read_are_taken() {
        let (hand, mut handed) = channel(16);
        for position in [12, 11, 14] {
            hand.hand(&event(position));
        }
        let taken = handed.next_after(10, 16);
        assert_eq!(positions(&taken.events), vec![11, 12]);
        assert!(taken.gap && !taken.missed, "13 is missing");
        // The log read reached 13; 14 follows it.
        handed.forget_through(13);
        let taken = handed.next_after(13, 16);
        assert_eq!(positions(&taken.events), vec![14]);
        assert!(!taken.gap);
    }

    #[test]
    fn what_the_log_passed_is_dropped_and_a_limit_is_no_gap() {
        let (hand, mut handed) = channel(16);
        for position in 1..=5 {
            hand.hand(&event(position));
        }
        let taken = handed.next_after(2, 2);
        assert_eq!(positions(&taken.events), vec![3, 4]);
        assert!(!taken.gap, "5 follows; the limit stopped the taking");
        let taken = handed.next_after(4, 8);
        assert_eq!(positions(&taken.events), vec![5]);
    }

    #[test]
    fn a_restart_forgets_everything_held() {
        let (hand, mut handed) = channel(4);
        hand.hand(&event(1));
        handed.forget_through(i64::MAX);
        hand.hand(&event(2));
        handed.clear();
        assert!(handed.next_after(0, 8).events.is_empty());
    }

    #[test]
    fn an_event_the_full_queue_could_not_take_sends_the_publisher_to_the_log() {
        let (hand, mut handed) = channel(2);
        for position in 1..=3 {
            hand.hand(&event(position));
        }
        let taken = handed.next_after(0, 8);
        assert_eq!(positions(&taken.events), vec![1, 2]);
        assert!(taken.missed && !taken.gap, "3 was not handed over");
        let taken = handed.next_after(2, 8);
        assert!(taken.events.is_empty());
        assert!(!taken.missed, "the miss is reported once");
    }
}
