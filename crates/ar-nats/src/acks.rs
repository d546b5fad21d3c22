//! JetStream's acknowledgements of the publisher's messages, all on one subscription: each message is sent with a reply subject naming its slot, and JetStream answers there.
//!
//! The client's own publish-and-wait (`send_publish`) makes every message a request: a reply
//! channel, a registration in the client's request table and a timer each, and a task woken per
//! answer. At thousands of events a second that is most of the sink's work. Here the
//! publisher subscribes once to `{inbox}.>` and sends each copy of an event with the reply
//! subject `{inbox}.{epoch}.{slot}`; answers are read as a plain stream of messages, and
//! overdue ones are found by one periodic check of the slots in flight
//! ([`crate::flight::Flight::overdue`]). The epoch changes at every restart from the cursor, so
//! a late answer to an abandoned send is never taken for its slot's new one.

use async_nats::{HeaderMap, StatusCode, Subscriber};
use bytes::Bytes;
use futures::StreamExt as _;
use serde::Deserialize;

use crate::message::Outgoing;

/// What JetStream answered for one message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Stored (or recognised as a duplicate of a stored message).
    Stored { epoch: u64, slot: u64 },
    /// Refused: the stream's error, or no stream listens on the subject.
    Refused { epoch: u64, reason: String },
    /// A message on the subscription that is no answer of ours.
    Stray,
}

/// The subscription and the reply subjects built on it.
pub(crate) struct Acks {
    inbox: String,
    subscriber: Subscriber,
    epoch: u64,
}

impl Acks {
    pub(crate) async fn subscribe(
        client: &async_nats::Client,
    ) -> Result<Acks, async_nats::SubscribeError> {
        let inbox = client.new_inbox();
        let subscriber = client.subscribe(format!("{inbox}.>")).await?;
        Ok(Acks {
            inbox,
            subscriber,
            epoch: 0,
        })
    }

    /// Starts a new epoch: answers to what was sent before are ignored from now on.
    pub(crate) fn restart(&mut self) {
        self.epoch += 1;
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Sends `message` asking JetStream to answer for `slot`.
    pub(crate) async fn send(
        &self,
        client: &async_nats::Client,
        slot: u64,
        message: Outgoing,
    ) -> Result<(), async_nats::PublishError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            async_nats::header::NATS_MESSAGE_ID,
            message.message_id.as_str(),
        );
        let reply = format!("{}.{}.{slot}", self.inbox, self.epoch);
        client
            .publish_with_reply_and_headers(message.subject, reply, headers, message.payload)
            .await
    }

    /// The next answer; `None` once the subscription ended (the client closed).
    pub(crate) async fn next(&mut self) -> Option<Answer> {
        let message = self.subscriber.next().await?;
        Some(read_answer(
            &self.inbox,
            message.subject.as_str(),
            message.status,
            &message.payload,
        ))
    }

    /// An answer already here, without waiting.
    pub(crate) fn ready(&mut self) -> Option<Answer> {
        use futures::FutureExt as _;
        self.next().now_or_never().flatten()
    }
}

#[derive(Deserialize)]
struct PubAck {
    #[serde(default)]
    error: Option<PubAckError>,
}

#[derive(Deserialize)]
struct PubAckError {
    #[serde(default)]
    code: u16,
    #[serde(default)]
    description: String,
}

/// Reads one message of the subscription: its subject names the slot, its payload is
/// JetStream's answer (`{"stream":…,"seq":…}` or `{"error":{…}}`), a 503 status means no
/// stream takes the subject.
fn read_answer(inbox: &str, subject: &str, status: Option<StatusCode>, payload: &Bytes) -> Answer {
    let Some((epoch, slot)) = subject
        .strip_prefix(inbox)
        .and_then(|rest| rest.strip_prefix('.'))
        .and_then(|rest| rest.split_once('.'))
        .and_then(|(epoch, slot)| Some((epoch.parse().ok()?, slot.parse().ok()?)))
    else {
        return Answer::Stray;
    };
    let reason = if status == Some(StatusCode::NO_RESPONDERS) {
        "no stream takes the subject (no responders)".to_owned()
    } else {
        match serde_json::from_slice::<PubAck>(payload) {
            Ok(PubAck { error: None }) => return Answer::Stored { epoch, slot },
            Ok(PubAck { error: Some(error) }) => format!(
                "JetStream refused the message ({}): {}",
                error.code, error.description
            ),
            Err(error) => format!("an unreadable JetStream answer: {error}"),
        }
    };
    Answer::Refused { epoch, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(subject: &str, status: Option<StatusCode>, payload: &str) -> Answer {
        read_answer(
            "_INBOX.x",
            subject,
            status,
            &Bytes::copy_from_slice(payload.as_bytes()),
        )
    }

    #[test]
    fn answers_name_their_slot_and_say_whether_the_stream_stored_it() {
        let stored = r#"{"stream":"S","seq":7}"#;
        assert_eq!(
            answer("_INBOX.x.2.41", None, stored),
            Answer::Stored { epoch: 2, slot: 41 }
        );
        let duplicate = r#"{"stream":"S","seq":7,"duplicate":true}"#;
        assert_eq!(
            answer("_INBOX.x.0.1", None, duplicate),
            Answer::Stored { epoch: 0, slot: 1 }
        );
        let refused =
            r#"{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"}}"#;
        assert!(
            matches!(answer("_INBOX.x.3.1", None, refused), Answer::Refused { epoch: 3, reason } if reason.contains("maximum messages"))
        );
        assert!(matches!(
            answer("_INBOX.x.0.1", Some(StatusCode::NO_RESPONDERS), ""),
            Answer::Refused { .. }
        ));
        assert!(matches!(
            answer("_INBOX.x.0.1", None, "garbage"),
            Answer::Refused { .. }
        ));
        assert_eq!(answer("_INBOX.y.0.1", None, stored), Answer::Stray);
        assert_eq!(answer("_INBOX.x.zero.1", None, stored), Answer::Stray);
    }
}
