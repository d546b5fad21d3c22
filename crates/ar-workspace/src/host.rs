//! `WorkspaceTools`: one run's tool host over one root, and the dispatch of a call to its tool.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use ar_core::tool::{ToolContext, ToolDefinition, ToolHost, ToolOutput};
use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::command::{self, CommandPolicy, PidsCgroup, Scratch};
use crate::error::{ToolError, ToolResult, WorkspaceError};
use crate::fs::Root;
use crate::state::ReadState;
use crate::{is_workspace_tool, patch, read, schema, search, symbols, write, Access};

/// The workspace tools of one run over one root.
///
/// Cheap to clone (clones share the run's state). Calls may run concurrently; mutations of
/// files are serialized so that a check and the write it allows are not interleaved with
/// another mutation.
#[derive(Clone)]
pub struct WorkspaceTools {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub root: Root,
    pub access: Access,
    pub reads: ReadState,
    pub policy: CommandPolicy,
    pub scratch: Scratch,
    /// The run's pids cgroup for commands, made at the first one (`None`: not available).
    pub cgroup: OnceLock<Option<PidsCgroup>>,
    /// Held while a command runs.
    pub commands: tokio::sync::Mutex<()>,
    mutation: Mutex<()>,
}

impl Inner {
    /// Held across a mutation's checks and writes.
    pub fn mutation_guard(&self) -> MutexGuard<'_, ()> {
        self.mutation.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl std::fmt::Debug for WorkspaceTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceTools")
            .field("root", &self.inner.root.real_path())
            .field("access", &self.inner.access)
            .finish_non_exhaustive()
    }
}

impl WorkspaceTools {
    /// Opens the tools over `root` with the default command policy.
    pub fn open(root: impl AsRef<Path>, access: Access) -> Result<Self, WorkspaceError> {
        Self::with_policy(root, access, CommandPolicy::default())
    }

    /// Opens the tools over `root` (which must be an existing directory) with `policy` for
    /// `run_command`.
    pub fn with_policy(
        root: impl AsRef<Path>,
        access: Access,
        policy: CommandPolicy,
    ) -> Result<Self, WorkspaceError> {
        let path = root.as_ref();
        let root = Root::open(path).map_err(|source| WorkspaceError::Root {
            path: path.to_path_buf(),
            source,
        })?;
        let scratch = Scratch::create().map_err(WorkspaceError::Scratch)?;
        Ok(Self {
            inner: Arc::new(Inner {
                root,
                access,
                reads: ReadState::default(),
                policy,
                scratch,
                cgroup: OnceLock::new(),
                commands: tokio::sync::Mutex::new(()),
                mutation: Mutex::new(()),
            }),
        })
    }

    /// The root's real path.
    pub fn root(&self) -> &Path {
        self.inner.root.real_path()
    }

    /// The access mode.
    pub fn access(&self) -> Access {
        self.inner.access
    }

    /// The tools offered: all of them read-write; read-only, no file mutations and the
    /// read-only `run_command`.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        schema::definitions(self.inner.access)
    }

    /// Runs one call. Every failure is an `is_error` output whose text says why.
    pub async fn call_tool(&self, name: &str, input: Value) -> ToolOutput {
        if !is_workspace_tool(name) {
            return ToolOutput::error(format!("{name:?} is not a workspace tool"));
        }
        if self.inner.access == Access::ReadOnly && schema::FILE_MUTATIONS.contains(&name) {
            return ToolOutput::error(format!(
                "the workspace is read-only: {name} is not available in this run"
            ));
        }
        if name == "run_command" {
            return command::run(&self.inner, input)
                .await
                .unwrap_or_else(|e| ToolOutput::error(e.0));
        }
        let inner = Arc::clone(&self.inner);
        let tool = name.to_string();
        // File tools do blocking I/O (a search can read thousands of files).
        let outcome = tokio::task::spawn_blocking(move || file_tool(&inner, &tool, input)).await;
        match outcome {
            Ok(Ok(output)) => output,
            Ok(Err(error)) => ToolOutput::error(error.0),
            Err(_) => ToolOutput::error(format!("{name} failed unexpectedly")),
        }
    }
}

fn file_tool(inner: &Inner, name: &str, input: Value) -> ToolResult<ToolOutput> {
    match name {
        "read_file" => read::read_file(inner, parse(name, input)?),
        "read_files" => read::read_files(inner, parse(name, input)?),
        "read_file_range" => read::read_file_range(inner, parse(name, input)?),
        "list_directory" => read::list_directory(inner, parse(name, input)?),
        "search_files" => search::search_files(inner, parse(name, input)?),
        "ripgrep" => search::ripgrep(inner, parse(name, input)?),
        "grep" => search::grep(inner, parse(name, input)?),
        "list_symbols" => symbols::list_symbols(inner, parse(name, input)?),
        "write_file" => write::write_file(inner, parse(name, input)?),
        "edit_file" => write::edit_file(inner, parse(name, input)?),
        "apply_patch" => patch::apply_patch(inner, parse(name, input)?),
        other => Err(ToolError::new(format!("{other:?} is not a workspace tool"))),
    }
}

/// Decodes a tool's input; a missing input is an empty object.
pub(crate) fn parse<T: DeserializeOwned>(tool: &str, input: Value) -> ToolResult<T> {
    let input = if input.is_null() {
        Value::Object(Default::default())
    } else {
        input
    };
    serde_json::from_value(input)
        .map_err(|e| ToolError::new(format!("invalid input for {tool}: {e}")))
}

/// The optional repository selector: this host serves one root, so a named repository is
/// one it does not have.
pub(crate) fn single_repository(selector: &Option<String>) -> ToolResult<()> {
    match selector.as_deref().map(str::trim) {
        None | Some("") => Ok(()),
        Some(name) => Err(ToolError::new(format!(
            "repository {name:?} is not checked out for this run; leave repository out to use the workspace"
        ))),
    }
}

#[async_trait]
impl ToolHost for WorkspaceTools {
    fn catalog(&self, _app_id: &str) -> Vec<ToolDefinition> {
        self.definitions()
    }

    async fn call(&self, _context: &ToolContext, tool_name: &str, input: Value) -> ToolOutput {
        self.call_tool(tool_name, input).await
    }
}
