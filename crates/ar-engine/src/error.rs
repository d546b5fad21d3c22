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
    /// The store failed. Maps to 500; details are logged, not returned.
    #[error("store error: {0}")]
    Store(#[from] StoreError),
}

impl EngineError {
    pub fn invalid(message: impl Into<String>) -> Self {
        EngineError::Invalid(message.into())
    }

    pub fn run_not_found() -> Self {
        EngineError::NotFound("run not found".to_string())
    }

    pub fn agent_not_found() -> Self {
        EngineError::NotFound("agent not found".to_string())
    }
}

pub type EngineResult<T> = Result<T, EngineError>;
