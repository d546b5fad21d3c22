//! Bounded, cancel-safe line reading from a child's pipe (lines up to a fixed limit, 1 MiB by default).

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// Longest line kept whole; longer lines are cut here and flagged `truncated`.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;

/// One line read from a pipe, without its line terminator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The text, decoded as UTF-8 with invalid sequences replaced.
    pub text: String,
    /// True when the line was longer than the limit and its tail was dropped.
    pub truncated: bool,
}

/// Reads lines of at most `max` bytes. All partial state lives in the struct, so
/// `next_line` can be used inside `tokio::select!` without losing data.
#[derive(Debug)]
pub struct LineReader<R> {
    inner: BufReader<R>,
    max: usize,
    buf: Vec<u8>,
    truncated: bool,
    eof: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// Wraps a reader with the default 1 MiB line limit.
    pub fn new(reader: R) -> Self {
        Self::with_limit(reader, MAX_LINE_BYTES)
    }

    /// Wraps a reader with an explicit line limit (at least one byte).
    pub fn with_limit(reader: R, max: usize) -> Self {
        Self {
            inner: BufReader::with_capacity(64 * 1024, reader),
            max: max.max(1),
            buf: Vec::new(),
            truncated: false,
            eof: false,
        }
    }

    /// The next line, or `None` at end of stream. A final line without a newline is returned too.
    pub async fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        if self.eof {
            return Ok(None);
        }
        loop {
            let available = self.inner.fill_buf().await?;
            if available.is_empty() {
                self.eof = true;
                if self.buf.is_empty() && !self.truncated {
                    return Ok(None);
                }
                return Ok(Some(self.finish()));
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let chunk_len = newline.unwrap_or(available.len());
            let room = self.max.saturating_sub(self.buf.len());
            if chunk_len > room {
                self.truncated = true;
            }
            let keep = chunk_len.min(room);
            self.buf.extend_from_slice(&available[..keep]);
            match newline {
                Some(i) => {
                    self.inner.consume(i + 1);
                    return Ok(Some(self.finish()));
                }
                None => {
                    let len = available.len();
                    self.inner.consume(len);
                }
            }
        }
    }

    fn finish(&mut self) -> Line {
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        let text = String::from_utf8_lossy(&self.buf).into_owned();
        let line = Line {
            text,
            truncated: self.truncated,
        };
        self.buf.clear();
        self.truncated = false;
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn splits_and_truncates() {
        let data: &[u8] = b"a\r\nbb\n0123456789abc\nlast";
        let mut r = LineReader::with_limit(data, 10);
        let mut out = Vec::new();
        while let Some(l) = r.next_line().await.unwrap() {
            out.push((l.text, l.truncated));
        }
        assert_eq!(
            out,
            vec![
                ("a".to_string(), false),
                ("bb".to_string(), false),
                ("0123456789".to_string(), true),
                ("last".to_string(), false),
            ]
        );
    }
}
