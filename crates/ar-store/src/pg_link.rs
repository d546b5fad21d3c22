//! The replica link over PostgreSQL `LISTEN/NOTIFY`, for deployments of several replicas on one database without NATS.
//!
//! Every replica listens on one channel of the database ([`CHANNEL`]). Messages queued by
//! [`ReplicaLink::send`] are packed in order into notifications of at most [`NOTIFY_LIMIT`]
//! bytes (PostgreSQL refuses a payload of 8000 bytes or more) and sent one after another by a
//! single task, so they are delivered in the order sent; a persisted event too large for a
//! notification travels as a wake-up that makes readers read the store. The listening
//! connection reconnects by itself; what was sent while it was away is lost (the SSE readers'
//! poll of the store covers persisted events; deltas are best effort).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ar_core::replica::{decode_batch, encode_message, LinkMessage, Packer, ReplicaLink};
use futures::stream::BoxStream;
use futures::StreamExt;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::ConnectError;

/// The notification channel every replica of a database listens on.
pub const CHANNEL: &str = "agent_runtime_replicas";
/// Largest notification payload sent (PostgreSQL's limit is 8000 bytes, exclusive).
pub const NOTIFY_LIMIT: usize = 7900;
/// Messages waiting to be sent; beyond it they are dropped (and counted).
const QUEUE: usize = 8192;

/// The sending side: a bounded queue in front of the one task that notifies.
pub struct PgReplicaLink {
    queue: mpsc::Sender<LinkMessage>,
    dropped: AtomicU64,
}

impl ReplicaLink for PgReplicaLink {
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

/// Connects the link to the database at `url`: a connection to notify on and one listening.
/// `origin` (this process's instance id) marks what it sends, so its own messages are not
/// received back. The notifying task stops with `stop`.
pub async fn connect_pg_link(
    url: &str,
    origin: &str,
    stop: CancellationToken,
) -> Result<(Arc<PgReplicaLink>, BoxStream<'static, LinkMessage>), ConnectError> {
    let connect = |source| ConnectError::Connect {
        backend: "postgres",
        source,
    };
    let options: PgConnectOptions = url.parse().map_err(connect)?;
    // One connection to notify on, one the listener keeps.
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect_with(options)
        .await
        .map_err(connect)?;
    let mut listener = PgListener::connect_with(&pool).await.map_err(connect)?;
    listener.listen(CHANNEL).await.map_err(connect)?;
    let (queue, receiver) = mpsc::channel(QUEUE);
    tokio::spawn(notify_loop(pool, receiver, origin.to_string(), stop));
    let link = Arc::new(PgReplicaLink {
        queue,
        dropped: AtomicU64::new(0),
    });
    Ok((link, inbound(listener, origin.to_string())))
}

/// Sends what is queued, in order, as few notifications as fit.
async fn notify_loop(
    pool: PgPool,
    mut receiver: mpsc::Receiver<LinkMessage>,
    origin: String,
    stop: CancellationToken,
) {
    let mut packer = Packer::new(&origin, NOTIFY_LIMIT);
    let fits = NOTIFY_LIMIT - packer.overhead();
    loop {
        let first = tokio::select! {
            message = receiver.recv() => message,
            () = stop.cancelled() => None,
        };
        let Some(first) = first else { return };
        let mut next = Some(first);
        while let Some(message) = next.take().or_else(|| receiver.try_recv().ok()) {
            let Some(encoded) = encode_message(&message, fits) else {
                tracing::debug!("a live delta too large for a notification was dropped");
                continue;
            };
            if !packer.push(&encoded) {
                notify(&pool, packer.take()).await;
                packer.push(&encoded);
            }
        }
        notify(&pool, packer.take()).await;
    }
}

async fn notify(pool: &PgPool, batch: Option<Vec<u8>>) {
    let Some(batch) = batch else { return };
    // The batch is JSON built from strings: valid UTF-8.
    let payload = String::from_utf8_lossy(&batch);
    let sent = sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(payload.as_ref())
        .execute(pool)
        .await;
    if let Err(error) = sent {
        tracing::warn!(%error, "notifying the other replicas failed");
    }
}

/// The other replicas' messages, in the order each sent them.
fn inbound(listener: PgListener, origin: String) -> BoxStream<'static, LinkMessage> {
    futures::stream::unfold(listener, |mut listener| async move {
        loop {
            match listener.recv().await {
                Ok(notification) => return Some((notification, listener)),
                Err(error) => {
                    // `recv` reconnects on the next call; do not spin while the database is away.
                    tracing::warn!(%error, "listening to the other replicas failed");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    })
    .flat_map(move |notification| {
        let messages = match decode_batch(notification.payload().as_bytes()) {
            Ok(batch) if batch.origin != origin => batch.messages,
            Ok(_) => Vec::new(),
            Err(error) => {
                tracing::warn!(%error, "a replica link notification was not understood");
                Vec::new()
            }
        };
        futures::stream::iter(messages)
    })
    .boxed()
}
