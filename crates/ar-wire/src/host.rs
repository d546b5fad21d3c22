//! Host-callback bodies: target context, command execution, provider tool calls, workspace
//! prepare/repository-spec/finalize/cleanup, and model-credential refresh.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::de::{nd, raw};
use crate::target::TargetRef;
use crate::workspace::WorkspaceLease;

/// Body the runtime POSTs to the app's `context_endpoint`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TargetContextRequest {
    /// App id.
    #[serde(deserialize_with = "nd")]
    pub app_id: String,
    /// Run id (empty at admission).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub run_id: String,
    /// Agent id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub agent_id: String,
    /// Target to describe.
    #[serde(deserialize_with = "nd")]
    pub target: TargetRef,
    /// Run trigger.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub trigger: Map<String, Value>,
    /// Run metadata.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

/// The app's target-context response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TargetContext {
    /// Echoed/canonical target.
    #[serde(deserialize_with = "nd")]
    pub target: TargetRef,
    /// Summary placed in `input.context_summary`.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// Extra data (`data.a2a` carries an A2A connection).
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub data: Map<String, Value>,
}

/// Caller context sent with host command and provider tool calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CommandExecutionContext {
    /// App id.
    #[serde(deserialize_with = "nd")]
    pub app_id: String,
    /// Run id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub run_id: String,
    /// Agent id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub agent_id: String,
    /// Acting external user.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub external_actor_id: String,
    /// Host workspace id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub workspace_id: String,
    /// Target type.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub target_type: String,
    /// Target id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub target_id: String,
    /// Full target (always written).
    #[serde(deserialize_with = "nd")]
    pub target: TargetRef,
    /// Run input metadata.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub run_input_metadata: Map<String, Value>,
    /// Target metadata.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub target_metadata: Map<String, Value>,
    /// Workspace lease metadata.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub workspace_metadata: Map<String, Value>,
}

/// Body of `POST {command_provider.base_url}/execute`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CommandExecutionRequest {
    /// Caller context.
    #[serde(deserialize_with = "nd")]
    pub meta: CommandExecutionContext,
    /// Command (tool) name.
    #[serde(deserialize_with = "nd")]
    pub command_name: String,
    /// Command input.
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
}

/// Host command response: `output` or `error`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CommandExecutionResponse {
    /// Command output.
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Command error.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// Body of `POST {mcp_provider.url}/call` for simple `http` tool providers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProviderToolCallRequest {
    /// Provider-side tool name.
    #[serde(deserialize_with = "nd")]
    pub tool_name: String,
    /// Tool input (always written; `null` when absent).
    pub input: Value,
    /// Caller context.
    #[serde(deserialize_with = "nd")]
    pub meta: CommandExecutionContext,
}

/// Body of `POST {workspace_provider.base_url}/prepare` and `/repository-spec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PrepareWorkspaceRequest {
    /// App id.
    #[serde(deserialize_with = "nd")]
    pub app_id: String,
    /// Run id.
    #[serde(deserialize_with = "nd")]
    pub run_id: String,
    /// Agent id.
    #[serde(deserialize_with = "nd")]
    pub agent_id: String,
    /// Run runtime kind.
    #[serde(deserialize_with = "nd")]
    pub runtime_kind: String,
    /// Run target.
    #[serde(deserialize_with = "nd")]
    pub target: TargetRef,
    /// Resolved target context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_context: Option<TargetContext>,
    /// Run instructions.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub instructions: String,
    /// Run trigger.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub trigger: Map<String, Value>,
    /// Run metadata.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// See [`crate::workspace::workspace_mode`].
    #[serde(deserialize_with = "nd")]
    pub workspace_mode: String,
    /// Agent execution config.
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub execution_config: Option<Value>,
}

/// Body of `POST {workspace_provider.base_url}/finalize`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FinalizeWorkspaceRequest {
    /// App id.
    #[serde(deserialize_with = "nd")]
    pub app_id: String,
    /// Run id.
    #[serde(deserialize_with = "nd")]
    pub run_id: String,
    /// Agent id.
    #[serde(deserialize_with = "nd")]
    pub agent_id: String,
    /// Run runtime kind.
    #[serde(deserialize_with = "nd")]
    pub runtime_kind: String,
    /// Run target.
    #[serde(deserialize_with = "nd")]
    pub target: TargetRef,
    /// The lease being finalized.
    #[serde(deserialize_with = "nd")]
    pub lease: WorkspaceLease,
    /// Redacted repository spec, for repository workspaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repository: Option<RepositoryWorkspaceSpec>,
    /// See [`crate::workspace::finalize_outcome`].
    #[serde(deserialize_with = "nd")]
    pub outcome: String,
    /// Failure message.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub error_message: String,
    /// Current run output summary.
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub output_summary: Option<Value>,
}

/// Provider response to finalize; merged into the run's output summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FinalizeWorkspaceResult {
    /// Output summary additions.
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub output_summary: Option<Value>,
    /// Lease metadata additions.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

/// Body of `POST {workspace_provider.base_url}/cleanup`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CleanupWorkspaceRequest {
    /// App id.
    #[serde(deserialize_with = "nd")]
    pub app_id: String,
    /// Run id.
    #[serde(deserialize_with = "nd")]
    pub run_id: String,
    /// Agent id.
    #[serde(deserialize_with = "nd")]
    pub agent_id: String,
    /// Run runtime kind.
    #[serde(deserialize_with = "nd")]
    pub runtime_kind: String,
    /// Run target.
    #[serde(deserialize_with = "nd")]
    pub target: TargetRef,
    /// The lease being cleaned.
    #[serde(deserialize_with = "nd")]
    pub lease: WorkspaceLease,
    /// Redacted repository spec.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repository: Option<RepositoryWorkspaceSpec>,
    /// See [`crate::workspace::cleanup_reason`].
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// The host's `/repository-spec` response describing what to clone and how to deliver.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RepositoryWorkspaceSpec {
    /// Git host (e.g. `github`).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// Clone URL (required).
    #[serde(deserialize_with = "nd")]
    pub clone_url: String,
    /// Clone/push credentials (secret; `Debug` redacts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<RepositoryAuth>,
    /// Base branch.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub base_branch: String,
    /// Work branch.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub work_branch: String,
    /// Commit author identity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_identity: Option<GitIdentity>,
    /// See [`crate::workspace::finalize_policy`].
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub finalize_policy: String,
    /// Extra data (`commit_message`, `delivery_mode`…).
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

/// Repository credentials. `Debug` redacts every secret value.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RepositoryAuth {
    /// Auth type (e.g. `token`, `basic`).
    #[serde(
        rename = "type",
        deserialize_with = "nd",
        skip_serializing_if = "String::is_empty"
    )]
    pub auth_type: String,
    /// Secret token.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub token: String,
    /// User name.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub username: String,
    /// Secret password.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub password: String,
    /// Secret `http.extraHeader` value.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub extra_header: String,
    /// Environment for git (values treated as secret).
    #[serde(deserialize_with = "nd", skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

impl fmt::Debug for RepositoryAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let env: BTreeMap<&str, &str> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), crate::redact(v)))
            .collect();
        f.debug_struct("RepositoryAuth")
            .field("auth_type", &self.auth_type)
            .field("token", &crate::redact(&self.token))
            .field("username", &self.username)
            .field("password", &crate::redact(&self.password))
            .field("extra_header", &crate::redact(&self.extra_header))
            .field("env", &env)
            .finish()
    }
}

/// Git commit identity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GitIdentity {
    /// Author name.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Author email.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub email: String,
}

/// Body the runtime POSTs to the app's `model_credential_callback`; the app answers with
/// [`crate::model::UpdateRunModelCredentialRequest`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelCredentialRefreshRequest {
    /// SHA-256 (hex) of the rejected access credential.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub credential_fingerprint: String,
    /// App id.
    #[serde(deserialize_with = "nd")]
    pub app_id: String,
    /// Run id.
    #[serde(deserialize_with = "nd")]
    pub run_id: String,
    /// App run id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub host_run_id: String,
    /// Host connection id.
    #[serde(deserialize_with = "nd")]
    pub connection_id: String,
    /// Model provider.
    #[serde(deserialize_with = "nd")]
    pub provider: String,
    /// Provider account id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub account_id: String,
    /// Why a refresh is needed; see [`refresh_reason`].
    #[serde(deserialize_with = "nd")]
    pub reason: String,
}

wire_values! {
    /// `ModelCredentialRefreshRequest.reason` values, the original's (`internal/modelauth`).
    pub mod refresh_reason {
        /// The credential expires within 30 s.
        EXPIRED = "expired",
        /// The provider answered HTTP 401.
        UNAUTHORIZED = "unauthorized",
    }
}
