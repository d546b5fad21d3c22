//! Shared state of the HTTP handlers.

use std::sync::Arc;

use ar_config::app::AppConfig;
use ar_core::secret::Secret;
use ar_core::store::Store;
use ar_engine::Engine;
use ar_events::Bus;
use tokio_util::sync::CancellationToken;

/// What the runtime reports about itself in capabilities.
#[derive(Debug, Clone, Default)]
pub struct RuntimeFacts {
    pub runtime_kinds: Vec<String>,
    pub providers: Vec<ar_wire::ProviderCapability>,
    pub store_driver: String,
    pub store_in_memory: bool,
}

/// Handler state: cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub engine: Engine,
    pub store: Arc<dyn Store>,
    pub bus: Arc<Bus>,
    pub apps: Arc<AppConfig>,
    /// `None` when anonymous access is allowed.
    pub service_token: Option<Secret>,
    pub facts: Arc<RuntimeFacts>,
    pub http: reqwest::Client,
    /// Cancelled once the server drains at shutdown: open event streams end (clients resume
    /// elsewhere with `Last-Event-ID`) so they cannot hold the graceful shutdown open forever.
    pub draining: CancellationToken,
    /// The apps' MCP providers (their health and the readiness they hold).
    pub mcp_providers: Arc<ar_tools::McpProviders>,
    /// What `/metrics` reports.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The fleet's router when nodes are configured (their health and inventory).
    pub fleet: Option<Arc<ar_dispatch::ClusterRouter>>,
    /// Codex's device sign-in of runs.
    pub codex_auth: Arc<crate::codex_auth::CodexAuth>,
}

impl AppState {
    pub fn is_v2_app(&self, app_id: &str) -> bool {
        self.apps
            .apps
            .get(app_id)
            .map(|app| app.event_protocol.as_str() == "v2")
            .unwrap_or(false)
    }
}
