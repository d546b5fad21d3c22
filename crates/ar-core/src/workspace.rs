//! Workspaces: a run's opt-in (mode, access), the lease a provider hands out, cleanup policy,
//! and the ports the engine drives (`WorkspaceProvider` for the host's side, `WorkspaceOpener`
//! for the tools over a lease's root, `RunToolHost` for those tools).

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::host::{HostCause, TargetContext};
use crate::tool::{ToolDefinition, ToolOutput};
use crate::{JsonMap, TargetRef};

/// `execution_config.workspace.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceMode {
    /// The host prepares the workspace (`/prepare`, `/finalize`, `/cleanup`).
    HostPrepared,
    /// The runtime clones a repository the host describes.
    Repository,
}

impl WorkspaceMode {
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim() {
            "host_prepared" => Some(WorkspaceMode::HostPrepared),
            "repository" => Some(WorkspaceMode::Repository),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WorkspaceMode::HostPrepared => "host_prepared",
            WorkspaceMode::Repository => "repository",
        }
    }
}

/// `execution_config.workspace.access`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkspaceAccess {
    ReadOnly,
    #[default]
    ReadWrite,
}

impl WorkspaceAccess {
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim() {
            "read_only" => Some(WorkspaceAccess::ReadOnly),
            "read_write" => Some(WorkspaceAccess::ReadWrite),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WorkspaceAccess::ReadOnly => "read_only",
            WorkspaceAccess::ReadWrite => "read_write",
        }
    }
}

/// `WorkspaceLease.cleanup_policy` (empty on the wire means `on_terminal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CleanupPolicy {
    /// After every execution, pauses included.
    Always,
    /// After completed, failed or cancelled.
    #[default]
    OnTerminal,
    /// Never: the host cleans up itself.
    Manual,
}

impl CleanupPolicy {
    /// The contract's spelling; empty is `on_terminal`, anything else `None`.
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim() {
            "" | "on_terminal" => Some(CleanupPolicy::OnTerminal),
            "always" => Some(CleanupPolicy::Always),
            "manual" => Some(CleanupPolicy::Manual),
            _ => None,
        }
    }
}

/// What a run asked for: the mode and the access (both pinned when the run first executes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceSpec {
    pub mode: WorkspaceMode,
    #[serde(default)]
    pub access: WorkspaceAccess,
}

/// A prepared workspace (the contract's `WorkspaceLease`; never holds secrets).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkspaceLease {
    pub id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub provider: String,
    pub root_path: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cleanup_policy: String,
    #[serde(skip_serializing_if = "JsonMap::is_empty")]
    pub metadata: JsonMap,
}

impl WorkspaceLease {
    /// The lease as the run records it (`Run::workspace_lease`).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The lease a run recorded; `None` when it has none or it is not a lease.
    pub fn from_value(value: Option<&Value>) -> Option<Self> {
        serde_json::from_value(value?.clone()).ok()
    }

    pub fn cleanup(&self) -> CleanupPolicy {
        CleanupPolicy::parse(&self.cleanup_policy).unwrap_or_default()
    }
}

/// Who and what a workspace call is about (the common fields of the contract's bodies).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkspaceRun {
    pub app_id: String,
    pub run_id: String,
    pub agent_id: String,
    pub runtime_kind: String,
    pub target: TargetRef,
}

/// `POST {base_url}/prepare`.
#[derive(Debug, Clone, PartialEq)]
pub struct PrepareRequest {
    pub run: WorkspaceRun,
    pub target_context: Option<TargetContext>,
    pub instructions: String,
    pub trigger: JsonMap,
    pub metadata: JsonMap,
    pub mode: WorkspaceMode,
    pub execution_config: Option<Value>,
}

/// How a turn ended, for `/finalize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalizeOutcome {
    Completed,
    Paused,
    Failed,
}

impl FinalizeOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            FinalizeOutcome::Completed => "completed",
            FinalizeOutcome::Paused => "paused",
            FinalizeOutcome::Failed => "failed",
        }
    }
}

/// `POST {base_url}/finalize`.
#[derive(Debug, Clone, PartialEq)]
pub struct FinalizeRequest {
    pub run: WorkspaceRun,
    pub mode: WorkspaceMode,
    pub lease: WorkspaceLease,
    pub outcome: FinalizeOutcome,
    pub error_message: String,
    pub output_summary: JsonMap,
}

/// The provider's answer to `/finalize`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FinalizeResult {
    /// Merged into the run's output summary, key by key.
    pub output_summary: JsonMap,
    /// Merged into the lease's metadata.
    pub metadata: JsonMap,
}

/// Why a workspace is cleaned (`CleanupWorkspaceRequest.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanupReason {
    Completed,
    Failed,
    Cancelled,
    Paused,
}

impl CleanupReason {
    pub fn as_str(self) -> &'static str {
        match self {
            CleanupReason::Completed => "completed",
            CleanupReason::Failed => "failed",
            CleanupReason::Cancelled => "cancelled",
            CleanupReason::Paused => "paused",
        }
    }
}

/// `POST {base_url}/cleanup`.
#[derive(Debug, Clone, PartialEq)]
pub struct CleanupRequest {
    pub run: WorkspaceRun,
    pub mode: WorkspaceMode,
    pub lease: WorkspaceLease,
    pub reason: CleanupReason,
}

/// A workspace call that failed. The messages name the step; none carries a URL or token.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The app has no workspace provider for this mode.
    #[error("app {app_id} has no workspace provider for mode {mode}")]
    NoProvider { app_id: String, mode: &'static str },
    /// The provider could not be reached, or timed out.
    #[error("workspace provider {step} failed: provider unreachable: {detail}")]
    Unreachable {
        step: &'static str,
        detail: String,
        #[source]
        cause: HostCause,
    },
    /// The provider answered with a non-success status (`detail`: the start of its body).
    #[error("workspace provider {step} failed: HTTP {status}{detail}")]
    Status {
        step: &'static str,
        status: u16,
        detail: String,
    },
    /// The provider's answer is not what the contract says.
    #[error("workspace provider {step} returned an unusable answer: {reason}")]
    BadAnswer { step: &'static str, reason: String },
    /// Cloning, committing or delivering a repository workspace failed.
    #[error("repository workspace {step} failed: {reason}")]
    Repository { step: &'static str, reason: String },
    /// The lease's root cannot be used.
    #[error("workspace root {root:?} cannot be used: {reason}")]
    Root { root: String, reason: String },
}

/// The host's side of workspaces: prepare, finalize and clean up a run's workspace.
#[async_trait]
pub trait WorkspaceProvider: Send + Sync + 'static {
    /// Whether runs of `app_id` can get a workspace of `mode` here.
    fn supports(&self, app_id: &str, mode: WorkspaceMode) -> bool;
    async fn prepare(&self, request: &PrepareRequest) -> Result<WorkspaceLease, WorkspaceError>;
    async fn finalize(&self, request: &FinalizeRequest) -> Result<FinalizeResult, WorkspaceError>;
    async fn cleanup(&self, request: &CleanupRequest) -> Result<(), WorkspaceError>;
    /// What the workspace's current state says about it for the lease's metadata (a
    /// repository checkout's branch: `work_branch`, or `detached_head` and `head_commit`),
    /// so a branch the run switched to is what a resume checks for; `None` when the provider
    /// has nothing to say or cannot tell.
    async fn observe(&self, _run: &WorkspaceRun, _lease: &WorkspaceLease) -> Option<JsonMap> {
        None
    }
    /// Whether a lease recorded by an earlier turn can still be used (a resume, or another
    /// owner taking the run over): `Err` names what is wrong with it. A `host_prepared` lease
    /// is reused as it is (the default); a repository checkout must still be there, a git
    /// checkout of the recorded remote, on the recorded branch.
    async fn validate(
        &self,
        _run: &WorkspaceRun,
        _mode: WorkspaceMode,
        _lease: &WorkspaceLease,
    ) -> Result<(), WorkspaceError> {
        Ok(())
    }
    /// Tools of the provider's own for a run with this lease (a repository's git tools);
    /// `None` when it has none.
    fn tools(
        &self,
        _run: &WorkspaceRun,
        _lease: &WorkspaceLease,
        _access: WorkspaceAccess,
    ) -> Option<Arc<dyn RunToolHost>> {
        None
    }
}

/// The tools of one run over one workspace root, built per run and dropped with its owner.
#[async_trait]
pub trait RunToolHost: Send + Sync + 'static {
    fn definitions(&self) -> Vec<ToolDefinition>;
    /// Runs one call; failures are `is_error` outputs.
    async fn call(&self, name: &str, input: Value) -> ToolOutput;
}

/// What the tools over a lease's root may do beyond its access.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Refuse `git push` in commands (a repository whose delivery is a preview).
    pub deny_git_push: bool,
}

impl OpenOptions {
    /// The options a lease asks for: a repository lease whose spec's `delivery_mode` is
    /// `preview` denies pushes.
    pub fn of(lease: &WorkspaceLease) -> Self {
        let mode = lease
            .metadata
            .get("repository_spec")
            .and_then(|spec| spec.get("metadata"))
            .and_then(|meta| meta.get("delivery_mode"))
            .and_then(Value::as_str);
        OpenOptions {
            deny_git_push: mode == Some("preview"),
        }
    }
}

/// Opens the workspace tools over a lease's root.
pub trait WorkspaceOpener: Send + Sync + 'static {
    /// Fails when the root does not exist or is not a directory.
    fn open(
        &self,
        root: &str,
        access: WorkspaceAccess,
        options: OpenOptions,
    ) -> Result<Arc<dyn RunToolHost>, WorkspaceError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip() {
        for mode in [WorkspaceMode::HostPrepared, WorkspaceMode::Repository] {
            assert_eq!(WorkspaceMode::parse(mode.as_str()), Some(mode));
        }
        for access in [WorkspaceAccess::ReadOnly, WorkspaceAccess::ReadWrite] {
            assert_eq!(WorkspaceAccess::parse(access.as_str()), Some(access));
        }
        assert_eq!(CleanupPolicy::parse(""), Some(CleanupPolicy::OnTerminal));
        assert_eq!(CleanupPolicy::parse("manual"), Some(CleanupPolicy::Manual));
        assert_eq!(CleanupPolicy::parse("weekly"), None);
    }

    #[test]
    fn a_preview_repository_lease_denies_pushes() {
        let mut lease = WorkspaceLease::default();
        assert!(!OpenOptions::of(&lease).deny_git_push);
        lease.metadata.insert(
            "repository_spec".into(),
            serde_json::json!({"clone_url": "x", "metadata": {"delivery_mode": "preview"}}),
        );
        assert!(OpenOptions::of(&lease).deny_git_push);
    }

    #[test]
    fn a_lease_survives_the_run_record() {
        let mut lease = WorkspaceLease {
            id: "ws_1".into(),
            root_path: "/w".into(),
            ..WorkspaceLease::default()
        };
        lease.metadata.insert("k".into(), Value::from(1));
        let back = WorkspaceLease::from_value(Some(&lease.to_value()));
        assert_eq!(back, Some(lease));
        assert_eq!(WorkspaceLease::from_value(Some(&Value::from(3))), None);
    }
}
