//! A run's live events over SSE that survive broken connections: each persisted event is
//! delivered exactly once and in sequence order, however often the connection breaks.
//!
//! The service gives every persisted event its sequence number as the SSE `id` and replays
//! after a `Last-Event-ID`. The stream keeps the last number it delivered, reconnects with it
//! after a reset, an idle connection (no byte, not even the 15-second ping, for
//! [`StreamOptions::idle_timeout`]), a 5xx or a refused connection (exponential backoff with
//! jitter), drops what it already delivered and, when a number is skipped, reconnects to read
//! the missing events rather than deliver out of order. A 4xx is final. Transient deltas carry
//! no id and are not replayed: one broken connection can lose some deltas, never an event.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use ar_wire::events::EventKind;
use ar_wire::EventEnvelope;
use reqwest::{header, Method};

use super::{check_status, Client, Error};

/// How an [`EventStream`] starts and resumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamOptions {
    /// Deliver the persisted events after this sequence number (0: all of them).
    pub after_sequence: i64,
    /// Reconnections in a row without a new event before the stream gives up (`None`: never).
    pub max_reconnects: Option<u32>,
    /// The wait before the first reconnection; doubled for each further one.
    pub initial_backoff: Duration,
    /// The longest wait between reconnections.
    pub max_backoff: Duration,
    /// A connection silent this long is taken for broken (the service pings every 15 s).
    pub idle_timeout: Duration,
}

impl Default for StreamOptions {
    fn default() -> Self {
        Self {
            after_sequence: 0,
            max_reconnects: Some(10),
            initial_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(45),
        }
    }
}

/// What an [`EventStream`] yields.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    /// A persisted event: each exactly once, in sequence order.
    Event(EventEnvelope),
    /// A transient event (a text or argument delta): live only, never replayed.
    Delta(EventEnvelope),
    /// The connection broke; the stream reconnects after `delay`, resuming after
    /// `after_sequence`. `attempt` counts the reconnections since the last new event.
    Reconnecting {
        attempt: u32,
        after_sequence: i64,
        delay: Duration,
        reason: String,
    },
}

/// Why a connection is given up.
enum Break {
    /// Reconnecting will not help.
    Fatal(Error),
    /// Reconnect and resume.
    Retry(String),
}

impl From<Error> for Break {
    fn from(error: Error) -> Self {
        if error.retryable() {
            Break::Retry(error.to_string())
        } else {
            Break::Fatal(error)
        }
    }
}

/// What one read of the open connection gave.
enum Read {
    Item(StreamItem),
    Skip,
    End,
    Broken(Break),
}

struct Connection {
    response: reqwest::Response,
    decoder: ar_sse::Decoder,
    /// Persisted events this connection delivered.
    delivered: u64,
}

/// A run's events (`GET /v1/runs/{id}/events`), resumed across broken connections; ends after
/// the run's terminal event. Read it with [`EventStream::next`] or as a `futures::Stream`
/// ([`EventStream::into_stream`]).
pub struct EventStream {
    client: Client,
    run_id: String,
    options: StreamOptions,
    last_sequence: i64,
    connection: Option<Connection>,
    /// Reconnections since the last new event.
    failures: u32,
    /// The wait before the next connection.
    wait: Option<Duration>,
    terminal_seen: bool,
    ended: bool,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("run_id", &self.run_id)
            .field("last_sequence", &self.last_sequence)
            .field("connected", &self.connection.is_some())
            .field("ended", &self.ended)
            .finish()
    }
}

impl Client {
    /// The run's event stream, resumed across broken connections (see [`EventStream`]).
    pub fn events(&self, run_id: &str, options: StreamOptions) -> EventStream {
        EventStream {
            client: self.clone(),
            run_id: run_id.trim().to_string(),
            last_sequence: options.after_sequence.max(0),
            options,
            connection: None,
            failures: 0,
            wait: None,
            terminal_seen: false,
            ended: false,
        }
    }

    /// Hands every event of the run (persisted and transient) to `handler` until the run's
    /// terminal event, a final error, or a handler error (the SDK's `StreamRunEvents`, which
    /// here also resumes after a broken connection).
    pub async fn stream_run_events<F, Fut, E>(
        &self,
        run_id: &str,
        mut handler: F,
    ) -> Result<(), Error>
    where
        F: FnMut(EventEnvelope) -> Fut,
        Fut: std::future::Future<Output = Result<(), E>>,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let mut stream = self.events(run_id, StreamOptions::default());
        while let Some(item) = stream.next().await {
            match item? {
                StreamItem::Event(event) | StreamItem::Delta(event) => handler(event)
                    .await
                    .map_err(|error| Error::Handler(error.into()))?,
                StreamItem::Reconnecting { .. } => {}
            }
        }
        Ok(())
    }
}

impl EventStream {
    /// The sequence number of the last persisted event delivered.
    pub fn last_sequence(&self) -> i64 {
        self.last_sequence
    }

    /// The next item; `None` once the run's terminal event was delivered or after an error.
    pub async fn next(&mut self) -> Option<Result<StreamItem, Error>> {
        loop {
            if self.ended {
                return None;
            }
            if self.connection.is_none() {
                if let Some(delay) = self.wait.take() {
                    tokio::time::sleep(delay).await;
                }
                match self.connect().await {
                    Ok(connection) => self.connection = Some(connection),
                    Err(cause) => return Some(self.broken(cause)),
                }
            }
            match self.read().await {
                Read::Item(item) => return Some(Ok(item)),
                Read::Skip => {}
                Read::End => {
                    let delivered = self.connection.take().map_or(0, |c| c.delivered);
                    if self.terminal_seen
                        || (delivered == 0 && self.caught_up_with_ended_run().await)
                    {
                        self.ended = true;
                        return None;
                    }
                    let cause = Break::Retry("the service closed the stream".into());
                    return Some(self.broken(cause));
                }
                Read::Broken(cause) => {
                    self.connection = None;
                    return Some(self.broken(cause));
                }
            }
        }
    }

    /// The stream as a `futures::Stream`.
    pub fn into_stream(self) -> impl futures::Stream<Item = Result<StreamItem, Error>> {
        futures::stream::unfold(self, |mut stream| async move {
            stream.next().await.map(|item| (item, stream))
        })
    }

    /// Opens a connection resuming after the last delivered event.
    async fn connect(&self) -> Result<Connection, Break> {
        let url = self.client.url(
            &["v1", "runs", &self.run_id, "events"],
            &self.client.app_query(),
        );
        let path = url.path().to_string();
        let mut request = self
            .client
            .request(Method::GET, url)
            .header(header::ACCEPT, "text/event-stream");
        if self.last_sequence > 0 {
            request = request.header("Last-Event-ID", self.last_sequence.to_string());
        }
        let answer = tokio::time::timeout(self.options.idle_timeout, request.send()).await;
        let response = match answer {
            Err(_) => return Err(Break::Retry("no answer to the stream request".into())),
            Ok(sent) => sent.map_err(|source| Error::Transport {
                method: "GET".into(),
                path: path.clone(),
                source,
            })?,
        };
        let response = check_status(response, "GET", &path).await?;
        Ok(Connection {
            response,
            decoder: ar_sse::Decoder::new(),
            delivered: 0,
        })
    }

    /// Reads until a frame is complete, the connection ends, breaks or falls silent.
    async fn read(&mut self) -> Read {
        let idle = self.options.idle_timeout;
        let Some(connection) = self.connection.as_mut() else {
            return Read::End;
        };
        let frame = loop {
            if let Some(frame) = connection.decoder.next_event() {
                break frame;
            }
            match tokio::time::timeout(idle, connection.response.chunk()).await {
                Err(_) => return Read::Broken(Break::Retry(format!("no data for {idle:?}"))),
                Ok(Err(error)) => return Read::Broken(Break::Retry(format!("read: {error}"))),
                Ok(Ok(None)) => return Read::End,
                Ok(Ok(Some(bytes))) => connection.decoder.push(&bytes),
            }
        };
        self.frame(frame)
    }

    /// One decoded frame: a new event, a delta, or one already delivered.
    fn frame(&mut self, frame: ar_sse::Event) -> Read {
        if frame.data.is_empty() {
            return Read::Skip;
        }
        let mut envelope: EventEnvelope = match serde_json::from_str(&frame.data) {
            Ok(envelope) => envelope,
            Err(source) => {
                return Read::Broken(Break::Fatal(Error::Event {
                    run_id: self.run_id.clone(),
                    source,
                }))
            }
        };
        if envelope.event_type.is_empty() {
            envelope.event_type = frame.event;
        }
        let Some(sequence) = frame.id.and_then(|id| id.trim().parse::<i64>().ok()) else {
            return Read::Item(StreamItem::Delta(envelope));
        };
        if sequence <= self.last_sequence {
            return Read::Skip;
        }
        if sequence > self.last_sequence + 1 {
            let last = self.last_sequence;
            return Read::Broken(Break::Retry(format!(
                "event {sequence} arrived after {last}: reading the ones between again"
            )));
        }
        self.last_sequence = sequence;
        self.failures = 0;
        if let Some(connection) = self.connection.as_mut() {
            connection.delivered += 1;
        }
        if EventKind::parse(&envelope.event_type).is_ok_and(EventKind::is_terminal) {
            self.terminal_seen = true;
        }
        Read::Item(StreamItem::Event(envelope))
    }

    /// Whether the run has ended and every event of it was delivered: the service closes a
    /// stream at once when the cursor is past an ended run's last event, which looks like a
    /// connection cut before its first frame.
    async fn caught_up_with_ended_run(&self) -> bool {
        match self.client.get_run(&self.run_id).await {
            Ok(run) if ar_wire::runs::is_terminal_status(&run.status) => {}
            _ => return false,
        }
        match self.client.list_run_events(&self.run_id).await {
            Ok(history) => history
                .last()
                .is_none_or(|event| event.sequence_no <= self.last_sequence),
            Err(_) => false,
        }
    }

    /// Gives up on a fatal cause or after too many reconnections; else schedules one.
    fn broken(&mut self, cause: Break) -> Result<StreamItem, Error> {
        let reason = match cause {
            Break::Fatal(error) => {
                self.ended = true;
                return Err(error);
            }
            Break::Retry(reason) => reason,
        };
        self.failures += 1;
        if self
            .options
            .max_reconnects
            .is_some_and(|max| self.failures > max)
        {
            self.ended = true;
            return Err(Error::StreamGaveUp {
                run_id: self.run_id.clone(),
                attempts: self.failures - 1,
                last: reason,
            });
        }
        let delay = backoff(&self.options, self.failures);
        self.wait = Some(delay);
        Ok(StreamItem::Reconnecting {
            attempt: self.failures,
            after_sequence: self.last_sequence,
            delay,
            reason,
        })
    }
}

/// `initial × 2^(attempt−1)`, at most `max`, times a jitter in [0.8, 1.2) so that many clients
/// cut off together do not come back together.
fn backoff(options: &StreamOptions, attempt: u32) -> Duration {
    let doubled = options
        .initial_backoff
        .saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    let capped = doubled.min(options.max_backoff);
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let jitter = 0.8 + (random % 400) as f64 / 1000.0;
    capped.mul_f64(jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_with_jitter() {
        let options = StreamOptions::default();
        for (attempt, base_ms) in [
            (1, 250.0),
            (2, 500.0),
            (3, 1000.0),
            (5, 4000.0),
            (9, 5000.0),
        ] {
            let ms = backoff(&options, attempt).as_secs_f64() * 1000.0;
            assert!(
                (base_ms * 0.8..base_ms * 1.2).contains(&ms),
                "attempt {attempt}: {ms} ms"
            );
        }
        assert!(backoff(&options, u32::MAX) <= Duration::from_secs(6));
    }
}
