//! Engine configuration: identity of this replica, leases, per-app policy and model defaults.

use std::collections::HashMap;
use std::time::Duration;

use ar_core::secret::Secret;

/// An administrator-approved OpenAI-compatible endpoint of an app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovedEndpoint {
    pub id: String,
    pub base_url: String,
    pub auth_mode: String,
}

/// What an app's configuration means to the engine.
#[derive(Debug, Clone, Default)]
pub struct AppPolicy {
    pub model_endpoints: Vec<ApprovedEndpoint>,
    pub require_run_model_credentials: bool,
    /// The app has a `model_credential_callback` (needed for `openai_chatgpt` credentials).
    pub credential_callback: bool,
}

/// A provider the runtime can reach with its own (global) configuration.
#[derive(Debug, Clone)]
pub struct ProviderDefaults {
    pub base_url: String,
    /// The global key; `None` when the provider is not configured globally.
    pub api_key: Option<Secret>,
    pub default_model: String,
    /// A provider that needs no key at all: the built-in demo model of `serve --demo`.
    pub keyless: bool,
}

impl ProviderDefaults {
    /// Whether runs without a credential of their own can use the provider.
    pub fn has_global_key(&self) -> bool {
        self.api_key.is_some() || self.keyless
    }
}

/// How the engine behaves.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Lease owner name of this process.
    pub instance_id: String,
    /// How long a lease lasts without a heartbeat.
    pub lease_ttl: Duration,
    /// How often orphaned runs are looked for.
    pub sweep_interval: Duration,
    pub apps: HashMap<String, AppPolicy>,
    /// Providers configured globally (by name: `openai`, `anthropic`, …).
    pub providers: HashMap<String, ProviderDefaults>,
    /// Providers a model client exists for (whether or not globally configured).
    pub served_providers: Vec<String>,
    /// Provider used when neither the run nor the agent names one.
    pub default_provider: String,
    /// Model rounds allowed per turn before the run fails.
    pub max_tool_steps: i64,
    /// Whether run credentials can be accepted (an encryption key exists).
    pub credentials_enabled: bool,
    /// How run-scoped MCP servers are checked at admission.
    pub mcp: crate::mcp::McpSettings,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            instance_id: ar_core::ids::new_id("inst"),
            lease_ttl: Duration::from_secs(30),
            sweep_interval: Duration::from_secs(10),
            apps: HashMap::new(),
            providers: HashMap::new(),
            served_providers: vec!["openai".into(), "openai_compatible".into()],
            default_provider: "openai".into(),
            max_tool_steps: 50,
            credentials_enabled: false,
            mcp: crate::mcp::McpSettings::default(),
        }
    }
}

impl EngineConfig {
    pub fn app(&self, app_id: &str) -> AppPolicy {
        self.apps.get(app_id).cloned().unwrap_or_default()
    }
}
