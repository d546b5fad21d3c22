//! The two ways MCP clients frame JSON-RPC messages on stdio, read and written: one JSON value
//! per line, or an LSP-style `Content-Length` header block followed by the body. Each message
//! is answered in the framing it came in, so a client of either kind understands the reply.

use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, AsyncReadExt as _};

/// The largest message body accepted (the contract's bound on MCP messages).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// The largest header line of the `Content-Length` framing.
const MAX_HEADER_LINE_BYTES: usize = 8 * 1024;

/// How one message was framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// One JSON value on one line.
    Line,
    /// `Content-Length: N` headers, an empty line, then N bytes.
    ContentLength,
}

/// One message read from the client: its framing and its body, or why it has none (an
/// oversized or badly framed message, answered as a parse error).
#[derive(Debug)]
pub struct Incoming {
    pub framing: Framing,
    pub body: Result<Vec<u8>, String>,
}

/// Frames `body` (one serialized JSON value) for the client.
pub fn encode(framing: Framing, body: &[u8]) -> Vec<u8> {
    match framing {
        Framing::Line => {
            let mut out = Vec::with_capacity(body.len() + 1);
            out.extend_from_slice(body);
            out.push(b'\n');
            out
        }
        Framing::ContentLength => {
            let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
            out.extend_from_slice(body);
            out
        }
    }
}

/// Reads the next message; `None` at the end of the input. Blank lines between messages are
/// skipped.
pub async fn next_message<R: AsyncBufRead + Unpin>(
    reader: &mut R,
) -> std::io::Result<Option<Incoming>> {
    loop {
        let Some(line) = read_line(reader, MAX_MESSAGE_BYTES).await? else {
            return Ok(None);
        };
        let Some(line) = line else {
            return Ok(Some(Incoming {
                framing: Framing::Line,
                body: Err(format!("message longer than {MAX_MESSAGE_BYTES} bytes")),
            }));
        };
        let text = trim_line(&line);
        if text.is_empty() {
            continue;
        }
        if !is_header(text) {
            return Ok(Some(Incoming {
                framing: Framing::Line,
                body: Ok(text.to_vec()),
            }));
        }
        return read_framed(reader, text).await.map(Some);
    }
}

/// The rest of a `Content-Length` message whose first header line is `first`.
async fn read_framed<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    first: &[u8],
) -> std::io::Result<Incoming> {
    let mut length = content_length(first);
    loop {
        match read_line(reader, MAX_HEADER_LINE_BYTES).await? {
            None => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Some(None) => return Ok(framed_error("header line too long")),
            Some(Some(line)) => {
                let text = trim_line(&line);
                if text.is_empty() {
                    break;
                }
                length = length.or(content_length(text));
            }
        }
    }
    let Some(length) = length else {
        return Ok(framed_error("Content-Length header missing or invalid"));
    };
    if length > MAX_MESSAGE_BYTES {
        // Skipped, so the next message is read from its own start.
        let mut rest = (&mut *reader).take(length as u64);
        tokio::io::copy(&mut rest, &mut tokio::io::sink()).await?;
        return Ok(framed_error(&format!(
            "message longer than {MAX_MESSAGE_BYTES} bytes"
        )));
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    Ok(Incoming {
        framing: Framing::ContentLength,
        body: Ok(body),
    })
}

fn framed_error(message: &str) -> Incoming {
    Incoming {
        framing: Framing::ContentLength,
        body: Err(message.to_owned()),
    }
}

/// Only the headers MCP clients send open a header block, so a malformed line of the line
/// framing is answered as a parse error instead of being waited on as a header.
fn is_header(line: &[u8]) -> bool {
    let lower = line.to_ascii_lowercase();
    lower.starts_with(b"content-length:") || lower.starts_with(b"content-type:")
}

fn content_length(line: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(line).ok()?;
    let (name, value) = text.split_once(':')?;
    if !name.trim().eq_ignore_ascii_case("content-length") {
        return None;
    }
    value.trim().parse().ok()
}

fn trim_line(line: &[u8]) -> &[u8] {
    line.trim_ascii()
}

/// One line without its end: `None` at the end of the input, `Some(None)` when the line was
/// longer than `max` (the rest of it is discarded).
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> std::io::Result<Option<Option<Vec<u8>>>> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            return Ok(if line.is_empty() && !too_long {
                None
            } else {
                Some((!too_long).then_some(line))
            });
        }
        let (chunk, done) = match buffer.iter().position(|b| *b == b'\n') {
            Some(end) => (&buffer[..end], end + 1),
            None => (buffer, buffer.len()),
        };
        let ended = done > chunk.len();
        if !too_long && line.len() + chunk.len() <= max {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line = Vec::new();
        }
        reader.consume(done);
        if ended {
            return Ok(Some((!too_long).then_some(line)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all(input: &[u8]) -> Vec<(Framing, Result<String, String>)> {
        let mut reader = tokio::io::BufReader::new(input);
        let mut out = Vec::new();
        while let Some(message) = next_message(&mut reader).await.unwrap() {
            let body = message.body.map(|b| String::from_utf8(b).unwrap());
            out.push((message.framing, body));
        }
        out
    }

    #[tokio::test]
    async fn both_framings_interleave() {
        let input = b"{\"a\":1}\r\n\n Content-Length: 7\r\nContent-Type: application/json\r\n\r\n{\"b\":2}{\"c\":3}\n";
        let messages = all(input).await;
        assert_eq!(
            messages,
            vec![
                (Framing::Line, Ok("{\"a\":1}".into())),
                (Framing::ContentLength, Ok("{\"b\":2}".into())),
                (Framing::Line, Ok("{\"c\":3}".into())),
            ]
        );
    }

    #[tokio::test]
    async fn a_last_line_without_newline_counts() {
        assert_eq!(all(b"{}").await, vec![(Framing::Line, Ok("{}".into()))]);
    }

    #[tokio::test]
    async fn bad_headers_are_reported_not_fatal() {
        let messages = all(b"Content-Length: x\r\n\r\n{}\n").await;
        assert_eq!(messages[0].0, Framing::ContentLength);
        assert!(messages[0].1.is_err());
        assert_eq!(messages[1], (Framing::Line, Ok("{}".into())));
    }

    #[tokio::test]
    async fn an_oversized_body_is_skipped() {
        let length = MAX_MESSAGE_BYTES + 1;
        let mut input = format!("Content-Length: {length}\r\n\r\n").into_bytes();
        input.extend(std::iter::repeat_n(b' ', length));
        input.extend_from_slice(b"{}\n");
        let messages = all(&input).await;
        assert!(messages[0].1.is_err());
        assert_eq!(messages[1], (Framing::Line, Ok("{}".into())));
    }

    #[test]
    fn encoding_matches_the_framing() {
        assert_eq!(encode(Framing::Line, b"{}"), b"{}\n");
        assert_eq!(
            encode(Framing::ContentLength, b"{}"),
            b"Content-Length: 2\r\n\r\n{}"
        );
    }
}
