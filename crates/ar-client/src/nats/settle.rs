//! What becomes of one message: its envelope decoded, the handler's answer ([`HandlerError`]) turned into a [`Settlement`] (ack, or nak with the schedule's delay), as the SDKs do.

use std::time::Duration;

use ar_wire::EventEnvelope;
use async_nats::jetstream::AckKind;

use super::config::NatsConsumerConfig;

/// A handler's boxed error cause.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What a handler answers instead of `Ok(())` (the SDKs' `ErrRetryEvent`, `ErrDropEvent`,
/// or any other error).
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// Deliver the event again after the schedule's delay (`RetryEvent`).
    #[error("retry agent-runtime event")]
    Retry,
    /// Never deliver the event again (`DropEvent`): it is acknowledged.
    #[error("drop agent-runtime event")]
    Drop,
    /// The handler failed; retried like [`HandlerError::Retry`].
    #[error("agent-runtime event handler failed: {0}")]
    Failed(#[source] BoxError),
}

impl HandlerError {
    /// A failure with its cause.
    pub fn failed(cause: impl Into<BoxError>) -> Self {
        HandlerError::Failed(cause.into())
    }
}

/// A message body that is not an event envelope.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("not an event envelope: {0}")]
    Json(#[from] serde_json::Error),
    #[error("an event envelope requires app_id, run_id and type")]
    Incomplete,
}

/// Reads a v1 or v2 envelope (v2 is v1 with `schema_version`, `turn_id`, `segment_id`,
/// `revision`); one without app, run or type is refused, as the SDKs refuse it.
pub fn decode_envelope(payload: &[u8]) -> Result<EventEnvelope, DecodeError> {
    let envelope: EventEnvelope = serde_json::from_slice(payload)?;
    let blank = |value: &str| value.trim().is_empty();
    if blank(&envelope.app_id) || blank(&envelope.run_id) || blank(&envelope.event_type) {
        return Err(DecodeError::Incomplete);
    }
    Ok(envelope)
}

/// How one delivery ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// Handled: acknowledged.
    Handled,
    /// The handler dropped it: acknowledged, never delivered again.
    Dropped,
    /// Not an envelope: acknowledged (it would never decode), with a warning.
    Invalid,
    /// The handler failed on the last delivery `max_deliver` allows: acknowledged, with an
    /// error logged, so the consumer moves on.
    Exhausted,
    /// Negatively acknowledged: delivered again after the delay.
    Retry(Duration),
}

impl Settlement {
    /// The handler's answer to delivery number `deliveries` of a decoded event.
    pub fn of(
        outcome: &Result<(), HandlerError>,
        deliveries: i64,
        config: &NatsConsumerConfig,
    ) -> Settlement {
        match outcome {
            Ok(()) => Settlement::Handled,
            Err(HandlerError::Drop) => Settlement::Dropped,
            Err(HandlerError::Retry | HandlerError::Failed(_))
                if deliveries >= config.max_deliver =>
            {
                Settlement::Exhausted
            }
            Err(HandlerError::Retry | HandlerError::Failed(_)) => {
                Settlement::Retry(config.retry_delay(deliveries))
            }
        }
    }

    /// The acknowledgement sent to the server.
    pub fn ack_kind(self) -> AckKind {
        match self {
            Settlement::Handled
            | Settlement::Dropped
            | Settlement::Invalid
            | Settlement::Exhausted => AckKind::Ack,
            Settlement::Retry(delay) => AckKind::Nak(Some(delay)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(max_deliver: i64) -> NatsConsumerConfig {
        NatsConsumerConfig {
            max_deliver,
            ..NatsConsumerConfig::new("nats://n", "a")
        }
    }

    #[test]
    fn answers_become_acks_or_naks_with_the_schedules_delay() {
        let config = config(5);
        let failed = || Err(HandlerError::failed("db down"));
        assert_eq!(Settlement::of(&Ok(()), 1, &config), Settlement::Handled);
        assert_eq!(
            Settlement::of(&Err(HandlerError::Drop), 1, &config),
            Settlement::Dropped
        );
        let retry = |d| Settlement::of(&Err(HandlerError::Retry), d, &config);
        assert_eq!(retry(1), Settlement::Retry(Duration::from_secs(5)));
        assert_eq!(retry(2), Settlement::Retry(Duration::from_secs(15)));
        assert_eq!(retry(4), Settlement::Retry(Duration::from_secs(120)));
        assert_eq!(retry(5), Settlement::Exhausted);
        assert_eq!(
            Settlement::of(&failed(), 3, &config),
            Settlement::Retry(Duration::from_secs(45))
        );
        assert_eq!(Settlement::of(&failed(), 5, &config), Settlement::Exhausted);
        assert!(matches!(Settlement::Dropped.ack_kind(), AckKind::Ack));
        assert!(matches!(Settlement::Exhausted.ack_kind(), AckKind::Ack));
        assert!(matches!(Settlement::Invalid.ack_kind(), AckKind::Ack));
        let nak = retry(1).ack_kind();
        assert!(
            matches!(nak, AckKind::Nak(Some(d)) if d == Duration::from_secs(5)),
            "{nak:?}"
        );
    }

    #[test]
    fn v1_and_v2_envelopes_decode_and_incomplete_ones_are_refused() {
        let v1 = br#"{"event_id":"e1","sent_at":"2026-01-02T03:04:05Z","sequence_no":3,
            "app_id":"a","run_id":"r","type":"run.started","data":{"host_run_id":"h"}}"#;
        let event = decode_envelope(v1).expect("v1");
        assert_eq!(
            (event.sequence_no, event.event_type.as_str()),
            (3, "run.started")
        );
        assert!(event.schema_version.is_empty());
        let v2 = br#"{"event_id":"e2","sent_at":"2026-01-02T03:04:05Z","sequence_no":4,
            "app_id":"a","run_id":"r","schema_version":"2","segment_id":"m1","turn_id":"m1",
            "revision":4,"type":"assistant_message_completed","data":{"message_id":"m1"}}"#;
        let event = decode_envelope(v2).expect("v2");
        assert_eq!((event.schema_version.as_str(), event.revision), ("2", 4));
        assert_eq!(event.segment_id, "m1");
        assert!(matches!(
            decode_envelope(b"not json"),
            Err(DecodeError::Json(_))
        ));
        assert!(matches!(
            decode_envelope(br#"{"app_id":"a","run_id":" ","type":"run.started"}"#),
            Err(DecodeError::Incomplete)
        ));
    }
}
