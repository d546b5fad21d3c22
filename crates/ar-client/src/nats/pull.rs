//! [`Pulls`]: the pull requests of one bound consumer, sent by a task of their own so that the server always holds one that is not about to expire, and the messages they bring, queued for the handler.
//!
//! Why requests overlap: nats-server before 2.10.14 (nats-io/nats-server#5305) mishandles a
//! redelivery that falls due while it holds pull requests but none that can take a message:
//! each has just expired, or lost its subscriber (another instance of the durable stopped, or
//! this one reconnected). It takes the message off its redelivery queue, finds no request to
//! give it to, and steps its stream cursor back by one as if the message were a first delivery:
//! the retried event then waits a whole ack wait, and the event before the cursor, already
//! acknowledged, is handed out again as a first delivery. One fetch at a time runs into that:
//! its request is sent right after the naks of the batch before it, so with a nak delay equal
//! to the fetch's expiry (the SDKs' defaults: 5 s and 5 s, the later delays multiples of it) the
//! retry falls due just as the request expires; and while a handler runs, no request of its own
//! is queued behind one a stopped instance left. So a new request is sent once the newest one
//! has waited half its expiry, handler running or not, and the server always holds one with
//! half its expiry left.
//!
//! A request sent on an earlier connection no longer counts (the server forgot it when that
//! connection closed, so its end never comes; it is left to time out by itself): the next one
//! goes out as soon as the client is connected again, not after the lost request's timeout.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_nats::connection::State;
use async_nats::jetstream::{self, consumer};
use futures::stream::{self, BoxStream, SelectAll};
use futures::StreamExt as _;
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How often the task looks at the connection when nothing else wakes it (a reconnect is
/// noticed this late at most).
const CONNECTION_CHECK: Duration = Duration::from_millis(250);

type Arrived = Result<jetstream::Message, async_nats::Error>;

/// The messages of a consumer's pull requests, in the order they arrive. Dropping it stops
/// the requests (those the server still holds run out on their own).
pub(super) struct Pulls {
    arrived: mpsc::UnboundedReceiver<Arrived>,
    queue: Arc<Queue>,
    task: JoinHandle<()>,
}

/// What the task and the handler side share: how many messages wait to be taken.
#[derive(Default)]
struct Queue {
    waiting: AtomicUsize,
    taken: Notify,
}

impl Pulls {
    /// Starts asking `bound` for messages: at most about `batch` asked for or waiting to be
    /// taken, each request waiting `expires` on the server.
    pub(super) fn start(
        bound: consumer::Consumer<consumer::pull::Config>,
        client: async_nats::Client,
        batch: usize,
        expires: Duration,
    ) -> Pulls {
        let (sender, arrived) = mpsc::unbounded_channel();
        let queue = Arc::new(Queue::default());
        let requester = Requester {
            consumer: bound,
            client,
            plan: Plan { batch, expires },
            requests: Vec::new(),
            arriving: SelectAll::new(),
            queue: queue.clone(),
            sender,
            next_id: 0,
        };
        Pulls {
            arrived,
            queue,
            task: tokio::spawn(requester.run()),
        }
    }

    /// The next message; an error ends the requests (the caller binds again). Cancel safe.
    pub(super) async fn next(&mut self) -> Arrived {
        let arrived = self
            .arrived
            .recv()
            .await
            .ok_or("the pull requests stopped")?;
        if arrived.is_ok() {
            self.queue.waiting.fetch_sub(1, Ordering::SeqCst);
            self.queue.taken.notify_one();
        }
        arrived
    }
}

impl Drop for Pulls {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A pull request sent, until its end arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Request {
    id: u64,
    sent: Instant,
    asked: usize,
    received: usize,
    /// The client's connection count when it was sent.
    connects: u64,
}

/// When to send a request and for how many messages: the pure part of the task.
#[derive(Debug, Clone, Copy)]
struct Plan {
    batch: usize,
    expires: Duration,
}

impl Plan {
    /// Requests ask for half a batch, so that two fit in it (at least one message each).
    fn half(&self) -> usize {
        (self.batch / 2).max(1)
    }

    /// Whether the server may still hand messages to `request`: not expired, and sent on the
    /// connection the client has now.
    fn live(&self, request: &Request, now: Instant, connects: u64) -> bool {
        request.connects == connects && now < request.sent + self.expires
    }

    /// How many messages a request sent now asks for, or `None` when none is due: none while
    /// a live one is younger than half the expiry; otherwise one when half a batch has room,
    /// or, with the room left (one at least), when a live request still waits for messages
    /// and would otherwise be the last one when it expires.
    fn ask(
        &self,
        requests: &[Request],
        waiting: usize,
        now: Instant,
        connects: u64,
    ) -> Option<usize> {
        let live = || requests.iter().filter(|r| self.live(r, now, connects));
        if live().any(|request| now < request.sent + self.expires / 2) {
            return None;
        }
        let unfilled: usize = live().map(|r| r.asked.saturating_sub(r.received)).sum();
        let room = self.batch.saturating_sub(waiting + unfilled);
        (room >= self.half() || unfilled > 0).then(|| room.clamp(1, self.half()))
    }

    /// When [`Self::ask`] may answer otherwise without anything arriving or being taken: a
    /// live request reaching half its expiry, or the next look at the connection. (Once all
    /// live requests are past half their expiry and none is due, none waits for messages, so
    /// their expiry changes nothing.)
    fn wake(&self, requests: &[Request], now: Instant, connects: u64) -> Instant {
        requests
            .iter()
            .filter(|r| self.live(r, now, connects))
            .map(|r| r.sent + self.expires / 2)
            .filter(|half| *half > now)
            .fold(now + CONNECTION_CHECK, Instant::min)
    }
}

/// What one request's stream yields: its messages (boxed: a message is large), then its end.
enum Arrival {
    Message(u64, Box<Arrived>),
    Ended(u64),
}

/// The task: sends requests by the [`Plan`] and forwards what they bring.
struct Requester {
    consumer: consumer::Consumer<consumer::pull::Config>,
    client: async_nats::Client,
    plan: Plan,
    requests: Vec<Request>,
    arriving: SelectAll<BoxStream<'static, Arrival>>,
    queue: Arc<Queue>,
    sender: mpsc::UnboundedSender<Arrived>,
    next_id: u64,
}

impl Requester {
    async fn run(mut self) {
        if let Err(error) = self.pull().await {
            let _ = self.sender.send(Err(error));
        }
    }

    async fn pull(&mut self) -> Result<(), async_nats::Error> {
        loop {
            let now = Instant::now();
            let connects = self.client.statistics().connects.load(Ordering::SeqCst);
            // While disconnected a request would only wait in the client and count as sent
            // on the old connection; the check after the reconnect sends it.
            if self.client.connection_state() == State::Connected {
                let waiting = self.queue.waiting.load(Ordering::SeqCst);
                if let Some(ask) = self.plan.ask(&self.requests, waiting, now, connects) {
                    self.request(ask, connects).await?;
                    continue;
                }
            }
            let wake = self.plan.wake(&self.requests, now, connects);
            tokio::select! {
                Some(arrival) = self.arriving.next(), if !self.arriving.is_empty() => {
                    self.arrived(arrival)?;
                }
                () = self.queue.taken.notified() => {}
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    async fn request(&mut self, ask: usize, connects: u64) -> Result<(), async_nats::Error> {
        // Taken before sending: the server's expiry runs from a moment later than this one.
        let sent = Instant::now();
        let batch = self
            .consumer
            .batch()
            .max_messages(ask)
            .expires(self.plan.expires)
            .messages()
            .await?;
        let id = self.next_id;
        self.next_id += 1;
        self.requests.push(Request {
            id,
            sent,
            asked: ask,
            received: 0,
            connects,
        });
        let messages = batch
            .map(move |message| Arrival::Message(id, Box::new(message)))
            .chain(stream::once(async move { Arrival::Ended(id) }));
        self.arriving.push(messages.boxed());
        Ok(())
    }

    fn arrived(&mut self, arrival: Arrival) -> Result<(), async_nats::Error> {
        match arrival {
            Arrival::Message(id, message) => {
                let message = (*message)?;
                if let Some(request) = self.requests.iter_mut().find(|r| r.id == id) {
                    request.received += 1;
                }
                self.queue.waiting.fetch_add(1, Ordering::SeqCst);
                // The receiver only goes away with the task, which is aborted then.
                let _ = self.sender.send(Ok(message));
            }
            Arrival::Ended(id) => self.requests.retain(|request| request.id != id),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPIRES: Duration = Duration::from_secs(4);

    fn plan_of(batch: usize) -> Plan {
        Plan {
            batch,
            expires: EXPIRES,
        }
    }

    fn sent(at: Instant, asked: usize, received: usize) -> Request {
        Request {
            id: 0,
            sent: at,
            asked,
            received,
            connects: 1,
        }
    }

    #[test]
    fn an_idle_consumer_keeps_two_half_batches_overlapping() {
        let (plan, t0) = (plan_of(8), Instant::now());
        assert_eq!(plan.ask(&[], 0, t0, 1), Some(4), "the first request");
        let first = [sent(t0, 4, 0)];
        let before_half = t0 + Duration::from_millis(1999);
        assert_eq!(plan.ask(&first, 0, before_half, 1), None);
        let half = t0 + EXPIRES / 2;
        assert_eq!(plan.ask(&first, 0, half, 1), Some(4), "the overlap");
        assert_eq!(plan.wake(&first, t0, 1), t0 + CONNECTION_CHECK);
        assert_eq!(plan.wake(&first, half - CONNECTION_CHECK / 2, 1), half);
        // When the first expires, the second has half its expiry left and a third is sent.
        let both = [sent(t0, 4, 0), sent(half, 4, 0)];
        assert_eq!(
            plan.ask(&both, 0, t0 + EXPIRES - Duration::from_millis(1), 1),
            None
        );
        assert_eq!(plan.ask(&both, 0, t0 + EXPIRES, 1), Some(4));
    }

    #[test]
    fn a_full_queue_asks_for_nothing_unless_a_waiting_request_needs_a_successor() {
        let (plan, t0) = (plan_of(8), Instant::now());
        let half = t0 + EXPIRES / 2;
        assert_eq!(plan.ask(&[], 8, t0, 1), None, "a batch waits to be taken");
        assert_eq!(
            plan.ask(&[], 5, t0, 1),
            None,
            "less than half a batch of room"
        );
        assert_eq!(plan.ask(&[], 4, t0, 1), Some(4));
        // A request that still waits is never left to expire without a successor, even
        // when the queue is full: it asks for one message.
        let waiting = [sent(t0, 4, 1)];
        assert_eq!(plan.ask(&waiting, 5, half, 1), Some(1));
        assert_eq!(plan.ask(&waiting, 2, half, 1), Some(3));
        let one = plan_of(1);
        assert_eq!(one.ask(&[], 0, t0, 1), Some(1));
        assert_eq!(one.ask(&[sent(t0, 1, 0)], 0, half, 1), Some(1));
        assert_eq!(one.ask(&[], 1, t0, 1), None);
    }

    #[test]
    fn a_request_of_an_earlier_connection_or_past_its_expiry_is_not_live() {
        let (plan, t0) = (plan_of(8), Instant::now());
        let old = [sent(t0, 4, 0)];
        assert_eq!(
            plan.ask(&old, 0, t0, 2),
            Some(4),
            "sent again after a reconnect"
        );
        assert_eq!(plan.wake(&old, t0, 2), t0 + CONNECTION_CHECK);
        let expired = t0 + EXPIRES;
        assert_eq!(plan.ask(&old, 0, expired, 1), Some(4));
    }
}
