//! Bounded retry with exponential backoff for model requests, honouring `Retry-After`; applies
//! only before any response byte is consumed.

use std::time::Duration;

use reqwest::header::HeaderMap;

/// How often and how patiently to retry transient failures (429, 5xx, connect errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Extra attempts after the first (0 = never retry).
    pub max_retries: u32,
    /// Backoff before the first retry; doubles per retry.
    pub initial_backoff: Duration,
    /// Upper bound of the computed backoff.
    pub max_backoff: Duration,
    /// A server asking to wait longer than this is not retried (the error is returned).
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// `max_retries` retries with a fixed small backoff (handy in tests).
    pub fn fast(max_retries: u32) -> Self {
        Self {
            max_retries,
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(20),
            max_retry_after: Duration::from_secs(60),
        }
    }

    /// The wait before retry number `attempt` (0-based), or `None` when the server asked for
    /// more than `max_retry_after`. A server's wait is kept and lengthened by up to a fifth,
    /// so that the calls one 429 turned away do not all come back at the same instant.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Option<Duration> {
        if let Some(ra) = retry_after {
            return (ra <= self.max_retry_after).then(|| percent_of(ra, 100 + noise(21)));
        }
        let factor = 2u32.saturating_pow(attempt.min(16));
        let base = self
            .initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff);
        Some(jitter(base))
    }
}

/// Spreads concurrent retries: 80–120 % of `d`.
fn jitter(d: Duration) -> Duration {
    percent_of(d, 80 + noise(41))
}

/// A number below `n` from the clock's sub-second noise (enough to spread retries).
fn noise(n: u64) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|t| t.subsec_nanos())
        .unwrap_or(0);
    u64::from(nanos) % n
}

fn percent_of(d: Duration, percent: u64) -> Duration {
    Duration::from_millis(d.as_millis() as u64 * percent / 100)
}

/// `retry-after-ms` (OpenAI) or `retry-after` in seconds. HTTP-date values are ignored (the
/// computed backoff applies).
pub(crate) fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let secs = text("retry-after").and_then(|v| v.trim().parse::<f64>().ok())?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy::default();
        let d0 = p.delay(0, None).unwrap();
        let d3 = p.delay(3, None).unwrap();
        let d10 = p.delay(10, None).unwrap();
        assert!(d0 >= Duration::from_millis(400) && d0 <= Duration::from_millis(600));
        assert!(d3 >= Duration::from_millis(3200));
        assert!(d10 <= Duration::from_millis(9600));
    }

    #[test]
    fn retry_after_wins_unless_too_long() {
        let p = RetryPolicy::default();
        let mut waits = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let wait = p.delay(3, Some(Duration::from_secs(2))).unwrap();
            assert!(
                wait >= Duration::from_secs(2) && wait <= Duration::from_millis(2400),
                "{wait:?}"
            );
            waits.insert(wait);
        }
        assert!(waits.len() > 1, "the server's wait is spread: {waits:?}");
        assert_eq!(p.delay(0, Some(Duration::from_secs(120))), None);
    }

    #[test]
    fn parses_retry_after_headers() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(parse_retry_after(&h), Some(Duration::from_secs(3)));
        h.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(parse_retry_after(&h), Some(Duration::from_millis(250)));
        let mut h = HeaderMap::new();
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(parse_retry_after(&h), None);
    }
}
