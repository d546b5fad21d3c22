//! Saturating instant arithmetic for the studio's deadlines (the clock itself is
//! `ar_core::clock`).

use chrono::{DateTime, Duration, Utc};

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
    fn later_and_earlier_saturate() {
        let at = DateTime::<Utc>::MAX_UTC;
        assert_eq!(later(at, std::time::Duration::from_secs(1)), at);
        let at = DateTime::<Utc>::MIN_UTC;
        assert_eq!(earlier(at, std::time::Duration::from_secs(1)), at);
    }
}
