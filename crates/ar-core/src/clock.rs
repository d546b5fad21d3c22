//! The clock port, so time-dependent rules (idle timeouts, leases, the studio's timers) are
//! testable: the wall clock, and a manual clock that tests move by hand.

use std::sync::Mutex;

use chrono::{DateTime, Duration, Utc};

/// Source of the current time.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
}

/// The real wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to (tests).
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(start),
        }
    }

    /// A clock standing at the current wall time.
    pub fn starting_now() -> Self {
        Self::new(Utc::now())
    }

    /// Moves the clock forward by `by` (it stays put where that would overflow).
    pub fn advance(&self, by: std::time::Duration) {
        let step = Duration::from_std(by).unwrap_or(Duration::MAX);
        let mut now = self.lock();
        *now = now.checked_add_signed(step).unwrap_or(*now);
    }

    /// Puts the clock at `at`.
    pub fn set(&self, at: DateTime<Utc>) {
        *self.lock() = at;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DateTime<Utc>> {
        // The guarded value is a plain instant: a panic elsewhere cannot leave it half-written.
        self.now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::starting_now();
        let t0 = clock.now();
        assert_eq!(clock.now(), t0);
        clock.advance(std::time::Duration::from_secs(30));
        assert_eq!(clock.now() - t0, Duration::seconds(30));
        clock.set(t0);
        assert_eq!(clock.now(), t0);
    }

    #[test]
    fn manual_clock_saturates() {
        let clock = ManualClock::new(DateTime::<Utc>::MAX_UTC);
        clock.advance(std::time::Duration::from_secs(1));
        assert_eq!(clock.now(), DateTime::<Utc>::MAX_UTC);
    }
}
