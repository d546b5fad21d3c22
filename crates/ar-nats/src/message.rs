//! The NATS messages of one event: a v1 copy on the v1 subject family for every app, and for a v2 app also a v2 copy on the v2 family.
//!
//! A persisted event's copy must fit the server's `max_payload` (1 MiB by default), or the
//! publisher could never get past it: the log is published in order, so one event NATS refuses
//! would hold back every event after it, for good. Such a copy carries the event with its data
//! replaced by a notice (`{"omitted": {"reason": "exceeds_nats_max_payload", "bytes": …,
//! "max_payload": …}}`, and `host_run_id` when the event has one): the run's sequence stays
//! whole in the stream and the consumer reads the event itself from the run's history.
//!
//! The original's global sink puts every event on the v1 family (what the Python SDK's default
//! consumer reads), and its v2 publisher puts a v2 app's events on the v2 family too. Both
//! families usually live in one stream, whose duplicate window compares `Nats-Msg-Id`s: the
//! v1 copy carries the event id, the v2 copy the event id with `:v2` appended, so neither
//! drops the other, and each is stable across republishes (which the window then drops).

use std::collections::HashSet;

use ar_core::event::{StoredEvent, TransientEvent};
use ar_events::RenderFn;
use ar_wire::nats::SubjectTemplate;
use bytes::Bytes;

/// Appended to an event's id for the message id of its v2 copy.
pub const V2_MESSAGE_ID_SUFFIX: &str = ":v2";

/// NATS's default `max_payload`, the limit until the server has said its own.
pub const DEFAULT_MAX_PAYLOAD: usize = 1 << 20;

/// The bytes a message's header block adds besides the message id: `NATS/1.0\r\n`,
/// `Nats-Msg-Id: ` and `\r\n` after the id, and the blank line (the server counts headers and
/// payload together against `max_payload`).
const HEADER_BYTES: usize = 10 + 13 + 2 + 2;

/// The envelope renderers (the server's v1 and v2 envelopes as JSON), so the wire forms are
/// made in one place.
#[derive(Clone)]
pub struct Renderers {
    pub v1: RenderFn,
    pub v2: RenderFn,
}

impl std::fmt::Debug for Renderers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Renderers")
    }
}

/// One message to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    pub subject: String,
    /// `Nats-Msg-Id`.
    pub message_id: String,
    pub payload: Bytes,
}

/// Where an app's events go and in which forms.
#[derive(Debug, Clone)]
pub struct Routes {
    /// Subject template of the v1 family (`{app_id}`, `{run_id}`, `{event_type}`/`{type}`).
    pub v1_template: SubjectTemplate,
    /// Subject template of the v2 family.
    pub v2_template: SubjectTemplate,
    /// Apps whose event protocol is v2.
    pub v2_apps: HashSet<String>,
    pub render: Renderers,
}

impl Routes {
    /// The messages of a persisted event, v1 copy first, each within `max_payload` (a copy
    /// that would not fit carries the event with its data omitted; see the module's docs).
    pub fn messages(&self, event: &StoredEvent, max_payload: usize) -> Vec<Outgoing> {
        let mut out = Vec::with_capacity(2);
        out.push(copy(
            &self.v1_template,
            &self.render.v1,
            event,
            event.event_id.clone(),
            max_payload,
        ));
        if self.v2_apps.contains(&event.app_id) {
            out.push(copy(
                &self.v2_template,
                &self.render.v2,
                event,
                format!("{}{V2_MESSAGE_ID_SUFFIX}", event.event_id),
                max_payload,
            ));
        }
        out
    }

    /// The messages of a transient delta: as a persisted event would be, with an id of its own
    /// and sequence 0 (it has no place in the durable log, so consumers can tell it apart). A
    /// delta too large for NATS is not cut down: its publish fails and it is dropped, as any
    /// delta NATS does not take.
    pub fn live_messages(&self, event: &TransientEvent) -> Vec<Outgoing> {
        self.messages(&as_envelope_source(event), usize::MAX)
    }
}

/// One copy of `event` in the form `render` writes, within `max_payload`.
fn copy(
    template: &SubjectTemplate,
    render: &RenderFn,
    event: &StoredEvent,
    message_id: String,
    max_payload: usize,
) -> Outgoing {
    let mut payload = Bytes::from(render(event));
    let size = HEADER_BYTES + message_id.len() + payload.len();
    if size > max_payload {
        tracing::warn!(
            event_id = %event.event_id,
            run_id = %event.run_id,
            bytes = size,
            max_payload,
            "an event is too large for NATS: published with its data omitted (the run's history has it)"
        );
        payload = Bytes::from(render(&omitted(event, size, max_payload)));
    }
    Outgoing {
        subject: subject(template, event),
        message_id,
        payload,
    }
}

/// `event` with its data replaced by the notice that it was `bytes` long, over `max_payload`.
fn omitted(event: &StoredEvent, bytes: usize, max_payload: usize) -> StoredEvent {
    let mut data = ar_core::JsonMap::new();
    if let Some(host_run_id) = event.data.get("host_run_id") {
        data.insert("host_run_id".into(), host_run_id.clone());
    }
    data.insert(
        "omitted".into(),
        serde_json::json!({
            "reason": "exceeds_nats_max_payload",
            "bytes": bytes,
            "max_payload": max_payload,
        }),
    );
    event.with_data(data.into())
}

fn subject(template: &SubjectTemplate, event: &StoredEvent) -> String {
    template.render(&event.app_id, &event.run_id, event.kind.as_str())
}

/// A transient event in the shape the renderers take: a fresh id, sent now, no position or
/// sequence, and `host_run_id` in its data as persisted events carry it.
pub fn as_envelope_source(event: &TransientEvent) -> StoredEvent {
    StoredEvent {
        position: 0,
        event_id: ar_core::ids::new_id(ar_core::ids::prefix::EVENT),
        app_id: event.app_id.clone(),
        run_id: event.run_id.clone(),
        host_run_id: event.host_run_id.clone(),
        sequence_no: 0,
        kind: event.event.kind(),
        data: event.event.data(&event.host_run_id).into(),
        created_at: chrono::Utc::now(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ar_core::event::MessageDelta;
    use ar_core::{EventKind, RunEvent};
    use serde_json::{json, Value};

    use super::*;

    fn routes() -> Routes {
        let render = |form: &'static str| -> RenderFn {
            Arc::new(move |event: &StoredEvent| {
                format!("{form}:{}:{}", event.event_id, event.sequence_no).into_bytes()
            })
        };
        Routes {
            v1_template: SubjectTemplate::parse("agent-runtime.events.{app_id}.{run_id}.{type}"),
            v2_template: SubjectTemplate::parse(ar_wire::nats::DEFAULT_V2_SUBJECT_TEMPLATE),
            v2_apps: HashSet::from(["v2.app".to_string()]),
            render: Renderers {
                v1: render("v1"),
                v2: render("v2"),
            },
        }
    }

    fn stored(app_id: &str) -> StoredEvent {
        StoredEvent {
            position: 7,
            event_id: "evt_1".into(),
            app_id: app_id.into(),
            run_id: "run 1".into(),
            host_run_id: String::new(),
            sequence_no: 3,
            kind: EventKind::RunStarted,
            data: Default::default(),
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn a_v1_apps_event_goes_to_the_v1_family_only() {
        let messages = routes().messages(&stored("host.app"), usize::MAX);
        assert_eq!(
            messages,
            vec![Outgoing {
                subject: "agent-runtime.events.host_app.run_1.run.started".into(),
                message_id: "evt_1".into(),
                payload: Bytes::from_static(b"v1:evt_1:3"),
            }]
        );
    }

    #[test]
    fn a_v2_apps_event_goes_to_both_families_with_distinct_stable_ids() {
        let routes = routes();
        let messages = routes.messages(&stored("v2.app"), usize::MAX);
        let got: Vec<(&str, &str, &[u8])> = messages
            .iter()
            .map(|m| (m.subject.as_str(), m.message_id.as_str(), &m.payload[..]))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "agent-runtime.events.v2_app.run_1.run.started",
                    "evt_1",
                    &b"v1:evt_1:3"[..]
                ),
                (
                    "agent-runtime.events.v2.v2_app.run_1.run.started",
                    "evt_1:v2",
                    &b"v2:evt_1:3"[..]
                ),
            ]
        );
        assert_eq!(
            messages,
            routes.messages(&stored("v2.app"), usize::MAX),
            "stable"
        );
    }

    #[test]
    fn a_copy_over_max_payload_carries_the_event_with_its_data_omitted() {
        let data = |event: &StoredEvent| serde_json::to_vec(&*event.data).unwrap();
        let routes = Routes {
            render: Renderers {
                v1: Arc::new(data),
                v2: Arc::new(data),
            },
            ..routes()
        };
        let mut event = stored("v2.app");
        let mut map = ar_core::JsonMap::new();
        map.insert("host_run_id".into(), "host-9".into());
        map.insert("text".into(), "x".repeat(2000).into());
        event.data = map.into();
        let whole = routes.messages(&event, 2100);
        let bodies: Vec<Value> = whole
            .iter()
            .map(|m| serde_json::from_slice(&m.payload).unwrap())
            .collect();
        assert_eq!(bodies[0]["text"].as_str().map(str::len), Some(2000));
        assert_eq!(bodies[0], bodies[1], "both copies fit");

        let cut = routes.messages(&event, 1000);
        assert_eq!(cut.len(), 2);
        for (message, family) in cut.iter().zip(&whole) {
            assert_eq!(
                (&message.subject, &message.message_id),
                (&family.subject, &family.message_id),
                "the same subject and id: the run's sequence stays whole"
            );
            let size = HEADER_BYTES + message.message_id.len() + family.payload.len();
            let body: Value = serde_json::from_slice(&message.payload).unwrap();
            assert_eq!(
                body,
                json!({
                    "host_run_id": "host-9",
                    "omitted": {"reason": "exceeds_nats_max_payload", "bytes": size, "max_payload": 1000}
                })
            );
        }
    }

    #[test]
    fn a_delta_gets_an_id_of_its_own_sequence_zero_and_the_host_run_id() {
        let delta = TransientEvent {
            app_id: "v2.app".into(),
            run_id: "run_1".into(),
            host_run_id: "host-9".into(),
            event: RunEvent::AssistantMessageDelta(MessageDelta {
                message_id: "m".into(),
                text: "hi".into(),
            }),
        };
        let source = as_envelope_source(&delta);
        assert!(source.event_id.starts_with("evt_"));
        assert_eq!((source.sequence_no, source.position), (0, 0));
        assert_eq!(source.kind, EventKind::AssistantMessageDelta);
        assert_eq!(source.data["host_run_id"], "host-9");
        assert_eq!(source.data["text"], "hi");
        let messages = routes().live_messages(&delta);
        assert_eq!(messages.len(), 2);
        assert_eq!(
            messages[1].message_id,
            format!("{}:v2", messages[0].message_id)
        );
        assert_ne!(
            routes().live_messages(&delta)[0].message_id,
            messages[0].message_id,
            "each delta is its own message"
        );
    }
}
