//! The worker side: one Temporal worker per task queue of the process's role, each with the
//! contract's concurrency limit for its turns, all sharing the engine's activities.

use std::sync::Arc;

use ar_core::durable::{DurableError, DurableQueue, DurableTurns};
use temporalio_sdk::runtime::worker_tuner::{FixedSizeSlotSupplier, TunerHolder};
use temporalio_sdk::{Runtime, Worker, WorkerOptions};

use crate::activities::AgentRunActivities;
use crate::workflow::AgentRunWorkflow;
use crate::TemporalSettings;

/// Which queues a worker process polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerRole {
    /// The interactive, autonomous and automation queues (the default).
    Shared,
    /// The coding queue only (`--coding`).
    Coding,
    /// Every queue (`--all-queues`, single-tenant).
    All,
}

impl WorkerRole {
    pub fn queues(self) -> Vec<DurableQueue> {
        match self {
            WorkerRole::Shared => vec![
                DurableQueue::NativeInteractive,
                DurableQueue::NativeAutonomous,
                DurableQueue::Automation,
            ],
            WorkerRole::Coding => vec![DurableQueue::Coding],
            WorkerRole::All => DurableQueue::ALL.to_vec(),
        }
    }
}

/// Temporal workers polling the queues of a role, ready to run.
pub struct Workers {
    workers: Vec<Worker>,
    queues: Vec<String>,
    /// The SDK's runtime the workers were built on (kept as long as they run).
    _runtime: Runtime,
}

/// What stops the workers: initiates their shutdown (polling stops; the workers' `run` returns
/// once their in-flight tasks are done or handed back).
#[derive(Clone)]
pub struct WorkersShutdown {
    handles: Vec<Arc<dyn Fn() + Send + Sync>>,
}

impl WorkersShutdown {
    pub fn initiate(&self) {
        for handle in &self.handles {
            handle();
        }
    }
}

impl Workers {
    /// Connects and builds one worker per queue of `role`. `on_cancel` is told the run id of a
    /// turn whose workflow was cancelled.
    pub async fn connect(
        settings: &TemporalSettings,
        role: WorkerRole,
        turns: Arc<dyn DurableTurns>,
        on_cancel: Arc<dyn Fn(&str) + Send + Sync>,
    ) -> Result<Workers, DurableError> {
        let client = crate::connect(settings, "agent-runtime-worker").await?;
        let runtime = Runtime::from_current_tokio(Default::default())
            .map_err(|error| DurableError(format!("temporal runtime: {error}")))?;
        let activities = AgentRunActivities::new(turns, on_cancel);
        let mut workers = Vec::new();
        let mut queues = Vec::new();
        for queue in role.queues() {
            let name = settings.queue_name(queue);
            let options = worker_options(&name, queue, activities.clone())?;
            let worker = Worker::new(&runtime, client.clone(), options)
                .map_err(|error| DurableError(format!("worker for {name}: {error}")))?;
            workers.push(worker);
            queues.push(name);
        }
        Ok(Workers {
            workers,
            queues,
            _runtime: runtime,
        })
    }

    /// The full names of the queues polled.
    pub fn queues(&self) -> &[String] {
        &self.queues
    }

    pub fn shutdown_handle(&self) -> WorkersShutdown {
        WorkersShutdown {
            handles: self
                .workers
                .iter()
                .map(|worker| Arc::new(worker.shutdown_handle()) as Arc<dyn Fn() + Send + Sync>)
                .collect(),
        }
    }

    /// Polls until shut down; the first worker error ends every worker.
    pub async fn run(mut self) -> Result<(), DurableError> {
        let shutdown = self.shutdown_handle();
        let runs = self.workers.iter_mut().map(|worker| worker.run());
        let results = futures::future::join_all(runs).await;
        shutdown.initiate();
        for result in results {
            result.map_err(|error| DurableError(format!("worker stopped: {error}")))?;
        }
        Ok(())
    }
}

/// A queue's worker: the workflow, the activities, and the queue's limit on concurrent turns
/// (local activities, which is how turns execute).
fn worker_options(
    name: &str,
    queue: DurableQueue,
    activities: AgentRunActivities,
) -> Result<WorkerOptions, DurableError> {
    let limit = queue.concurrency();
    let tuner = TunerHolder::builder()
        .workflow_task_slot_supplier(FixedSizeSlotSupplier::new(limit * 4))
        .activity_task_slot_supplier(FixedSizeSlotSupplier::new(limit))
        .local_activity_task_slot_supplier(FixedSizeSlotSupplier::new(limit))
        .nexus_task_slot_supplier(FixedSizeSlotSupplier::new(1))
        .build();
    Ok(WorkerOptions::new(name)
        .register_workflow::<AgentRunWorkflow>()
        .map_err(|error| DurableError(format!("registering the workflow: {error}")))?
        .register_activities(activities)
        .tuner(tuner)
        .build())
}
