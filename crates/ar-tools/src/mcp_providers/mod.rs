//! Each app's deployment-owned MCP providers (`apps[].mcp_providers`) as tools: a connection
//! per provider (`ar_mcp::provider`), its catalogue loaded at startup and refreshed (one
//! refresh at a time, retried with jittered backoff, on `refresh_interval`, and when a run
//! names a tool nobody has), the app's tools published as one snapshot, calls routed to the
//! provider that owns the tool, health and readiness (`startup_policy: required`).

mod catalog;
mod refresh;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ar_config::app::{AppSettings, McpProvider, McpTransport, StartupPolicy};
use ar_config::AppConfig;
use ar_core::mcp::McpError;
use ar_core::tool::{ToolContext, ToolDefinition, ToolOutput};
use ar_mcp::provider::{ProviderSpec, DEFAULT_PROVIDER_TIMEOUT};
use parking_lot::RwLock;
use tokio_util::sync::CancellationToken;

use crate::control::{self, names};
use catalog::ProviderCatalog;
use refresh::{Provider, RefreshOutcome};
pub use refresh::{ProviderHealth, ProviderStatus};

/// Why the providers could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("app {app_id}: MCP provider {provider:?}: {source}")]
pub struct ProviderSetupError {
    pub app_id: String,
    pub provider: String,
    #[source]
    pub source: McpError,
}

/// Where a published tool goes.
#[derive(Debug, Clone)]
struct Route {
    provider: usize,
    original: String,
}

/// The tools of one app's providers, as runs see them (replaced whole on every change).
#[derive(Debug, Default)]
struct AppSnapshot {
    tools: Vec<ToolDefinition>,
    routes: HashMap<String, Route>,
}

/// One app's providers.
struct AppProviders {
    app_id: String,
    providers: Vec<Provider>,
    /// Names the app's provider tools may not take (runtime tools, host commands).
    reserved: HashSet<String>,
    snapshot: RwLock<Arc<AppSnapshot>>,
    /// Held while a catalogue is checked against the others and published.
    publish: parking_lot::Mutex<()>,
}

/// Every app's MCP providers.
pub struct McpProviders {
    apps: HashMap<String, Arc<AppProviders>>,
}

impl std::fmt::Debug for McpProviders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut apps: Vec<_> = self
            .apps
            .iter()
            .map(|(id, app)| (id.as_str(), app.providers.len()))
            .collect();
        apps.sort_unstable();
        f.debug_struct("McpProviders")
            .field("providers_per_app", &apps)
            .finish()
    }
}

impl McpProviders {
    /// The providers of every app, not connected yet ([`McpProviders::start`] loads them).
    /// Stdio providers run in `workdir`.
    pub fn from_app_config(config: &AppConfig, workdir: &Path) -> Result<Self, ProviderSetupError> {
        Self::with_timeout(config, workdir, DEFAULT_PROVIDER_TIMEOUT)
    }

    /// As [`McpProviders::from_app_config`], with `timeout` bounding each provider request.
    pub fn with_timeout(
        config: &AppConfig,
        workdir: &Path,
        timeout: Duration,
    ) -> Result<Self, ProviderSetupError> {
        let mut apps = HashMap::new();
        for (app_id, app) in &config.apps {
            if app.mcp_providers.is_empty() {
                continue;
            }
            let mut providers = Vec::with_capacity(app.mcp_providers.len());
            for config in &app.mcp_providers {
                let connection = provider_spec(config, workdir)
                    .and_then(|spec| ar_mcp::provider::connect(spec, timeout))
                    .map_err(|source| ProviderSetupError {
                        app_id: app_id.clone(),
                        provider: config.name.clone(),
                        source,
                    })?;
                providers.push(Provider::new(config.clone(), connection));
            }
            let app_providers = AppProviders {
                app_id: app_id.clone(),
                providers,
                reserved: reserved_names(app),
                snapshot: RwLock::default(),
                publish: parking_lot::Mutex::new(()),
            };
            apps.insert(app_id.clone(), Arc::new(app_providers));
        }
        Ok(McpProviders { apps })
    }

    /// Whether any app has a provider.
    pub fn is_empty(&self) -> bool {
        self.apps.is_empty()
    }

    /// Starts loading every catalogue and keeping it fresh, until `stop`.
    pub fn start(&self, stop: &CancellationToken) {
        for app in self.apps.values() {
            for index in 0..app.providers.len() {
                tokio::spawn(refresh::maintain(app.clone(), index, stop.clone()));
            }
        }
    }

    /// The provider tools of `app_id`.
    pub fn catalog(&self, app_id: &str) -> Vec<ToolDefinition> {
        self.apps
            .get(app_id)
            .map(|app| app.snapshot.read().tools.clone())
            .unwrap_or_default()
    }

    /// Calls `name` if a provider of the app publishes it; `None` when none does.
    pub async fn call(
        &self,
        ctx: &ToolContext,
        name: &str,
        input: serde_json::Value,
    ) -> Option<ToolOutput> {
        let app = self.apps.get(&ctx.app_id)?;
        let route = app.snapshot.read().routes.get(name).cloned()?;
        let provider = &app.providers[route.provider];
        let meta = serde_json::to_value(crate::host_tools::execution_meta(ctx)).unwrap_or_default();
        let output = match provider
            .connection
            .call_tool(&route.original, input, &meta)
            .await
        {
            Ok(output) => output,
            Err(error) => {
                tracing::warn!(app_id = %ctx.app_id, run_id = %ctx.run_id, provider = %provider.config.name, tool = %name, %error, "MCP provider call failed");
                ToolOutput::error(format!(
                    "MCP provider {} failed to run {name}: {error}",
                    provider.config.name
                ))
            }
        };
        Some(output)
    }

    /// Refreshes the app's providers whose unknown-tool cooldown has passed, because a run
    /// named a tool none of them publishes; true when a catalogue changed.
    pub async fn refresh_for_unknown(&self, app_id: &str) -> bool {
        let Some(app) = self.apps.get(app_id) else {
            return false;
        };
        let due: Vec<usize> = (0..app.providers.len())
            .filter(|&index| app.providers[index].take_unknown_refresh_slot())
            .collect();
        let refreshes = due.iter().map(|&index| app.refresh(index));
        futures::future::join_all(refreshes)
            .await
            .into_iter()
            .any(|outcome| outcome == RefreshOutcome::Changed)
    }

    /// Why runs of `app_id` cannot start yet: a required provider has no catalogue.
    pub fn unready(&self, app_id: &str) -> Option<String> {
        let app = self.apps.get(app_id)?;
        let waiting: Vec<&str> = app
            .providers
            .iter()
            .filter(|provider| provider.holds_readiness())
            .map(|provider| provider.config.name.as_str())
            .collect();
        (!waiting.is_empty()).then(|| {
            format!(
                "app {app_id} is not ready: its required MCP provider(s) {} have not loaded their tool catalogue yet",
                waiting.join(", ")
            )
        })
    }

    /// `app_id/provider` of every required provider without a catalogue (empty = ready).
    pub fn waiting_for(&self) -> Vec<String> {
        let mut waiting: Vec<String> = self
            .apps
            .values()
            .flat_map(|app| {
                app.providers
                    .iter()
                    .filter(|provider| provider.holds_readiness())
                    .map(|provider| format!("{}/{}", app.app_id, provider.config.name))
            })
            .collect();
        waiting.sort_unstable();
        waiting
    }

    /// The health of each of the app's providers, in configuration order.
    pub fn health(&self, app_id: &str) -> Vec<ProviderHealth> {
        self.apps
            .get(app_id)
            .map(|app| app.providers.iter().map(Provider::health).collect())
            .unwrap_or_default()
    }

    /// Ends every session (and stops stdio processes).
    pub async fn close(&self) {
        for app in self.apps.values() {
            for provider in &app.providers {
                provider.connection.close().await;
            }
        }
    }
}

impl AppProviders {
    /// Checks `catalog` of provider `index` against the other providers and publishes the
    /// app's new snapshot; the previous catalogue stays when it is refused.
    fn publish(
        &self,
        index: usize,
        listed: Vec<ar_mcp::provider::ProviderTool>,
    ) -> Result<ProviderCatalog, String> {
        let _publishing = self.publish.lock();
        let current: Vec<Option<Arc<ProviderCatalog>>> =
            self.providers.iter().map(Provider::catalog).collect();
        let others = current
            .iter()
            .enumerate()
            .filter(|(other, _)| *other != index)
            .filter_map(|(other, catalog)| Some((other, catalog.as_ref()?)))
            .flat_map(|(other, catalog)| {
                let owner = self.providers[other].config.name.as_str();
                catalog
                    .entries
                    .iter()
                    .map(move |entry| (entry.definition.name.as_str(), owner))
            })
            .collect();
        let taken = catalog::TakenNames {
            reserved: &self.reserved,
            others,
        };
        let catalog = ProviderCatalog::build(&self.providers[index].config, listed, &taken)
            .map_err(|error| error.to_string())?;
        let accepted = Arc::new(catalog.clone());
        self.providers[index].set_catalog(accepted.clone());
        let mut snapshot = AppSnapshot::default();
        for (position, provider) in self.providers.iter().enumerate() {
            let catalog = if position == index {
                Some(accepted.clone())
            } else {
                provider.catalog()
            };
            for entry in catalog.iter().flat_map(|catalog| catalog.entries.iter()) {
                snapshot.tools.push(entry.definition.clone());
                let route = Route {
                    provider: position,
                    original: entry.original.clone(),
                };
                snapshot.routes.insert(entry.definition.name.clone(), route);
            }
        }
        *self.snapshot.write() = Arc::new(snapshot);
        Ok(catalog)
    }
}

/// The runtime's own tool names and the app's host commands: no provider tool may take them.
fn reserved_names(app: &AppSettings) -> HashSet<String> {
    let mut reserved: HashSet<String> = names::RUNTIME_CONTROL
        .iter()
        .map(|name| name.to_string())
        .collect();
    reserved.insert(control::names::GET_CONTEXT.to_string());
    reserved.insert(crate::fetch::NAME.to_string());
    if let Some(provider) = &app.command_provider {
        // An unusable embedded catalogue is reported by the host tools; nothing to reserve then.
        let commands = crate::host_tools::provider_commands(provider).unwrap_or_default();
        reserved.extend(commands.into_iter().map(|command| command.definition.name));
    }
    reserved
}

fn provider_spec(config: &McpProvider, workdir: &Path) -> Result<ProviderSpec, McpError> {
    let url = || {
        config.url.clone().ok_or_else(|| {
            McpError::Refused(format!(
                "the {} transport needs a url",
                config.transport.as_str()
            ))
        })
    };
    Ok(match config.transport {
        McpTransport::Http => ProviderSpec::HttpApi {
            url: url()?,
            token: config.token.clone(),
        },
        McpTransport::StreamableHttp => ProviderSpec::StreamableHttp {
            url: url()?,
            token: config.token.clone(),
        },
        McpTransport::Stdio => ProviderSpec::Stdio {
            command: config.command.clone().ok_or_else(|| {
                McpError::Refused("the stdio transport needs a command".to_string())
            })?,
            args: config.args.clone(),
            env: config.env.clone(),
            workdir: workdir.to_path_buf(),
        },
    })
}

/// Whether a provider holds the process's readiness until its first catalogue.
fn is_required(config: &McpProvider) -> bool {
    config.startup_policy == StartupPolicy::Required
}

#[cfg(test)]
mod tests;
