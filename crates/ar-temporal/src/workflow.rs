//! `AgentRunWorkflow`: one workflow per durable run. It prepares the run, executes its turns
//! as local activities (each turn's steps are checkpointed in the store by the engine, so a
//! retried turn continues from the last step), waits for people through signals, and answers
//! queries about where it is. Its history holds references only: `{app_id, run_id}` in, the
//! run's status flags and step number out.

#![allow(unreachable_pub)]

use std::time::Duration;

use ar_core::durable::{RunRef, TurnOutcome};
use serde::{Deserialize, Serialize};
use temporalio_common::RetryPolicy;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ActivityExecutionError, ContinueAsNewOptions, LocalActivityOptions, SyncWorkflowContext,
    WorkflowContext, WorkflowContextView, WorkflowResult, WorkflowTermination,
};

use crate::activities::AgentRunActivities;
use crate::state::{continued, turn_limit, CurrentStep, ResumeIds, Wait, Wake};

/// The workflow's input: the contract's `{app_id, run_id}`, plus what a continued run carries
/// over (omitted on a first start).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowInput {
    pub app_id: String,
    pub run_id: String,
    /// Resume ids already consumed by earlier runs of this workflow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consumed_resume_ids: Vec<String>,
    /// Turns executed by earlier runs of this workflow.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub turns: u64,
    /// Turns per workflow run before it continues as new (0:
    /// [`crate::state::TURNS_PER_WORKFLOW_RUN`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub turns_per_run: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// The payload of `ResumeRun` and `ApproveRun`: the resume the API committed, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResumeSignal {
    pub resume_id: String,
}

/// The payload of `RunMessage`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageSignal {
    pub content: String,
}

/// What `approval_wait_state` and `input_wait_state` answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitState {
    pub waiting: bool,
    /// The run's checkpointed step when the wait began.
    pub step: i64,
    /// Resume ids received and not yet consumed.
    pub pending_resume_ids: Vec<String>,
}

#[workflow]
#[derive(Default)]
pub struct AgentRunWorkflow {
    current_step: CurrentStep,
    step: i64,
    waiting_for: Option<Wait>,
    resume_ids: ResumeIds,
    pause_requests: u32,
    messages: u32,
    handoffs: u32,
}

impl AgentRunWorkflow {
    fn wait_state(&self, wait: Wait) -> WaitState {
        WaitState {
            waiting: self.waiting_for == Some(wait),
            step: self.step,
            pending_resume_ids: self.resume_ids.pending_ids(),
        }
    }
}

#[workflow_methods]
impl AgentRunWorkflow {
    #[run(name = "AgentRunWorkflow")]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        input: WorkflowInput,
    ) -> WorkflowResult<String> {
        let run = RunRef {
            app_id: input.app_id.clone(),
            run_id: input.run_id.clone(),
        };
        ctx.state_mut(|s| {
            s.resume_ids = ResumeIds::carried(input.consumed_resume_ids.clone());
            s.current_step = CurrentStep::Preparing;
        });
        let mut outcome = ctx
            .execute_local_activity(AgentRunActivities::prepare, run.clone(), prepare_options())
            .await?;
        let mut turns = input.turns;
        let limit = turn_limit(&input);
        loop {
            ctx.state_mut(|s| s.step = outcome.step);
            if outcome.continue_execution {
                ctx.state_mut(|s| s.current_step = CurrentStep::Executing);
                outcome = match ctx
                    .execute_local_activity(
                        AgentRunActivities::execute,
                        run.clone(),
                        execute_options(),
                    )
                    .await
                {
                    Ok(outcome) => outcome,
                    // A cancelled workflow (the run was cancelled first) ends cancelled.
                    Err(ActivityExecutionError::Cancelled(_)) => {
                        return Err(WorkflowTermination::cancelled())
                    }
                    Err(error) => return failed(ctx, &run, &error.to_string()).await,
                };
                turns += 1;
                continue;
            }
            if !outcome.waits() {
                ctx.state_mut(|s| s.current_step = CurrentStep::Completed);
                return Ok("completed".into());
            }
            wait(ctx, &outcome).await?;
            // The API committed the resume before signalling: the next turn executes it.
            outcome = TurnOutcome {
                continue_execution: true,
                ..outcome
            };
            if turns >= limit || ctx.continue_as_new_suggested() {
                let next = ctx.state(|s| continued(&input, &s.resume_ids));
                ctx.continue_as_new(next, ContinueAsNewOptions::default())?;
            }
        }
    }

    #[signal(name = "ResumeRun")]
    pub fn resume_run(&mut self, _ctx: &mut SyncWorkflowContext<Self>, signal: ResumeSignal) {
        self.resume_ids.receive(signal.resume_id, Wake::Resume);
    }

    #[signal(name = "ApproveRun")]
    pub fn approve_run(&mut self, _ctx: &mut SyncWorkflowContext<Self>, signal: ResumeSignal) {
        self.resume_ids.receive(signal.resume_id, Wake::Approve);
    }

    /// The pause itself is a request in the store (the turn stops at its next safe point);
    /// the workflow records it.
    #[signal(name = "PauseRun")]
    pub fn pause_run(&mut self, _ctx: &mut SyncWorkflowContext<Self>) {
        self.pause_requests += 1;
    }

    #[signal(name = "RunMessage")]
    pub fn run_message(&mut self, _ctx: &mut SyncWorkflowContext<Self>, _message: MessageSignal) {
        self.messages += 1;
    }

    /// Recorded; the workflow keeps waiting.
    #[signal(name = "HandoffRun")]
    pub fn handoff_run(&mut self, _ctx: &mut SyncWorkflowContext<Self>) {
        self.handoffs += 1;
        if self.waiting_for.is_some() {
            self.current_step = CurrentStep::HandoffRecorded;
        }
    }

    #[query(name = "current_step")]
    pub fn current_step(&self, _ctx: &WorkflowContextView) -> String {
        self.current_step.as_str().to_string()
    }

    #[query(name = "approval_wait_state")]
    pub fn approval_wait_state(&self, _ctx: &WorkflowContextView) -> WaitState {
        self.wait_state(Wait::Approval)
    }

    #[query(name = "input_wait_state")]
    pub fn input_wait_state(&self, _ctx: &WorkflowContextView) -> WaitState {
        let mut state = self.wait_state(Wait::Input);
        state.waiting |= self.waiting_for == Some(Wait::Auth);
        state
    }
}

/// Waits for a resume id not consumed before (a duplicate signal wakes nothing).
async fn wait(
    ctx: &mut WorkflowContext<AgentRunWorkflow>,
    outcome: &TurnOutcome,
) -> WorkflowResult<()> {
    let wait = Wait::after(outcome);
    ctx.state_mut(|s| {
        s.waiting_for = Some(wait);
        s.current_step = CurrentStep::waiting(wait);
    });
    ctx.wait_condition(|s| s.resume_ids.has_pending()).await?;
    ctx.state_mut(|s| {
        let wake = s.resume_ids.consume();
        s.waiting_for = None;
        s.current_step = CurrentStep::woken(wait, wake);
    });
    Ok(())
}

/// The run's turn could not be executed (its retries ran out): the run is failed.
async fn failed(
    ctx: &mut WorkflowContext<AgentRunWorkflow>,
    run: &RunRef,
    error: &str,
) -> WorkflowResult<String> {
    let failure = crate::activities::FailRun {
        run: run.clone(),
        message: format!("durable execution failed: {error}"),
    };
    ctx.execute_local_activity(AgentRunActivities::mark_failed, failure, fail_options())
        .await?;
    ctx.state_mut(|s| s.current_step = CurrentStep::Completed);
    Ok("failed".into())
}

/// `PrepareRunActivity`: start-to-close 2 h; retried ×3 from 5 s, ×2, at most 2 min apart.
fn prepare_options() -> LocalActivityOptions {
    LocalActivityOptions::builder()
        .start_to_close_timeout(Duration::from_secs(2 * 3600))
        .retry_policy(
            RetryPolicy::builder()
                .initial_interval(Duration::from_secs(5))
                .backoff_coefficient(2.0)
                .maximum_interval(Duration::from_secs(120))
                .maximum_attempts(3)
                .build(),
        )
        .build()
}

/// `ExecuteRunActivity`: start-to-close 2 h. A turn that did not finish is retried until it
/// does (the engine continues from the last checkpoint and refuses a second owner by lease),
/// from 1 s up to 10 s apart, so a worker's death never fails the run: a retry waits out the
/// dead worker's lease. A turn that keeps failing for 30 minutes fails the run.
fn execute_options() -> LocalActivityOptions {
    LocalActivityOptions::builder()
        .start_to_close_timeout(Duration::from_secs(2 * 3600))
        .schedule_to_close_timeout(Duration::from_secs(2 * 3600 + 1800))
        .retry_policy(
            RetryPolicy::builder()
                .initial_interval(Duration::from_secs(1))
                .backoff_coefficient(2.0)
                .maximum_interval(Duration::from_secs(10))
                .build(),
        )
        .timer_backoff_threshold(Duration::from_secs(5))
        .build()
}

/// `MarkRunFailedActivity`: 1 min, retried a few times (the failure must be persisted).
fn fail_options() -> LocalActivityOptions {
    LocalActivityOptions::builder()
        .start_to_close_timeout(Duration::from_secs(60))
        .retry_policy(RetryPolicy::builder().maximum_attempts(5).build())
        .build()
}
