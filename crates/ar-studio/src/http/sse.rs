//! The command stream's response body: opening frames, then live frames and pings, ending the stream's registration when dropped.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use tokio::sync::mpsc;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::frame::PING_FRAME;
use crate::server::{StreamStart, StudioServer};

/// Yields a runtime's frames; when dropped (the runtime went away, or the feed ended), runs
/// the disconnect sweep for this stream.
pub(crate) struct CommandStream {
    opening: VecDeque<Bytes>,
    feed: mpsc::Receiver<Bytes>,
    ping: Interval,
    server: StudioServer,
    runtime_id: String,
    feed_id: u64,
}

impl CommandStream {
    pub(crate) fn new(
        server: StudioServer,
        runtime_id: String,
        start: StreamStart,
        ping_every: Duration,
    ) -> Self {
        let period = ping_every.max(Duration::from_millis(1));
        let mut ping = tokio::time::interval_at(Instant::now() + period, period);
        ping.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Self {
            opening: start.opening.into(),
            feed: start.feed,
            ping,
            server,
            runtime_id,
            feed_id: start.feed_id,
        }
    }
}

impl Stream for CommandStream {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(frame) = this.opening.pop_front() {
            return Poll::Ready(Some(Ok(frame)));
        }
        match this.feed.poll_recv(cx) {
            Poll::Ready(Some(frame)) => return Poll::Ready(Some(Ok(frame))),
            // Replaced, dropped full, or shut down: end this response.
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        if this.ping.poll_tick(cx).is_ready() {
            this.server.touch(&this.runtime_id);
            return Poll::Ready(Some(Ok(Bytes::from_static(PING_FRAME))));
        }
        Poll::Pending
    }
}

impl Drop for CommandStream {
    fn drop(&mut self) {
        self.server.stream_ended(&self.runtime_id, self.feed_id);
    }
}
