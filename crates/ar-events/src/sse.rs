//! The run event stream's `text/event-stream` conventions: frames keyed by sequence number, the
//! heartbeat, and the resume cursor from `Last-Event-ID` (the framing itself is `ar-sse`'s).

/// Interval between `: ping` comments that keep proxies from closing an idle stream.
pub const HEARTBEAT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(15);

/// A run event's frame: its sequence number as `id:`, its type as `event:`, its JSON as `data:`
/// (framing by [`ar_sse::frame`]).
pub fn frame(id: Option<i64>, event: &str, data: &str) -> String {
    let id = id.map(|sequence| sequence.to_string());
    ar_sse::frame(id.as_deref(), event, data)
}

/// A comment line (`: text`), ignored by clients; used for `connected` and heartbeats.
pub use ar_sse::comment;

/// The replay cursor a client asked for: `Last-Event-ID` wins over `?after_sequence=`; anything
/// unparsable or negative counts as 0 (replay from the beginning).
pub fn resume_cursor(last_event_id: Option<&str>, after_sequence: Option<&str>) -> i64 {
    let parse = |value: Option<&str>| {
        value
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|v| *v >= 0)
    };
    parse(last_event_id)
        .or_else(|| parse(after_sequence))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames() {
        assert_eq!(
            frame(Some(7), "run.started", "{\"a\":1}"),
            "id: 7\nevent: run.started\ndata: {\"a\":1}\n\n"
        );
        assert_eq!(
            frame(None, "x\ny", "a\nb"),
            "event: xy\ndata: a\ndata: b\n\n"
        );
        assert_eq!(comment("ping"), ": ping\n\n");
    }

    #[test]
    fn cursors() {
        assert_eq!(resume_cursor(Some("12"), Some("3")), 12);
        assert_eq!(resume_cursor(None, Some("3")), 3);
        assert_eq!(resume_cursor(Some("junk"), Some("-1")), 0);
        assert_eq!(resume_cursor(None, None), 0);
    }
}
