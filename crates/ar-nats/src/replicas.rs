//! The replica link over NATS core subjects (no JetStream): each replica publishes the live events of the runs it owns and the owner signals of the requests it receives, and subscribes to the others'.
//!
//! Subjects are the link's own, apart from the JetStream stream's: `{prefix}.live.{run_id}`
//! for a run's live events, `{prefix}.owner` for owner signals (sent to every replica; the
//! one owning the run acts) and `{prefix}.watch` for the runs a replica's SSE readers watch
//! (only those runs' events are sent). One task publishes what [`ReplicaLink::send`] queued, in order, on
//! the sink's connection, so a run's events reach the other replicas in the order published;
//! nothing is sent while disconnected (a reader's poll of the store covers persisted events;
//! deltas are best effort) and a full queue drops.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ar_core::replica::{decode_batch, encode_message, LinkMessage, Packer, ReplicaLink};
use futures::stream::BoxStream;
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::NatsError;

/// Messages waiting to be published; beyond it they are dropped (and counted).
const QUEUE: usize = 8192;

/// The sending side: a bounded queue in front of the publishing task.
pub struct NatsReplicaLink {
    queue: mpsc::Sender<LinkMessage>,
    dropped: AtomicU64,
}

impl ReplicaLink for NatsReplicaLink {
    fn send(&self, message: LinkMessage) {
        if let Err(mpsc::error::TrySendError::Full(message)) = self.queue.try_send(message) {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if matches!(message, LinkMessage::Owner { .. }) {
                tracing::warn!(
                    dropped,
                    "replica link queue full: an owner signal was dropped"
                );
            }
        }
    }
}

/// The link on `client` under `prefix` (e.g. `agent-runtime.replicas`). `origin` (this
/// process's instance id) marks what it sends, so its own messages are not received back.
/// The publishing task stops with `stop`.
pub async fn connect_nats_link(
    client: async_nats::Client,
    prefix: &str,
    origin: &str,
    stop: CancellationToken,
) -> Result<(Arc<NatsReplicaLink>, BoxStream<'static, LinkMessage>), NatsError> {
    let subscriber = client.subscribe(format!("{prefix}.>")).await?;
    confirm_subscription(&client).await?;
    let (queue, receiver) = mpsc::channel(QUEUE);
    tokio::spawn(publish_loop(
        client,
        prefix.to_string(),
        origin.to_string(),
        receiver,
        stop,
    ));
    let link = Arc::new(NatsReplicaLink {
        queue,
        dropped: AtomicU64::new(0),
    });
    let origin = origin.to_string();
    let inbound = subscriber
        .flat_map(move |message| {
            let messages = match decode_batch(&message.payload) {
                Ok(batch) if batch.origin != origin => batch.messages,
                Ok(_) => Vec::new(),
                Err(error) => {
                    tracing::warn!(%error, subject = %message.subject, "a replica link message was not understood");
                    Vec::new()
                }
            };
            futures::stream::iter(messages)
        })
        .boxed();
    Ok((link, inbound))
}

/// Returns once the server has taken the connection's subscription. `subscribe` only queues
/// the SUB (and `flush` only writes it), so another replica's first messages could reach the
/// server before it and be lost. The server reads a connection's operations in order: a
/// request to a subject nobody serves comes back ("no responders") only after the SUB was read.
async fn confirm_subscription(client: &async_nats::Client) -> Result<(), NatsError> {
    use async_nats::RequestErrorKind;
    match client
        .request(client.new_inbox(), bytes::Bytes::new())
        .await
    {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == RequestErrorKind::NoResponders => Ok(()),
        // A server without no-responders answers nothing: the SUB went first all the same.
        Err(error) if error.kind() == RequestErrorKind::TimedOut => Ok(()),
        Err(error) => Err(NatsError::Confirm(error)),
    }
}

/// Publishes what is queued, one message per NATS message, in order.
async fn publish_loop(
    client: async_nats::Client,
    prefix: String,
    origin: String,
    mut receiver: mpsc::Receiver<LinkMessage>,
    stop: CancellationToken,
) {
    let mut packer = Packer::new(&origin, 0);
    loop {
        let message = tokio::select! {
            message = receiver.recv() => message,
            () = stop.cancelled() => None,
        };
        let Some(message) = message else { return };
        if client.connection_state() != async_nats::connection::State::Connected {
            continue;
        }
        // The server's limit (NATS's default 1 MiB until its INFO is known).
        let limit = match client.server_info().max_payload {
            0 => 1 << 20,
            max => max,
        }
        .saturating_sub(packer.overhead());
        let Some(encoded) = encode_message(&message, limit) else {
            tracing::debug!("a live delta too large for NATS was dropped");
            continue;
        };
        packer.push(&encoded);
        let Some(batch) = packer.take() else { continue };
        if let Err(error) = client
            .publish(subject(&prefix, &message), batch.into())
            .await
        {
            tracing::debug!(%error, "publishing to the other replicas failed");
        }
    }
}

/// `{prefix}.live.{run_id}` for a run's events, `{prefix}.owner` for owner signals,
/// `{prefix}.watch` for the runs a replica's readers watch.
fn subject(prefix: &str, message: &LinkMessage) -> String {
    let run_id = match message {
        LinkMessage::Live(event) => event.run_id(),
        LinkMessage::Appended { run_id, .. } => run_id,
        LinkMessage::Owner { .. } => return format!("{prefix}.owner"),
        LinkMessage::Watching { .. } => return format!("{prefix}.watch"),
    };
    // The run id as a subject token, sanitised as the event subjects' are.
    ar_wire::nats::render_subject_of(&format!("{prefix}.live.{{run_id}}"), "", run_id, "")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ar_core::event::{LiveEvent, MessageDelta, TransientEvent};
    use ar_core::replica::OwnerSignal;
    use ar_core::RunEvent;

    use super::*;

    async fn connect() -> Option<async_nats::Client> {
        let url = std::env::var("AR_TEST_NATS_URL")
            .ok()
            .filter(|url| !url.trim().is_empty())
            .unwrap_or_else(|| "nats://127.0.0.1:4222".to_string());
        let connecting = async_nats::connect(url.as_str());
        match tokio::time::timeout(Duration::from_secs(5), connecting).await {
            Ok(Ok(client)) => Some(client),
            outcome if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
                panic!("NATS at {url} is required under CI: {outcome:?}")
            }
            outcome => {
                eprintln!(
                    "\n!!!!! SKIPPING the NATS replica link test: NATS at {url} is unreachable \
                     ({outcome:?}); under CI=true this fails.\n"
                );
                None
            }
        }
    }

    fn delta(n: usize) -> LinkMessage {
        LinkMessage::Live(Box::new(LiveEvent::from(TransientEvent {
            app_id: "app".into(),
            run_id: "run_nats".into(),
            host_run_id: String::new(),
            event: RunEvent::AssistantMessageDelta(MessageDelta {
                message_id: "m".into(),
                text: n.to_string(),
            }),
        })))
    }

    #[tokio::test]
    async fn two_replicas_exchange_in_order_on_their_own_subjects_without_echo() {
        let (Some(one), Some(two), Some(watcher)) =
            (connect().await, connect().await, connect().await)
        else {
            return;
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.subsec_nanos());
        let prefix = format!("art_link_{}_{nanos}", std::process::id());
        let mut subjects = watcher.subscribe(format!("{prefix}.>")).await.unwrap();
        confirm_subscription(&watcher).await.unwrap();
        let stop = CancellationToken::new();
        let (sender, mut echo) = connect_nats_link(one, &prefix, "inst_a", stop.clone())
            .await
            .unwrap();
        let (_other, mut inbound) = connect_nats_link(two, &prefix, "inst_b", stop.clone())
            .await
            .unwrap();
        let mut sent: Vec<LinkMessage> = (0..20).map(delta).collect();
        sent.push(LinkMessage::Owner {
            run_id: "run_nats".into(),
            signal: OwnerSignal::Pause,
        });
        for message in &sent {
            sender.send(message.clone());
        }
        let mut received = Vec::new();
        while received.len() < sent.len() {
            let next = tokio::time::timeout(Duration::from_secs(5), inbound.next())
                .await
                .unwrap_or_else(|_| panic!("stalled after {} messages", received.len()));
            received.push(next.expect("the link ended"));
        }
        assert_eq!(received, sent);
        let mut seen = Vec::new();
        for _ in 0..sent.len() {
            let message = tokio::time::timeout(Duration::from_secs(5), subjects.next())
                .await
                .unwrap()
                .unwrap();
            seen.push(message.subject.to_string());
        }
        assert_eq!(seen[0], format!("{prefix}.live.run_nats"));
        assert_eq!(seen[20], format!("{prefix}.owner"));
        let own = tokio::time::timeout(Duration::from_millis(300), echo.next()).await;
        assert!(own.is_err(), "a replica received its own message: {own:?}");
        stop.cancel();
    }
}
