//! Runs: one execution of an agent against a target, and the values pinned into it at admission.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::studio::StudioPolicy;
use crate::{
    ApprovalState, ExecutionMode, InvocationMode, JsonMap, PauseReason, ResumeIntent, RunStatus,
    RuntimeKind,
};

/// Display hints for a target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetDisplay {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
}

/// A thing in the host's world that a run works on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetRef {
    #[serde(rename = "type")]
    pub target_type: String,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<TargetDisplay>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonMap>,
}

/// Turn policy of a run, as admission normalized it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnPolicy {
    /// `None`: the default, `complete_on_finish`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<crate::TurnMode>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub idle_timeout_seconds: i64,
    /// Free text for chat runs; its meaning is the host's.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub expired_resume_strategy: String,
    /// `None`: the default, `implicit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_mode: Option<crate::CompletionMode>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_completion_corrections: i64,
}

fn is_zero(value: &i64) -> bool {
    *value == 0
}

impl TurnPolicy {
    pub fn pauses_after_assistant(&self) -> bool {
        self.mode == Some(crate::TurnMode::PauseAfterAssistant)
    }

    pub fn is_explicit_completion(&self) -> bool {
        self.completion_mode.is_some_and(|mode| mode.is_explicit())
    }
}

/// An approved model endpoint binding (for `openai_compatible`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelEndpoint {
    pub id: String,
    pub base_url: String,
    pub auth_mode: String,
}

/// The model route pinned into a run (never carries secrets).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunModel {
    pub provider: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<ModelEndpoint>,
    /// Model controls (reasoning effort, service tier, provider preferences), as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controls: Option<serde_json::Value>,
}

/// Inputs of a run fixed at admission (the host's own metadata included, untouched).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunInput {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<RunModel>,
    /// `app` when the host supplied a run credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_source: Option<crate::CredentialSource>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instructions: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<JsonMap>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonMap>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub context_summary: String,
    #[serde(default)]
    pub turn_policy: TurnPolicy,
    /// Remote MCP servers the host attached to this run (secret-free; not on the wire).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<crate::mcp::McpServer>,
}

/// A run record.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub id: String,
    pub app_id: String,
    pub host_run_id: String,
    pub agent_id: String,
    pub target: TargetRef,
    pub runtime_kind: RuntimeKind,
    pub execution_mode: ExecutionMode,
    pub invocation_mode: InvocationMode,
    pub external_actor_id: String,
    /// Status, pause reason and approval state; changed only through checked transitions.
    pub state: RunState,
    pub input: RunInput,
    pub output_summary: JsonMap,
    pub workspace_lease: Option<serde_json::Value>,
    pub error_message: String,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Optimistic-concurrency version; every committed change increments it.
    pub version: i64,
    /// What the engine keeps about the run for itself (never the host's metadata).
    pub engine: EngineState,
}

impl Run {
    pub fn status(&self) -> RunStatus {
        self.state.status()
    }

    pub fn pause_reason(&self) -> PauseReason {
        self.state.pause_reason()
    }

    pub fn approval_state(&self) -> ApprovalState {
        self.state.approval_state()
    }

    pub fn is_terminal(&self) -> bool {
        self.state.status().is_terminal()
    }

    /// `queued → running`: the first turn starts.
    pub fn start(&mut self, now: DateTime<Utc>) -> Result<(), TransitionError> {
        self.state.apply(RunAction::Start)?;
        self.started_at.get_or_insert(now);
        self.engine.turn_started_at = Some(now);
        Ok(())
    }

    /// `queued | running → paused` for `reason`.
    pub fn pause(&mut self, reason: PauseReason) -> Result<(), TransitionError> {
        self.state.apply(RunAction::Pause(reason))?;
        self.engine.tool_gateway_token_sha256 = None;
        Ok(())
    }

    /// Asks a running run to pause at its next safe point; false when it was already asked.
    pub fn request_pause(&mut self) -> Result<bool, TransitionError> {
        let before = self.state.pause_requested;
        self.state.apply(RunAction::RequestPause)?;
        Ok(!before)
    }

    /// `paused → running` after a person answered; approve and request-changes set the
    /// approval state on the way.
    pub fn resume(
        &mut self,
        intent: ResumeIntent,
        now: DateTime<Utc>,
    ) -> Result<(), TransitionError> {
        let mut next = self.state;
        match intent {
            ResumeIntent::Approve => next.apply(RunAction::Approve)?,
            ResumeIntent::RequestChanges => next.apply(RunAction::Reject)?,
            _ => {}
        }
        next.apply(RunAction::Resume)?;
        self.state = next;
        self.engine.turn_started_at = Some(now);
        Ok(())
    }

    /// Executing an approved mutation consumes a single-use approval.
    pub fn consume_approval(&mut self) {
        self.state.consume_approval();
    }

    pub fn complete(&mut self, now: DateTime<Utc>) -> Result<(), TransitionError> {
        self.state.apply(RunAction::Complete)?;
        self.end(now);
        Ok(())
    }

    pub fn fail(&mut self, error: &str, now: DateTime<Utc>) -> Result<(), TransitionError> {
        self.state.apply(RunAction::Fail)?;
        self.error_message = error.to_string();
        self.end(now);
        Ok(())
    }

    pub fn cancel(&mut self, now: DateTime<Utc>) -> Result<(), TransitionError> {
        self.state.apply(RunAction::Cancel)?;
        self.end(now);
        Ok(())
    }

    /// What every terminal state leaves behind: its time, and no way into the tool gateway.
    fn end(&mut self, now: DateTime<Utc>) {
        self.completed_at = Some(now);
        self.engine.tool_gateway_token_sha256 = None;
    }
}

/// What the engine records about a run for its own use, kept apart from the host's metadata.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineState {
    /// When the current turn started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_started_at: Option<DateTime<Utc>>,
    /// The last resume accepted (for idempotent retries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_resume: Option<LastResume>,
    /// Where the run's agent CLI works.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    /// How a studio command shapes this run (studio-started runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub studio: Option<StudioPolicy>,
    /// SHA-256 (hex) of the token the current CLI turn's MCP bridge sends to this run's tool
    /// gateway: any replica can check it, none can recover it. Set when a CLI turn starts,
    /// cleared when the run pauses or ends (no turn runs then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_gateway_token_sha256: Option<String>,
    /// The run's workspace: what it asked for and where its lease is in its life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceState>,
    /// The run's budgets: its agent's at admission, as resumes raised them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budgets: Option<crate::budget::RunBudgets>,
}

/// What the engine keeps about a run's workspace beside the lease on the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceState {
    pub spec: crate::workspace::WorkspaceSpec,
    /// The provider cleaned the lease's workspace; a later turn needs a new one.
    #[serde(default)]
    pub cleaned: bool,
}

impl EngineState {
    pub fn is_empty(&self) -> bool {
        *self == EngineState::default()
    }
}

/// The last resume a run accepted: a retry with the same id or fingerprint changes nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LastResume {
    pub resume_id: String,
    /// sha256 over the request's fields (see the engine's resume).
    pub fingerprint: String,
    pub intent: String,
    pub message_provenance: String,
    pub content: String,
    pub external_actor_id: String,
    pub interaction_id: String,
}

/// A change of a run's lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAction {
    Start,
    Pause(PauseReason),
    RequestPause,
    Resume,
    Approve,
    Reject,
    Complete,
    Fail,
    Cancel,
}

impl std::fmt::Display for RunAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunAction::Start => f.write_str("start"),
            RunAction::Pause(reason) => write!(f, "pause ({reason})"),
            RunAction::RequestPause => f.write_str("request a pause of"),
            RunAction::Resume => f.write_str("resume"),
            RunAction::Approve => f.write_str("approve"),
            RunAction::Reject => f.write_str("reject"),
            RunAction::Complete => f.write_str("complete"),
            RunAction::Fail => f.write_str("fail"),
            RunAction::Cancel => f.write_str("cancel"),
        }
    }
}

/// A transition the state machine does not allow; nothing was changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cannot {action} a run that is {status}")]
pub struct TransitionError {
    pub status: RunStatus,
    pub action: RunAction,
}

/// A run's place in its life. The fields are private: [`RunState::apply`] is the only way they
/// change, and it refuses what the contract's state machine does not allow (service contract
/// §3, "Legal transitions").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunState {
    status: RunStatus,
    pause_reason: PauseReason,
    approval_state: ApprovalState,
    pause_requested: bool,
}

impl RunState {
    /// A newly admitted run; `approval_required` (approval mode `always`) starts it pending.
    pub fn queued(approval_required: bool) -> Self {
        RunState {
            status: RunStatus::Queued,
            pause_reason: PauseReason::None,
            approval_state: if approval_required {
                ApprovalState::Pending
            } else {
                ApprovalState::NotRequired
            },
            pause_requested: false,
        }
    }

    /// A state as a store persisted it.
    pub fn restore(
        status: RunStatus,
        pause_reason: PauseReason,
        approval_state: ApprovalState,
        pause_requested: bool,
    ) -> Self {
        RunState {
            status,
            pause_reason,
            approval_state,
            pause_requested,
        }
    }

    pub fn status(&self) -> RunStatus {
        self.status
    }

    pub fn pause_reason(&self) -> PauseReason {
        self.pause_reason
    }

    pub fn approval_state(&self) -> ApprovalState {
        self.approval_state
    }

    /// A pause was requested; the owner stops at its next safe point.
    pub fn pause_requested(&self) -> bool {
        self.pause_requested
    }

    /// Applies `action`, or refuses it and leaves the state as it was.
    pub fn apply(&mut self, action: RunAction) -> Result<(), TransitionError> {
        use RunStatus::*;
        let refuse = TransitionError {
            status: self.status,
            action,
        };
        match (self.status, action) {
            (from, _) if from.is_terminal() => return Err(refuse),
            (Queued, RunAction::Start) => self.enter(Running, PauseReason::None),
            (Queued | Running, RunAction::Pause(reason)) if reason != PauseReason::None => {
                self.enter(Paused, reason)
            }
            (Running, RunAction::RequestPause) => self.pause_requested = true,
            (Paused, RunAction::Resume) => self.enter(Running, PauseReason::None),
            (Paused, RunAction::Approve) => self.approval_state = ApprovalState::Approved,
            (Paused, RunAction::Reject) => self.approval_state = ApprovalState::Rejected,
            (Running | Paused, RunAction::Complete) => self.enter(Completed, PauseReason::None),
            (_, RunAction::Fail) => self.enter(Failed, PauseReason::None),
            (_, RunAction::Cancel) => self.enter(Cancelled, PauseReason::None),
            _ => return Err(refuse),
        }
        Ok(())
    }

    /// Single-use approvals: `approved` becomes `not_required`; other states stay.
    pub fn consume_approval(&mut self) {
        if self.approval_state == ApprovalState::Approved {
            self.approval_state = ApprovalState::NotRequired;
        }
    }

    fn enter(&mut self, status: RunStatus, pause_reason: PauseReason) {
        self.status = status;
        self.pause_reason = pause_reason;
        self.pause_requested = false;
    }
}

#[cfg(test)]
mod tests;
