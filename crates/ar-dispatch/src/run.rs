//! The `Runtime` trait, the `Run` handle every runtime returns, and `RunSink`, the producer side of a run.
//!
//! A run's events flow through a bounded channel (capacity [`EVENT_BUFFER`]): a slow reader
//! slows the producer down (and through the pipe, the child) instead of growing memory.
//! The stream ends after the last event (`exited`). Nobody has to read it: [`Run::wait`]
//! drops an untaken stream so the producer never blocks on it.
//!
//! Dropping a `Run` that is still running cancels it, so no process outlives its handle.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use async_trait::async_trait;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::event::{RunEvent, State, Status};
use crate::spec::{RunSpec, SpecError};

/// Events buffered per run before the producer waits for the reader.
pub const EVENT_BUFFER: usize = 64;

/// Why a dispatch was refused. Nothing was started when this is returned.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// The spec is malformed or breaks an authority rule.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// No provider serves this agent.
    #[error("unknown agent {0:?}")]
    UnknownAgent(String),
    /// The cluster router knows no such machine.
    #[error("unknown machine {0:?}")]
    UnknownMachine(String),
    /// The lane refused the run (`chat_policy_unavailable`, …).
    #[error("{code}: {message}")]
    Policy {
        /// Error code.
        code: &'static str,
        /// Detail.
        message: String,
    },
    /// The process could not be started.
    #[error(transparent)]
    Process(#[from] ar_process::ProcessError),
    /// Setting the run up failed on this side (its directories, its egress proxy).
    #[error("setting up the run: {0}")]
    Setup(String),
    /// This runtime does not hand over typed output ([`Runtime::start`]).
    #[error("runtime {0:?} does not hand over typed output")]
    Unsupported(String),
    /// The remote node refused or could not be reached.
    #[error("remote node: {message}")]
    Remote {
        /// HTTP status when the node answered.
        status: Option<u16>,
        /// Detail.
        message: String,
    },
}

impl DispatchError {
    /// A short machine-readable code.
    pub fn code(&self) -> &str {
        match self {
            DispatchError::Spec(e) => e.code(),
            DispatchError::UnknownAgent(_) => "unknown_agent",
            DispatchError::UnknownMachine(_) => "unknown_machine",
            DispatchError::Policy { code, .. } => code,
            DispatchError::Process(_) => "spawn_failed",
            DispatchError::Setup(_) => "setup_failed",
            DispatchError::Unsupported(_) => "unsupported",
            DispatchError::Remote { .. } => "remote_failed",
        }
    }

    /// True when the caller's input is at fault (HTTP 4xx).
    pub fn is_client_error(&self) -> bool {
        !matches!(
            self,
            DispatchError::Process(_)
                | DispatchError::Remote { .. }
                | DispatchError::Setup(_)
                | DispatchError::Unsupported(_)
        )
    }
}

/// Why a `signal` or `cancel` did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The run already ended.
    #[error("run already finished")]
    Finished,
    /// This agent does not read input while it runs.
    #[error("agent {0:?} does not accept signals")]
    SignalUnsupported(String),
    /// The input was too large.
    #[error("signal input of {0} bytes exceeds the limit")]
    TooLarge(usize),
    /// Writing the input failed.
    #[error("signal failed: {0}")]
    Io(String),
    /// The remote node refused.
    #[error("remote node: {0}")]
    Remote(String),
}

/// Largest signal input accepted anywhere (the node's body limit).
pub const MAX_SIGNAL_BYTES: usize = 1024 * 1024;

/// A place that runs agents. Implementations are safe to call concurrently.
#[async_trait]
pub trait Runtime: Send + Sync {
    /// A short name for logs (`local`, `subscription`, `remote:NAME`, …).
    fn name(&self) -> &str;
    /// Starts a run. On error nothing was started.
    async fn dispatch(&self, spec: RunSpec) -> Result<Run, DispatchError>;
    /// Starts a run like [`Runtime::dispatch`] but hands over its typed output: what the
    /// agent's parser read in each line (the service reads its agent-CLI turns this way,
    /// here or on a node). Runtimes that cannot refuse with [`DispatchError::Unsupported`].
    async fn start(&self, spec: RunSpec) -> Result<Run<crate::local::AgentOutput>, DispatchError> {
        let _ = spec;
        Err(DispatchError::Unsupported(self.name().to_string()))
    }
}

/// The control side a runtime gives its `Run`: cancel and signal.
#[async_trait]
pub trait RunControl: Send + Sync {
    /// Requests cancellation; idempotent and immediate (kills the process group where there is one).
    fn cancel(&self);
    /// Delivers input to the running agent.
    async fn signal(&self, input: &str) -> Result<(), RunError>;
}

/// A handle to one dispatched run whose events are `E` (the wire [`RunEvent`]s of
/// [`Runtime::dispatch`], or the local runtime's typed output).
pub struct Run<E = RunEvent> {
    id: String,
    events: Mutex<Option<mpsc::Receiver<E>>>,
    status: watch::Receiver<Status>,
    control: Arc<dyn RunControl>,
}

impl<E> std::fmt::Debug for Run<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("id", &self.id)
            .field("status", &*self.status.borrow())
            .finish()
    }
}

impl<E> Run<E> {
    /// Assembles a handle from the parts made by [`RunSink::channel`].
    pub fn new(parts: RunParts<E>, control: Arc<dyn RunControl>) -> Self {
        Self {
            id: parts.id,
            events: Mutex::new(Some(parts.events)),
            status: parts.status,
            control,
        }
    }

    /// The run id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The current status.
    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// The event stream; `Some` once (the first caller owns it), `None` after.
    /// It ends after the run's last event.
    pub fn events(&self) -> Option<RunEvents<E>> {
        let mut g = match self.events.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        g.take().map(|rx| RunEvents { rx })
    }

    /// Waits for a terminal status. An untaken event stream is dropped first, so the
    /// producer is never held up by events nobody reads.
    pub async fn wait(&self) -> Status {
        drop(self.events());
        let mut rx = self.status.clone();
        let res = rx.wait_for(|s| s.terminal()).await.map(|s| s.clone());
        match res {
            Ok(s) => s,
            Err(_) => {
                let last = rx.borrow().clone();
                if last.terminal() {
                    last
                } else {
                    Status::ended(State::Failed, -1, "run ended without a final status")
                }
            }
        }
    }

    /// Waits for a terminal status without touching the event stream.
    pub async fn wait_status(&self) -> Status {
        let mut rx = self.status.clone();
        match rx.wait_for(|s| s.terminal()).await.map(|s| s.clone()) {
            Ok(s) => s,
            Err(_) => Status::ended(State::Failed, -1, "run ended without a final status"),
        }
    }

    /// Cancels the run. Idempotent; a no-op on a finished run. The final status is
    /// `canceled` with the process's exit code kept.
    pub fn cancel(&self) {
        if !self.status.borrow().terminal() {
            self.control.cancel();
        }
    }

    /// Sends input to the running agent (for process agents: the input plus a newline on stdin).
    pub async fn signal(&self, input: &str) -> Result<(), RunError> {
        if input.len() > MAX_SIGNAL_BYTES {
            return Err(RunError::TooLarge(input.len()));
        }
        if self.status.borrow().terminal() {
            return Err(RunError::Finished);
        }
        self.control.signal(input).await
    }
}

impl<E> Drop for Run<E> {
    fn drop(&mut self) {
        if !self.status.borrow().terminal() {
            self.control.cancel();
        }
    }
}

/// The event stream of a run. Also a `futures::Stream`.
#[derive(Debug)]
pub struct RunEvents<E = RunEvent> {
    rx: mpsc::Receiver<E>,
}

impl<E> RunEvents<E> {
    /// The next event, `None` after the last.
    pub async fn next(&mut self) -> Option<E> {
        self.rx.recv().await
    }

    /// Reads every remaining event.
    pub async fn collect(mut self) -> Vec<E> {
        let mut out = Vec::new();
        while let Some(e) = self.rx.recv().await {
            out.push(e);
        }
        out
    }
}

impl<E> futures::Stream for RunEvents<E> {
    type Item = E;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<E>> {
        self.rx.poll_recv(cx)
    }
}

/// The reader half made by [`RunSink::channel`], turned into a [`Run`] with [`Run::new`].
#[derive(Debug)]
pub struct RunParts<E = RunEvent> {
    id: String,
    events: mpsc::Receiver<E>,
    status: watch::Receiver<Status>,
}

/// The producer side of a run: emits events and sets the final status.
#[derive(Debug, Clone)]
pub struct RunSink<E = RunEvent> {
    id: String,
    tx: mpsc::Sender<E>,
    status: Arc<watch::Sender<Status>>,
    cancel: CancellationToken,
}

impl<E> RunSink<E> {
    /// A new sink and the reader parts for a run id. `cancel` is the run's cancellation token:
    /// while it is cancelled, `emit` stops waiting for a slow reader.
    pub fn channel(id: impl Into<String>, cancel: CancellationToken) -> (Self, RunParts<E>) {
        let id = id.into();
        let (tx, rx) = mpsc::channel(EVENT_BUFFER);
        let (stx, srx) = watch::channel(Status::running());
        (
            RunSink {
                id: id.clone(),
                tx,
                status: Arc::new(stx),
                cancel,
            },
            RunParts {
                id,
                events: rx,
                status: srx,
            },
        )
    }

    /// The run id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The run's cancellation token.
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Emits an event, waiting for room (backpressure). Returns without delivering when the
    /// reader is gone or the run was cancelled while waiting.
    pub async fn emit(&self, event: E) {
        tokio::select! {
            _ = self.tx.send(event) => {}
            _ = self.cancel.cancelled() => {}
        }
    }

    /// Sets the final status, then delivers the final events (normally one `exited`).
    /// The status becomes visible before the stream ends.
    pub async fn finish(self, status: Status, final_events: Vec<E>) {
        self.status.send_replace(status);
        for e in final_events {
            if self.tx.send(e).await.is_err() {
                break;
            }
        }
    }
}

/// A `RunControl` for runs that only need a cancellation token and no input.
#[derive(Debug, Clone)]
pub struct TokenControl {
    /// Cancelled by `cancel`.
    pub token: CancellationToken,
    /// Agent name for the `SignalUnsupported` error.
    pub agent: String,
}

#[async_trait]
impl RunControl for TokenControl {
    fn cancel(&self) {
        self.token.cancel();
    }
    async fn signal(&self, _input: &str) -> Result<(), RunError> {
        Err(RunError::SignalUnsupported(self.agent.clone()))
    }
}

/// Validates a caller-chosen run id (used in paths and URLs): 1-128 chars of `A-Za-z0-9._:-`,
/// not `.` or `..`.
fn validate_run_id(id: &str) -> Result<(), SpecError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id != "."
        && id != ".."
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(SpecError::Decode(format!(
            "RunID {id:?} must be 1-128 characters of A-Z a-z 0-9 . _ : -"
        )))
    }
}

/// The spec's run id, or a fresh ULID when empty; validated either way.
pub fn run_id_for(spec: &RunSpec) -> Result<String, SpecError> {
    if spec.run_id.is_empty() {
        Ok(ulid::Ulid::new().to_string().to_lowercase())
    } else {
        validate_run_id(&spec.run_id)?;
        Ok(spec.run_id.clone())
    }
}
