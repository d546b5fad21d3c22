//! The workflow's pure state, kept apart from the SDK so it can be tested alone: the resume
//! ids it received and consumed, where it is (`current_step`), and what a continued run of it
//! carries over.

use ar_core::durable::TurnOutcome;

use crate::workflow::WorkflowInput;

/// Consumed resume ids remembered (the oldest are forgotten past this; a signal that old
/// cannot reach a paused run again, whose last resume the store also holds).
pub const REMEMBERED_RESUME_IDS: usize = 512;

/// A workflow run continues as new after this many turns (each turn adds about a dozen
/// events), well before Temporal's history limits, or earlier when Temporal suggests it.
pub const TURNS_PER_WORKFLOW_RUN: u64 = 200;

/// What a paused run waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    Approval,
    Input,
    Auth,
}

impl Wait {
    /// What the run waits for after `outcome` (one that waits).
    pub fn after(outcome: &TurnOutcome) -> Wait {
        if outcome.wait_for_approval {
            Wait::Approval
        } else if outcome.awaiting_auth {
            Wait::Auth
        } else {
            Wait::Input
        }
    }
}

/// Which signal brought a resume id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// `ResumeRun`.
    Resume,
    /// `ApproveRun`.
    Approve,
}

/// The contract's `current_step` values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CurrentStep {
    #[default]
    Queued,
    Preparing,
    Executing,
    AwaitingApproval,
    AwaitingInput,
    AwaitingAuth,
    ApprovalReceived,
    FeedbackReceived,
    InputReceived,
    AuthCompleted,
    HandoffRecorded,
    Completed,
}

impl CurrentStep {
    pub fn as_str(self) -> &'static str {
        match self {
            CurrentStep::Queued => "queued",
            CurrentStep::Preparing => "preparing",
            CurrentStep::Executing => "executing",
            CurrentStep::AwaitingApproval => "awaiting_approval",
            CurrentStep::AwaitingInput => "awaiting_input",
            CurrentStep::AwaitingAuth => "awaiting_auth",
            CurrentStep::ApprovalReceived => "approval_received",
            CurrentStep::FeedbackReceived => "feedback_received",
            CurrentStep::InputReceived => "input_received",
            CurrentStep::AuthCompleted => "auth_completed",
            CurrentStep::HandoffRecorded => "handoff_recorded",
            CurrentStep::Completed => "completed",
        }
    }

    /// Where a run waiting for `wait` is.
    pub fn waiting(wait: Wait) -> CurrentStep {
        match wait {
            Wait::Approval => CurrentStep::AwaitingApproval,
            Wait::Input => CurrentStep::AwaitingInput,
            Wait::Auth => CurrentStep::AwaitingAuth,
        }
    }

    /// Where a run that waited for `wait` is once `wake` woke it: an approval from either
    /// wait, else what the wait was for (a plain resume of an approval wait is feedback).
    pub fn woken(wait: Wait, wake: Option<Wake>) -> CurrentStep {
        match (wait, wake) {
            (_, Some(Wake::Approve)) => CurrentStep::ApprovalReceived,
            (Wait::Approval, _) => CurrentStep::FeedbackReceived,
            (Wait::Auth, _) => CurrentStep::AuthCompleted,
            (Wait::Input, _) => CurrentStep::InputReceived,
        }
    }
}

/// The resume ids a workflow received and has not acted on yet, and those it consumed: a
/// duplicate signal (an id pending or consumed) wakes nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResumeIds {
    pending: Vec<(String, Wake)>,
    consumed: Vec<String>,
}

impl ResumeIds {
    /// The memory of a continued workflow run: the ids its earlier runs consumed.
    pub fn carried(consumed: Vec<String>) -> ResumeIds {
        ResumeIds {
            pending: Vec::new(),
            consumed,
        }
    }

    /// Records a signal's resume id unless it is empty or already known.
    pub fn receive(&mut self, resume_id: String, wake: Wake) {
        let known = self.consumed.contains(&resume_id)
            || self.pending.iter().any(|(id, _)| *id == resume_id);
        if !resume_id.is_empty() && !known {
            self.pending.push((resume_id, wake));
        }
    }

    /// Whether a resume is waiting to be acted on.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Takes the oldest pending resume (remembering its id, within the cap); what brought it.
    pub fn consume(&mut self) -> Option<Wake> {
        if self.pending.is_empty() {
            return None;
        }
        let (resume_id, wake) = self.pending.remove(0);
        self.consumed.push(resume_id);
        if self.consumed.len() > REMEMBERED_RESUME_IDS {
            self.consumed.remove(0);
        }
        Some(wake)
    }

    pub fn pending_ids(&self) -> Vec<String> {
        self.pending.iter().map(|(id, _)| id.clone()).collect()
    }

    pub fn consumed(&self) -> &[String] {
        &self.consumed
    }
}

/// The turns a run of the workflow executes before it continues as new.
pub fn turn_limit(input: &WorkflowInput) -> u64 {
    match input.turns_per_run {
        0 => TURNS_PER_WORKFLOW_RUN,
        limit => limit,
    }
}

/// The input of the workflow's next run: the same run, the consumed ids carried over, the
/// turn count started again.
pub fn continued(input: &WorkflowInput, ids: &ResumeIds) -> WorkflowInput {
    WorkflowInput {
        consumed_resume_ids: ids.consumed().to_vec(),
        turns: 0,
        ..input.clone()
    }
}

#[cfg(test)]
mod tests;
