//! The composition root: builds every adapter from the settings, wires them into the engine,
//! serves HTTP, and shuts down in order (stop intake, let runs reach a checkpoint, exit).

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use ar_config::app::AppConfig;
use ar_config::env::{EventSettings, GlobalCallbackSettings, StoreSettings};
use ar_config::ServiceSettings;
use ar_core::agent_cli::AgentCli;
use ar_core::clock::SystemClock;
use ar_core::event::EventBus;
use ar_core::replica::LinkMessage;
use ar_core::secret::Secret;
use ar_core::store::Store;
use ar_engine::sealer::Sealer;
use ar_engine::{AppPolicy, ApprovedEndpoint, Engine, EngineConfig, EngineDeps, ProviderDefaults};
use ar_events::{Bus, LoggingBus};
use ar_wire::nats::SubjectTemplate;
use rand::RngCore;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::model::MeteredModels;
use crate::metrics::store::MeteredStore;
use crate::metrics::Metrics;
use crate::state::{AppState, RuntimeFacts};

/// What the other replicas send, as the link's adapter receives it.
type ReplicaInbound = futures::stream::BoxStream<'static, LinkMessage>;

/// Providers the model client speaks; `openai_chatgpt` joins them when the deployment
/// enables ChatGPT subscriptions.
const SERVED_PROVIDERS: &[&str] = &[
    "openai",
    "openai_compatible",
    "anthropic",
    "openrouter",
    "openrouter_responses",
];

/// The host tool catalog plus the runtime-control tools the engine executes itself.
struct WithControlTools(ar_tools::HostToolHost);

#[async_trait::async_trait]
impl ar_core::tool::ToolHost for WithControlTools {
    fn catalog(&self, app_id: &str) -> Vec<ar_core::tool::ToolDefinition> {
        let mut tools = self.0.catalog(app_id);
        tools.extend(ar_tools::runtime_control_tools());
        tools
    }

    async fn call(
        &self,
        context: &ar_core::tool::ToolContext,
        tool_name: &str,
        input: serde_json::Value,
    ) -> ar_core::tool::ToolOutput {
        self.0.call(context, tool_name, input).await
    }

    fn unready(&self, app_id: &str) -> Option<String> {
        self.0.unready(app_id)
    }

    async fn refresh_for_unknown(&self, app_id: &str, names: &[String]) -> bool {
        self.0.refresh_for_unknown(app_id, names).await
    }
}

/// How long in-flight steps get to reach a checkpoint at shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// A built service: the router state plus the background pieces it owns.
pub struct Service {
    pub state: AppState,
    pub engine: Engine,
    /// The token clients must send (generated in development mode).
    pub service_token: Option<Secret>,
    /// Where a generated development token was written (`None` when configured or anonymous).
    pub generated_token_path: Option<PathBuf>,
    /// How long in-flight steps get to reach a checkpoint at shutdown.
    pub shutdown_grace: Duration,
    /// The embedded studio (`/api/...`, console at `/studio`) and this service's runtime link.
    pub studio: crate::studio_embed::EmbeddedStudio,
    /// Timeouts and the per-client cap of HTTP connections.
    pub connections: crate::connections::ConnectionLimits,
    pub(crate) background: CancellationToken,
    /// The NATS sink's publisher, which flushes what is committed when `background` ends.
    nats_publisher: Option<tokio::task::JoinHandle<()>>,
    /// `TEMPORAL_*`, when durable execution is on.
    pub(crate) durable: Option<ar_config::env::DurableSettings>,
}

/// Directory for files the runtime keeps beside its database (dev token, dev key, instance id).
fn data_dir(settings: &ServiceSettings) -> PathBuf {
    ar_config::env::data_dir(&settings.store, ar_config::env::process_env)
}

fn random_hex(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    rand::thread_rng().fill_bytes(&mut buffer);
    hex::encode(buffer)
}

/// Reads a file kept beside the database, or creates it (mode 0600) with `make()`.
fn keep_file(dir: &Path, name: &str, make: impl FnOnce() -> String) -> anyhow::Result<String> {
    let path = dir.join(name);
    if let Ok(text) = std::fs::read_to_string(&path) {
        if !text.trim().is_empty() {
            return Ok(text.trim().to_string());
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let value = make();
    write_private(&path, &value)?;
    Ok(value)
}

fn write_private(path: &Path, value: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(value.as_bytes())?;
    Ok(())
}

fn app_policies(apps: &AppConfig) -> HashMap<String, AppPolicy> {
    apps.apps
        .iter()
        .map(|(app_id, app)| {
            let policy = AppPolicy {
                model_endpoints: app
                    .model_endpoint_bindings()
                    .into_iter()
                    .map(|endpoint| ApprovedEndpoint {
                        id: endpoint.id,
                        base_url: endpoint.base_url,
                        auth_mode: endpoint.auth_mode,
                    })
                    .collect(),
                require_run_model_credentials: app.require_run_model_credentials,
                credential_callback: app.model_credential_callback.is_some(),
            };
            (app_id.clone(), policy)
        })
        .collect()
}

fn provider_facts(
    settings: &ServiceSettings,
    credentials: bool,
    demo: bool,
) -> (
    Vec<ar_wire::ProviderCapability>,
    HashMap<String, ProviderDefaults>,
) {
    let models = &settings.models;
    let mut defaults = HashMap::new();
    let mut providers = Vec::new();
    // `openrouter_responses` is the original's alias of `openrouter`: the same key and URL.
    for (name, provider, protocol, controls) in [
        (
            "openai",
            &models.openai,
            "responses",
            vec!["reasoning_effort", "service_tier"],
        ),
        ("anthropic", &models.anthropic, "anthropic_messages", vec![]),
        (
            "openrouter",
            &models.openrouter,
            "responses",
            vec!["reasoning_effort", "openrouter"],
        ),
        (
            "openrouter_responses",
            &models.openrouter,
            "responses",
            vec!["reasoning_effort", "openrouter"],
        ),
    ] {
        // AGENT_RUNTIME_NATIVE_MODEL is the default provider's model; the others keep theirs.
        let default_model = if name == models.native_provider {
            models.native_model.clone()
        } else {
            ar_config::env::default_native_model(name).to_string()
        };
        // Every fixed provider has its URL and default model, with or without a global key:
        // a run that brings its own credential needs no key of ours.
        defaults.insert(
            name.to_string(),
            ProviderDefaults {
                base_url: provider.base_url.as_str().trim_end_matches('/').to_string(),
                api_key: provider.api_key.clone(),
                default_model: default_model.clone(),
                keyless: false,
            },
        );
        providers.push(ar_wire::ProviderCapability {
            protocols: vec![protocol.to_string()],
            controls: controls.into_iter().map(str::to_string).collect(),
            transcript_continuation: true,
            lossless_response_replay: false,
            auth_modes: vec!["api_key".to_string()],
            run_credentials_configured: credentials,
            name: name.to_string(),
            configured: provider.configured(),
            default_model,
            base_url_overridden: provider.base_url_overridden,
        });
    }
    let (chatgpt_defaults, chatgpt) = chatgpt_facts(models, credentials);
    defaults.insert(chatgpt.name.clone(), chatgpt_defaults);
    providers.push(chatgpt);
    providers.push(ar_wire::ProviderCapability {
        protocols: vec!["chat_completions".to_string()],
        controls: Vec::new(),
        transcript_continuation: true,
        lossless_response_replay: false,
        auth_modes: vec!["api_key".to_string(), "none".to_string()],
        run_credentials_configured: credentials,
        name: "openai_compatible".to_string(),
        configured: true,
        default_model: String::new(),
        base_url_overridden: false,
    });
    if demo {
        defaults.insert(
            ar_core::model::DEMO_PROVIDER.to_string(),
            crate::demo::provider_defaults(),
        );
        providers.push(crate::demo::capability());
    }
    (providers, defaults)
}

/// `openai_chatgpt`: the subscription backend's URL and no key of ours (its runs bring an
/// `oauth` credential), listed whether or not it is enabled (`configured` says which).
fn chatgpt_facts(
    models: &ar_config::env::ModelSettings,
    credentials: bool,
) -> (ProviderDefaults, ar_wire::ProviderCapability) {
    let name = ar_engine::model_route::CHATGPT;
    let default_model = if name == models.native_provider {
        models.native_model.clone()
    } else {
        ar_config::env::default_native_model(name).to_string()
    };
    let defaults = ProviderDefaults {
        base_url: models
            .chatgpt_base_url
            .as_str()
            .trim_end_matches('/')
            .to_string(),
        api_key: None,
        keyless: false,
        default_model: default_model.clone(),
    };
    let capability = ar_wire::ProviderCapability {
        protocols: vec!["responses".to_string()],
        controls: vec!["reasoning_effort".to_string(), "service_tier".to_string()],
        transcript_continuation: true,
        lossless_response_replay: false,
        auth_modes: vec!["oauth".to_string()],
        run_credentials_configured: credentials,
        name: name.to_string(),
        configured: models.chatgpt_enabled,
        default_model,
        base_url_overridden: models.chatgpt_base_url.as_str()
            != ar_config::env::CHATGPT_BASE_URL.default.unwrap_or_default(),
    };
    (defaults, capability)
}

/// How clients authenticate, decided at startup.
struct ServiceAuth {
    /// `None` when anonymous access is allowed.
    token: Option<Secret>,
    /// Where a generated development token was written.
    generated_token_path: Option<PathBuf>,
}

/// A configured token, anonymous access (loopback only), or a development token generated
/// once and kept beside the database.
fn resolve_auth(
    settings: &ServiceSettings,
    listen_addr: SocketAddr,
    dir: &Path,
) -> anyhow::Result<ServiceAuth> {
    if let Some(token) = settings.service_token.clone() {
        return Ok(ServiceAuth {
            token: Some(token),
            generated_token_path: None,
        });
    }
    if settings.allow_anonymous {
        if !listen_addr.ip().is_loopback() {
            anyhow::bail!(
                "refusing to serve anonymously on non-loopback address {listen_addr}: set AGENT_RUNTIME_SERVICE_TOKEN"
            );
        }
        tracing::warn!("serving without authentication (AGENT_RUNTIME_ALLOW_ANONYMOUS); local development only");
        return Ok(ServiceAuth {
            token: None,
            generated_token_path: None,
        });
    }
    let token = keep_file(dir, ar_config::env::GENERATED_TOKEN_FILE, || {
        format!("ar_dev_{}", random_hex(24))
    })?;
    Ok(ServiceAuth {
        token: Some(Secret::new(token)),
        generated_token_path: Some(dir.join(ar_config::env::GENERATED_TOKEN_FILE)),
    })
}

async fn open_store(store: &StoreSettings) -> anyhow::Result<Arc<dyn Store>> {
    Ok(match store {
        StoreSettings::Memory => ar_store::open("memory", "", "").await?,
        StoreSettings::Sqlite { dsn } => ar_store::open("sqlite", dsn, "").await?,
        StoreSettings::Postgres { url } => ar_store::open("postgres", "", url.expose()).await?,
    })
}

/// Seals run credentials with the configured key, or (development, or a single-node store)
/// with one kept beside the database. `None`: run credentials are refused.
fn credential_sealer(
    settings: &ServiceSettings,
    dir: &Path,
) -> anyhow::Result<Option<Arc<Sealer>>> {
    let dev_mode = settings.service_token.is_none() && !settings.allow_anonymous;
    let single_node = matches!(
        settings.store,
        StoreSettings::Sqlite { .. } | StoreSettings::Memory
    );
    let material = match &settings.models.credential_encryption_key {
        Some(key) => key.bytes().to_vec(),
        None if dev_mode || single_node => {
            let text = keep_file(dir, "credential-key", || random_hex(32))?;
            hex::decode(text.trim()).context("credential-key file is not hex")?
        }
        None => return Ok(None),
    };
    let sealer = Sealer::from_key_material(&material).context("credential key")?;
    Ok(Some(Arc::new(sealer)))
}

/// The credential sealer and the client of run-scoped MCP (both or neither).
type RunMcp = (
    Option<Arc<Sealer>>,
    Option<Arc<dyn ar_core::mcp::McpClient>>,
);

/// Run-scoped MCP, offered only with a credential key: the key's sealer and the client,
/// enforcing the destination policy at connect time.
fn run_mcp(settings: &ar_config::env::McpSettings) -> anyhow::Result<RunMcp> {
    let Some(key) = &settings.credential_encryption_key else {
        return Ok((None, None));
    };
    let sealer = Sealer::from_key_material(key.bytes()).context("MCP credential key")?;
    let policy = ar_mcp::McpPolicy::new(
        settings.allow_http,
        settings.allow_private_networks,
        settings.allowed_hosts.clone(),
    );
    let client = ar_mcp::McpHttpClient::new(policy).context("MCP client")?;
    Ok((Some(Arc::new(sealer)), Some(Arc::new(client))))
}

/// The configured instance id; on SQLite one kept beside the database, so a restarted process
/// takes its own runs back at once.
/// This process's instance id: a durable worker's is its own (unless configured), so the
/// leases of two workers sharing a data directory keep their turns apart.
fn process_instance_id(
    settings: &ServiceSettings,
    dir: &Path,
    worker: bool,
) -> anyhow::Result<String> {
    match (&settings.instance_id, worker) {
        (None, true) => Ok(ar_core::ids::new_id("inst")),
        _ => instance_id(settings, dir),
    }
}

fn instance_id(settings: &ServiceSettings, dir: &Path) -> anyhow::Result<String> {
    Ok(match (&settings.instance_id, &settings.store) {
        (Some(id), _) => id.clone(),
        (None, StoreSettings::Sqlite { .. }) => {
            keep_file(dir, "instance-id", || ar_core::ids::new_id("inst"))?
        }
        (None, _) => ar_core::ids::new_id("inst"),
    })
}

/// What the process running the service adds to its settings.
#[derive(Debug, Clone, Default)]
pub struct ServiceOptions {
    /// The `agent-runtime` executable, which agent CLIs start as their MCP bridge to the run's
    /// tools (`<program> mcp-bridge`). `None`: CLI runs are offered no tools of the run, and a
    /// CLI run with `mcp_servers` is refused.
    pub mcp_bridge_program: Option<PathBuf>,
    /// A durable worker: an instance id of its own per process (unless
    /// `AGENT_RUNTIME_INSTANCE_ID` names one), so that the leases of two workers sharing a
    /// data directory keep their turns apart.
    pub worker: bool,
    /// Demo mode (`serve --demo`, see [`crate::demo`]): the built-in demo model, its app and
    /// agent. Refused when a real provider is configured.
    pub demo: bool,
}

/// How long a CLI's bridged tool call may take (the bridge's own default).
const MCP_BRIDGE_TIMEOUT: Duration = Duration::from_secs(300);

/// The bridge agent CLIs start, reaching this service on loopback at the port it listens on.
fn mcp_bridge(
    options: &ServiceOptions,
    listen_addr: SocketAddr,
) -> Option<crate::agent_cli::McpBridge> {
    let program = options.mcp_bridge_program.clone()?;
    let ip = match listen_addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    Some(crate::agent_cli::McpBridge {
        program,
        base_url: format!("http://{}", SocketAddr::new(ip, listen_addr.port())),
        timeout: MCP_BRIDGE_TIMEOUT,
    })
}

/// How Codex's device sign-in runs `codex app-server`: in private homes under the data
/// directory, against the configured issuer and ChatGPT backend (`None`: codex is not here).
fn codex_login(
    settings: &ServiceSettings,
    dir: &Path,
) -> Option<ar_dispatch::codex_login::CodexLoginConfig> {
    let program = ar_process::find_program("codex", None)?;
    let models = &settings.models;
    // The backend's account discovery lives beside its Responses route (`…/backend-api/`).
    let base = models.chatgpt_base_url.as_str().trim_end_matches('/');
    let chatgpt_base_url = (Some(base) != ar_config::env::CHATGPT_BASE_URL.default)
        .then(|| format!("{}/", base.strip_suffix("/codex").unwrap_or(base)));
    Some(ar_dispatch::codex_login::CodexLoginConfig {
        program: program.display().to_string(),
        home_root: dir.join("codex-logins"),
        issuer: models
            .codex_login_issuer
            .as_ref()
            .map(|url| url.as_str().trim_end_matches('/').to_string()),
        chatgpt_base_url,
    })
}

/// The ChatGPT-subscription lane, offered with codex here. When the ChatGPT backend is not
/// codex's own, the lane's codex is pointed at it: its account calls (`chatgpt_base_url`), and
/// its Responses route as a provider signed in with the ChatGPT sign-in
/// (`requires_openai_auth`; codex's built-in provider follows the account's workspace origin,
/// which must be https).
fn lane_settings(
    settings: &ServiceSettings,
    dir: &Path,
) -> Option<crate::subscription_lane::LaneSettings> {
    let login = codex_login(settings, dir)?;
    let overrides = match &login.chatgpt_base_url {
        None => Vec::new(),
        Some(base) => {
            let quote = ar_dispatch::providers::toml_string;
            let responses = settings.models.chatgpt_base_url.as_str();
            let responses = quote(responses.trim_end_matches('/'));
            vec![
                format!("chatgpt_base_url={}", quote(base)),
                "model_provider=\"chatgpt_backend\"".into(),
                "model_providers.chatgpt_backend.name=\"chatgpt_backend\"".into(),
                format!("model_providers.chatgpt_backend.base_url={responses}"),
                "model_providers.chatgpt_backend.requires_openai_auth=true".into(),
                "model_providers.chatgpt_backend.wire_api=\"responses\"".into(),
            ]
        }
    };
    Some(crate::subscription_lane::LaneSettings {
        program: login.program,
        overrides,
    })
}

/// The agent CLIs: those found on PATH and the fleet's nodes (`AGENT_RUNTIME_NODES`) run
/// `codex`, `claude_code` and `opencode` agents, offered `bridge`; the nodes' health is
/// checked in the background until `stop`.
struct AgentClis {
    cli: Option<Arc<dyn AgentCli>>,
    /// The kinds whose CLI is on this machine.
    local_kinds: Vec<String>,
    fleet: Option<Arc<ar_dispatch::ClusterRouter>>,
}

fn agent_clis(
    dir: &Path,
    settings: &ServiceSettings,
    (options, listen_addr): (&ServiceOptions, SocketAddr),
    stop: &CancellationToken,
) -> anyhow::Result<AgentClis> {
    let nodes = &settings.nodes;
    let bridge = mcp_bridge(options, listen_addr);
    let mut cli_config = crate::agent_cli::AgentCliConfig::detect(dir.join("cli-runs"));
    cli_config.bridge = bridge;
    cli_config.node_service_url = nodes.service_url.as_ref().map(|url| url.to_string());
    cli_config.lane = lane_settings(settings, dir);
    let local_kinds: Vec<String> = cli_config
        .kinds()
        .iter()
        .map(|kind| kind.as_str().to_string())
        .collect();
    if local_kinds.is_empty() && nodes.nodes.is_empty() {
        return Ok(AgentClis {
            cli: None,
            local_kinds,
            fleet: None,
        });
    }
    let specs = settings_nodes(nodes);
    let cli = crate::agent_cli::DispatchAgentCli::with_nodes(cli_config, specs)
        .context("agent CLIs and nodes")?;
    let router = cli.router().clone();
    let fleet = router.has_nodes().then(|| {
        router.spawn_health(nodes.health_interval, stop.clone());
        router
    });
    Ok(AgentClis {
        cli: Some(Arc::new(cli)),
        local_kinds,
        fleet,
    })
}

/// The configured nodes as the cluster router takes them.
fn settings_nodes(nodes: &ar_config::nodes::NodesConfig) -> Vec<ar_dispatch::NodeSpec> {
    nodes
        .nodes
        .iter()
        .map(|node| ar_dispatch::NodeSpec {
            name: node.name.clone(),
            url: node.url.as_str().trim_end_matches('/').to_string(),
            token: node.token.clone(),
            labels: node.labels.clone(),
            max_concurrent_runs: node.max_concurrent_runs,
        })
        .collect()
}

/// Where the engine publishes: the bus, behind the replica link, the NATS sink (live deltas,
/// and persisted events handed to its publisher) and the `log` sink when they are on.
/// (Callbacks read persisted events from the store.)
fn event_sinks(
    events: &EventSettings,
    bus: &Arc<Bus>,
    nats: Option<&ar_nats::NatsSink>,
    replicas: Option<&ar_events::Replicas>,
) -> Arc<dyn EventBus> {
    let mut sink: Arc<dyn EventBus> = bus.clone();
    if let Some(replicas) = replicas {
        sink = replicas.bus(sink);
    }
    if let Some(nats) = nats {
        sink = nats.live_bus(sink);
    }
    if events.log {
        sink = Arc::new(LoggingBus::new(sink));
    }
    sink
}

/// The v1 envelope of a persisted event as JSON (app callbacks, the global callback, NATS).
fn v1_body() -> ar_events::RenderFn {
    Arc::new(|event| json_body(&crate::convert::v1_envelope(event)))
}

/// `value` as JSON, written into a buffer sized for a typical envelope at once (growing one
/// from empty reallocates several times per event).
fn json_body(value: &impl serde::Serialize) -> Vec<u8> {
    let mut body = Vec::with_capacity(512);
    match serde_json::to_writer(&mut body, value) {
        Ok(()) => body,
        Err(_) => Vec::new(),
    }
}

/// The client of app-health probes: ten seconds per probe.
fn probe_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
}

/// The apps' model credential refresh callbacks, when some app has one.
fn credential_refresher(
    apps: &AppConfig,
) -> anyhow::Result<Option<Arc<dyn ar_core::host::CredentialRefresher>>> {
    Ok(ar_tools::HttpCredentialRefresher::from_app_config(apps)
        .context("model credential callbacks")?
        .map(|refresher| Arc::new(refresher) as Arc<dyn ar_core::host::CredentialRefresher>))
}

/// The apps' skill providers, when some app has one: host skills are looked up through them.
fn skill_lookup(apps: &AppConfig) -> anyhow::Result<Option<Arc<dyn ar_skills::SkillLookup>>> {
    Ok(ar_tools::HttpSkillProviders::from_app_config(apps)
        .context("skill providers")?
        .map(|providers| Arc::new(providers) as Arc<dyn ar_skills::SkillLookup>))
}

/// The NATS JetStream sink (`AGENT_RUNTIME_EVENT_SINK` with `nats`): connected in the
/// background, its cursor in the store before the service takes a request.
async fn nats_sink(
    events: &EventSettings,
    apps: &AppConfig,
    store: &Arc<dyn Store>,
) -> anyhow::Result<Option<ar_nats::NatsSink>> {
    let Some(nats) = &events.nats else {
        return Ok(None);
    };
    let options = ar_nats::NatsOptions {
        servers: nats.url.clone(),
        client_name: nats.client_name.clone(),
        stream: nats.stream.clone(),
        stream_subjects: nats.stream_subjects.clone(),
        ensure_stream: nats.ensure_stream,
        tuning: ar_nats::Tuning::default(),
    };
    let routes = ar_nats::Routes {
        v1_template: SubjectTemplate::parse(&nats.subject_template),
        v2_template: SubjectTemplate::parse(&nats.v2_subject_template),
        v2_apps: apps
            .apps
            .iter()
            .filter(|(_, app)| app.event_protocol == ar_core::EventProtocol::V2)
            .map(|(app_id, _)| app_id.clone())
            .collect(),
        render: ar_nats::Renderers {
            v1: v1_body(),
            v2: Arc::new(|event| json_body(&crate::convert::v2_envelope(event))),
        },
    };
    let sink = ar_nats::NatsSink::connect(options, routes, store.clone())
        .await
        .context("the NATS event sink")?;
    Ok(Some(sink))
}

/// The link between the replicas sharing the store: NATS core subjects when the `nats` sink is
/// on (whatever the store: processes sharing one SQLite file are replicas too), else
/// PostgreSQL `LISTEN/NOTIFY` when the store is PostgreSQL; none otherwise (SQLite and memory
/// without NATS are one process).
async fn replica_link(
    settings: &ServiceSettings,
    nats: Option<&ar_nats::NatsSink>,
    instance_id: &str,
    stop: &CancellationToken,
) -> anyhow::Result<Option<(ar_events::Replicas, ReplicaInbound)>> {
    if let (Some(sink), Some(nats)) = (nats, &settings.events.nats) {
        let (link, inbound) = ar_nats::replicas::connect_nats_link(
            sink.client(),
            &nats.replica_subject_prefix,
            instance_id,
            stop.clone(),
        )
        .await
        .context("the replica link on NATS")?;
        tracing::info!(prefix = %nats.replica_subject_prefix, "replica link on NATS core subjects");
        return Ok(Some((ar_events::Replicas::new(link), inbound)));
    }
    if let StoreSettings::Postgres { url } = &settings.store {
        let (link, inbound) = ar_store::connect_pg_link(url.expose(), instance_id, stop.clone())
            .await
            .context("the replica link on PostgreSQL")?;
        tracing::info!("replica link on PostgreSQL LISTEN/NOTIFY");
        return Ok(Some((ar_events::Replicas::new(link), inbound)));
    }
    Ok(None)
}

/// What capabilities report about this process. Durable execution and run-scoped MCP are not
/// supported by this version (their settings are refused at startup).
fn runtime_facts(
    settings: &ServiceSettings,
    providers: Vec<ar_wire::ProviderCapability>,
    cli_kinds: &[String],
) -> RuntimeFacts {
    RuntimeFacts {
        runtime_kinds: std::iter::once("native_sdk".to_string())
            .chain(cli_kinds.iter().cloned())
            .collect(),
        providers,
        store_driver: settings.store.driver().to_string(),
        store_in_memory: matches!(settings.store, StoreSettings::Memory),
    }
}

impl Service {
    /// Builds every adapter. `listen_addr` decides whether anonymous/dev modes are allowed.
    /// Agent CLIs get no MCP bridge (see [`Service::build_with`]).
    pub async fn build(
        settings: ServiceSettings,
        listen_addr: SocketAddr,
    ) -> anyhow::Result<Service> {
        Service::build_with(settings, listen_addr, ServiceOptions::default()).await
    }

    /// [`Service::build`] with what the process adds (the MCP bridge's program).
    pub async fn build_with(
        settings: ServiceSettings,
        listen_addr: SocketAddr,
        options: ServiceOptions,
    ) -> anyhow::Result<Service> {
        let settings = crate::demo::prepare(settings, options.demo)?;
        let dir = data_dir(&settings);
        let auth = resolve_auth(&settings, listen_addr, &dir)?;
        let (metrics, store) = metered_store(&settings).await?;
        let sealer = credential_sealer(&settings, &dir)?;
        let apps = Arc::new(settings.app_config.clone());
        let bus = Arc::new(Bus::new());
        let (providers, defaults) = provider_facts(&settings, sealer.is_some(), options.demo);
        let background = CancellationToken::new();
        let clis = agent_clis(&dir, &settings, (&options, listen_addr), &background)?;
        let config = EngineConfig {
            instance_id: process_instance_id(&settings, &dir, options.worker)?,
            apps: app_policies(&apps),
            providers: defaults,
            credentials_enabled: sealer.is_some(),
            ..engine_config(&settings, options.demo)
        };
        let (mcp_sealer, mcp) = run_mcp(&settings.mcp)?;
        let (tools, mcp_providers) = tool_host(&apps, &dir, &settings.mcp)?;
        let context =
            ar_tools::ContextRouter::from_app_config(&apps).context("context endpoints")?;
        let nats = nats_sink(&settings.events, &apps, &store).await?;
        let (replicas, inbound) =
            replica_link(&settings, nats.as_ref(), &config.instance_id, &background)
                .await?
                .unzip();
        let deps = EngineDeps {
            store: store.clone(),
            bus: event_sinks(&settings.events, &bus, nats.as_ref(), replicas.as_ref()),
            models: model_client(&metrics, options.demo)?,
            tools: Arc::new(tools),
            context: Arc::new(context),
            clock: Arc::new(SystemClock),
            sealer,
            mcp_sealer,
            mcp,
            agent_cli: clis.cli,
            replicas: replicas.as_ref().map(ar_events::Replicas::link),
            skills: skill_lookup(&apps)?,
            workspaces: workspaces(&apps, &settings)?,
            workspace_opener: Some(Arc::new(ar_workspace::Opener::default())),
            credential_refresher: credential_refresher(&apps)?,
            durable: durable_scheduler(settings.durable.as_ref()).await?,
        };
        let engine = Engine::new(deps, config);
        if let (Some(replicas), Some(inbound)) = (&replicas, inbound) {
            serve_replica_link(replicas, inbound, &engine, (&bus, &store), &background);
        }
        let state = AppState {
            engine: engine.clone(),
            store: store.clone(),
            bus: bus.clone(),
            apps: apps.clone(),
            service_token: auth.token.clone(),
            facts: Arc::new(runtime_facts(&settings, providers, &clis.local_kinds)),
            fleet: clis.fleet,
            codex_auth: Arc::new(crate::codex_auth::CodexAuth::new(codex_login(
                &settings, &dir,
            ))),
            http: probe_client()?,
            draining: CancellationToken::new(),
            mcp_providers: mcp_providers.clone(),
            metrics: metrics.clone(),
        };
        let studio = crate::studio_embed::EmbeddedStudio::new(
            engine.clone(),
            store.clone(),
            apps.clone(),
            auth.token.clone(),
            &settings.studio,
        );
        let nats_publisher = nats.map(|nats| nats.spawn(background.clone()));
        start_callbacks(
            &apps,
            settings.events.callback.as_ref(),
            store,
            bus,
            &background,
        )
        .await;
        mcp_providers.start(&background);
        Ok(Service {
            state,
            engine,
            service_token: auth.token,
            generated_token_path: auth.generated_token_path,
            shutdown_grace: SHUTDOWN_GRACE,
            studio,
            connections: (&settings.http).into(),
            background,
            nats_publisher,
            durable: settings.durable,
        })
    }

    /// Serves until `shutdown` resolves, then drains.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        self.engine.start_background();
        if let Some(durable) = &self.durable {
            crate::durable::start_reconciler(
                &self.engine,
                durable.reconcile_every,
                &self.background,
            );
        }
        let router = crate::router(self.state.clone()).merge(self.studio.routes());
        let links = self.studio.start_links(listener.local_addr()?);
        let engine = self.engine.clone();
        let studio = self.studio.server.clone();
        let draining = self.state.draining.clone();
        let grace = self.shutdown_grace;
        let stop = CancellationToken::new();
        let stop_signal = stop.clone();
        tokio::spawn(async move {
            shutdown.await;
            stop_signal.cancel();
        });
        let stopped = stop.clone();
        crate::connections::serve(listener, router, self.connections, async move {
            stopped.cancelled().await;
            // Stop intake first so no new run starts while we drain.
            engine.shutdown(grace).await;
            // Runs are at their checkpoints and their events sent; end the open streams.
            // The studio links (one to this very server) and the studio's command streams
            // are connections too: graceful shutdown would wait for them forever.
            links.stop().await;
            studio.shutdown().await;
            draining.cancel();
        })
        .await;
        self.background.cancel();
        if let Some(publisher) = self.nats_publisher {
            // Bounded by the sink's own shutdown flush.
            let _ = publisher.await;
        }
        // Stdio providers are processes of their own group: they would outlive the service.
        self.state.mcp_providers.close().await;
        Ok(())
    }
}

/// The Temporal client of durable runs, when `TEMPORAL_ADDRESS` is set.
async fn durable_scheduler(
    settings: Option<&ar_config::env::DurableSettings>,
) -> anyhow::Result<Option<Arc<dyn ar_core::durable::DurableScheduler>>> {
    let Some(settings) = settings else {
        return Ok(None);
    };
    if settings.api_key.is_some() && settings.tls.is_none() {
        // As the Temporal CLI does when TLS is turned off: the operator asked for it, but the
        // key then crosses the network readable by anyone on the path.
        tracing::warn!(
            address = %settings.address,
            "TEMPORAL_API_KEY is sent to Temporal over plain text (TEMPORAL_TLS=false or an http:// address); anyone on the path can read it"
        );
    }
    let scheduler =
        ar_temporal::TemporalScheduler::connect(crate::durable::temporal_settings(settings))
            .await
            .context("durable execution (TEMPORAL_ADDRESS)")?;
    Ok(Some(Arc::new(scheduler)))
}

/// The engine settings read straight from the service settings.
fn engine_config(settings: &ServiceSettings, demo: bool) -> EngineConfig {
    let mut config = EngineConfig {
        lease_ttl: settings.lease_ttl,
        sweep_interval: settings.sweep_interval,
        served_providers: SERVED_PROVIDERS
            .iter()
            .copied()
            .chain(
                settings
                    .models
                    .chatgpt_enabled
                    .then_some(ar_engine::model_route::CHATGPT),
            )
            .map(str::to_string)
            .collect(),
        default_provider: settings.models.native_provider.clone(),
        mcp: ar_engine::mcp::McpSettings {
            allow_http: settings.mcp.allow_http,
            allow_private_networks: settings.mcp.allow_private_networks,
            allowed_hosts: settings.mcp.allowed_hosts.clone(),
        },
        ..EngineConfig::default()
    };
    if demo {
        // Demo mode has no real provider (it refuses to start beside one): runs that name
        // no model get the demo model.
        let provider = ar_core::model::DEMO_PROVIDER.to_string();
        config.served_providers.push(provider.clone());
        config.default_provider = provider;
    }
    config
}

/// The tools runs get: host commands, `fetch_url` (its destinations as open as those of run MCP
/// servers: plain http and non-public addresses only when the MCP settings allow them), the
/// apps' MCP providers (returned too, for health and readiness; stdio providers run in `dir`)
/// and the runtime-control tools.
fn tool_host(
    apps: &AppConfig,
    dir: &Path,
    mcp: &ar_config::env::McpSettings,
) -> anyhow::Result<(WithControlTools, Arc<ar_tools::McpProviders>)> {
    let providers =
        Arc::new(ar_tools::McpProviders::from_app_config(apps, dir).context("app MCP providers")?);
    let fetch = ar_tools::FetchPolicy {
        allow_http: mcp.allow_http,
        allow_private_networks: mcp.allow_private_networks,
        allow_loopback: false,
    };
    let host = ar_tools::HostToolHost::from_app_config(apps)
        .context("host tools")?
        .with_fetch_policy(fetch)
        .context("fetch_url")?
        .with_mcp_providers(providers.clone());
    Ok((WithControlTools(host), providers))
}

/// The apps' workspace providers of both transports; `None` when no app has one.
fn workspaces(
    apps: &AppConfig,
    settings: &ServiceSettings,
) -> anyhow::Result<Option<Arc<dyn ar_core::workspace::WorkspaceProvider>>> {
    let http = ar_tools::HttpWorkspaces::from_app_config(apps).context("workspace providers")?;
    let github = settings.github_api_base.as_ref().map(|url| url.as_str());
    let repository = ar_tools::RepositoryWorkspaces::from_app_config(apps, github)
        .context("repository workspace providers")?
        .with_github_token(settings.github_token.clone());
    if http.is_empty() && repository.is_empty() {
        return Ok(None);
    }
    let router = ar_tools::WorkspaceRouter::default()
        .with(Arc::new(http))
        .with(Arc::new(repository));
    Ok(Some(Arc::new(router)))
}

/// Per-app event callbacks and the legacy global one (`AGENT_RUNTIME_EVENT_SINK` with
/// `callback`), delivered through the durable outbox. Their cursors are made before the
/// service takes a request, so no event committed from then on is missed.
/// Hands what the other replicas send to this one's bus and to the runs' owners.
fn serve_replica_link(
    replicas: &ar_events::Replicas,
    inbound: ReplicaInbound,
    engine: &Engine,
    (bus, store): (&Arc<Bus>, &Arc<dyn Store>),
    background: &CancellationToken,
) {
    let owners = engine.clone();
    replicas.spawn(
        inbound,
        bus.clone(),
        store.clone(),
        move |run_id, signal| owners.owner_signal_received(run_id, signal),
        background.clone(),
    );
}

/// The metrics, and the store wrapped by their recorder.
async fn metered_store(
    settings: &ServiceSettings,
) -> anyhow::Result<(Arc<Metrics>, Arc<dyn Store>)> {
    let metrics = Arc::new(Metrics::new());
    watch_outboxes(&metrics, &settings.events, &settings.app_config);
    let store = MeteredStore::wrap(open_store(&settings.store).await?, metrics.clone());
    Ok((metrics, store))
}

/// The model client (every vendor's dialect), wrapped by the metrics' recorder.
fn model_client(
    metrics: &Arc<Metrics>,
    demo: bool,
) -> anyhow::Result<Arc<dyn ar_core::model::ModelClient>> {
    let mut client: Arc<dyn ar_core::model::ModelClient> =
        Arc::new(ar_llm::LlmClient::new().context("model client")?);
    if demo {
        client = Arc::new(crate::demo::WithDemo::new(client));
    }
    Ok(MeteredModels::wrap(client, metrics.clone()))
}

/// Names every outbox cursor (the apps' callbacks, the global callback, the NATS sink) so
/// `/metrics` reports its lag.
fn watch_outboxes(metrics: &Metrics, events: &EventSettings, apps: &AppConfig) {
    for (app_id, app) in &apps.apps {
        for callback in &app.event_callbacks {
            metrics.watch_outbox(callback.cursor_name(app_id));
        }
    }
    if let Some(global) = &events.callback {
        metrics.watch_outbox(global.cursor_name());
    }
    if let Some(nats) = &events.nats {
        metrics.watch_outbox(ar_nats::cursor_name(&nats.stream));
    }
}

async fn start_callbacks(
    apps: &AppConfig,
    global: Option<&GlobalCallbackSettings>,
    store: Arc<dyn Store>,
    bus: Arc<Bus>,
    cancel: &CancellationToken,
) {
    let mut targets = Vec::new();
    for (app_id, app) in &apps.apps {
        for callback in &app.event_callbacks {
            targets.push(ar_events::CallbackTarget {
                cursor_name: callback.cursor_name(app_id),
                apps: ar_events::AppFilter::One(app_id.clone()),
                url: callback.url.to_string(),
                token: callback.token.clone(),
                event_types: callback.event_types.clone(),
                start: ar_events::StartPosition::End,
            });
        }
    }
    if let Some(global) = global {
        targets.push(ar_events::CallbackTarget {
            cursor_name: global.cursor_name(),
            apps: ar_events::AppFilter::All,
            url: global.url.to_string(),
            token: global.token.clone(),
            event_types: Vec::new(),
            start: ar_events::StartPosition::End,
        });
    }
    if targets.is_empty() {
        return;
    }
    let dispatcher = match ar_events::CallbackDispatcher::new(store, v1_body(), targets) {
        Ok(dispatcher) => dispatcher.wake_on(&bus),
        Err(error) => {
            tracing::error!(%error, "event callbacks disabled: could not build the HTTP client");
            return;
        }
    };
    if let Err(error) = dispatcher.init_cursors().await {
        // The workers create them, retrying; events committed until then may be skipped.
        tracing::warn!(%error, "creating the event callbacks' cursors failed");
    }
    let cancel = cancel.clone();
    tokio::spawn(async move { dispatcher.run(cancel).await });
}
