//! Service discovery: `Capabilities`, per-provider and per-app summaries, app health components, `/healthz`.

use serde::{Deserialize, Serialize};

use crate::de::{is_false, is_zero, nd};
use crate::model::ModelEndpoint;
use crate::tools::Tool;

/// Response of `GET /v1/capabilities`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct Capabilities {
    /// Supported runtime kinds (always written).
    #[serde(deserialize_with = "nd")]
    pub runtime_kinds: Vec<String>,
    /// Model providers (always written).
    #[serde(deserialize_with = "nd")]
    pub providers: Vec<ProviderCapability>,
    /// Store backend.
    #[serde(deserialize_with = "nd")]
    pub store: StoreInfo,
    /// Durable execution.
    #[serde(deserialize_with = "nd")]
    pub durable: DurableInfo,
    /// Built-in skills.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<SkillInfo>,
    /// Configured apps (filtered by `app_id` when given).
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub apps: Vec<AppSummary>,
    /// Whether a service token is enforced.
    #[serde(deserialize_with = "nd")]
    pub service_auth_enabled: bool,
    /// Tool catalog (always written).
    #[serde(deserialize_with = "nd")]
    pub tools: Vec<Tool>,
    /// Run-scoped MCP support.
    #[serde(deserialize_with = "nd")]
    pub run_mcp: RunMCPCapability,
    /// The fleet's nodes that run agent-CLI runs (our addition; written when configured).
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeInfo>,
}

/// A node of the fleet (`agent-runtime node`) as the service sees it (our addition).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct NodeInfo {
    /// Its name (what `execution_config.placement.machine` names).
    #[serde(deserialize_with = "nd")]
    pub name: String,
    /// Its base URL.
    #[serde(deserialize_with = "nd")]
    pub url: String,
    /// Its labels.
    #[serde(
        deserialize_with = "nd",
        skip_serializing_if = "std::collections::BTreeMap::is_empty"
    )]
    pub labels: std::collections::BTreeMap<String, String>,
    /// It answers its health checks and takes runs.
    #[serde(deserialize_with = "nd")]
    pub ready: bool,
    /// Why it is not ready.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// When it was last checked (RFC 3339; empty before the first check).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub checked_at: String,
    /// This service's runs on it.
    #[serde(deserialize_with = "nd")]
    pub active_runs: i64,
    /// This service's limit of runs on it.
    #[serde(deserialize_with = "nd")]
    pub max_concurrent_runs: i64,
    /// The agent CLIs ready on it (`codex`, `claude`, `opencode`).
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<String>,
    /// Its inventory as seed 000's `AgentSourceInventorySnapshot` (CLIs, versions, readiness
    /// with evidence), as it last reported it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inventory: Option<serde_json::Value>,
}

/// One model provider as seen by the runtime.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ProviderCapability {
    /// Wire protocols.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub protocols: Vec<String>,
    /// Supported model controls.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub controls: Vec<String>,
    /// Transcript continuation supported.
    #[serde(deserialize_with = "nd")]
    pub transcript_continuation: bool,
    /// Lossless Responses replay supported.
    #[serde(deserialize_with = "nd")]
    pub lossless_response_replay: bool,
    /// Accepted credential types.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub auth_modes: Vec<String>,
    /// Run credentials can be stored (encryption key configured).
    #[serde(deserialize_with = "nd")]
    pub run_credentials_configured: bool,
    /// Provider name.
    #[serde(deserialize_with = "nd")]
    pub name: String,
    /// Global key present at startup.
    #[serde(deserialize_with = "nd")]
    pub configured: bool,
    /// Default model.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub default_model: String,
    /// Base URL overridden by environment.
    #[serde(deserialize_with = "nd")]
    pub base_url_overridden: bool,
}

/// Store backend info.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct StoreInfo {
    /// `memory`, `sqlite` or `postgres`.
    #[serde(deserialize_with = "nd")]
    pub driver: String,
    /// Whether data is lost on restart.
    #[serde(deserialize_with = "nd")]
    pub in_memory: bool,
}

/// Durable execution info.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct DurableInfo {
    /// Durable execution available.
    #[serde(deserialize_with = "nd")]
    pub enabled: bool,
    /// Workflow service address.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub temporal_address: String,
    /// Workflow namespace.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// A skill listed in capabilities.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct SkillInfo {
    /// Skill key.
    #[serde(deserialize_with = "nd")]
    pub key: String,
    /// Title.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// Description.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// Run-scoped MCP support.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct RunMCPCapability {
    /// Supported.
    #[serde(deserialize_with = "nd")]
    pub supported: bool,
    /// Transports (always written).
    #[serde(deserialize_with = "nd")]
    pub transports: Vec<String>,
    /// MCP credential encryption key configured.
    #[serde(deserialize_with = "nd")]
    pub credential_encryption_configured: bool,
    /// Most servers one run may attach (beyond the original: written when supported).
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub max_servers_per_run: i64,
    /// Most tools one server may grant (beyond the original: written when supported).
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub max_tools_per_server: i64,
    /// Plain-HTTP servers accepted (`AGENT_RUNTIME_MCP_ALLOW_HTTP`; written when on).
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_false")]
    pub allow_http: bool,
    /// Private and loopback destinations accepted (written when on).
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_false")]
    pub allow_private_networks: bool,
    /// The only hosts allowed (`AGENT_RUNTIME_MCP_ALLOWED_HOSTS`; written when set).
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
}

/// One app's configuration summary; also the response of `GET /v1/app-health`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct AppSummary {
    /// Approved model endpoint bindings.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub model_endpoints: Vec<ModelEndpoint>,
    /// Runs must bring `model` and `model_credential`.
    #[serde(deserialize_with = "nd")]
    pub require_run_model_credentials: bool,
    /// App id.
    #[serde(deserialize_with = "nd")]
    pub app_id: String,
    /// Configured host components and their health.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<AppComponent>,
}

/// One configured host component (URLs/tokens are never exposed beyond `url`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct AppComponent {
    /// Component name.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Component kind (e.g. `context`, `workspace_provider`, `model_credentials`).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Configured.
    #[serde(deserialize_with = "nd")]
    pub configured: bool,
    /// Endpoint URL.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub url: String,
    /// Transport.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub transport: String,
    /// A token is configured.
    #[serde(deserialize_with = "nd")]
    pub auth_configured: bool,
    /// Probe status.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// Probe HTTP status.
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub http_status: i64,
    /// Probe error.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// Tools a provider publishes (MCP providers; additive, written when not zero).
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub tool_count: i64,
}

/// Body of `GET /healthz`: `{"status":"ok"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct HealthResponse {
    /// Always `ok` when serving.
    #[serde(deserialize_with = "nd")]
    pub status: String,
}

impl Default for HealthResponse {
    fn default() -> Self {
        Self::ok()
    }
}

impl HealthResponse {
    /// `{"status":"ok"}`.
    pub fn ok() -> Self {
        Self {
            status: "ok".to_owned(),
        }
    }
}

wire_values! {
    /// `StoreInfo.driver`.
    pub mod store_driver {
        /// In-memory.
        MEMORY = "memory",
        /// SQLite.
        SQLITE = "sqlite",
        /// PostgreSQL.
        POSTGRES = "postgres",
    }
}
