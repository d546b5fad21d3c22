//! `TemporalScheduler`: the API side of durable runs on the official Temporal client. It starts
//! a run's workflow (idempotent by workflow id), signals it, cancels it and describes it.

use std::time::{Duration, SystemTime};

use ar_core::durable::{
    workflow_id, DurableError, DurableQueue, DurableScheduler, DurableSignal, RunRef, WorkflowInfo,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use temporalio_client::errors::{WorkflowInteractionError, WorkflowStartError};
use temporalio_client::{
    Client, WorkflowCancelOptions, WorkflowDescribeOptions, WorkflowExecutionStatus,
    WorkflowIdConflictPolicy, WorkflowIdReusePolicy, WorkflowSignalOptions, WorkflowStartOptions,
};

use crate::workflow::{AgentRunWorkflow, MessageSignal, ResumeSignal, WorkflowInput};
use crate::TemporalSettings;

/// Starts, signals, cancels and describes runs' workflows.
pub struct TemporalScheduler {
    client: Client,
    settings: TemporalSettings,
}

impl TemporalScheduler {
    /// Connects to the frontend of `settings`.
    pub async fn connect(settings: TemporalSettings) -> Result<TemporalScheduler, DurableError> {
        let client = crate::connect(&settings, "agent-runtime-api").await?;
        Ok(TemporalScheduler { client, settings })
    }

    fn handle(&self, run_id: &str) -> temporalio_client::WorkflowHandle<Client, AgentRunWorkflow> {
        self.client
            .get_workflow_handle::<AgentRunWorkflow>(workflow_id(run_id))
    }
}

#[async_trait]
impl DurableScheduler for TemporalScheduler {
    async fn start(&self, run: &RunRef, queue: DurableQueue) -> Result<(), DurableError> {
        let input = WorkflowInput {
            app_id: run.app_id.clone(),
            run_id: run.run_id.clone(),
            turns_per_run: self.settings.turns_per_workflow_run,
            ..Default::default()
        };
        let options =
            WorkflowStartOptions::new(self.settings.queue_name(queue), workflow_id(&run.run_id))
                // A run's workflow starts once: not again while it runs, nor after it closed.
                .id_reuse_policy(WorkflowIdReusePolicy::RejectDuplicate)
                .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
                // A run's turns take as long as they take; the workflow task itself is short.
                .task_timeout(Duration::from_secs(10))
                .build();
        match self
            .client
            .start_workflow(AgentRunWorkflow::run, input, options)
            .await
        {
            Ok(_) | Err(WorkflowStartError::AlreadyStarted { .. }) => Ok(()),
            Err(error) => Err(DurableError(error.to_string())),
        }
    }

    async fn signal(&self, run_id: &str, signal: DurableSignal) -> Result<(), DurableError> {
        let handle = self.handle(run_id);
        let options = WorkflowSignalOptions::default();
        let sent = match signal {
            DurableSignal::Resume { resume_id } => {
                handle
                    .signal(
                        AgentRunWorkflow::resume_run,
                        ResumeSignal { resume_id },
                        options,
                    )
                    .await
            }
            DurableSignal::Approve { resume_id } => {
                handle
                    .signal(
                        AgentRunWorkflow::approve_run,
                        ResumeSignal { resume_id },
                        options,
                    )
                    .await
            }
            DurableSignal::Pause => {
                handle
                    .signal(AgentRunWorkflow::pause_run, (), options)
                    .await
            }
            DurableSignal::Message { content } => {
                handle
                    .signal(
                        AgentRunWorkflow::run_message,
                        MessageSignal { content },
                        options,
                    )
                    .await
            }
            DurableSignal::Handoff => {
                handle
                    .signal(AgentRunWorkflow::handoff_run, (), options)
                    .await
            }
        };
        sent.map_err(|error| DurableError(error.to_string()))
    }

    async fn cancel(&self, run_id: &str) -> Result<(), DurableError> {
        let options = WorkflowCancelOptions::builder()
            .reason("run cancelled".to_string())
            .build();
        match self.handle(run_id).cancel(options).await {
            Ok(()) | Err(WorkflowInteractionError::NotFound(_)) => Ok(()),
            // Cancelling a workflow that already closed is not an error for the run.
            Err(WorkflowInteractionError::Rpc(status))
                if status.code() == temporalio_client::tonic::Code::FailedPrecondition =>
            {
                Ok(())
            }
            Err(error) => Err(DurableError(error.to_string())),
        }
    }

    async fn describe(&self, run_id: &str) -> Result<Option<WorkflowInfo>, DurableError> {
        let description = match self
            .handle(run_id)
            .describe(WorkflowDescribeOptions::default())
            .await
        {
            Ok(description) => description,
            Err(WorkflowInteractionError::NotFound(_)) => return Ok(None),
            Err(error) => return Err(DurableError(error.to_string())),
        };
        let raw = description.raw();
        let info = raw.workflow_execution_info.clone().unwrap_or_default();
        Ok(Some(WorkflowInfo {
            workflow_id: description.id().to_string(),
            temporal_run_id: description.run_id().to_string(),
            task_queue: description.task_queue().to_string(),
            state: state_name(description.status()).to_string(),
            history_length: info.history_length,
            history_size_bytes: info.history_size_bytes,
            state_transition_count: info.state_transition_count,
            started_at: description.start_time().map(utc),
            closed_at: description.close_time().map(utc),
        }))
    }

    fn address(&self) -> &str {
        &self.settings.address
    }

    fn namespace(&self) -> &str {
        &self.settings.namespace
    }
}

/// The state names `GET /v1/runs/{id}/execution` and the reconciler use.
fn state_name(status: WorkflowExecutionStatus) -> &'static str {
    match status {
        WorkflowExecutionStatus::Running => "running",
        WorkflowExecutionStatus::Completed => "completed",
        WorkflowExecutionStatus::Failed => "failed",
        WorkflowExecutionStatus::Canceled => "cancelled",
        WorkflowExecutionStatus::Terminated => "terminated",
        WorkflowExecutionStatus::ContinuedAsNew => "continued_as_new",
        WorkflowExecutionStatus::TimedOut => "timed_out",
        _ => "unknown",
    }
}

fn utc(time: SystemTime) -> DateTime<Utc> {
    DateTime::<Utc>::from(time)
}
