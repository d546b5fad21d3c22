//! The link between the replicas of one deployment: what one process tells the others (a run's live events, a signal for a run's owner), the [`ReplicaLink`] port adapters implement, and the one wire form of its messages.
//!
//! A replica publishes every live event of the runs it owns to the link, in order; the others
//! hand them to their own SSE readers, which keep the stream gap-free and duplicate-free by
//! sequence number (the store stays the truth; the link only makes them prompt). A request that
//! must reach a run's owner (cancel, pause, steer) is sent to every replica and acted on by the
//! one that owns the run. Adapters may carry only a bounded payload (PostgreSQL `NOTIFY`: under
//! 8000 bytes): a persisted event that does not fit travels as [`LinkMessage::Appended`], a
//! wake-up that makes readers read the store; a transient delta that does not fit is dropped
//! (deltas are best effort).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::event::{
    ActivityDelta, LiveEvent, MessageDelta, StoredEvent, ToolCallArgsDelta, TransientEvent,
};
use crate::{EventKind, JsonMap, RunEvent};

/// What a request received by one replica asks of a run's owner, wherever it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "signal", content = "text", rename_all = "snake_case")]
pub enum OwnerSignal {
    /// The run was cancelled (committed): stop at once, aborting the call in flight.
    Cancel,
    /// A pause was requested (committed): pause at the next safe point, aborting a model
    /// call in flight (a tool call in flight finishes first).
    Pause,
    /// A user message for the loop's next safe boundary (studio steering).
    Steer(String),
}

/// One message between replicas.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkMessage {
    /// A live event of a run owned by the sender.
    Live(Box<LiveEvent>),
    /// A persisted event too large for the link: read it from the store.
    Appended {
        app_id: String,
        run_id: String,
        sequence_no: i64,
    },
    /// For the owner of `run_id`.
    Owner { run_id: String, signal: OwnerSignal },
    /// A reader on the sender watches `run_id`: its owner sends the run's live events for the
    /// next few seconds (renewed while the reader stays), and nothing for runs nobody watches.
    Watching { run_id: String },
}

/// The sending side of the link. Receiving is the adapter's own (a stream of
/// [`LinkMessage`]s, without the sender's own messages).
pub trait ReplicaLink: Send + Sync + 'static {
    /// Sends to the other replicas, best effort: never waits (a full queue drops the message).
    fn send(&self, message: LinkMessage);
}

/// Why bytes received from the link were not a batch of messages.
#[derive(Debug, thiserror::Error)]
pub enum LinkDecodeError {
    #[error("not a replica link batch: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{0:?} is not a transient event")]
    NotTransient(EventKind),
}

/// A decoded batch: who sent it and its messages, in the order sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub origin: String,
    pub messages: Vec<LinkMessage>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
enum Wire {
    Persisted {
        position: i64,
        event_id: String,
        app_id: String,
        run_id: String,
        host_run_id: String,
        sequence_no: i64,
        kind: EventKind,
        data: JsonMap,
        created_at: DateTime<Utc>,
    },
    Transient {
        app_id: String,
        run_id: String,
        host_run_id: String,
        kind: EventKind,
        data: JsonMap,
    },
    Appended {
        app_id: String,
        run_id: String,
        sequence_no: i64,
    },
    Owner {
        run_id: String,
        #[serde(flatten)]
        signal: OwnerSignal,
    },
    Watching {
        run_id: String,
    },
}

#[derive(Deserialize)]
struct WireBatch {
    origin: String,
    messages: Vec<Wire>,
}

impl From<&LinkMessage> for Wire {
    fn from(message: &LinkMessage) -> Wire {
        match message {
            LinkMessage::Live(event) => live_wire(event),
            LinkMessage::Appended {
                app_id,
                run_id,
                sequence_no,
            } => Wire::Appended {
                app_id: app_id.clone(),
                run_id: run_id.clone(),
                sequence_no: *sequence_no,
            },
            LinkMessage::Owner { run_id, signal } => Wire::Owner {
                run_id: run_id.clone(),
                signal: signal.clone(),
            },
            LinkMessage::Watching { run_id } => Wire::Watching {
                run_id: run_id.clone(),
            },
        }
    }
}

fn live_wire(event: &LiveEvent) -> Wire {
    match event {
        LiveEvent::Persisted(event) => persisted_wire(event),
        LiveEvent::Transient(event) => Wire::Transient {
            app_id: event.app_id.clone(),
            run_id: event.run_id.clone(),
            host_run_id: event.host_run_id.clone(),
            kind: event.event.kind(),
            data: event.event.data(""),
        },
    }
}

fn persisted_wire(event: &StoredEvent) -> Wire {
    Wire::Persisted {
        position: event.position,
        event_id: event.event_id.clone(),
        app_id: event.app_id.clone(),
        run_id: event.run_id.clone(),
        host_run_id: event.host_run_id.clone(),
        sequence_no: event.sequence_no,
        kind: event.kind,
        data: (*event.data).clone(),
        created_at: event.created_at,
    }
}

impl TryFrom<Wire> for LinkMessage {
    type Error = LinkDecodeError;

    fn try_from(wire: Wire) -> Result<LinkMessage, LinkDecodeError> {
        Ok(match wire {
            Wire::Persisted {
                position,
                event_id,
                app_id,
                run_id,
                host_run_id,
                sequence_no,
                kind,
                data,
                created_at,
            } => LinkMessage::Live(Box::new(LiveEvent::from(StoredEvent {
                position,
                event_id,
                app_id,
                run_id,
                host_run_id,
                sequence_no,
                kind,
                data: data.into(),
                created_at,
            }))),
            Wire::Transient {
                app_id,
                run_id,
                host_run_id,
                kind,
                data,
            } => LinkMessage::Live(Box::new(LiveEvent::from(TransientEvent {
                app_id,
                run_id,
                host_run_id,
                event: transient_event(kind, data)?,
            }))),
            Wire::Appended {
                app_id,
                run_id,
                sequence_no,
            } => LinkMessage::Appended {
                app_id,
                run_id,
                sequence_no,
            },
            Wire::Owner { run_id, signal } => LinkMessage::Owner { run_id, signal },
            Wire::Watching { run_id } => LinkMessage::Watching { run_id },
        })
    }
}

/// A transient event from its kind and `data` (the only kinds that are never persisted).
fn transient_event(kind: EventKind, data: JsonMap) -> Result<RunEvent, LinkDecodeError> {
    let data = serde_json::Value::Object(data);
    Ok(match kind {
        EventKind::AssistantMessageDelta => {
            RunEvent::AssistantMessageDelta(serde_json::from_value::<MessageDelta>(data)?)
        }
        EventKind::ReasoningMessageDelta => {
            RunEvent::ReasoningMessageDelta(serde_json::from_value::<MessageDelta>(data)?)
        }
        EventKind::ToolCallArgsDelta => {
            RunEvent::ToolCallArgsDelta(serde_json::from_value::<ToolCallArgsDelta>(data)?)
        }
        EventKind::ActivityDelta => {
            RunEvent::ActivityDelta(serde_json::from_value::<ActivityDelta>(data)?)
        }
        other => return Err(LinkDecodeError::NotTransient(other)),
    })
}

/// One message as its wire JSON, within `limit` bytes: a persisted event too large goes as
/// its [`LinkMessage::Appended`] wake-up; `None` when even that does not fit (a transient
/// delta too large, or a limit below any message).
pub fn encode_message(message: &LinkMessage, limit: usize) -> Option<Vec<u8>> {
    let encoded = serde_json::to_vec(&Wire::from(message)).ok()?;
    if encoded.len() <= limit {
        return Some(encoded);
    }
    let LinkMessage::Live(event) = message else {
        return None;
    };
    let LiveEvent::Persisted(event) = &**event else {
        return None;
    };
    let wake = LinkMessage::Appended {
        app_id: event.app_id.clone(),
        run_id: event.run_id.clone(),
        sequence_no: event.sequence_no,
    };
    serde_json::to_vec(&Wire::from(&wake))
        .ok()
        .filter(|encoded| encoded.len() <= limit)
}

/// Packs encoded messages (from [`encode_message`]) into batches of at most `limit` bytes,
/// in order: `{"origin":…,"messages":[…]}`.
#[derive(Debug)]
pub struct Packer {
    head: Vec<u8>,
    buffer: Vec<u8>,
    count: usize,
    limit: usize,
}

impl Packer {
    pub fn new(origin: &str, limit: usize) -> Packer {
        let origin = serde_json::to_string(origin).unwrap_or_else(|_| "\"\"".into());
        let head = format!("{{\"origin\":{origin},\"messages\":[").into_bytes();
        Packer {
            buffer: head.clone(),
            head,
            count: 0,
            limit,
        }
    }

    /// Adds a message; false (and nothing added) when it would make the batch too large.
    /// An empty batch always takes one message that fits the limit on its own.
    pub fn push(&mut self, encoded: &[u8]) -> bool {
        let separator = usize::from(self.count > 0);
        if self.buffer.len() + separator + encoded.len() + 2 > self.limit && self.count > 0 {
            return false;
        }
        if separator == 1 {
            self.buffer.push(b',');
        }
        self.buffer.extend_from_slice(encoded);
        self.count += 1;
        true
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The batch so far (`None` when empty); the packer starts a new one.
    pub fn take(&mut self) -> Option<Vec<u8>> {
        if self.count == 0 {
            return None;
        }
        let mut batch = std::mem::replace(&mut self.buffer, self.head.clone());
        batch.extend_from_slice(b"]}");
        self.count = 0;
        Some(batch)
    }

    /// Bytes of the batch header: a message must fit `limit` minus this (and two) to travel.
    pub fn overhead(&self) -> usize {
        self.head.len() + 2
    }
}

/// Decodes one batch received from the link.
pub fn decode_batch(bytes: &[u8]) -> Result<Batch, LinkDecodeError> {
    let wire: WireBatch = serde_json::from_slice(bytes)?;
    let messages = wire
        .messages
        .into_iter()
        .map(LinkMessage::try_from)
        .collect::<Result<_, _>>()?;
    Ok(Batch {
        origin: wire.origin,
        messages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::MessageDelta;

    fn delta(text: &str) -> LinkMessage {
        LinkMessage::Live(Box::new(LiveEvent::from(TransientEvent {
            app_id: "app".into(),
            run_id: "run_1".into(),
            host_run_id: "h".into(),
            event: RunEvent::AssistantMessageDelta(MessageDelta {
                message_id: "m".into(),
                text: text.into(),
            }),
        })))
    }

    fn persisted(sequence_no: i64, text: &str) -> LinkMessage {
        let mut data = JsonMap::new();
        data.insert("text".into(), text.into());
        LinkMessage::Live(Box::new(LiveEvent::from(StoredEvent {
            position: 40 + sequence_no,
            event_id: format!("evt_{sequence_no}"),
            app_id: "app".into(),
            run_id: "run_1".into(),
            host_run_id: String::new(),
            sequence_no,
            kind: EventKind::AssistantMessageCompleted,
            data: data.into(),
            created_at: DateTime::from_timestamp_micros(1_700_000_000_123_456).unwrap(),
        })))
    }

    fn round_trip(messages: &[LinkMessage], limit: usize) -> Vec<Batch> {
        let mut packer = Packer::new("inst_a", limit);
        let mut batches = Vec::new();
        for message in messages {
            let encoded = encode_message(message, limit - packer.overhead()).expect("fits");
            if !packer.push(&encoded) {
                batches.extend(packer.take());
                assert!(packer.push(&encoded));
            }
        }
        batches.extend(packer.take());
        batches
            .iter()
            .map(|bytes| {
                assert!(bytes.len() <= limit, "a batch over the limit");
                decode_batch(bytes).expect("decodes")
            })
            .collect()
    }

    #[test]
    fn every_kind_of_message_comes_back_equal_and_in_order() {
        let messages = vec![
            persisted(1, "hello"),
            delta("a"),
            delta("b\u{e9}\"quoted\""),
            LinkMessage::Owner {
                run_id: "run_1".into(),
                signal: OwnerSignal::Steer("go on".into()),
            },
            LinkMessage::Owner {
                run_id: "run_1".into(),
                signal: OwnerSignal::Cancel,
            },
            LinkMessage::Watching {
                run_id: "run_1".into(),
            },
            persisted(2, "bye"),
        ];
        let batches = round_trip(&messages, 7900);
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].origin, "inst_a");
        assert_eq!(batches[0].messages, messages);
    }

    #[test]
    fn batches_split_at_the_limit_and_keep_the_order() {
        let messages: Vec<_> = (0..50).map(|n| delta(&"x".repeat(n * 3))).collect();
        let batches = round_trip(&messages, 600);
        assert!(batches.len() > 3, "{} batches", batches.len());
        let back: Vec<_> = batches.into_iter().flat_map(|b| b.messages).collect();
        assert_eq!(back, messages);
    }

    #[test]
    fn a_persisted_event_too_large_travels_as_a_wake_up_and_a_large_delta_not_at_all() {
        let big = "y".repeat(9000);
        let encoded = encode_message(&persisted(7, &big), 7900).expect("a wake-up");
        let batch = decode_batch(
            format!(
                "{{\"origin\":\"o\",\"messages\":[{}]}}",
                String::from_utf8(encoded).unwrap()
            )
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(
            batch.messages,
            vec![LinkMessage::Appended {
                app_id: "app".into(),
                run_id: "run_1".into(),
                sequence_no: 7
            }]
        );
        assert_eq!(encode_message(&delta(&big), 7900), None);
    }

    #[test]
    fn a_persisted_kind_sent_as_transient_is_refused() {
        let bytes = br#"{"origin":"o","messages":[{"t":"transient","app_id":"a","run_id":"r","host_run_id":"","kind":"run.completed","data":{}}]}"#;
        assert!(matches!(
            decode_batch(bytes),
            Err(LinkDecodeError::NotTransient(EventKind::RunCompleted))
        ));
    }
}
