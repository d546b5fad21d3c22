//! The studio's typed errors, one per refusal the registry and its routes can answer with.

use crate::store::StoreError;

/// Why a studio operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum StudioError {
    /// No runtime ever registered under the id (404).
    #[error("studio/runtime: unknown runtime")]
    UnknownRuntime,
    /// The runtime registered once but holds no live command stream now (503).
    #[error("studio/runtime: runtime not connected")]
    NotConnected,
    /// The command id was already used (409).
    #[error("studio/runtime: command id already used")]
    DuplicateCommand,
    /// No command under the id (404).
    #[error("studio/runtime: unknown command")]
    UnknownCommand,
    /// A caller-supplied command id outside `[A-Za-z0-9._:-]{1,128}` (400).
    #[error("studio/runtime: invalid command id")]
    InvalidCommandId,
    /// A session command without a session or with an unknown verb (400).
    #[error("studio/runtime: invalid session command: {0}")]
    InvalidSessionCommand(&'static str),
    /// No runtime started the run (404).
    #[error("studio/runtime: no runtime started the run")]
    UnknownRun,
    /// The run's command is no longer in flight (409).
    #[error("studio/runtime: the run's command is no longer in flight")]
    RunFinished,
    /// The runtime holds a live stream, so it cannot be forgotten (409).
    #[error("studio/runtime: runtime is connected")]
    Connected,
    /// The runtime has queued or accepted commands, so it cannot be forgotten (409).
    #[error("studio/runtime: runtime has live commands")]
    RuntimeBusy,
    /// The studio is shutting down (503).
    #[error("studio/runtime: shutting down")]
    ShuttingDown,
    /// Serving failed.
    #[error("studio/runtime: io: {0}")]
    Io(#[from] std::io::Error),
    /// The persistent store failed.
    #[error("studio/runtime: store: {0}")]
    Store(#[from] StoreError),
}
