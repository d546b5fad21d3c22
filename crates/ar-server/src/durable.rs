//! Durable execution in the service: `TEMPORAL_*` turned into the Temporal adapter's settings,
//! the reconciler `serve` runs, and `agent-runtime worker` (the same composition as `serve`,
//! polling the task queues of its role instead of serving the API, with `/readyz`).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use ar_config::env::DurableSettings;
use ar_engine::Engine;
use ar_temporal::worker::{WorkerRole, Workers};
use ar_temporal::TemporalSettings;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::compose::Service;
use crate::error::json;

/// The adapter's settings from the service's.
pub fn temporal_settings(settings: &DurableSettings) -> TemporalSettings {
    TemporalSettings {
        address: settings.address.clone(),
        namespace: settings.namespace.clone(),
        task_queue_prefix: settings.task_queue_prefix.clone(),
        api_key: settings.api_key.clone(),
        tls: settings.tls.clone(),
        turns_per_workflow_run: settings.turns_per_workflow_run,
    }
}

/// Runs the durable reconciler every `every` until `stop`: rows whose workflow never started
/// are started, rows whose workflow ended while the run did not are failed.
pub(crate) fn start_reconciler(engine: &Engine, every: Duration, stop: &CancellationToken) {
    let (engine, stop) = (engine.clone(), stop.clone());
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let repaired = engine.reconcile_durable(every).await;
            if repaired > 0 {
                tracing::info!(repaired, "durable reconciler repaired runs");
            }
        }
    });
}

impl Service {
    /// `agent-runtime worker`: polls the task queues of `role` and executes durable runs'
    /// turns until `shutdown`, answering `/readyz` and `/healthz` on `listener`. At shutdown
    /// polling stops first, then in-flight turns stop at their checkpoint and are handed back
    /// to Temporal, which retries them on another worker.
    pub async fn work(
        self,
        listener: TcpListener,
        role: WorkerRole,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let settings = self
            .durable
            .clone()
            .context("agent-runtime worker needs TEMPORAL_ADDRESS (durable execution is off)")?;
        self.engine.start_lease_heartbeat();
        let on_cancel: Arc<dyn Fn(&str) + Send + Sync> = {
            let engine = self.engine.clone();
            Arc::new(move |run_id: &str| engine.durable_turn_cancelled(run_id))
        };
        let workers = Workers::connect(
            &temporal_settings(&settings),
            role,
            Arc::new(self.engine.clone()),
            on_cancel,
        )
        .await?;
        tracing::info!(queues = ?workers.queues(), "worker polling");
        let ready = Arc::new(AtomicBool::new(true));
        let stopping = CancellationToken::new();
        let health = tokio::spawn(crate::connections::serve(
            listener,
            worker_router(ready.clone()),
            self.connections,
            stopping.clone().cancelled_owned(),
        ));
        let (stop_polling, engine, grace) = (
            workers.shutdown_handle(),
            self.engine.clone(),
            self.shutdown_grace,
        );
        tokio::spawn(async move {
            shutdown.await;
            tracing::info!("worker stopping: no new turns; in-flight turns stop at a checkpoint");
            // Not ready from now on; polling stops, then turns in flight reach a checkpoint.
            ready.store(false, Ordering::Relaxed);
            stop_polling.initiate();
            engine.shutdown(grace).await;
        });
        let result = workers.run().await;
        stopping.cancel();
        let _ = health.await;
        self.background.cancel();
        result.map_err(anyhow::Error::from)
    }
}

/// `/readyz` (200 while the workers poll) and `/healthz` of a worker.
fn worker_router(ready: Arc<AtomicBool>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { health("ok", StatusCode::OK) }))
        .route("/readyz", get(readyz))
        .with_state(ready)
}

async fn readyz(State(ready): State<Arc<AtomicBool>>) -> Response {
    if ready.load(Ordering::Relaxed) {
        health("ready", StatusCode::OK)
    } else {
        health("not_ready", StatusCode::SERVICE_UNAVAILABLE)
    }
}

fn health(status: &str, code: StatusCode) -> Response {
    json(code, &serde_json::json!({ "status": status }))
}
