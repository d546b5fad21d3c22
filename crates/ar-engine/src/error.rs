//! Engine errors, classified the way callers must answer them (bad input, missing, conflict, internal).

use ar_core::store::StoreError;

/// Why an engine operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The request is wrong; nothing changed. Maps to 400.
    #[error("{0}")]
    Invalid(String),
    /// The record does not exist for this app. Maps to 404.
    #[error("{0}")]
    NotFound(String),
    /// The runtime is shutting down and takes no new work. Maps to 503.
    #[error("runtime is shutting down")]
    ShuttingDown,
    /// The app cannot take runs yet (a catalogue it requires has not loaded). Maps to 503.
    #[error("{0}")]
    NotReady(String),
    /// The state machine refused a change (the run moved on). Maps to 400, like the
    /// original's engine errors on mutations; nothing was written.
    #[error(transparent)]
    Transition(#[from] ar_core::TransitionError),
    /// A host callback failed (the host is down or answered garbage). Maps to 502.
    #[error(transparent)]
    Host(#[from] ar_core::host::ContextError),
    /// A fault of this runtime (sealing, an unreadable checkpoint). Maps to 500.
    #[error("{context}")]
    Internal {
        context: String,
        #[source]
        cause: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// The store failed. Maps to 500; details are logged, not returned.
    #[error("store error")]
    Store(#[from] StoreError),
}

impl EngineError {
    pub fn invalid(message: impl Into<String>) -> Self {
        EngineError::Invalid(message.into())
    }

    /// A fault of this runtime while doing `context`, keeping its cause.
    pub fn internal(
        context: impl Into<String>,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        EngineError::Internal {
            context: context.into(),
            cause: Some(Box::new(cause)),
        }
    }

    pub fn run_not_found() -> Self {
        EngineError::NotFound("run not found".to_string())
    }

    pub fn agent_not_found() -> Self {
        EngineError::NotFound("agent not found".to_string())
    }
}

pub type EngineResult<T> = Result<T, EngineError>;
