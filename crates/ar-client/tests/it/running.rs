//! A consumer running in a task of its own, reporting every event its handler is given.

use std::time::{Duration, Instant};

use ar_client::nats::{HandlerError, NatsConsumer, NatsConsumerConfig, NatsConsumerError};
use ar_wire::EventEnvelope;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What the handler does with an event: answer at once, after a while (a slow handler), or
/// never (a consumer that crashes while handling it).
pub enum Answer {
    Reply(Result<(), HandlerError>),
    After(Duration, Result<(), HandlerError>),
    Hang,
}

/// One call of the handler.
pub struct Handled {
    pub event: EventEnvelope,
    pub at: Instant,
}

pub struct Running {
    cancel: CancellationToken,
    task: JoinHandle<Result<(), NatsConsumerError>>,
    pub handled: mpsc::UnboundedReceiver<Handled>,
}

/// Starts `config`'s consumer; `answer` decides each handler call.
pub fn spawn_consumer<A>(config: NatsConsumerConfig, mut answer: A) -> Running
where
    A: FnMut(&EventEnvelope) -> Answer + Send + 'static,
{
    // Logs help when a test fails; `AR_TEST_LOG=ar_client=debug` turns them on.
    if let Ok(filter) = std::env::var("AR_TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    }
    let (sender, handled) = mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let consumer = NatsConsumer::new(config);
    let token = cancel.clone();
    let task = tokio::spawn(async move {
        consumer
            .run(&token, move |event| {
                let answer = answer(&event);
                let _ = sender.send(Handled {
                    event,
                    at: Instant::now(),
                });
                async move {
                    match answer {
                        Answer::Reply(result) => result,
                        Answer::After(wait, result) => {
                            tokio::time::sleep(wait).await;
                            result
                        }
                        Answer::Hang => std::future::pending().await,
                    }
                }
            })
            .await
    });
    Running {
        cancel,
        task,
        handled,
    }
}

impl Running {
    /// The next handler call, or `None` when none comes within `within`.
    pub async fn next(&mut self, within: Duration) -> Option<Handled> {
        tokio::time::timeout(within, self.handled.recv())
            .await
            .ok()
            .flatten()
    }

    /// Handler calls until `count` of them satisfy `counted`; panics after `within`.
    pub async fn take(
        &mut self,
        count: usize,
        within: Duration,
        counted: impl Fn(&EventEnvelope) -> bool,
    ) -> Vec<Handled> {
        let deadline = Instant::now() + within;
        let mut got = Vec::new();
        while got.iter().filter(|h: &&Handled| counted(&h.event)).count() < count {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next(left).await {
                Some(handled) => got.push(handled),
                None => panic!(
                    "gave up after {within:?} with {} calls: {:?}",
                    got.len(),
                    got.iter().map(|h| &h.event.event_type).collect::<Vec<_>>()
                ),
            }
        }
        got
    }

    /// Stops it as cancellation does (the event being handled is settled first).
    pub async fn stop(self) {
        self.cancel.cancel();
        let stopped = tokio::time::timeout(Duration::from_secs(10), self.task).await;
        let result = stopped.expect("the consumer stops when cancelled");
        result.expect("task").expect("run ends with Ok");
    }

    /// Ends it as a crash would: nothing settled, the connection dropped.
    pub async fn crash(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}
