//! `AgentRunActivities`: the workflow's activities, each a call into the engine through the
//! `DurableTurns` port with a run reference. Every one is idempotent against the store: a turn
//! commits each step under the run's version and lease, so an activity Temporal runs twice
//! never doubles a message, a tool call or an event.

#![allow(unreachable_pub)]

use std::sync::Arc;

use ar_core::durable::{DurableTurns, RunRef, TurnError, TurnOutcome};
use serde::{Deserialize, Serialize};
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

/// The input of `MarkRunFailedActivity`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailRun {
    pub run: RunRef,
    pub message: String,
}

/// The activities of `AgentRunWorkflow`, over the engine of this worker.
#[derive(Clone)]
pub struct AgentRunActivities {
    turns: Arc<dyn DurableTurns>,
    /// Told when Temporal cancels a turn (its workflow was cancelled).
    on_cancel: Arc<dyn Fn(&str) + Send + Sync>,
}

impl AgentRunActivities {
    pub fn new(turns: Arc<dyn DurableTurns>, on_cancel: Arc<dyn Fn(&str) + Send + Sync>) -> Self {
        AgentRunActivities { turns, on_cancel }
    }
}

#[activities]
impl AgentRunActivities {
    #[activity(name = "AgentRunActivities.PrepareRunActivity")]
    pub async fn prepare(
        self: Arc<Self>,
        _ctx: ActivityContext,
        run: RunRef,
    ) -> Result<TurnOutcome, ActivityError> {
        self.turns.prepare(&run).await.map_err(retry)
    }

    #[activity(name = "AgentRunActivities.ExecuteRunActivity")]
    pub async fn execute(
        self: Arc<Self>,
        ctx: ActivityContext,
        run: RunRef,
    ) -> Result<TurnOutcome, ActivityError> {
        let turn = self.turns.execute(&run);
        tokio::pin!(turn);
        tokio::select! {
            outcome = &mut turn => outcome.map_err(retry),
            () = ctx.cancelled() => {
                // The run's owner stops at once; the turn's task ends at its next safe point.
                (self.on_cancel)(&run.run_id);
                let _ = turn.await;
                Err(ActivityError::cancelled())
            }
        }
    }

    #[activity(name = "AgentRunActivities.MarkRunFailedActivity")]
    pub async fn mark_failed(
        self: Arc<Self>,
        _ctx: ActivityContext,
        failure: FailRun,
    ) -> Result<(), ActivityError> {
        self.turns
            .mark_failed(&failure.run, &failure.message)
            .await
            .map_err(retry)
    }
}

/// A turn that could not run now is an activity failure Temporal retries by its policy.
fn retry(error: TurnError) -> ActivityError {
    ActivityError::from(anyhow::anyhow!("{error}"))
}
