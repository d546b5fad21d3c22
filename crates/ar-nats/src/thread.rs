//! The sink's own thread: a single-threaded runtime that the NATS connection and both publishers run on, so a saturated engine never starves publishing.
//!
//! The service runs every run on its few workers; a publisher among them waits for its turn
//! behind every runnable run task after each acknowledgement, and under load its lag grows to
//! the backlog of the whole process. On a thread of its own the operating system schedules it
//! when an acknowledgement arrives. Store calls still run on the service's runtime
//! ([`on_store_runtime`]): the store's connections belong to it and must outlive this thread.

use std::future::Future;

use ar_core::store::StoreError;
use tokio::runtime::Handle;
use tokio_util::sync::{CancellationToken, DropGuard};

/// The thread and its runtime; the thread ends when this is dropped (the sink's last task
/// ending, or a sink never spawned), and the runtime with it.
pub(crate) struct SinkThread {
    handle: Handle,
    _stop: DropGuard,
}

impl SinkThread {
    pub(crate) fn start() -> std::io::Result<SinkThread> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        std::thread::Builder::new()
            .name("nats-sink".into())
            .spawn(move || runtime.block_on(stopped.cancelled()))?;
        Ok(SinkThread {
            handle,
            _stop: stop.drop_guard(),
        })
    }

    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }
}

/// Runs a store call on `runtime` (the service's) and waits for it from here.
pub(crate) async fn on_store_runtime<T, F>(runtime: &Handle, call: F) -> Result<T, StoreError>
where
    T: Send + 'static,
    F: Future<Output = Result<T, StoreError>> + Send + 'static,
{
    match runtime.spawn(call).await {
        Ok(result) => result,
        Err(error) => Err(StoreError::backend(
            "the NATS sink's store call did not finish",
            error,
        )),
    }
}
