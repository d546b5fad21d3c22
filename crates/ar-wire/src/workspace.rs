//! Workspace leases recorded on runs, plus workspace mode, access, cleanup and repository finalize values.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::de::nd;

/// A prepared workspace for a run (must not contain secrets).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct WorkspaceLease {
    /// Lease id.
    #[serde(deserialize_with = "nd")]
    pub id: String,
    /// Workspace provider (e.g. `analysis`, `repository`).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// Absolute root path tools operate in.
    #[serde(deserialize_with = "nd")]
    pub root_path: String,
    /// See [`cleanup_policy`]; empty = `on_terminal`.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub cleanup_policy: String,
    /// Provider metadata (redacted repository spec, secondary checkouts…).
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

wire_values! {
    /// `execution_config.workspace.mode` and `PrepareWorkspaceRequest.workspace_mode`.
    pub mod workspace_mode {
        /// The host prepares the workspace over HTTP.
        HOST_PREPARED = "host_prepared",
        /// The runtime clones a host-described repository.
        REPOSITORY = "repository",
    }
}

wire_values! {
    /// `execution_config.workspace.access`.
    pub mod workspace_access {
        /// `run_command` restricted to read-only use.
        READ_ONLY = "read_only",
        /// Full access.
        READ_WRITE = "read_write",
    }
}

wire_values! {
    /// `WorkspaceLease.cleanup_policy`.
    pub mod cleanup_policy {
        /// After every execution, including pauses.
        ALWAYS = "always",
        /// After completed/failed/cancelled (default).
        ON_TERMINAL = "on_terminal",
        /// Never.
        MANUAL = "manual",
    }
}

wire_values! {
    /// `RepositoryWorkspaceSpec.finalize_policy`.
    pub mod finalize_policy {
        /// No delivery.
        NONE = "none",
        /// Commit locally.
        LOCAL_COMMIT = "local_commit",
        /// Push the work branch.
        PUSH_BRANCH = "push_branch",
        /// Push and open a pull request.
        OPEN_PR = "open_pr",
    }
}

wire_values! {
    /// `FinalizeWorkspaceRequest.outcome`.
    pub mod finalize_outcome {
        /// Turn completed.
        COMPLETED = "completed",
        /// Turn paused.
        PAUSED = "paused",
        /// Turn failed.
        FAILED = "failed",
    }
}

wire_values! {
    /// `CleanupWorkspaceRequest.reason`.
    pub mod cleanup_reason {
        /// Run completed.
        COMPLETED = "completed",
        /// Run failed.
        FAILED = "failed",
        /// Run cancelled.
        CANCELLED = "cancelled",
        /// Run paused (`always` policy).
        PAUSED = "paused",
    }
}
