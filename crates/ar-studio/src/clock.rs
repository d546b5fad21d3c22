//! The injectable clock every studio timer reads, with a system clock and a manual one for tests.

use chrono::{DateTime, Duration, Utc};
use parking_lot::Mutex;

/// A source of "now". The studio never reads the wall clock directly, so tests can move time.
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> DateTime<Utc>;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to.
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

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: std::time::Duration) {
        let step = Duration::from_std(by).unwrap_or(Duration::MAX);
        let mut now = self.now.lock();
        *now = now.checked_add_signed(step).unwrap_or(*now);
    }

    /// Puts the clock at `at`.
    pub fn set(&self, at: DateTime<Utc>) {
        *self.now.lock() = at;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock()
    }
}

/// `at + d`, saturating instead of overflowing.
pub(crate) fn later(at: DateTime<Utc>, d: std::time::Duration) -> DateTime<Utc> {
    let step = Duration::from_std(d).unwrap_or(Duration::MAX);
    at.checked_add_signed(step)
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// `at - d`, saturating instead of overflowing.
pub(crate) fn earlier(at: DateTime<Utc>, d: std::time::Duration) -> DateTime<Utc> {
    let step = Duration::from_std(d).unwrap_or(Duration::MAX);
    at.checked_sub_signed(step)
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
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
    }

    #[test]
    fn later_saturates() {
        let at = DateTime::<Utc>::MAX_UTC;
        assert_eq!(later(at, std::time::Duration::from_secs(1)), at);
    }
}
