//! Incremental Server-Sent-Events decoder over a byte stream (split across arbitrary chunks).

/// One decoded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// `event:` field, if present.
    pub event: Option<String>,
    /// `data:` lines joined with `\n`.
    pub data: String,
}

/// Feed bytes with [`SseDecoder::push`], then drain complete events with [`SseDecoder::next_event`].
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    /// Start of the not-yet-consumed part of `buf`.
    pos: usize,
}

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete event, if one is buffered. Events with neither data nor name
    /// (comments, keep-alives) are skipped.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        loop {
            let (block_end, next_start) = self.find_block_end()?;
            let block = String::from_utf8_lossy(&self.buf[self.pos..block_end]).into_owned();
            self.pos = next_start;
            if self.pos > 64 * 1024 {
                self.buf.drain(..self.pos);
                self.pos = 0;
            }
            if let Some(ev) = parse_block(&block) {
                return Some(ev);
            }
        }
    }

    /// Whether undecoded bytes other than whitespace remain (a truncated event).
    pub fn has_partial(&self) -> bool {
        self.buf[self.pos..]
            .iter()
            .any(|b| !b.is_ascii_whitespace())
    }

    /// Finds the end of the first block (blank line) as (end of block, start of next).
    fn find_block_end(&self) -> Option<(usize, usize)> {
        let b = &self.buf[self.pos..];
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'\n' {
                // "\n\n" or "\n\r\n"
                if b.get(i + 1) == Some(&b'\n') {
                    return Some((self.pos + i, self.pos + i + 2));
                }
                if b.get(i + 1) == Some(&b'\r') && b.get(i + 2) == Some(&b'\n') {
                    return Some((self.pos + i, self.pos + i + 3));
                }
            }
            i += 1;
        }
        None
    }
}

fn parse_block(block: &str) -> Option<SseEvent> {
    let mut event = None;
    let mut data: Option<String> = None;
    for line in block.lines() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() || line.starts_with(':') {
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => event = Some(value.to_string()),
            "data" => match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_string()),
            },
            _ => {}
        }
    }
    if event.is_none() && data.is_none() {
        return None;
    }
    Some(SseEvent {
        event,
        data: data.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(chunks: &[&str]) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            d.push(c.as_bytes());
            while let Some(e) = d.next_event() {
                out.push(e);
            }
        }
        out
    }

    #[test]
    fn decodes_across_chunk_boundaries() {
        let evs = decode_all(&[
            "event: a\nda",
            "ta: {\"x\":1}\n",
            "\ndata: second\n\n: ping\n\n",
        ]);
        assert_eq!(
            evs,
            vec![
                SseEvent {
                    event: Some("a".into()),
                    data: "{\"x\":1}".into()
                },
                SseEvent {
                    event: None,
                    data: "second".into()
                },
            ]
        );
    }

    #[test]
    fn handles_crlf_and_multiline_data() {
        let evs = decode_all(&["data: a\r\ndata: b\r\n\r\nevent: e\r\n\r\n"]);
        assert_eq!(evs[0].data, "a\nb");
        assert_eq!(evs[1].event.as_deref(), Some("e"));
    }

    #[test]
    fn reports_partial_tail() {
        let mut d = SseDecoder::new();
        d.push(b"data: x\n\ndata: trunc");
        assert!(d.next_event().is_some());
        assert!(d.next_event().is_none());
        assert!(d.has_partial());
    }
}
