//! The events stream as the contract defines it (file storage, limits retention, discard old, 2 min duplicate window, 7 days, 512 MiB), created or updated at startup.

use std::time::Duration;

use async_nats::jetstream::{self, stream};

/// JetStream's duplicate window: a republish within it (after a crash, or a retry after a
/// lost acknowledgement) is dropped by message id.
pub const DUPLICATE_WINDOW: Duration = ar_wire::nats::STREAM_DUPLICATE_WINDOW;
/// How long the stream keeps an event.
pub const MAX_AGE: Duration = ar_wire::nats::STREAM_MAX_AGE;
/// How much the stream keeps before it discards its oldest events.
pub const MAX_BYTES: i64 = ar_wire::nats::STREAM_MAX_BYTES;

/// The stream `name` over `subjects`.
pub fn config(name: &str, subjects: &[String]) -> stream::Config {
    stream::Config {
        name: name.to_string(),
        subjects: subjects.to_vec(),
        storage: stream::StorageType::File,
        retention: stream::RetentionPolicy::Limits,
        discard: stream::DiscardPolicy::Old,
        duplicate_window: DUPLICATE_WINDOW,
        max_age: MAX_AGE,
        max_bytes: MAX_BYTES,
        ..Default::default()
    }
}

/// Creates the stream, or updates it to `config` when it exists.
pub async fn ensure(
    js: &jetstream::Context,
    config: stream::Config,
) -> Result<(), jetstream::context::CreateStreamError> {
    js.create_or_update_stream(config).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contracts_limits() {
        let config = config("EVENTS", &["a.>".to_string(), "b.>".to_string()]);
        assert_eq!(config.name, "EVENTS");
        assert_eq!(config.subjects, vec!["a.>", "b.>"]);
        assert_eq!(config.storage, stream::StorageType::File);
        assert_eq!(config.retention, stream::RetentionPolicy::Limits);
        assert_eq!(config.discard, stream::DiscardPolicy::Old);
        assert_eq!(config.duplicate_window, Duration::from_secs(120));
        assert_eq!(config.max_age, Duration::from_secs(604_800));
        assert_eq!(config.max_bytes, 536_870_912);
    }
}
