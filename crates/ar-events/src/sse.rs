//! `text/event-stream` framing: event frames with optional `id:`, comments and the resume cursor from `Last-Event-ID`.

/// Interval between `: ping` comments that keep proxies from closing an idle stream.
pub const HEARTBEAT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(15);

/// One SSE frame: `id: …` (optional), `event: …`, one `data:` line per line of `data`, blank line.
///
/// Carriage returns and newlines in `event` and `id` would break the framing, so they are removed.
pub fn frame(id: Option<i64>, event: &str, data: &str) -> String {
    let mut out = String::with_capacity(data.len() + event.len() + 32);
    if let Some(id) = id {
        out.push_str("id: ");
        out.push_str(&id.to_string());
        out.push('\n');
    }
    if !event.is_empty() {
        out.push_str("event: ");
        out.extend(event.chars().filter(|c| *c != '\n' && *c != '\r'));
        out.push('\n');
    }
    // `lines()` drops a trailing empty line; SSE joins data lines with '\n', so split exactly.
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line.strip_suffix('\r').unwrap_or(line));
        out.push('\n');
    }
    out.push('\n');
    out
}

/// A comment line (`: text`), ignored by clients; used for `connected` and heartbeats.
pub fn comment(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 4);
    for line in text.split('\n') {
        out.push_str(": ");
        out.push_str(line.strip_suffix('\r').unwrap_or(line));
        out.push('\n');
    }
    out.push('\n');
    out
}

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
