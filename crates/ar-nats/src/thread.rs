//! The sink's own thread: a single-threaded runtime that the NATS connection and both publishers run on, so a saturated engine never starves publishing.
//!
//! The service runs every run on its few workers; a publisher among them waits for its turn
//! behind every runnable run task after each acknowledgement, and under load its lag grows to
//! the backlog of the whole process. On a thread of its own the operating system schedules it
//! when an acknowledgement arrives. Store calls still run on the service's runtime
//! ([`on_store_runtime`]): the store's connections belong to it and must outlive this thread.
//!
//! The thread is paced: when it runs out of work it sleeps `pace` before parking, so what
//! arrives meanwhile (commits, acknowledgements, deltas) is handled in one wake-up and written
//! to the socket in one go, instead of one wake-up, one store read and one write per event.
//! Under load this halves the sink's CPU; it adds at most `pace` to the publish lag.

use std::future::Future;
use std::time::Duration;

use ar_core::store::StoreError;
use tokio::runtime::Handle;
use tokio_util::sync::{CancellationToken, DropGuard};

/// The sink thread's name (what `ps -L` and `/proc/<pid>/task/*/comm` show).
pub const SINK_THREAD_NAME: &str = "nats-sink";

/// The thread and its runtime; the thread ends when this is dropped (the sink's last task
/// ending, or a sink never spawned), and the runtime with it.
pub(crate) struct SinkThread {
    handle: Handle,
    _stop: DropGuard,
}

impl SinkThread {
    /// Starts the thread, sleeping `pace` each time it runs out of work (none when zero).
    pub(crate) fn start(pace: Duration) -> std::io::Result<SinkThread> {
        let mut builder = tokio::runtime::Builder::new_current_thread();
        if !pace.is_zero() {
            builder.on_thread_park(move || std::thread::sleep(pace));
        }
        let runtime = builder.enable_all().build()?;
        let handle = runtime.handle().clone();
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        std::thread::Builder::new()
            .name(SINK_THREAD_NAME.into())
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
