//! [`NatsConsumer`]: the durable pull loop (connect, ensure the stream, bind the consumer, pull, handle, settle), reconnecting and rebinding until cancelled.

use std::future::Future;
use std::time::Duration;

use ar_wire::EventEnvelope;
use async_nats::jetstream::{self, consumer, stream, AckKind};
use tokio_util::sync::CancellationToken;

use super::config::{ConfigError, NatsConsumerConfig};
use super::pull::Pulls;
use super::settle::{decode_envelope, HandlerError, Settlement};

/// Wait between reconnect attempts after the first (the runtime's 2 s; attempts never stop).
const RECONNECT_WAIT: Duration = Duration::from_secs(2);
/// Longest pause after a failed pull or bind before trying again (the SDKs' 5 s, or the
/// pull requests' wait when shorter).
const RETRY_PAUSE: Duration = Duration::from_secs(5);
/// Shortest interval of the "in progress" acknowledgements a long handler keeps sending.
const MIN_PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// Why [`NatsConsumer::run`] could not start; once it runs, every failure (NATS away, the
/// stream missing, a pull request refused) is logged and retried until cancellation.
#[derive(Debug, thiserror::Error)]
pub enum NatsConsumerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The message names the server by its place in the list: the URL may carry a password.
    #[error("NATS server address #{index} is not valid: {source}")]
    ServerAddress {
        index: usize,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot connect to NATS: {0}")]
    Connect(#[from] async_nats::ConnectError),
}

/// The SDKs' `NATSConsumer`: a durable pull consumer with explicit acknowledgements that
/// hands each event to a handler, one at a time in stream order, and settles it by the
/// handler's answer: `Ok` acks, [`HandlerError::Drop`] acks (never redelivered),
/// [`HandlerError::Retry`] and any other error nak with the schedule's delay for that
/// delivery, until the last delivery `max_deliver` allows, which is acked with an error
/// logged. A body that is not an envelope is acked with a warning.
#[derive(Debug, Clone)]
pub struct NatsConsumer {
    config: NatsConsumerConfig,
}

impl NatsConsumer {
    /// A consumer of `config` with its zero values replaced by the SDKs' defaults.
    pub fn new(config: NatsConsumerConfig) -> Self {
        NatsConsumer {
            config: config.normalized(),
        }
    }

    /// The configuration in effect (defaults applied).
    pub fn config(&self) -> &NatsConsumerConfig {
        &self.config
    }

    /// Consumes until `cancel` fires (then returns `Ok`): the event being handled is
    /// finished and settled first. A connection the consumer opened itself is drained.
    pub async fn run<H, Fut>(
        &self,
        cancel: &CancellationToken,
        mut handler: H,
    ) -> Result<(), NatsConsumerError>
    where
        H: FnMut(EventEnvelope) -> Fut,
        Fut: Future<Output = Result<(), HandlerError>>,
    {
        self.config.check()?;
        let (js, own_client) = match &self.config.jetstream {
            Some(js) => (js.clone(), None),
            None => {
                let client = self.connect().await?;
                (jetstream::new(client.clone()), Some(client))
            }
        };
        while !cancel.is_cancelled() {
            match cancel.run_until_cancelled(self.bind(&js)).await {
                None => break,
                Some(Ok(bound)) => self.consume(bound, js.client(), cancel, &mut handler).await,
                Some(Err(error)) => {
                    tracing::warn!(
                        stream = %self.config.stream, durable = %self.config.durable, %error,
                        "agent runtime NATS consumer cannot bind; retrying"
                    );
                    self.pause(cancel).await;
                }
            }
        }
        if let Some(client) = own_client {
            let _ = client.drain().await;
        }
        Ok(())
    }

    async fn connect(&self) -> Result<async_nats::Client, NatsConsumerError> {
        let servers = servers(&self.config.url)?;
        let client = async_nats::ConnectOptions::new()
            .name(&self.config.client_name)
            .retry_on_initial_connect()
            .max_reconnects(None)
            .reconnect_delay_callback(|attempts| {
                if attempts <= 1 {
                    Duration::ZERO
                } else {
                    RECONNECT_WAIT
                }
            })
            .event_callback(log_connection_event)
            .connect(servers)
            .await?;
        Ok(client)
    }

    /// The stream (created first when the configuration says so) and the durable consumer
    /// on it, created or updated to the configuration.
    async fn bind(
        &self,
        js: &jetstream::Context,
    ) -> Result<consumer::Consumer<consumer::pull::Config>, async_nats::Error> {
        let stream = if self.config.ensure_stream == Some(true) {
            js.get_or_create_stream(stream_config(&self.config)).await?
        } else {
            js.get_stream(&self.config.stream).await?
        };
        Ok(stream
            .create_consumer(self.config.consumer_config())
            .await?)
    }

    /// Handles the messages of its pull requests ([`Pulls`]) until cancelled or a request
    /// fails (the caller rebinds).
    async fn consume<H, Fut>(
        &self,
        bound: consumer::Consumer<consumer::pull::Config>,
        client: async_nats::Client,
        cancel: &CancellationToken,
        handler: &mut H,
    ) where
        H: FnMut(EventEnvelope) -> Fut,
        Fut: Future<Output = Result<(), HandlerError>>,
    {
        let mut pulls = Pulls::start(bound, client, self.config.fetch_batch, self.config.max_wait);
        while !cancel.is_cancelled() {
            match cancel.run_until_cancelled(pulls.next()).await {
                None => return,
                Some(Ok(message)) => self.process(message, handler).await,
                Some(Err(error)) => return self.fetch_failed(error.to_string(), cancel).await,
            }
        }
    }

    async fn fetch_failed(&self, error: String, cancel: &CancellationToken) {
        tracing::warn!(
            stream = %self.config.stream, durable = %self.config.durable, %error,
            "agent runtime NATS consumer pull failed"
        );
        self.pause(cancel).await;
    }

    async fn pause(&self, cancel: &CancellationToken) {
        let pause = self.config.max_wait.min(RETRY_PAUSE);
        let _ = cancel.run_until_cancelled(tokio::time::sleep(pause)).await;
    }

    /// Decodes, handles and settles one message.
    async fn process<H, Fut>(&self, message: jetstream::Message, handler: &mut H)
    where
        H: FnMut(EventEnvelope) -> Fut,
        Fut: Future<Output = Result<(), HandlerError>>,
    {
        let event = match decode_envelope(&message.payload) {
            Ok(event) => event,
            Err(error) => {
                tracing::warn!(subject = %message.subject, %error, "dropping invalid agent runtime event");
                return self.settle(&message, Settlement::Invalid).await;
            }
        };
        let deliveries = message.info().map(|info| info.delivered).unwrap_or(1);
        let (run_id, host_run_id, event_type) = (
            event.run_id.clone(),
            event.host_run_id.clone(),
            event.event_type.clone(),
        );
        let outcome = self.handle_in_progress(&message, handler(event)).await;
        let settlement = Settlement::of(&outcome, deliveries, &self.config);
        match (&outcome, settlement) {
            (Err(error), Settlement::Exhausted) => tracing::error!(
                runtime_run_id = %run_id, %host_run_id, %event_type, deliveries, %error,
                "dropping agent runtime event after max deliveries"
            ),
            (Err(error), Settlement::Retry(delay)) => tracing::debug!(
                runtime_run_id = %run_id, %event_type, deliveries, ?delay, %error,
                "agent runtime event will be delivered again"
            ),
            _ => {}
        }
        self.settle(&message, settlement).await;
    }

    /// Awaits the handler, telling the server every so often that the message is still in
    /// progress, so a handler slower than the ack wait is not handed a second copy meanwhile.
    async fn handle_in_progress<Fut>(
        &self,
        message: &jetstream::Message,
        handling: Fut,
    ) -> Fut::Output
    where
        Fut: Future<Output = Result<(), HandlerError>>,
    {
        let interval = (self.config.ack_wait / 2).max(MIN_PROGRESS_INTERVAL);
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        tokio::pin!(handling);
        loop {
            tokio::select! {
                outcome = &mut handling => return outcome,
                _ = ticks.tick() => {
                    if let Err(error) = message.ack_with(AckKind::Progress).await {
                        tracing::debug!(%error, "in-progress acknowledgement failed");
                    }
                }
            }
        }
    }

    /// Sends the settlement's acknowledgement. An ack waits for the server's confirmation, so
    /// a consumer stopped right after handling an event is not handed it again; a lost one
    /// means the event comes again after the ack wait (at least once).
    async fn settle(&self, message: &jetstream::Message, settlement: Settlement) {
        let kind = settlement.ack_kind();
        let sent = match kind {
            AckKind::Ack => message.double_ack().await,
            kind => message.ack_with(kind).await,
        };
        if let Err(error) = sent {
            tracing::warn!(subject = %message.subject, ?settlement, %error, "agent runtime event acknowledgement failed");
        }
    }
}

/// The stream the runtime creates (the contract's storage and limits), for a consumer that
/// creates it when missing (the SDKs' `EnsureNATSStream`: an existing stream is left as is).
pub fn stream_config(config: &NatsConsumerConfig) -> stream::Config {
    stream::Config {
        name: config.stream.clone(),
        subjects: config.stream_subjects.clone(),
        storage: stream::StorageType::File,
        retention: stream::RetentionPolicy::Limits,
        discard: stream::DiscardPolicy::Old,
        duplicate_window: ar_wire::nats::STREAM_DUPLICATE_WINDOW,
        max_age: ar_wire::nats::STREAM_MAX_AGE,
        max_bytes: ar_wire::nats::STREAM_MAX_BYTES,
        ..Default::default()
    }
}

fn servers(list: &str) -> Result<Vec<async_nats::ServerAddr>, NatsConsumerError> {
    list.split(',')
        .map(str::trim)
        .filter(|server| !server.is_empty())
        .enumerate()
        .map(|(index, server)| {
            server
                .parse()
                .map_err(|source| NatsConsumerError::ServerAddress {
                    index: index + 1,
                    source,
                })
        })
        .collect()
}

/// Logs the connection's changes (never its address, which may carry credentials).
async fn log_connection_event(event: async_nats::Event) {
    match event {
        async_nats::Event::Connected => tracing::info!("agent runtime NATS consumer connected"),
        async_nats::Event::Disconnected => {
            tracing::warn!("agent runtime NATS consumer disconnected; reconnecting")
        }
        async_nats::Event::Closed => {
            tracing::info!("agent runtime NATS consumer connection closed")
        }
        other => tracing::warn!(event = %other, "agent runtime NATS consumer connection"),
    }
}
