//! The built-in workspace tools of a native run, confined to the run's workspace root.
//!
//! [`WorkspaceTools`] is one run's tool host over one root (a lease's `root_path`) and an
//! access mode: it implements [`ar_core::tool::ToolHost`] for the file tools (`read_file`,
//! `read_files`, `read_file_range`, `list_directory`, `search_files`, `ripgrep`, `grep`,
//! `list_symbols`, `write_file`, `edit_file`, `apply_patch`) and `run_command`, and keeps
//! the run's read-before-write state. Build one per run; drop it when the run's execution
//! ends (that removes the commands' scratch directory).
//!
//! Confinement:
//! - file paths are resolved by the kernel beneath the root (`fs.rs`: `openat2` with
//!   `RESOLVE_BENEATH`), at open time, so `..`, absolute paths, symlinks and a symlink
//!   swapped in after a check cannot lead outside; hard-linked files are refused;
//! - `run_command` runs an allow-listed program without a shell, through `ar-process`
//!   (its own process group, killed on timeout), with a filtered environment, rlimits, a
//!   pids cgroup of its own (a watchdog where cgroups cannot be used), bounded output, and
//!   under Landlock: writes only inside the root (none at all in a read-only workspace),
//!   reads only of the root and system paths, no signals to processes outside.
//!
//! Failures of a call are tool errors (`ToolOutput::error`) with a message for the model,
//! never panics or Rust errors.

pub mod bench;
mod command;
mod error;
mod fs;
mod host;
mod opener;
mod patch;
mod read;
mod schema;
mod search;
mod state;
mod symbols;
mod write;

pub use command::{kernel_process_limit_available, CommandPolicy, SandboxReport, SandboxState};
pub use error::WorkspaceError;
pub use host::WorkspaceTools;
pub use opener::Opener;
pub use schema::TOOL_NAMES;

/// What a run may do to its workspace (`execution_config.workspace.access`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// Read tools only; `run_command` in its read-only variant, with writes refused by the
    /// kernel.
    ReadOnly,
    /// Read and write inside the root.
    #[default]
    ReadWrite,
}

impl Access {
    /// Parses the contract's spelling (`read_only`, `read_write`); `None` for anything else.
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim() {
            "read_only" => Some(Access::ReadOnly),
            "read_write" => Some(Access::ReadWrite),
            _ => None,
        }
    }

    /// The contract's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::ReadOnly => "read_only",
            Access::ReadWrite => "read_write",
        }
    }
}

/// Whether `name` is one of this crate's tools.
pub fn is_workspace_tool(name: &str) -> bool {
    TOOL_NAMES.contains(&name)
}
