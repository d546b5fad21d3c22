//! The `log` event sink (`AGENT_RUNTIME_EVENT_SINK=log`, the default): every published event also goes to the service log.
//!
//! Only the envelope is logged (type, app, run, sequence), never the payload, which may carry
//! tool output and secrets. Persisted events are logged at debug level and transient deltas at
//! trace, under [`TARGET`], so the default `info` filter costs one level check per event;
//! `AGENT_RUNTIME_LOG=info,agent_runtime::events=debug` shows them.

use std::sync::Arc;

use ar_core::event::{EventBus, LiveEvent};

/// The log target of event lines.
pub const TARGET: &str = "agent_runtime::events";

/// An [`EventBus`] that logs each event, then hands it to the bus it wraps.
pub struct LoggingBus {
    inner: Arc<dyn EventBus>,
}

impl LoggingBus {
    pub fn new(inner: Arc<dyn EventBus>) -> Self {
        LoggingBus { inner }
    }
}

impl EventBus for LoggingBus {
    fn publish(&self, event: LiveEvent) {
        match &event {
            LiveEvent::Persisted(stored) => tracing::debug!(
                target: TARGET,
                event_type = %stored.kind,
                app_id = %stored.app_id,
                run_id = %stored.run_id,
                sequence_no = stored.sequence_no,
                "event"
            ),
            LiveEvent::Transient(transient) => tracing::trace!(
                target: TARGET,
                event_type = %transient.event.kind(),
                app_id = %transient.app_id,
                run_id = %transient.run_id,
                "event"
            ),
        }
        self.inner.publish(event);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Records what reaches the wrapped bus.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl EventBus for Recorder {
        fn publish(&self, event: LiveEvent) {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(event.run_id().to_string());
        }
    }

    #[test]
    fn every_event_still_reaches_the_wrapped_bus() {
        let recorder = Arc::new(Recorder::default());
        let bus = LoggingBus::new(recorder.clone());
        for run in ["run_a", "run_b"] {
            bus.publish(LiveEvent::from(ar_core::event::TransientEvent {
                app_id: "app".into(),
                run_id: run.into(),
                host_run_id: String::new(),
                event: ar_core::RunEvent::AssistantMessageDelta(ar_core::event::MessageDelta {
                    message_id: "m".into(),
                    text: "x".into(),
                }),
            }));
        }
        assert_eq!(*recorder.0.lock().unwrap(), vec!["run_a", "run_b"]);
    }
}
