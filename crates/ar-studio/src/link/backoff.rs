//! Reconnect backoff: doubling from a floor to a ceiling, with jitter, reset after a good connection.

use std::time::Duration;

use rand::Rng;

/// Jittered exponential backoff.
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    current: Duration,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Self {
        let min = min.max(Duration::from_millis(1));
        Self {
            min,
            max: max.max(min),
            current: min,
        }
    }

    /// The next wait: uniformly in [½·d, d] for the current step d, which then doubles.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.current;
        self.current = (self.current * 2).min(self.max);
        let half = d / 2;
        let jitter_ms = u64::try_from(half.as_millis()).unwrap_or(u64::MAX);
        half + Duration::from_millis(rand::thread_rng().gen_range(0..=jitter_ms))
    }

    /// Back to the floor.
    pub fn reset(&mut self) {
        self.current = self.min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_ceiling_with_jitter() {
        let mut b = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
        let mut step = Duration::from_millis(500);
        for _ in 0..12 {
            let d = b.next_delay();
            assert!(d >= step / 2 && d <= step, "{d:?} vs {step:?}");
            step = (step * 2).min(Duration::from_secs(30));
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(500));
    }
}
