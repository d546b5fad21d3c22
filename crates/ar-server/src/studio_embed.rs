//! The embedded studio: a `StudioServer` mounted in the service under `/api/` (the runtime
//! protocol and the people API, the same paths as a standalone studio), the console at
//! `/studio`, and the links that register this service as a runtime with its own studio and
//! with `AGENT_RUNTIME_STUDIO_URL` when set.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ar_config::app::AppConfig;
use ar_config::env::StudioSettings;
use ar_core::secret::Secret;
use ar_core::store::Store;
use ar_engine::Engine;
use ar_studio::http::RouterOptions;
use ar_studio::link::{CommandHandler, LinkClient, LinkConfig, LinkHandle};
use ar_studio::{ServerConfig, StudioServer};
use axum::Router;
use tokio_util::sync::CancellationToken;

use crate::studio_runtime::{LinkedRuntime, StudioRuntime};

/// How often the registration is compared with the store's agents and re-sent when it changed.
const REGISTRATION_REFRESH: Duration = Duration::from_secs(1);
/// The longest wait between attempts of the link to the embedded studio.
const EMBEDDED_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The studio inside the service and this service's runtime side.
pub struct EmbeddedStudio {
    pub server: StudioServer,
    pub runtime: Arc<StudioRuntime>,
    token: Option<Secret>,
    external: Option<String>,
    external_token: Option<Secret>,
    store: Arc<dyn Store>,
    apps: Arc<AppConfig>,
    /// Demo mode: the console says so and offers the demo run.
    demo: bool,
}

/// The links started by [`EmbeddedStudio::start_links`].
pub struct StudioLinks {
    links: Vec<LinkHandle>,
    refresh: CancellationToken,
}

impl StudioLinks {
    /// Stops the links (their runs were already drained by the engine's shutdown).
    pub async fn stop(self) {
        self.refresh.cancel();
        for link in self.links {
            link.stop().await;
        }
    }
}

impl EmbeddedStudio {
    /// `token` guards the embedded studio (the service token); `settings` names the external
    /// studio, its token and the experiment caps.
    pub fn new(
        engine: Engine,
        store: Arc<dyn Store>,
        apps: Arc<AppConfig>,
        token: Option<Secret>,
        settings: &StudioSettings,
    ) -> Self {
        let demo = engine
            .config()
            .served_providers
            .iter()
            .any(|provider| provider == ar_core::model::DEMO_PROVIDER);
        let runtime = Arc::new(StudioRuntime::new(engine, store.clone(), apps.clone()));
        runtime.set_budget(
            settings.max_tokens_per_experiment,
            settings.max_runs_per_experiment,
        );
        EmbeddedStudio {
            server: StudioServer::new(ServerConfig::default()),
            runtime,
            token,
            external: settings
                .url
                .as_ref()
                .map(|u| u.as_str().trim_end_matches('/').to_string()),
            external_token: settings.token.clone(),
            store,
            apps,
            demo,
        }
    }

    /// `/api/...` (studio link and people API, behind the service token or loopback-only)
    /// and `/studio` (the console and its run views).
    pub fn routes(&self) -> Router {
        let token = self.token.as_ref().map(|t| t.expose().to_string());
        let api = ar_studio::http::router(
            self.server.clone(),
            RouterOptions {
                token: token.clone(),
                runs: Some(Arc::new(StoreRuns {
                    store: self.store.clone(),
                    apps: self.apps.clone(),
                })),
            },
        );
        api.merge(ar_studio::console::routes())
            .merge(crate::studio_console::routes(
                self.store.clone(),
                self.apps.clone(),
                token,
                self.demo,
            ))
    }

    /// Links this service to its own studio (at `local`) and to the configured one.
    pub fn start_links(&self, local: SocketAddr) -> StudioLinks {
        let own = if local.ip().is_unspecified() {
            SocketAddr::from(([127, 0, 0, 1], local.port()))
        } else {
            local
        };
        let mut targets = vec![(
            format!("http://{own}"),
            self.token.as_ref().map(|t| t.expose().to_string()),
        )];
        if let Some(url) = &self.external {
            targets.push((
                url.clone(),
                self.external_token.as_ref().map(|t| t.expose().to_string()),
            ));
        }
        let mut links = Vec::new();
        for (i, (url, token)) in targets.iter().enumerate() {
            let handler: Arc<dyn CommandHandler> = Arc::new(LinkedRuntime {
                runtime: self.runtime.clone(),
                slot: i,
            });
            let mut config = LinkConfig::new(url.clone());
            config.token = token.clone();
            if i == 0 {
                // The own studio is in this process: retry fast (a registration without
                // agents is refused until the first agent exists).
                config.backoff_max = EMBEDDED_BACKOFF_MAX;
            }
            match LinkClient::start(config, handler.clone()) {
                Ok(link) => links.push(link),
                Err(error) => tracing::error!(%error, url, "studio link did not start"),
            }
        }
        let refresh = CancellationToken::new();
        tokio::spawn(refresh_registrations(
            self.runtime.clone(),
            targets,
            refresh.clone(),
        ));
        StudioLinks { links, refresh }
    }

    pub async fn shutdown(&self) {
        self.server.shutdown().await;
    }
}

/// Source runs of playground commands are looked up in the service's store (404 when unknown).
struct StoreRuns {
    store: Arc<dyn Store>,
    apps: Arc<AppConfig>,
}

#[async_trait::async_trait]
impl ar_studio::http::RunLookup for StoreRuns {
    async fn run_exists(&self, run_id: &str) -> bool {
        for app in self.apps.apps.keys() {
            if let Ok(Some(_)) = self.store.get_run(app, run_id).await {
                return true;
            }
        }
        false
    }
}

/// Re-sends the registration whenever the agents change (the link sends it on connect only).
async fn refresh_registrations(
    runtime: Arc<StudioRuntime>,
    targets: Vec<(String, Option<String>)>,
    stop: CancellationToken,
) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_default();
    let beat_ms = i64::try_from(LinkConfig::new("").heartbeat.as_millis()).unwrap_or(i64::MAX);
    let mut last = runtime.current_registration().await.agents;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(REGISTRATION_REFRESH) => {}
        }
        let reg = runtime.current_registration().await;
        if reg.agents == last {
            continue;
        }
        last = reg.agents.clone();
        for (slot, (url, token)) in targets.iter().enumerate() {
            let mut reg = reg.clone();
            reg.breakpoints = runtime.breakpoints_of(slot);
            reg.studio_url = url.clone();
            reg.heartbeat_ms = beat_ms;
            let mut req = http.post(format!("{url}/api/runtime/register")).json(&reg);
            if let Some(token) = token {
                req = req.bearer_auth(token);
            }
            if let Err(error) = req.send().await {
                tracing::debug!(%error, url, "studio: registration refresh failed");
            }
        }
    }
}
