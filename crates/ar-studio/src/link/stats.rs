//! Counters a link client keeps about its connection and commands, readable at any time.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of a link client's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub registrations: u64,
    pub streams_opened: u64,
    pub pings: u64,
    pub runs: u64,
    pub approvals: u64,
    pub sessions: u64,
    pub cancels: u64,
    pub steers: u64,
    pub breakpoints: u64,
    /// Tracked frames ignored because their id was seen before.
    pub duplicates: u64,
    pub accepted: u64,
    pub rejected: u64,
    pub finished: u64,
    /// Accepted acks answered 409 (the command was lost): nothing ran.
    pub conflicts: u64,
    pub heartbeats: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) registrations: AtomicU64,
    pub(crate) streams_opened: AtomicU64,
    pub(crate) pings: AtomicU64,
    pub(crate) runs: AtomicU64,
    pub(crate) approvals: AtomicU64,
    pub(crate) sessions: AtomicU64,
    pub(crate) cancels: AtomicU64,
    pub(crate) steers: AtomicU64,
    pub(crate) breakpoints: AtomicU64,
    pub(crate) duplicates: AtomicU64,
    pub(crate) accepted: AtomicU64,
    pub(crate) rejected: AtomicU64,
    pub(crate) finished: AtomicU64,
    pub(crate) conflicts: AtomicU64,
    pub(crate) heartbeats: AtomicU64,
}

pub(crate) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    pub(crate) fn snapshot(&self) -> LinkStats {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        LinkStats {
            registrations: g(&self.registrations),
            streams_opened: g(&self.streams_opened),
            pings: g(&self.pings),
            runs: g(&self.runs),
            approvals: g(&self.approvals),
            sessions: g(&self.sessions),
            cancels: g(&self.cancels),
            steers: g(&self.steers),
            breakpoints: g(&self.breakpoints),
            duplicates: g(&self.duplicates),
            accepted: g(&self.accepted),
            rejected: g(&self.rejected),
            finished: g(&self.finished),
            conflicts: g(&self.conflicts),
            heartbeats: g(&self.heartbeats),
        }
    }
}
