//! Errors: why the workspace could not be opened (a Rust error for the host), and why one
//! tool call failed (a message for the model, returned as an `is_error` tool output).

use std::path::PathBuf;

/// Why [`crate::WorkspaceTools`] could not be built for a root.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The root does not exist, is not a directory, or cannot be opened beneath (`openat2`).
    #[error("workspace root {path}: {source}")]
    Root {
        /// The root asked for.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The private scratch directory for commands (their `HOME` and `TMPDIR`) failed.
    #[error("command scratch directory: {0}")]
    Scratch(std::io::Error),
}

/// One tool call's failure, as the model will read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolError(pub String);

impl ToolError {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }

    /// An I/O failure on a path the tool was given.
    pub fn io(raw: &str, error: std::io::Error) -> Self {
        Self(format!("{}: {error}", crate::fs::display(raw)))
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub(crate) type ToolResult<T> = Result<T, ToolError>;
