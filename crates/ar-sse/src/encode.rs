//! Writing frames: `id:`, `event:`, one `data:` line per line of data, and comments.

use memchr::memchr;

/// One event frame: `id: …` (when given), `event: …` (when not empty), one `data: …` line per
/// line of `data`, then a blank line.
///
/// A line break in `id` or `event` would end the field early (or smuggle another one), so line
/// breaks are removed from both; `data` is split at every `\n`, dropping the `\r` of a `\r\n`.
pub fn frame(id: Option<&str>, event: &str, data: &str) -> String {
    let mut out = String::with_capacity(data.len() + event.len() + id.map_or(0, str::len) + 24);
    if let Some(id) = id {
        push_field(&mut out, "id: ", id);
    }
    if !event.is_empty() {
        push_field(&mut out, "event: ", event);
    }
    push_lines(&mut out, "data: ", data);
    out.push('\n');
    out
}

/// A comment (`: text`, one line per line of `text`), which clients ignore: stream openings and
/// keep-alives.
pub fn comment(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 4);
    push_lines(&mut out, ": ", text);
    out.push('\n');
    out
}

/// `prefix` and `value` without its line breaks, then `\n`.
fn push_field(out: &mut String, prefix: &str, value: &str) {
    out.push_str(prefix);
    // Ids and event names are short: a plain scan beats memchr's set-up.
    if !value.bytes().any(|b| b == b'\n' || b == b'\r') {
        out.push_str(value);
    } else {
        out.extend(value.chars().filter(|c| *c != '\n' && *c != '\r'));
    }
    out.push('\n');
}

/// `prefix` and each line of `text`, each ending in `\n`: split at every `\n` (a trailing empty
/// line too, since the reader joins data lines with `\n`), a trailing `\r` dropped.
fn push_lines(out: &mut String, prefix: &str, text: &str) {
    let mut rest = text;
    loop {
        let (line, next) = match memchr(b'\n', rest.as_bytes()) {
            // Splitting at an ASCII byte keeps both halves valid UTF-8.
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        out.push_str(prefix);
        out.push_str(line.strip_suffix('\r').unwrap_or(line));
        out.push('\n');
        match next {
            Some(next) => rest = next,
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_byte_exact() {
        assert_eq!(
            frame(Some("7"), "run.started", "{\"a\":1}"),
            "id: 7\nevent: run.started\ndata: {\"a\":1}\n\n"
        );
        assert_eq!(frame(None, "ping", "{}"), "event: ping\ndata: {}\n\n");
        assert_eq!(frame(None, "", "[DONE]"), "data: [DONE]\n\n");
        assert_eq!(frame(None, "", ""), "data: \n\n");
    }

    #[test]
    fn line_breaks_cannot_end_a_field_early() {
        assert_eq!(
            frame(Some("1\r\nevent: x"), "x\ny", "a\nb\r\nc\n"),
            "id: 1event: x\nevent: xy\ndata: a\ndata: b\ndata: c\ndata: \n\n"
        );
    }

    #[test]
    fn comments() {
        assert_eq!(comment("ping"), ": ping\n\n");
        assert_eq!(comment("a\r\nb"), ": a\n: b\n\n");
    }
}
