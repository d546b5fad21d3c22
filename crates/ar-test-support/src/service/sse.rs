//! Reading a service's SSE answer into frames, bounded in time.

use futures::StreamExt as _;
use serde_json::Value;

use super::WAIT;

/// One server-sent event frame: `id:` (persisted events only), `event:` and parsed `data:`
/// (a string when it is not JSON).
#[derive(Debug, Clone)]
pub struct Frame {
    pub id: Option<i64>,
    pub event: String,
    pub data: Value,
}

/// Reads an SSE response until the server closes it (bounded by [`WAIT`]; panics on timeout).
pub async fn read_frames(response: reqwest::Response) -> Vec<Frame> {
    read_frames_until_cut(response).await.0
}

/// Reads an SSE response until it ends; also says whether it ended by a broken connection
/// (the server died) rather than a clean close. Partial frames of a broken connection are
/// dropped.
pub async fn read_frames_until_cut(response: reqwest::Response) -> (Vec<Frame>, bool) {
    let mut frames = Vec::new();
    let mut buffer = String::new();
    let mut body = response.bytes_stream();
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut cut = false;
    loop {
        let chunk = match tokio::time::timeout_at(deadline, body.next()).await {
            Err(_) => panic!("the SSE stream did not end within {WAIT:?}; got {frames:?}"),
            Ok(None) => break,
            Ok(Some(Ok(chunk))) => chunk,
            Ok(Some(Err(_))) => {
                cut = true;
                break;
            }
        };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            if let Some(frame) = parse_block(&block) {
                frames.push(frame);
            }
        }
    }
    (frames, cut)
}

/// An SSE response read frame by frame, for tests that act while the stream is open.
pub struct FrameStream {
    body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
}

impl FrameStream {
    pub fn new(response: reqwest::Response) -> FrameStream {
        FrameStream {
            body: response.bytes_stream().boxed(),
            buffer: String::new(),
        }
    }

    /// The next frame; `None` when the stream ended (cleanly or not). Panics after [`WAIT`].
    pub async fn next(&mut self) -> Option<Frame> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            while let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                if let Some(frame) = parse_block(&block) {
                    return Some(frame);
                }
            }
            match tokio::time::timeout_at(deadline, self.body.next()).await {
                Err(_) => panic!("no SSE frame within {WAIT:?}"),
                Ok(Some(Ok(chunk))) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                Ok(None | Some(Err(_))) => return None,
            }
        }
    }
}

/// One frame from its lines; `None` for comments (`: ping`).
fn parse_block(block: &str) -> Option<Frame> {
    let (mut id, mut event, mut data) = (None, String::new(), String::new());
    for line in block.lines() {
        if let Some(value) = line.strip_prefix("id:") {
            id = value.trim().parse().ok();
        } else if let Some(value) = line.strip_prefix("event:") {
            event = value.trim().to_string();
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push_str(value.strip_prefix(' ').unwrap_or(value));
        }
    }
    if event.is_empty() && data.is_empty() {
        return None;
    }
    let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
    Some(Frame { id, event, data })
}
