//! SSE body plumbing shared by all wire formats: pacing, hang, disconnect, open-stream counting.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Value;

use super::reply::{Reply, StreamEnd};
use super::Shared;

/// A rendered stream: `head` (start events), `content` (deltas), `tail` (completion events),
/// `error` (the in-stream error events used for [`StreamEnd::Error`]). On
/// [`StreamEnd::Hang`]/[`StreamEnd::Disconnect`] the tail is replaced by a stall/abort.
#[derive(Default)]
pub(crate) struct StreamParts {
    pub head: Vec<Bytes>,
    pub content: Vec<Bytes>,
    pub tail: Vec<Bytes>,
    pub error: Vec<Bytes>,
}

/// `event: <name>\ndata: <json>\n\n`
pub(crate) fn named(event: &str, data: &Value) -> Bytes {
    Bytes::from(ar_sse::frame(None, event, &data.to_string()))
}

/// `data: <json>\n\n`
pub(crate) fn data(data: &Value) -> Bytes {
    Bytes::from(ar_sse::frame(None, "", &data.to_string()))
}

/// `data: [DONE]\n\n` (Chat Completions' end of stream), written once.
pub(crate) fn done() -> Bytes {
    Bytes::from_static(DONE_FRAME)
}

const DONE_FRAME: &[u8] = b"data: [DONE]\n\n";

enum Step {
    Send(Bytes),
    Stall,
    Abort,
}

/// Decrements the open-stream counter when the body is finished or dropped by hyper.
struct StreamGuard(Arc<Shared>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.active_streams.fetch_sub(1, Ordering::SeqCst);
    }
}

struct BodyState {
    steps: VecDeque<Step>,
    delay: Duration,
    first: bool,
    guard: StreamGuard,
}

pub(crate) fn response(parts: StreamParts, reply: &Reply, shared: &Arc<Shared>) -> Response {
    let mut steps: VecDeque<Step> = parts
        .head
        .into_iter()
        .chain(parts.content)
        .map(Step::Send)
        .collect();
    match &reply.end {
        StreamEnd::Complete => steps.extend(parts.tail.into_iter().map(Step::Send)),
        StreamEnd::Error(_) => steps.extend(parts.error.into_iter().map(Step::Send)),
        StreamEnd::Hang => steps.push_back(Step::Stall),
        StreamEnd::Disconnect => steps.push_back(Step::Abort),
    }
    shared.active_streams.fetch_add(1, Ordering::SeqCst);
    let state = BodyState {
        steps,
        delay: reply.chunk_delay,
        first: true,
        guard: StreamGuard(shared.clone()),
    };
    let stream = futures::stream::unfold(state, |mut st| async move {
        let step = st.steps.pop_front()?;
        let shutdown = st.guard.0.shutdown.clone();
        if !st.first && !st.delay.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(st.delay) => {}
                _ = shutdown.cancelled() => {
                    st.steps.clear();
                    return Some((Err(std::io::Error::other("mock provider shut down")), st));
                }
            }
        }
        st.first = false;
        match step {
            Step::Send(b) => Some((Ok(b), st)),
            Step::Stall => {
                shutdown.cancelled().await;
                Some((Err(std::io::Error::other("mock provider shut down")), st))
            }
            Step::Abort => {
                // Give hyper time to flush headers and content before the abort.
                tokio::time::sleep(Duration::from_millis(20)).await;
                let err = std::io::Error::other("mock provider: scripted disconnect");
                Some((Err(err), st))
            }
        }
    });
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    h.insert("x-request-id", HeaderValue::from_static("req_mock"));
    h.insert("request-id", HeaderValue::from_static("req_mock"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_the_shared_encoders() {
        let body = serde_json::json!({"a": 1});
        assert_eq!(
            &named("ping", &body)[..],
            b"event: ping\ndata: {\"a\":1}\n\n"
        );
        assert_eq!(&data(&body)[..], b"data: {\"a\":1}\n\n");
        assert_eq!(&done()[..], ar_sse::frame(None, "", "[DONE]").as_bytes());
    }
}
