//! Durable execution (`execution_mode: durable`): the ports between the engine and a workflow
//! scheduler (Temporal), the small reference types that cross them, and how the scheduler
//! reaches Temporal over TLS ([`TemporalTls`], read by `ar-config`, used by `ar-temporal`).
//!
//! The scheduler never carries a run's data: a workflow knows a run by `{app_id, run_id}`, an
//! activity answers with the run's status and checkpointed step, and the store holds the rest.
//! The engine executes the turns (with its leases and checkpoints); the scheduler decides when.

use std::fmt;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::secret::Secret;
use crate::{PauseReason, RunStatus};

/// The workflow id of a run's workflow: `agent-run-{run_id}`.
pub fn workflow_id(run_id: &str) -> String {
    format!("agent-run-{run_id}")
}

/// What a workflow is started with: a reference to the run, nothing more.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRef {
    pub app_id: String,
    pub run_id: String,
}

/// How a run's workflow is woken from outside (the contract's signal names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurableSignal {
    /// A resume (reply, continue, auth completed) was committed under this resume id.
    Resume { resume_id: String },
    /// An approval or a request for changes was committed under this resume id.
    Approve { resume_id: String },
    /// A pause was requested (the store holds the request; the workflow records it).
    Pause,
    /// A message was appended to the run.
    Message { content: String },
    /// The run was handed off (recorded; the workflow keeps waiting).
    Handoff,
}

/// Which task queue a run's workflow goes to (before the deployment's prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurableQueue {
    NativeInteractive,
    NativeAutonomous,
    Automation,
    Coding,
}

impl DurableQueue {
    /// Every queue, in the order a worker with every role polls them.
    pub const ALL: [DurableQueue; 4] = [
        DurableQueue::NativeInteractive,
        DurableQueue::NativeAutonomous,
        DurableQueue::Automation,
        DurableQueue::Coding,
    ];

    /// The queue's name (the contract's), without the prefix.
    pub fn name(self) -> &'static str {
        match self {
            DurableQueue::NativeInteractive => "agent-native-interactive",
            DurableQueue::NativeAutonomous => "agent-native-autonomous",
            DurableQueue::Automation => "automation-default",
            DurableQueue::Coding => "agent-native-coding",
        }
    }

    /// Concurrent activities per worker process on this queue (the contract's limits).
    pub fn concurrency(self) -> usize {
        match self {
            DurableQueue::NativeInteractive => 8,
            DurableQueue::NativeAutonomous => 6,
            DurableQueue::Automation | DurableQueue::Coding => 4,
        }
    }
}

/// Where a run is scheduled and how it went, as the scheduler describes its workflow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkflowInfo {
    pub workflow_id: String,
    pub temporal_run_id: String,
    pub task_queue: String,
    /// `running`, `completed`, `failed`, `cancelled`, `terminated`, `continued_as_new`,
    /// `timed_out`.
    pub state: String,
    pub history_length: i64,
    pub history_size_bytes: i64,
    pub state_transition_count: i64,
    pub started_at: Option<DateTime<Utc>>,
    pub closed_at: Option<DateTime<Utc>>,
}

/// A scheduler call that did not go through.
#[derive(Debug, thiserror::Error)]
#[error("temporal: {0}")]
pub struct DurableError(pub String);

/// The engine's side of the scheduler: start, wake, cancel and describe a run's workflow.
#[async_trait]
pub trait DurableScheduler: Send + Sync + 'static {
    /// Starts the run's workflow on `queue`; idempotent by workflow id (an existing workflow,
    /// running or closed, is not started again).
    async fn start(&self, run: &RunRef, queue: DurableQueue) -> Result<(), DurableError>;
    /// Signals the run's workflow.
    async fn signal(&self, run_id: &str, signal: DurableSignal) -> Result<(), DurableError>;
    /// Cancels the run's workflow (a workflow already closed or never started is fine).
    async fn cancel(&self, run_id: &str) -> Result<(), DurableError>;
    /// The run's workflow, `None` when it was never started.
    async fn describe(&self, run_id: &str) -> Result<Option<WorkflowInfo>, DurableError>;
    /// The Temporal frontend and namespace (for capabilities).
    fn address(&self) -> &str;
    fn namespace(&self) -> &str;
}

/// How one turn executed by a worker left the run (`ExecuteRunActivity`'s answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnOutcome {
    pub wait_for_approval: bool,
    pub awaiting_input: bool,
    pub awaiting_auth: bool,
    pub continue_execution: bool,
    /// The run's checkpointed step after the turn (a reference, for the workflow's state).
    pub step: i64,
}

impl TurnOutcome {
    /// The outcome a run's stored status stands for: a pause waits for the matching signal, a
    /// run still queued or running continues, a terminal run is done.
    pub fn of(status: RunStatus, reason: PauseReason, step: i64) -> TurnOutcome {
        let paused = status == RunStatus::Paused;
        TurnOutcome {
            wait_for_approval: paused && reason == PauseReason::HumanApproval,
            awaiting_auth: paused && reason == PauseReason::Authentication,
            awaiting_input: paused
                && !matches!(
                    reason,
                    PauseReason::HumanApproval | PauseReason::Authentication
                ),
            continue_execution: matches!(status, RunStatus::Queued | RunStatus::Running),
            step,
        }
    }

    /// The run waits for a person.
    pub fn waits(&self) -> bool {
        self.wait_for_approval || self.awaiting_input || self.awaiting_auth
    }
}

/// Why a worker could not execute a turn now; Temporal retries the activity.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// Another live process holds the run's lease (a worker that died holds it until it
    /// expires).
    #[error("the run is leased by another process")]
    Leased,
    /// This worker is shutting down: the turn is left for another worker.
    #[error("the worker is shutting down")]
    ShuttingDown,
    /// The store could not be reached.
    #[error("{0}")]
    Store(String),
}

/// The worker's side: the engine executing a durable run's turns for the workflow's
/// activities.
#[async_trait]
pub trait DurableTurns: Send + Sync + 'static {
    /// `PrepareRunActivity`: the run's current outcome without executing anything (a run
    /// already terminal or paused is not executed again).
    async fn prepare(&self, run: &RunRef) -> Result<TurnOutcome, TurnError>;
    /// `ExecuteRunActivity`: executes the run's current turn until it pauses or ends (steps
    /// checkpointed as it goes, so a retry continues from the last one).
    async fn execute(&self, run: &RunRef) -> Result<TurnOutcome, TurnError>;
    /// `MarkRunFailedActivity`: fails a run whose turns could not be executed.
    async fn mark_failed(&self, run: &RunRef, message: &str) -> Result<(), TurnError>;
}

/// How durable execution reaches Temporal over TLS. The default: the system's roots, no client
/// certificate, the address's host as the server's name.
#[derive(Clone, Default, PartialEq)]
pub struct TemporalTls {
    /// `TEMPORAL_TLS_CA_PATH`'s or `_CA_DATA`'s certificates (PEM): the only roots trusted.
    /// `None`: the system's.
    pub ca_pem: Option<Vec<u8>>,
    /// Which of the two gave `ca_pem`, so a message names the setting to fix.
    pub ca_form: PemForm,
    /// `TEMPORAL_TLS_CERT_*` and `TEMPORAL_TLS_KEY_*`: the client certificate (mTLS).
    pub client_cert: Option<ClientCertificate>,
    /// `TEMPORAL_TLS_SERVER_NAME`: the name sent (SNI) and verified instead of the address's host.
    pub server_name: Option<String>,
}

/// How a `TEMPORAL_TLS_*` PEM setting was given: a file (`*_PATH`) or the text itself (`*_DATA`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PemForm {
    #[default]
    Path,
    Data,
}

impl PemForm {
    /// The variable of `setting` (`CA`, `CERT`, `KEY`) in this form: `TEMPORAL_TLS_CA_PATH`.
    pub fn variable(self, setting: &str) -> String {
        let suffix = match self {
            PemForm::Path => "PATH",
            PemForm::Data => "DATA",
        };
        format!("TEMPORAL_TLS_{setting}_{suffix}")
    }
}

/// A client certificate chain and its private key, both PEM.
#[derive(Clone, PartialEq)]
pub struct ClientCertificate {
    pub cert_pem: Vec<u8>,
    /// Which of `TEMPORAL_TLS_CERT_PATH` and `_CERT_DATA` gave `cert_pem`.
    pub cert_form: PemForm,
    /// PEM text; a secret, so `Debug` never shows it.
    pub key_pem: Secret,
}

impl fmt::Debug for TemporalTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = |pem: &Vec<u8>| format!("{} bytes", pem.len());
        f.debug_struct("TemporalTls")
            .field("ca_pem", &self.ca_pem.as_ref().map(bytes))
            .field("ca_form", &self.ca_form)
            .field("client_cert", &self.client_cert)
            .field("server_name", &self.server_name)
            .finish()
    }
}

impl fmt::Debug for ClientCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCertificate")
            .field("cert_pem", &format!("{} bytes", self.cert_pem.len()))
            .field("cert_form", &self.cert_form)
            .field("key_pem", &self.key_pem)
            .finish()
    }
}
