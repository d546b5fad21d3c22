//! The runtime's events from NATS JetStream, as the Go and Python SDKs' `NATSConsumer` reads them: a durable pull consumer with explicit acknowledgements and a progressive retry schedule.
//!
//! ```no_run
//! # async fn example() -> Result<(), ar_client::nats::NatsConsumerError> {
//! use ar_client::nats::{HandlerError, NatsConsumer, NatsConsumerConfig};
//! let consumer = NatsConsumer::new(NatsConsumerConfig {
//!     durable: "host-app-agent-runtime".into(),
//!     ..NatsConsumerConfig::new("nats://nats.internal:4222", "host_app")
//! });
//! let cancel = tokio_util::sync::CancellationToken::new();
//! consumer
//!     .run(&cancel, |event| async move {
//!         println!("{} {}", event.sequence_no, event.event_type);
//!         Ok::<(), HandlerError>(())
//!     })
//!     .await
//! # }
//! ```
//!
//! The subject conventions (`DefaultNATSStreamName`, `RenderNATSSubject`, `NATSAppToken`, …)
//! are `ar_wire::nats`'s, re-exported here.

mod config;
mod consumer;
mod pull;
mod settle;

pub use ar_wire::nats::{
    app_event_subject, app_token, render_subject, render_v2_subject, token, v2_app_event_subject,
    DEFAULT_STREAM_NAME, DEFAULT_STREAM_SUBJECT, DEFAULT_SUBJECT_TEMPLATE,
    DEFAULT_V2_SUBJECT_TEMPLATE,
};
pub use config::{
    default_backoff, ConfigError, NatsConsumerConfig, DEFAULT_ACK_WAIT, DEFAULT_CLIENT_NAME,
    DEFAULT_DURABLE, DEFAULT_FETCH_BATCH, DEFAULT_MAX_ACK_PENDING, DEFAULT_MAX_DELIVER,
    DEFAULT_MAX_WAIT,
};
pub use consumer::{stream_config, NatsConsumer, NatsConsumerError};
pub use settle::{decode_envelope, BoxError, DecodeError, HandlerError, Settlement};
