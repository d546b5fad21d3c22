//! Reading frames from bytes that arrive in arbitrary chunks, with an optional bound on a
//! frame's size.

use memchr::memchr;

/// One decoded frame.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    /// This frame's `id:` field, if it had one. (Not carried over to later frames as a browser's
    /// last event id is: a client that resumes keeps its own cursor.)
    pub id: Option<String>,
    /// The `event:` field; empty when the frame had none.
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// The frame was larger than the decoder's bound: its lines from the one that crossed the
    /// bound on were dropped (fields read before it are kept, so the frame's id still tells
    /// which command it was).
    pub oversized: bool,
}

/// Decodes frames incrementally: [`Decoder::push`] received bytes, then drain complete frames
/// with [`Decoder::next_event`].
///
/// Lines end at `\n` (a `\r` before it is dropped) and a blank line ends a frame. Comment lines
/// (`:` first) and unknown fields are skipped; a frame with no `id`, `event` or `data` field
/// (a keep-alive comment, a stray blank line) yields nothing. Invalid UTF-8 becomes U+FFFD.
/// Only the line being received is buffered; each frame costs one allocation per field it has.
#[derive(Debug)]
pub struct Decoder {
    /// Received bytes; `buf[pos..]` is not consumed yet.
    buf: Vec<u8>,
    pos: usize,
    /// How many bytes from `pos` on are known to hold no `\n` (not searched again).
    scanned: usize,
    frame: PendingFrame,
}

/// The frame being read.
#[derive(Debug)]
struct PendingFrame {
    event: Event,
    /// Whether a `data` line was seen (an empty one counts).
    has_data: bool,
    /// Bytes of this frame so far, line breaks not counted.
    size: usize,
    max: usize,
    /// The rest of the current line is dropped (it crossed the bound).
    skipping: bool,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder without a bound on a frame's size.
    pub fn new() -> Self {
        Self::with_max_frame(usize::MAX)
    }

    /// A decoder that marks frames over `max_frame` bytes [`Event::oversized`] and keeps no more
    /// than that of any one frame in memory.
    pub fn with_max_frame(max_frame: usize) -> Self {
        Self {
            buf: Vec::new(),
            pos: 0,
            scanned: 0,
            frame: PendingFrame {
                event: Event::default(),
                has_data: false,
                size: 0,
                max: max_frame,
                skipping: false,
            },
        }
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete frame, if the bytes pushed so far hold one.
    pub fn next_event(&mut self) -> Option<Event> {
        loop {
            let from = self.pos + self.scanned;
            let Some(offset) = memchr(b'\n', &self.buf[from..]) else {
                self.scanned = self.buf.len() - self.pos;
                self.bound_partial_line();
                self.compact();
                return None;
            };
            let (start, end) = (self.pos, from + offset);
            self.pos = end + 1;
            self.scanned = 0;
            if let Some(event) = self.frame.line(&self.buf[start..end]) {
                return Some(event);
            }
        }
    }

    /// Drops the unfinished line when it is being skipped or would cross the bound.
    fn bound_partial_line(&mut self) {
        let partial = self.buf.len() - self.pos;
        if partial == 0 {
            return;
        }
        let frame = &mut self.frame;
        if !frame.skipping && frame.size.saturating_add(partial) > frame.max {
            frame.event.oversized = true;
            frame.skipping = true;
        }
        if frame.skipping {
            self.buf.truncate(self.pos);
            self.scanned = 0;
        }
    }

    /// Moves the unfinished line to the front of the buffer.
    fn compact(&mut self) {
        if self.pos == 0 {
            return;
        }
        if self.pos == self.buf.len() {
            self.buf.clear();
        } else {
            self.buf.drain(..self.pos);
        }
        self.pos = 0;
    }
}

impl PendingFrame {
    /// Takes one line (without its `\n`); a blank line ends the frame.
    fn line(&mut self, line: &[u8]) -> Option<Event> {
        if std::mem::take(&mut self.skipping) {
            // The end of a line that crossed the bound, not a blank line.
            return None;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            return self.finish();
        }
        self.size = self.size.saturating_add(line.len());
        if self.size > self.max {
            self.event.oversized = true;
            return None;
        }
        if line[0] == b':' {
            return None;
        }
        let (field, value) = match memchr(b':', line) {
            Some(i) => {
                let value = &line[i + 1..];
                (&line[..i], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        let value = String::from_utf8_lossy(value);
        match field {
            b"data" => {
                if self.has_data {
                    self.event.data.push('\n');
                }
                self.has_data = true;
                self.event.data.push_str(&value);
            }
            b"event" => self.event.event = value.into_owned(),
            b"id" => self.event.id = Some(value.into_owned()),
            _ => {}
        }
        None
    }

    /// The frame a blank line ended, unless it had no field at all.
    fn finish(&mut self) -> Option<Event> {
        let seen = self.has_data
            || self.event.id.is_some()
            || !self.event.event.is_empty()
            || self.event.oversized;
        self.has_data = false;
        self.size = 0;
        let event = std::mem::take(&mut self.event);
        seen.then_some(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(decoder: &mut Decoder, chunks: &[&[u8]]) -> Vec<Event> {
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.push(chunk);
            while let Some(event) = decoder.next_event() {
                out.push(event);
            }
        }
        out
    }

    fn event(id: Option<&str>, name: &str, data: &str) -> Event {
        Event {
            id: id.map(str::to_string),
            event: name.to_string(),
            data: data.to_string(),
            oversized: false,
        }
    }

    #[test]
    fn decodes_across_chunk_boundaries() {
        let evs = decode_all(
            &mut Decoder::new(),
            &[
                b"event: a\nda",
                b"ta: {\"x\":1}\n",
                b"\ndata: second\n\n: ping\n\n",
            ],
        );
        assert_eq!(
            evs,
            vec![event(None, "a", "{\"x\":1}"), event(None, "", "second")]
        );
    }

    #[test]
    fn every_split_gives_the_same_frames() {
        let bytes: &[u8] =
            b"event: ping\ndata: {}\n\n: comment\nid: c1\nevent: run\r\ndata: {\"a\":1}\n\n";
        for split in 0..bytes.len() {
            let evs = decode_all(&mut Decoder::new(), &[&bytes[..split], &bytes[split..]]);
            assert_eq!(
                evs,
                vec![
                    event(None, "ping", "{}"),
                    event(Some("c1"), "run", "{\"a\":1}")
                ],
                "split {split}"
            );
        }
        let one_by_one: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(decode_all(&mut Decoder::new(), &one_by_one).len(), 2);
    }

    #[test]
    fn crlf_multiline_data_and_field_forms() {
        let evs = decode_all(
            &mut Decoder::new(),
            &[b"data: a\r\ndata: b\r\n\r\nevent: e\r\n\r\ndata:x\ndata\ndata: \n\nretry: 5\n\nid\n\n"],
        );
        assert_eq!(
            evs,
            vec![
                event(None, "", "a\nb"),
                event(None, "e", ""),
                event(None, "", "x\n\n"),
                event(Some(""), "", ""),
            ]
        );
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let evs = decode_all(&mut Decoder::new(), &[b"data: a\xffb\n\n"]);
        assert_eq!(evs[0].data, "a\u{fffd}b");
    }

    #[test]
    fn oversized_frames_keep_their_id_and_the_stream_recovers() {
        let big = format!(
            "id: c9\nevent: run\ndata: {}\n\nevent: ping\ndata: {{}}\n\n",
            "x".repeat(200)
        );
        let mut whole = Decoder::with_max_frame(64);
        let evs = decode_all(&mut whole, &[big.as_bytes()]);
        let mut split = Decoder::with_max_frame(64);
        let mut split_evs = Vec::new();
        for piece in big.as_bytes().chunks(7) {
            split_evs.extend(decode_all(&mut split, &[piece]));
            assert!(split.buf.len() <= 64, "at most the bound of a line is kept");
        }
        assert_eq!(split_evs, evs);
        assert_eq!(evs.len(), 2);
        assert!(evs[0].oversized);
        assert_eq!(evs[0].id.as_deref(), Some("c9"));
        assert_eq!(evs[0].event, "run");
        assert!(evs[0].data.is_empty());
        assert_eq!(evs[1], event(None, "ping", "{}"));
    }

    #[test]
    fn a_partial_line_waits_for_its_end() {
        let mut d = Decoder::new();
        d.push(b"data: x\n\ndata: trunc");
        assert_eq!(d.next_event(), Some(event(None, "", "x")));
        assert_eq!(d.next_event(), None);
        d.push(b"ated\n\n");
        assert_eq!(d.next_event(), Some(event(None, "", "truncated")));
    }
}
