//! Durable runs: the engine's side of `execution_mode: durable`. The API process starts,
//! signals and cancels a run's workflow through the `DurableScheduler` port instead of
//! executing the run; a worker's activities execute its turns here (`DurableTurns`), under the
//! same leases and checkpoints as a lightweight run; the reconciler repairs what a crash
//! between the store and the scheduler left behind.

use std::time::Duration;

use ar_core::durable::{
    DurableQueue, DurableScheduler, DurableSignal, DurableTurns, RunRef, TurnError, TurnOutcome,
    WorkflowInfo,
};
use ar_core::replica::OwnerSignal;
use ar_core::{InvocationMode, Run, RunStatus, RuntimeKind};
use async_trait::async_trait;

use crate::engine::Engine;
use crate::error::{EngineError, EngineResult};

/// How long a row must have sat unchanged before the reconciler looks at it (a run just
/// admitted or just moved is still being handled by the request that did it).
pub const RECONCILE_MIN_AGE: Duration = Duration::from_secs(30);

/// The task queue a run's workflow goes to: native runs by invocation mode, others to the
/// automation queue.
pub fn queue_of(run: &Run) -> DurableQueue {
    match (run.runtime_kind, run.invocation_mode) {
        (RuntimeKind::NativeSdk, InvocationMode::Interactive) => DurableQueue::NativeInteractive,
        (RuntimeKind::NativeSdk, InvocationMode::Autonomous) => DurableQueue::NativeAutonomous,
        _ => DurableQueue::Automation,
    }
}

impl Engine {
    fn scheduler(&self) -> Option<&std::sync::Arc<dyn DurableScheduler>> {
        self.deps().durable.as_ref()
    }

    /// Whether durable runs can be admitted here.
    pub fn durable_enabled(&self) -> bool {
        self.scheduler().is_some()
    }

    /// The Temporal frontend and namespace when durable execution is on.
    pub fn durable_endpoint(&self) -> Option<(String, String)> {
        self.scheduler()
            .map(|s| (s.address().to_string(), s.namespace().to_string()))
    }

    /// Starts a durable run's workflow (idempotent by workflow id). A run whose workflow
    /// cannot be started is failed, and the request answered 400, as the contract says.
    pub(crate) async fn start_durable(&self, run: &Run) -> EngineResult<()> {
        let Some(scheduler) = self.scheduler() else {
            return Err(durable_off());
        };
        let reference = run_ref(run);
        if let Err(error) = scheduler.start(&reference, queue_of(run)).await {
            let message = format!("durable run could not be started: {error}");
            tracing::error!(run_id = %run.id, %error, "durable start failed");
            self.fail_run(&run.app_id, &run.id, &message).await;
            return Err(EngineError::invalid(message));
        }
        Ok(())
    }

    /// Wakes a durable run's workflow after a change the request already committed.
    pub(crate) async fn signal_durable(
        &self,
        run_id: &str,
        signal: DurableSignal,
    ) -> EngineResult<()> {
        let Some(scheduler) = self.scheduler() else {
            return Err(durable_off());
        };
        scheduler
            .signal(run_id, signal)
            .await
            .map_err(|error| EngineError::internal("signalling the run's workflow", error))
    }

    /// Cancels a durable run's workflow (before the run is marked cancelled).
    pub(crate) async fn cancel_durable(&self, run_id: &str) -> EngineResult<()> {
        let Some(scheduler) = self.scheduler() else {
            return Err(durable_off());
        };
        scheduler
            .cancel(run_id)
            .await
            .map_err(|error| EngineError::internal("cancelling the run's workflow", error))
    }

    /// The workflow of a durable run as the scheduler describes it (`None` when it was never
    /// started, or durable execution is off here).
    pub async fn durable_workflow(&self, run: &Run) -> EngineResult<Option<WorkflowInfo>> {
        let Some(scheduler) = self.scheduler() else {
            return Ok(None);
        };
        scheduler
            .describe(&run.id)
            .await
            .map_err(|error| EngineError::internal("describing the run's workflow", error))
    }

    /// One reconciler pass: durable rows unchanged for `min_age` are inspected; one still
    /// queued whose workflow never started is started, one whose workflow is no longer running
    /// is failed. Returns how many rows it repaired.
    pub async fn reconcile_durable(&self, min_age: Duration) -> usize {
        let Some(scheduler) = self.scheduler().cloned() else {
            return 0;
        };
        let before = self.now() - chrono::Duration::from_std(min_age).unwrap_or_default();
        let runs = match self.deps().store.list_stale_durable_runs(before, 200).await {
            Ok(runs) => runs,
            Err(error) => {
                tracing::warn!(%error, "reconciler could not list durable runs");
                return 0;
            }
        };
        let mut repaired = 0;
        for run in runs {
            if self.reconcile_run(scheduler.as_ref(), &run).await {
                repaired += 1;
            }
        }
        repaired
    }

    async fn reconcile_run(&self, scheduler: &dyn DurableScheduler, run: &Run) -> bool {
        let described = match scheduler.describe(&run.id).await {
            Ok(described) => described,
            Err(error) => {
                tracing::warn!(run_id = %run.id, %error, "reconciler could not describe the workflow");
                return false;
            }
        };
        let state = match described {
            Some(info) if info.state == "running" => return false,
            None if run.status() == RunStatus::Queued => {
                // The row was committed but its workflow never started.
                return match scheduler.start(&run_ref(run), queue_of(run)).await {
                    Ok(()) => {
                        tracing::info!(run_id = %run.id, "reconciler started the run's workflow");
                        true
                    }
                    Err(error) => {
                        tracing::warn!(run_id = %run.id, %error, "reconciler could not start the workflow");
                        false
                    }
                };
            }
            Some(info) => info.state,
            None => "missing".to_string(),
        };
        let message = format!(
            "temporal workflow is {state} while runtime run remained {}",
            run.status()
        );
        tracing::warn!(run_id = %run.id, %message, "reconciler failing the run");
        self.fail_run(&run.app_id, &run.id, &message).await;
        true
    }

    /// Executes one turn of a durable run here (an activity of its workflow): the owner task
    /// of a lightweight run, once, under this process's lease, tracked so that a shutdown
    /// waits for it to reach a checkpoint.
    async fn execute_turn(&self, run: &RunRef) -> Result<(), TurnError> {
        if self.is_shutting_down() {
            return Err(TurnError::ShuttingDown);
        }
        match self.drive_turn_once(&run.app_id, &run.run_id).await {
            // A retry of the activity while its first attempt still executes here.
            None => Err(TurnError::Leased),
            Some(Ok(true)) => Ok(()),
            Some(Ok(false)) => Err(TurnError::Leased),
            Some(Err(error)) => Err(TurnError::Store(format!("turn task failed: {error}"))),
        }
    }

    /// The outcome the run's stored state stands for.
    async fn stored_outcome(&self, run: &RunRef) -> Result<TurnOutcome, TurnError> {
        let store = &self.deps().store;
        let stored = store
            .get_run(&run.app_id, &run.run_id)
            .await
            .map_err(|error| TurnError::Store(error.to_string()))?;
        let Some(stored) = stored else {
            // A run that no longer exists has nothing left to execute.
            return Ok(TurnOutcome::of(
                RunStatus::Cancelled,
                ar_core::PauseReason::None,
                0,
            ));
        };
        let step = store
            .latest_checkpoint(&run.run_id)
            .await
            .map_err(|error| TurnError::Store(error.to_string()))?
            .map_or(0, |checkpoint| checkpoint.step);
        Ok(TurnOutcome::of(
            stored.status(),
            stored.pause_reason(),
            step,
        ))
    }

    /// Tells the owner of a durable run executing here that its workflow was cancelled.
    pub fn durable_turn_cancelled(&self, run_id: &str) {
        self.owner_signal_received(run_id, OwnerSignal::Cancel);
    }
}

#[async_trait]
impl DurableTurns for Engine {
    async fn prepare(&self, run: &RunRef) -> Result<TurnOutcome, TurnError> {
        self.stored_outcome(run).await
    }

    async fn execute(&self, run: &RunRef) -> Result<TurnOutcome, TurnError> {
        let before = self.stored_outcome(run).await?;
        if !before.continue_execution {
            return Ok(before);
        }
        self.execute_turn(run).await?;
        let after = self.stored_outcome(run).await?;
        if after.continue_execution && self.is_shutting_down() {
            // The turn was stopped at a checkpoint by this worker's shutdown: the activity is
            // retried (on another worker) rather than reported as progress.
            return Err(TurnError::ShuttingDown);
        }
        // Still running otherwise means a resume landed as the turn ended: the workflow
        // executes again.
        Ok(after)
    }

    async fn mark_failed(&self, run: &RunRef, message: &str) -> Result<(), TurnError> {
        self.fail_run(&run.app_id, &run.run_id, message).await;
        Ok(())
    }
}

fn run_ref(run: &Run) -> RunRef {
    RunRef {
        app_id: run.app_id.clone(),
        run_id: run.id.clone(),
    }
}

pub(crate) fn durable_off() -> EngineError {
    EngineError::invalid(
        "execution_mode durable is not available: durable execution is not configured on this runtime (set TEMPORAL_ADDRESS)",
    )
}
