//! The `CommandHandler` trait a runtime implements to execute what the studio asks, and the types it exchanges.

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::wire::{
    AckReason, ApprovalDecision, Command, Registration, RunStatus, SessionCommand, SteerMessage,
};

/// A tracked command from the stream: acked, at most once.
#[derive(Debug, Clone, PartialEq)]
// Values of this enum are built once per command and moved, never held in bulk arrays
// where the variant size difference would matter.
#[allow(clippy::large_enum_variant)]
pub enum Work {
    Run(Command),
    Approve(ApprovalDecision),
    Session(SessionCommand),
}

impl Work {
    /// The command id.
    pub fn command_id(&self) -> &str {
        match self {
            Work::Run(c) => &c.command_id,
            Work::Approve(d) => &d.command_id,
            Work::Session(s) => &s.command_id,
        }
    }
}

/// A command the handler agreed to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admission {
    /// The run the command starts or resumes (empty when not known yet, as for a fork turn).
    pub run_id: String,
}

/// Why the handler refused a command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rejection {
    pub message: String,
    pub reason: Option<AckReason>,
}

impl Rejection {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            reason: None,
        }
    }

    pub fn with_kind(message: impl Into<String>, kind: &str) -> Self {
        Self {
            message: message.into(),
            reason: Some(AckReason {
                kind: kind.to_string(),
                ..AckReason::default()
            }),
        }
    }
}

/// How an executed command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The run it ended as (empty keeps the admission's).
    pub run_id: String,
    pub status: RunStatus,
    pub error: String,
    pub reason: Option<AckReason>,
    /// Tokens the run used, charged to its experiment's budget.
    pub tokens: i64,
}

impl Outcome {
    pub fn succeeded() -> Self {
        Self {
            run_id: String::new(),
            status: RunStatus::Succeeded,
            error: String::new(),
            reason: None,
            tokens: 0,
        }
    }

    pub fn failed(error: impl Into<String>) -> Self {
        Self {
            status: RunStatus::Failed,
            error: error.into(),
            ..Self::succeeded()
        }
    }
}

/// What a runtime does with the studio's commands. The link client handles the protocol
/// (register, stream, acks, heartbeats, at-most-once, admission bounds, budgets); the handler
/// only decides and executes.
#[async_trait]
pub trait CommandHandler: Send + Sync + 'static {
    /// The registration sent on every connect (the runtime's copy is authoritative).
    async fn registration(&self) -> Registration;

    /// Re-validates a command before it is accepted. An error is acked `rejected`.
    async fn admit(&self, work: &Work) -> Result<Admission, Rejection>;

    /// Runs an accepted command to its end. `cancel` fires on a `cancel` frame or on stop.
    async fn execute(&self, work: Work, admission: Admission, cancel: CancellationToken)
        -> Outcome;

    /// A steer message into a run this runtime started; best effort.
    async fn steer(&self, steer: SteerMessage) {
        let _ = steer;
    }

    /// The breakpoint set every run started from now on parks on. Applied before any later
    /// frame is read.
    async fn breakpoints(&self, tools: Vec<String>) {
        let _ = tools;
    }
}
