//! The write-behind task that applies queued store operations in order and in batches.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::store::{StoreOp, StudioStore};

/// A message to the persister.
#[derive(Debug)]
pub(crate) enum PersistMsg {
    Op(StoreOp),
    /// Answered once every operation queued before it is applied.
    Flush(oneshot::Sender<()>),
}

const BATCH: usize = 512;

/// Applies operations until every sender is gone.
pub(crate) async fn run_persister(
    store: Arc<dyn StudioStore>,
    mut rx: mpsc::UnboundedReceiver<PersistMsg>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut waiters = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                PersistMsg::Op(op) => batch.push(op),
                PersistMsg::Flush(done) => waiters.push(done),
            }
            if batch.len() < BATCH {
                next = rx.try_recv().ok();
            }
        }
        if !batch.is_empty() {
            let ops = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            if let Err(err) = store.apply(ops).await {
                tracing::warn!(error = %err, "studio: store write failed");
            }
        }
        for done in waiters.drain(..) {
            let _ = done.send(());
        }
    }
}
