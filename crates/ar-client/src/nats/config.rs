//! [`NatsConsumerConfig`]: the SDKs' `NATSConsumerConfig` with their defaults, and the JetStream consumer it asks the server for.

use std::fmt;
use std::time::Duration;

use ar_wire::nats::{app_event_subject, DEFAULT_STREAM_NAME, DEFAULT_STREAM_SUBJECT};
use async_nats::jetstream::{self, consumer};

/// NATS client name of the consumer (the SDKs' default).
pub const DEFAULT_CLIENT_NAME: &str = "agent-runtime-sdk-consumer";
/// Durable consumer name (the SDKs' default).
pub const DEFAULT_DURABLE: &str = "agent-runtime-projection";
/// Messages the consumer holds at once, asked for or waiting to be handled (the SDKs' fetch
/// batch; pull requests ask for half of it each, so two can overlap).
pub const DEFAULT_FETCH_BATCH: usize = 8;
/// How long one pull request waits on the server for messages (a new one is sent when the
/// newest has waited half of it).
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(5);
/// How long the server waits for an acknowledgement before it redelivers.
pub const DEFAULT_ACK_WAIT: Duration = Duration::from_secs(45);
/// Deliveries of one event before the consumer gives up on it.
pub const DEFAULT_MAX_DELIVER: i64 = 5;
/// Messages delivered and not yet acknowledged, at most.
pub const DEFAULT_MAX_ACK_PENDING: i64 = 64;

/// The SDKs' progressive retry schedule: the delay before delivery `n + 1` is entry `n - 1`
/// (the last entry for later deliveries).
pub fn default_backoff() -> Vec<Duration> {
    [5, 15, 45, 120, 300]
        .into_iter()
        .map(Duration::from_secs)
        .collect()
}

/// How a [`super::NatsConsumer`] reaches NATS and what it consumes. Zero values (empty
/// strings, `0`, an empty list) mean the SDKs' defaults, as in the Go and Python SDKs; see
/// [`NatsConsumerConfig::new`].
#[derive(Clone, Default)]
pub struct NatsConsumerConfig {
    /// Server URL (or several, comma separated); may carry credentials, so never logged.
    /// Unused when [`Self::jetstream`] is given.
    pub url: String,
    pub client_name: String,
    /// A JetStream context of the host's own connection, used instead of connecting to `url`.
    pub jetstream: Option<jetstream::Context>,
    pub stream: String,
    /// Subjects of the stream when the consumer creates it.
    pub stream_subjects: Vec<String>,
    /// The host app whose events are consumed: the default filter subject is its v1 family
    /// (`agent-runtime.events.{app}.>`); set [`Self::subject`] to
    /// [`ar_wire::nats::v2_app_event_subject`] for the v2 family.
    pub app_id: String,
    pub durable: String,
    /// The consumer's filter subject.
    pub subject: String,
    pub fetch_batch: usize,
    pub max_wait: Duration,
    pub ack_wait: Duration,
    pub max_deliver: i64,
    pub backoff: Vec<Duration>,
    pub max_ack_pending: i64,
    /// Create the stream when it does not exist. `None`: when the consumer opens its own
    /// connection (the Python SDK's rule).
    pub ensure_stream: Option<bool>,
}

impl fmt::Debug for NatsConsumerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let url = if self.url.is_empty() { "" } else { "[set]" };
        f.debug_struct("NatsConsumerConfig")
            .field("url", &url)
            .field("client_name", &self.client_name)
            .field("jetstream", &self.jetstream.is_some())
            .field("stream", &self.stream)
            .field("stream_subjects", &self.stream_subjects)
            .field("app_id", &self.app_id)
            .field("durable", &self.durable)
            .field("subject", &self.subject)
            .field("fetch_batch", &self.fetch_batch)
            .field("max_wait", &self.max_wait)
            .field("ack_wait", &self.ack_wait)
            .field("max_deliver", &self.max_deliver)
            .field("backoff", &self.backoff)
            .field("max_ack_pending", &self.max_ack_pending)
            .field("ensure_stream", &self.ensure_stream)
            .finish()
    }
}

/// A configuration that cannot consume anything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("a NATS URL or a JetStream context is required")]
    NoConnection,
    #[error("an app id or a filter subject is required")]
    NoSubject,
}

impl NatsConsumerConfig {
    /// The SDKs' defaults for `app_id`'s events on the NATS at `url`.
    pub fn new(url: impl Into<String>, app_id: impl Into<String>) -> Self {
        NatsConsumerConfig {
            url: url.into(),
            app_id: app_id.into(),
            ..Default::default()
        }
        .normalized()
    }

    /// Every zero value replaced by its default and strings trimmed (the SDKs' rules).
    pub fn normalized(mut self) -> Self {
        fn or(value: &str, default: &str) -> String {
            match value.trim() {
                "" => default.to_string(),
                value => value.to_string(),
            }
        }
        self.url = self.url.trim().to_string();
        self.app_id = self.app_id.trim().to_string();
        self.client_name = or(&self.client_name, DEFAULT_CLIENT_NAME);
        self.stream = or(&self.stream, DEFAULT_STREAM_NAME);
        if self.stream_subjects.is_empty() {
            self.stream_subjects = vec![DEFAULT_STREAM_SUBJECT.to_string()];
        }
        self.durable = or(&self.durable, DEFAULT_DURABLE);
        let subject = self.subject.trim();
        self.subject = match (subject, self.app_id.as_str()) {
            ("", "") => String::new(),
            ("", app) => app_event_subject(app),
            (subject, _) => subject.to_string(),
        };
        let positive = |value: i64, default: i64| if value > 0 { value } else { default };
        self.fetch_batch = if self.fetch_batch > 0 {
            self.fetch_batch
        } else {
            DEFAULT_FETCH_BATCH
        };
        self.max_wait = nonzero(self.max_wait, DEFAULT_MAX_WAIT);
        self.ack_wait = nonzero(self.ack_wait, DEFAULT_ACK_WAIT);
        self.max_deliver = positive(self.max_deliver, DEFAULT_MAX_DELIVER);
        if self.backoff.is_empty() {
            self.backoff = default_backoff();
        }
        self.max_ack_pending = positive(self.max_ack_pending, DEFAULT_MAX_ACK_PENDING);
        if self.ensure_stream.is_none() {
            self.ensure_stream = Some(self.jetstream.is_none() && !self.url.is_empty());
        }
        self
    }

    /// Refuses a configuration with nothing to connect to or nothing to filter on.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.jetstream.is_none() && self.url.is_empty() {
            return Err(ConfigError::NoConnection);
        }
        if self.subject.is_empty() {
            return Err(ConfigError::NoSubject);
        }
        Ok(())
    }

    /// The delay before the redelivery that follows delivery number `deliveries` (1 for the
    /// first delivery): the schedule's entry `deliveries - 1`, its last entry beyond it.
    pub fn retry_delay(&self, deliveries: i64) -> Duration {
        let index = usize::try_from(deliveries.max(1) - 1).unwrap_or(usize::MAX);
        self.backoff
            .get(index)
            .or(self.backoff.last())
            .copied()
            .unwrap_or(DEFAULT_MAX_WAIT)
    }

    /// The durable pull consumer: explicit acks, every event of the stream from its start.
    ///
    /// The schedule is not given to the server as the consumer's `backoff`: the consumer
    /// applies it itself, as the delay of each nak (which is all the SDKs use it for when a
    /// handler fails). Given to the server it would do harm: nats-server refuses a backoff
    /// with as many entries as `max_deliver` ("max deliver is required to be > length of
    /// backoff values"), which the SDKs' defaults (five delays, five deliveries) have, and a
    /// server backoff replaces the ack wait (45 s) with its first entry (5 s) for every
    /// message of a batch, so a batch whose handlers take longer than that in total would be
    /// delivered twice. An unacknowledged delivery (a consumer that crashed) comes again after
    /// the ack wait.
    pub fn consumer_config(&self) -> consumer::pull::Config {
        consumer::pull::Config {
            durable_name: Some(self.durable.clone()),
            filter_subject: self.subject.clone(),
            ack_policy: consumer::AckPolicy::Explicit,
            deliver_policy: consumer::DeliverPolicy::All,
            ack_wait: self.ack_wait,
            max_deliver: self.max_deliver,
            max_ack_pending: self.max_ack_pending,
            ..Default::default()
        }
    }
}

fn nonzero(value: Duration, default: Duration) -> Duration {
    if value.is_zero() {
        default
    } else {
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sdks_defaults() {
        let config = NatsConsumerConfig::new(" nats://nats:4222 ", " host.app ");
        assert_eq!(config.url, "nats://nats:4222");
        assert_eq!(config.client_name, "agent-runtime-sdk-consumer");
        assert_eq!(config.stream, "AGENT_RUNTIME_EVENTS");
        assert_eq!(config.stream_subjects, vec!["agent-runtime.events.>"]);
        assert_eq!(config.durable, "agent-runtime-projection");
        assert_eq!(config.subject, "agent-runtime.events.host_app.>");
        assert_eq!(config.fetch_batch, 8);
        assert_eq!(config.max_wait, Duration::from_secs(5));
        assert_eq!(config.ack_wait, Duration::from_secs(45));
        assert_eq!(config.max_deliver, 5);
        assert_eq!(config.max_ack_pending, 64);
        assert_eq!(config.ensure_stream, Some(true));
        let seconds: Vec<u64> = config.backoff.iter().map(Duration::as_secs).collect();
        assert_eq!(seconds, [5, 15, 45, 120, 300]);
        assert_eq!(config.check(), Ok(()));
    }

    #[test]
    fn the_retry_delay_follows_the_schedule_and_stays_at_its_last_entry() {
        let config = NatsConsumerConfig::new("nats://n", "a");
        let delays: Vec<u64> = (0..=7).map(|d| config.retry_delay(d).as_secs()).collect();
        assert_eq!(delays, [5, 5, 15, 45, 120, 300, 300, 300]);
    }

    #[test]
    fn the_server_gets_a_durable_explicit_ack_consumer_without_a_backoff() {
        let config = NatsConsumerConfig::new("nats://n", "a");
        let server = config.consumer_config();
        assert!(server.backoff.is_empty(), "the schedule is applied by naks");
        assert_eq!(server.ack_wait, Duration::from_secs(45));
        assert_eq!(server.max_deliver, 5);
        assert_eq!(server.max_ack_pending, 64);
        assert_eq!(server.ack_policy, consumer::AckPolicy::Explicit);
        assert_eq!(server.deliver_policy, consumer::DeliverPolicy::All);
        assert_eq!(
            server.durable_name.as_deref(),
            Some("agent-runtime-projection")
        );
        assert_eq!(server.filter_subject, "agent-runtime.events.a.>");
    }

    #[test]
    fn a_given_subject_or_connection_is_kept_and_a_missing_one_refused() {
        let config = NatsConsumerConfig {
            url: "nats://n".into(),
            subject: "custom.>".into(),
            ..Default::default()
        }
        .normalized();
        assert_eq!(config.subject, "custom.>");
        assert_eq!(config.check(), Ok(()));
        let config = NatsConsumerConfig::new("", "a");
        assert_eq!(config.check(), Err(ConfigError::NoConnection));
        assert_eq!(config.ensure_stream, Some(false));
        let config = NatsConsumerConfig::new("nats://n", " ");
        assert_eq!(config.check(), Err(ConfigError::NoSubject));
    }

    #[test]
    fn debug_never_shows_the_url() {
        let config = NatsConsumerConfig::new("nats://user:secret@nats:4222", "a");
        assert!(!format!("{config:?}").contains("secret"));
    }
}
