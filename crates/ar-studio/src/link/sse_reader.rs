//! An incremental SSE parser for the command stream: fields, multi-line data, comments, and a bound on frame size.

/// One dispatched event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawEvent {
    pub id: Option<String>,
    pub event: String,
    pub data: String,
    /// The frame was larger than the bound; its data was dropped.
    pub oversized: bool,
}

/// Parses SSE bytes as they arrive.
#[derive(Debug)]
pub struct SseReader {
    line: Vec<u8>,
    current: RawEvent,
    size: usize,
    max_frame: usize,
    skip_line: bool,
}

impl SseReader {
    /// A reader that marks frames over `max_frame` bytes as oversized.
    pub fn new(max_frame: usize) -> Self {
        Self {
            line: Vec::new(),
            current: RawEvent::default(),
            size: 0,
            max_frame,
            skip_line: false,
        }
    }

    /// Feeds `chunk`; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<RawEvent> {
        let mut out = Vec::new();
        for &b in chunk {
            if b == b'\n' {
                if self.line.last() == Some(&b'\r') {
                    self.line.pop();
                }
                let line = std::mem::take(&mut self.line);
                let skipped = std::mem::replace(&mut self.skip_line, false);
                if let Some(ev) = self.end_line(&line, skipped) {
                    out.push(ev);
                }
                continue;
            }
            self.size += 1;
            if self.size > self.max_frame {
                self.current.oversized = true;
                self.skip_line = true;
                self.line.clear();
                continue;
            }
            if !self.skip_line {
                self.line.push(b);
            }
        }
        out
    }

    fn end_line(&mut self, line: &[u8], skipped: bool) -> Option<RawEvent> {
        if line.is_empty() && !skipped {
            let ev = std::mem::take(&mut self.current);
            self.size = 0;
            if ev.event.is_empty() && ev.data.is_empty() && ev.id.is_none() && !ev.oversized {
                return None;
            }
            return Some(ev);
        }
        if skipped || line.first() == Some(&b':') {
            return None;
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f.to_string(), v.strip_prefix(' ').unwrap_or(v).to_string()),
            None => (text.to_string(), String::new()),
        };
        match field.as_str() {
            "id" => self.current.id = Some(value),
            "event" => self.current.event = value,
            "data" => {
                if !self.current.data.is_empty() {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(&value);
            }
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_frames_split_anywhere() {
        let bytes =
            b"event: ping\ndata: {}\n\n: comment\nid: c1\nevent: run\r\ndata: {\"a\":1}\n\n";
        for split in 0..bytes.len() {
            let mut r = SseReader::new(1 << 20);
            let mut evs = r.push(&bytes[..split]);
            evs.extend(r.push(&bytes[split..]));
            assert_eq!(evs.len(), 2, "split {split}");
            assert_eq!(evs[0].event, "ping");
            assert_eq!(evs[1].id.as_deref(), Some("c1"));
            assert_eq!(evs[1].data, "{\"a\":1}");
        }
    }

    #[test]
    fn marks_oversized_frames_and_recovers() {
        let mut r = SseReader::new(64);
        let big = format!(
            "id: c9\nevent: run\ndata: {}\n\nevent: ping\ndata: {{}}\n\n",
            "x".repeat(200)
        );
        let evs = r.push(big.as_bytes());
        assert_eq!(evs.len(), 2);
        assert!(evs[0].oversized);
        assert_eq!(evs[0].id.as_deref(), Some("c9"));
        assert!(evs[0].data.is_empty());
        assert!(!evs[1].oversized && evs[1].event == "ping");
    }
}
