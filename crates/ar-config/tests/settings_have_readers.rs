//! Every declared setting is read by production code or refused: no setting is accepted and ignored.
//!
//! The declarations say which settings this version supports ([`Support`] on every
//! [`EnvVar`] of `env::ALL` and on every key of `app::keys::SECTIONS`). This test holds them to
//! it from both sides:
//! - a setting that is not supported yet is refused when set: the real validation
//!   (`ServiceSettings::from_env`, which `serve` and `config validate` run) reports it by name,
//!   saying which capability is missing;
//! - a supported setting has a reader recorded below, and that reader is in the production
//!   source of another crate (test modules and comments do not count). A new setting without a
//!   reader or a refusal fails here; so does a reader that disappears.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use ar_config::app::keys::{Section, SECTIONS};
use ar_config::env::{EnvVar, ALL};
use ar_config::support::{Capability, Support};
use ar_config::{Diagnostic, ServiceSettings};
use serde_json::{json, Value};

/// Where production code reads a supported setting: the file (below `crates/`) and fragments
/// of code that must all occur in it (whitespace is ignored).
struct Reader {
    setting: &'static str,
    file: &'static str,
    code: &'static [&'static str],
}

const fn reader(
    setting: &'static str,
    file: &'static str,
    code: &'static [&'static str],
) -> Reader {
    Reader {
        setting,
        file,
        code,
    }
}

const COMPOSE: &str = "ar-server/src/compose.rs";
const DURABLE: &str = "ar-server/src/durable.rs";
const TEMPORAL: &str = "ar-temporal/src/lib.rs";
const STUDIO_EMBED: &str = "ar-server/src/studio_embed.rs";
const MAIN: &str = "agent-runtime/src/main.rs";
const HOST_TOOLS: &str = "ar-tools/src/host_tools.rs";
const CONTEXT: &str = "ar-tools/src/context.rs";
const PROVIDERS: &str = "ar-tools/src/mcp_providers/mod.rs";
const PROVIDER_CATALOG: &str = "ar-tools/src/mcp_providers/catalog.rs";
const PROVIDER_REFRESH: &str = "ar-tools/src/mcp_providers/refresh.rs";
const WORKSPACES: &str = "ar-tools/src/workspaces.rs";
const REPOSITORY: &str = "ar-tools/src/repository/mod.rs";
const MCP_BRIDGE: &str = "agent-runtime/src/commands/mcp_bridge/settings.rs";
const REMOTE: &str = "agent-runtime/src/commands/remote/mod.rs";

const POSTGRES: &[&str] =
    &[r#"StoreSettings::Postgres { url } => ar_store::open("postgres", "", url.expose())"#];

/// Readers of the supported environment variables. A variable may have several.
const ENV_READERS: &[Reader] = &[
    reader(
        "AGENT_RUNTIME_ADDR",
        "agent-runtime/src/commands/serve.rs",
        &["TcpListener::bind(settings.addr)"],
    ),
    reader(
        "AGENT_RUNTIME_SERVICE_TOKEN",
        COMPOSE,
        &["settings.service_token.clone()"],
    ),
    reader(
        "AGENT_RUNTIME_SERVICE_TOKEN",
        MCP_BRIDGE,
        &["value(&SERVICE_TOKEN)", ".map(Secret::new)"],
    ),
    reader(
        "AGENT_RUNTIME_ALLOW_ANONYMOUS",
        COMPOSE,
        &["if settings.allow_anonymous {"],
    ),
    reader(
        "AGENT_RUNTIME_APP_CONFIG",
        COMPOSE,
        &["Arc::new(settings.app_config.clone())"],
    ),
    reader(
        "AGENT_RUNTIME_INSTANCE_ID",
        COMPOSE,
        &["match (&settings.instance_id, &settings.store)"],
    ),
    reader(
        "AGENT_RUNTIME_LEASE_TTL_SECONDS",
        COMPOSE,
        &["lease_ttl: settings.lease_ttl"],
    ),
    reader(
        "AGENT_RUNTIME_SWEEP_INTERVAL_SECONDS",
        COMPOSE,
        &["sweep_interval: settings.sweep_interval"],
    ),
    reader(
        "AGENT_RUNTIME_WORKER_THREADS",
        MAIN,
        &[
            "ar_config::env::worker_threads(",
            "builder.worker_threads(threads)",
        ],
    ),
    reader("AGENT_RUNTIME_LOG", MAIN, &["ar_config::env::LOG.name"]),
    reader(
        "AGENT_RUNTIME_STORE_DRIVER",
        COMPOSE,
        &["open_store(&settings.store)"],
    ),
    reader(
        "AGENT_RUNTIME_SQLITE_DSN",
        COMPOSE,
        &[r#"StoreSettings::Sqlite { dsn } => ar_store::open("sqlite", dsn, "")"#],
    ),
    reader("DATABASE_URL", COMPOSE, POSTGRES),
    reader("PGHOST", COMPOSE, POSTGRES),
    reader("PGPORT", COMPOSE, POSTGRES),
    reader("PGDATABASE", COMPOSE, POSTGRES),
    reader("PGUSER", COMPOSE, POSTGRES),
    reader("PGPASSWORD", COMPOSE, POSTGRES),
    reader("PGSSLMODE", COMPOSE, POSTGRES),
    // Both also place the default SQLite file (ar-config) and the files kept beside it.
    // `env::data_dir` reads them through the lookup it is given: the process's environment,
    // where `serve` keeps its files and where the client commands find its generated token.
    reader(
        "XDG_DATA_HOME",
        COMPOSE,
        &["ar_config::env::data_dir(&settings.store, ar_config::env::process_env)"],
    ),
    reader(
        "HOME",
        COMPOSE,
        &["ar_config::env::data_dir(&settings.store, ar_config::env::process_env)"],
    ),
    reader(
        "XDG_DATA_HOME",
        REMOTE,
        &["env::data_dir(&store, process_env)"],
    ),
    reader("HOME", REMOTE, &["env::data_dir(&store, process_env)"]),
    reader(
        "OPENAI_API_KEY",
        COMPOSE,
        &["&models.openai", "api_key: provider.api_key.clone()"],
    ),
    reader(
        "OPENAI_BASE_URL",
        COMPOSE,
        &["&models.openai", "base_url: provider.base_url.as_str()"],
    ),
    reader(
        "ANTHROPIC_API_KEY",
        COMPOSE,
        &["&models.anthropic", "api_key: provider.api_key.clone()"],
    ),
    reader(
        "ANTHROPIC_BASE_URL",
        COMPOSE,
        &["&models.anthropic", "base_url: provider.base_url.as_str()"],
    ),
    reader(
        "OPENROUTER_API_KEY",
        COMPOSE,
        &["&models.openrouter", "api_key: provider.api_key.clone()"],
    ),
    reader(
        "OPENROUTER_BASE_URL",
        COMPOSE,
        &["&models.openrouter", "base_url: provider.base_url.as_str()"],
    ),
    reader(
        "AGENT_RUNTIME_CHATGPT_ENABLED",
        COMPOSE,
        &["settings.models.chatgpt_enabled.then_some(ar_engine::model_route::CHATGPT)"],
    ),
    reader(
        "AGENT_RUNTIME_CHATGPT_BASE_URL",
        COMPOSE,
        &["base_url: models.chatgpt_base_url.as_str()"],
    ),
    reader(
        "AGENT_RUNTIME_CODEX_LOGIN_ISSUER",
        COMPOSE,
        &["issuer: models .codex_login_issuer"],
    ),
    reader(
        "AGENT_RUNTIME_NATIVE_PROVIDER",
        COMPOSE,
        &["default_provider: settings.models.native_provider.clone()"],
    ),
    reader(
        "AGENT_RUNTIME_NATIVE_MODEL",
        COMPOSE,
        &["models.native_model.clone()"],
    ),
    reader(
        "AGENT_RUNTIME_MODEL_CREDENTIAL_ENCRYPTION_KEY",
        COMPOSE,
        &["match &settings.models.credential_encryption_key"],
    ),
    reader(
        "AGENT_RUNTIME_MCP_CREDENTIAL_ENCRYPTION_KEY",
        COMPOSE,
        &["let Some(key) = &settings.credential_encryption_key else"],
    ),
    reader(
        "AGENT_RUNTIME_GITHUB_API_BASE",
        COMPOSE,
        &["settings.github_api_base.as_ref().map(|url| url.as_str())"],
    ),
    reader(
        "AGENT_RUNTIME_GITHUB_TOKEN",
        COMPOSE,
        &[".with_github_token(settings.github_token.clone())"],
    ),
    reader(
        "GITHUB_TOKEN",
        COMPOSE,
        &[".with_github_token(settings.github_token.clone())"],
    ),
    reader(
        "GH_TOKEN",
        COMPOSE,
        &[".with_github_token(settings.github_token.clone())"],
    ),
    reader(
        "AGENT_RUNTIME_MCP_ALLOW_HTTP",
        COMPOSE,
        &[
            "allow_http: settings.mcp.allow_http",
            "settings.allow_http,",
        ],
    ),
    reader(
        "AGENT_RUNTIME_MCP_ALLOW_PRIVATE_NETWORKS",
        COMPOSE,
        &["settings.allow_private_networks,"],
    ),
    reader(
        "AGENT_RUNTIME_MCP_ALLOWED_HOSTS",
        COMPOSE,
        &["settings.allowed_hosts.clone()"],
    ),
    reader(
        "AGENT_RUNTIME_EVENT_SINK",
        COMPOSE,
        &[
            "event_sinks(&settings.events, &bus, nats.as_ref(), replicas.as_ref())",
            "if events.log {",
            "let Some(nats) = &events.nats else",
            "settings.events.callback.as_ref()",
        ],
    ),
    reader(
        "AGENT_RUNTIME_NATS_URL",
        COMPOSE,
        &["servers: nats.url.clone()"],
    ),
    reader(
        "AGENT_RUNTIME_NATS_STREAM",
        COMPOSE,
        &["stream: nats.stream.clone()"],
    ),
    reader(
        "AGENT_RUNTIME_NATS_STREAM_SUBJECTS",
        COMPOSE,
        &["stream_subjects: nats.stream_subjects.clone()"],
    ),
    reader(
        "AGENT_RUNTIME_NATS_SUBJECT_TEMPLATE",
        COMPOSE,
        &["v1_template: SubjectTemplate::parse(&nats.subject_template)"],
    ),
    reader(
        "AGENT_RUNTIME_NATS_V2_SUBJECT_TEMPLATE",
        COMPOSE,
        &["v2_template: SubjectTemplate::parse(&nats.v2_subject_template)"],
    ),
    reader(
        "AGENT_RUNTIME_NATS_REPLICA_SUBJECT_PREFIX",
        COMPOSE,
        &["&nats.replica_subject_prefix"],
    ),
    reader(
        "AGENT_RUNTIME_NATS_CLIENT_NAME",
        COMPOSE,
        &["client_name: nats.client_name.clone()"],
    ),
    reader(
        "AGENT_RUNTIME_NATS_ENSURE_STREAM",
        COMPOSE,
        &["ensure_stream: nats.ensure_stream"],
    ),
    reader(
        "AGENT_RUNTIME_EVENT_CALLBACK_URL",
        COMPOSE,
        &[
            "if let Some(global) = global {",
            "url: global.url.to_string()",
        ],
    ),
    reader(
        "AGENT_RUNTIME_EVENT_CALLBACK_TOKEN",
        COMPOSE,
        &["token: global.token.clone()"],
    ),
    reader(
        "AGENT_RUNTIME_STUDIO_URL",
        STUDIO_EMBED,
        &["external: settings.url"],
    ),
    reader(
        "AGENT_RUNTIME_STUDIO_ADDR",
        "ar-studio/src/serve.rs",
        &[
            r#"STUDIO_ADDR_ENV: &str = "AGENT_RUNTIME_STUDIO_ADDR""#,
            "std::env::var(STUDIO_ADDR_ENV)",
        ],
    ),
    reader(
        "AGENT_RUNTIME_STUDIO_TOKEN",
        STUDIO_EMBED,
        &["external_token: settings.token.clone()"],
    ),
    reader(
        "AGENT_RUNTIME_STUDIO_TOKEN",
        "agent-runtime/src/commands/studio.rs",
        &["process_env(STUDIO_TOKEN.name)"],
    ),
    reader(
        "AGENT_RUNTIME_STUDIO_MAX_TOKENS_PER_EXPERIMENT",
        STUDIO_EMBED,
        &["settings.max_tokens_per_experiment"],
    ),
    reader(
        "AGENT_RUNTIME_STUDIO_MAX_RUNS_PER_EXPERIMENT",
        STUDIO_EMBED,
        &["settings.max_runs_per_experiment"],
    ),
    reader(
        "AGENT_RUNTIME_NODE_ADDR",
        "ar-dispatch/src/node.rs",
        &[
            r#"NODE_ADDR_ENV: &str = "AGENT_RUNTIME_NODE_ADDR""#,
            "std::env::var(NODE_ADDR_ENV)",
        ],
    ),
    reader(
        "AGENT_RUNTIME_NODE_TOKEN",
        "ar-dispatch/src/node.rs",
        &[
            r#"NODE_TOKEN_ENV: &str = "AGENT_RUNTIME_NODE_TOKEN""#,
            "std::env::var(NODE_TOKEN_ENV)",
        ],
    ),
    reader(
        "TEMPORAL_ADDRESS",
        DURABLE,
        &["address: settings.address.clone()"],
    ),
    reader(
        "TEMPORAL_NAMESPACE",
        DURABLE,
        &["namespace: settings.namespace.clone()"],
    ),
    reader(
        "TEMPORAL_TASK_QUEUE_PREFIX",
        DURABLE,
        &["task_queue_prefix: settings.task_queue_prefix.clone()"],
    ),
    reader(
        "TEMPORAL_API_KEY",
        DURABLE,
        &["api_key: settings.api_key.clone()"],
    ),
    reader("TEMPORAL_TLS", DURABLE, &["tls: settings.tls.clone()"]),
    reader(
        "TEMPORAL_TLS_CA_PATH",
        TEMPORAL,
        &[".maybe_server_root_ca_cert(tls.ca_pem.clone())"],
    ),
    reader(
        "TEMPORAL_TLS_CA_DATA",
        TEMPORAL,
        &[".maybe_server_root_ca_cert(tls.ca_pem.clone())"],
    ),
    reader(
        "TEMPORAL_TLS_CERT_PATH",
        TEMPORAL,
        &[".client_cert(client.cert_pem.clone())"],
    ),
    reader(
        "TEMPORAL_TLS_CERT_DATA",
        TEMPORAL,
        &[".client_cert(client.cert_pem.clone())"],
    ),
    reader(
        "TEMPORAL_TLS_KEY_PATH",
        TEMPORAL,
        &[".client_private_key(client.key_pem.expose()"],
    ),
    reader(
        "TEMPORAL_TLS_KEY_DATA",
        TEMPORAL,
        &[".client_private_key(client.key_pem.expose()"],
    ),
    reader(
        "TEMPORAL_TLS_SERVER_NAME",
        TEMPORAL,
        &[".maybe_domain(tls.server_name.clone())"],
    ),
    reader(
        "AGENT_RUNTIME_DURABLE_TURNS_PER_WORKFLOW_RUN",
        DURABLE,
        &["turns_per_workflow_run: settings.turns_per_workflow_run"],
    ),
    reader(
        "AGENT_RUNTIME_DURABLE_RECONCILE_SECONDS",
        COMPOSE,
        &["durable.reconcile_every"],
    ),
    reader(
        "AGENT_RUNTIME_NODES",
        COMPOSE,
        &[
            "let nodes = &settings.nodes;",
            "nodes.service_url.as_ref()",
            "nodes.health_interval",
            ".nodes.iter()",
        ],
    ),
    reader(
        "AGENT_RUNTIME_API_BASE_URL",
        MCP_BRIDGE,
        &["required(&API_BASE_URL,", "Url::parse(&base)"],
    ),
    reader("AGENT_RUNTIME_APP_ID", MCP_BRIDGE, &["required(&APP_ID,"]),
    reader(
        "AGENT_RUNTIME_APP_ID",
        REMOTE,
        &["process_env(env::APP_ID.name)"],
    ),
    reader("AGENT_RUNTIME_URL", REMOTE, &["process_env(env::URL.name)"]),
    reader("AGENT_RUNTIME_RUN_ID", MCP_BRIDGE, &["required(&RUN_ID,"]),
    reader(
        "AGENT_RUNTIME_MCP_BRIDGE_HTTP_TIMEOUT_SECONDS",
        MCP_BRIDGE,
        &[
            "value(&MCP_BRIDGE_HTTP_TIMEOUT_SECONDS)",
            "Duration::from_secs(seconds)",
        ],
    ),
    reader(
        "AGENT_RUNTIME_HTTP_HEADER_READ_TIMEOUT_SECONDS",
        "ar-server/src/connections.rs",
        &["header_read_timeout: settings.header_read_timeout"],
    ),
    reader(
        "AGENT_RUNTIME_HTTP_BODY_READ_TIMEOUT_SECONDS",
        "ar-server/src/connections.rs",
        &["body_read_timeout: settings.body_read_timeout"],
    ),
    reader(
        "AGENT_RUNTIME_HTTP_MAX_CONNECTIONS_PER_CLIENT",
        "ar-server/src/connections.rs",
        &["max_per_client: settings.max_connections_per_client"],
    ),
];

const CALLBACKS: &str = "for callback in &app.event_callbacks";
const COMMANDS: &str = "if let Some(provider) = &app.command_provider";
const ENDPOINTS: &str = ".model_endpoint_bindings()";
const MCP_PROVIDERS: &str = "for config in &app.mcp_providers";
const SKILLS: &str = "ar-tools/src/skills.rs";
const SKILL_PROVIDER: &str = "let provider = app.skill_provider.as_ref()?;";
const WORKSPACE_PROVIDER: &str = "if let Some(provider) = &app.workspace_provider";
const REFRESH: &str = "ar-tools/src/credential_refresh.rs";
const REFRESH_CALLBACK: &str = "let callback = app.model_credential_callback.as_ref()?;";

/// Readers of the supported app-configuration keys, by `section.path` + `.` + key. Keys of
/// sections below a refused key are covered by that refusal.
const APP_KEY_READERS: &[Reader] = &[
    reader("apps", CONTEXT, &["for (app_id, app) in &config.apps"]),
    reader(
        "apps[].app_id",
        "ar-server/src/routes/meta.rs",
        &["state.apps.apps.get(app_id)"],
    ),
    reader(
        "apps[].event_protocol",
        "ar-server/src/state.rs",
        &[r#"app.event_protocol.as_str() == "v2""#],
    ),
    reader(
        "apps[].context_endpoint",
        CONTEXT,
        &[
            "if let Some(endpoint) = &app.context",
            "endpoint.url.as_str()",
        ],
    ),
    reader("apps[].context_token", CONTEXT, &["endpoint.token.clone()"]),
    reader(
        "apps[].context_token_env",
        CONTEXT,
        &["endpoint.token.clone()"],
    ),
    reader("apps[].event_callbacks", COMPOSE, &[CALLBACKS]),
    reader(
        "apps[].event_callbacks[].url",
        COMPOSE,
        &[CALLBACKS, "url: callback.url.to_string()"],
    ),
    reader(
        "apps[].event_callbacks[].token",
        COMPOSE,
        &[CALLBACKS, "token: callback.token.clone()"],
    ),
    reader(
        "apps[].event_callbacks[].token_env",
        COMPOSE,
        &[CALLBACKS, "token: callback.token.clone()"],
    ),
    reader(
        "apps[].event_callbacks[].event_types",
        COMPOSE,
        &[CALLBACKS, "event_types: callback.event_types.clone()"],
    ),
    reader("apps[].skill_provider", SKILLS, &[SKILL_PROVIDER]),
    // The parser accepts only `http`, the transport the lookup client speaks.
    reader(
        "apps[].skill_provider.transport",
        SKILLS,
        &[SKILL_PROVIDER, "provider.base_url.as_str()"],
    ),
    reader(
        "apps[].skill_provider.base_url",
        SKILLS,
        &[SKILL_PROVIDER, "provider.base_url.as_str()"],
    ),
    reader(
        "apps[].skill_provider.token",
        SKILLS,
        &[SKILL_PROVIDER, "provider.token.clone()"],
    ),
    reader(
        "apps[].skill_provider.token_env",
        SKILLS,
        &[SKILL_PROVIDER, "provider.token.clone()"],
    ),
    reader(
        "apps[].skill_provider.package_base_url",
        SKILLS,
        &[SKILL_PROVIDER, "provider.package_base_url.clone()"],
    ),
    reader(
        "apps[].skill_provider.package_token",
        SKILLS,
        &[SKILL_PROVIDER, "provider.package_token.clone()"],
    ),
    reader(
        "apps[].skill_provider.package_token_env",
        SKILLS,
        &[SKILL_PROVIDER, "provider.package_token.clone()"],
    ),
    reader(
        "apps[].workspace_provider",
        WORKSPACES,
        &[WORKSPACE_PROVIDER],
    ),
    // Each client serves its transport and skips the other.
    reader(
        "apps[].workspace_provider.transport",
        WORKSPACES,
        &["if provider.transport != WorkspaceTransport::Http"],
    ),
    reader(
        "apps[].workspace_provider.root_dir",
        REPOSITORY,
        &["(provider.transport, provider.root_dir.as_ref())"],
    ),
    reader(
        "apps[].workspace_provider.base_url",
        WORKSPACES,
        &["base_url: provider.base_url.as_str().to_string()"],
    ),
    reader(
        "apps[].workspace_provider.token",
        WORKSPACES,
        &["token: provider.token.clone()"],
    ),
    reader(
        "apps[].workspace_provider.token_env",
        WORKSPACES,
        &["token: provider.token.clone()"],
    ),
    reader(
        "apps[].model_credential_callback",
        REFRESH,
        &[REFRESH_CALLBACK],
    ),
    reader(
        "apps[].model_credential_callback.url",
        REFRESH,
        &[
            REFRESH_CALLBACK,
            "let url = callback.url.as_str().to_string();",
        ],
    ),
    reader(
        "apps[].model_credential_callback.token",
        REFRESH,
        &[REFRESH_CALLBACK, "token: callback.token.clone()"],
    ),
    reader(
        "apps[].model_credential_callback.token_env",
        REFRESH,
        &[REFRESH_CALLBACK, "token: callback.token.clone()"],
    ),
    reader("apps[].command_provider", HOST_TOOLS, &[COMMANDS]),
    // The parser accepts only `http`, the transport the command client speaks.
    reader(
        "apps[].command_provider.transport",
        HOST_TOOLS,
        &[COMMANDS, "execute_url: provider.execute_url()"],
    ),
    reader(
        "apps[].command_provider.base_url",
        HOST_TOOLS,
        &[COMMANDS, "execute_url: provider.execute_url()"],
    ),
    reader(
        "apps[].command_provider.token",
        HOST_TOOLS,
        &[COMMANDS, "token: provider.token.clone()"],
    ),
    reader(
        "apps[].command_provider.token_env",
        HOST_TOOLS,
        &[COMMANDS, "token: provider.token.clone()"],
    ),
    reader(
        "apps[].command_provider.commands",
        HOST_TOOLS,
        &[COMMANDS, "match &provider.commands", "Some(declared) =>"],
    ),
    // `HostCommand::to_tool_definition` turns every field of a command into the tool the model sees.
    reader(
        "apps[].command_provider.commands[].name",
        HOST_TOOLS,
        &["command.to_tool_definition()"],
    ),
    reader(
        "apps[].command_provider.commands[].description",
        HOST_TOOLS,
        &["command.to_tool_definition()"],
    ),
    reader(
        "apps[].command_provider.commands[].category",
        HOST_TOOLS,
        &["command.to_tool_definition()"],
    ),
    reader(
        "apps[].command_provider.commands[].input_schema",
        HOST_TOOLS,
        &["command.to_tool_definition()"],
    ),
    reader(
        "apps[].command_provider.commands[].mutating",
        HOST_TOOLS,
        &["command.to_tool_definition()"],
    ),
    reader(
        "apps[].command_provider.commands[].risk_level",
        HOST_TOOLS,
        &["command.to_tool_definition()"],
    ),
    reader(
        "apps[].command_provider.commands[].supported_target_types",
        HOST_TOOLS,
        &["command.to_tool_definition()"],
    ),
    reader("apps[].mcp_providers", PROVIDERS, &[MCP_PROVIDERS]),
    reader(
        "apps[].mcp_providers[].name",
        PROVIDERS,
        &[MCP_PROVIDERS, "provider: config.name.clone()"],
    ),
    reader(
        "apps[].mcp_providers[].transport",
        PROVIDERS,
        &["match config.transport {"],
    ),
    reader(
        "apps[].mcp_providers[].url",
        PROVIDERS,
        &["config.url.clone()"],
    ),
    reader(
        "apps[].mcp_providers[].token",
        PROVIDERS,
        &["token: config.token.clone()"],
    ),
    reader(
        "apps[].mcp_providers[].token_env",
        PROVIDERS,
        &["token: config.token.clone()"],
    ),
    reader(
        "apps[].mcp_providers[].command",
        PROVIDERS,
        &["command: config.command.clone()"],
    ),
    reader(
        "apps[].mcp_providers[].args",
        PROVIDERS,
        &["args: config.args.clone()"],
    ),
    reader(
        "apps[].mcp_providers[].env",
        PROVIDERS,
        &["env: config.env.clone()"],
    ),
    // `McpProvider::effective_prefix` reads tool_prefix and tool_namespace.
    reader(
        "apps[].mcp_providers[].tool_prefix",
        PROVIDER_CATALOG,
        &["provider.effective_prefix()"],
    ),
    reader(
        "apps[].mcp_providers[].tool_namespace",
        PROVIDER_CATALOG,
        &["provider.effective_prefix()"],
    ),
    reader(
        "apps[].mcp_providers[].allowed_tools",
        PROVIDER_CATALOG,
        &["provider.allowed_tools.iter().any(|name| name == &tool.name)"],
    ),
    reader(
        "apps[].mcp_providers[].refresh_interval",
        PROVIDER_REFRESH,
        &["app.providers[index].config.refresh_interval"],
    ),
    reader(
        "apps[].mcp_providers[].startup_policy",
        PROVIDERS,
        &["config.startup_policy == StartupPolicy::Required"],
    ),
    reader(
        "apps[].mcp_providers[].unknown_refresh_cooldown",
        PROVIDER_REFRESH,
        &["self.config.unknown_refresh_cooldown"],
    ),
    reader("apps[].model_endpoints", COMPOSE, &[ENDPOINTS]),
    reader(
        "apps[].model_endpoints[].id",
        COMPOSE,
        &[ENDPOINTS, "id: endpoint.id"],
    ),
    reader(
        "apps[].model_endpoints[].base_url",
        COMPOSE,
        &[ENDPOINTS, "base_url: endpoint.base_url"],
    ),
    reader(
        "apps[].model_endpoints[].auth_mode",
        COMPOSE,
        &[ENDPOINTS, "auth_mode: endpoint.auth_mode"],
    ),
    // A gate, not a value: without it the parser refuses a plain-http base_url, so the only
    // reader is the validation itself.
    reader(
        "apps[].model_endpoints[].allow_http",
        "ar-config/src/app/rules.rs",
        &[r#"if url.scheme() == "http" && !allow_http {"#],
    ),
    reader(
        "apps[].require_run_model_credentials",
        COMPOSE,
        &["require_run_model_credentials: app.require_run_model_credentials"],
    ),
];

/// Settings whose reader may be in ar-config itself, because validating them is all they do.
const READ_BY_VALIDATION: &[&str] = &["apps[].model_endpoints[].allow_http"];

/// The production text of `crates/<file>` without whitespace: line comments and a trailing
/// `#[cfg(test)] mod tests` are cut, so a reader in a test or a comment does not count.
fn production_source(file: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()));
    let mut kept = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim();
        if trimmed == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.trim().starts_with("mod tests"))
        {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        kept.push_str(line);
        kept.push('\n');
    }
    squeeze(&kept)
}

fn squeeze(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Checks every reader of `table`; returns what is wrong, one line per problem.
fn check_readers(table: &[Reader], supported: &BTreeSet<String>) -> Vec<String> {
    let mut sources: BTreeMap<&str, String> = BTreeMap::new();
    let mut problems = Vec::new();
    for entry in table {
        if !supported.contains(entry.setting) {
            problems.push(format!(
                "{}: a reader is recorded, but the setting is not declared as supported",
                entry.setting
            ));
        }
        if entry.file.starts_with("ar-config/") && !READ_BY_VALIDATION.contains(&entry.setting) {
            problems.push(format!(
                "{}: the reader must be outside ar-config (its declaration and parsing)",
                entry.setting
            ));
        }
        let source = sources
            .entry(entry.file)
            .or_insert_with(|| production_source(entry.file));
        for code in entry.code {
            if !source.contains(&squeeze(code)) {
                problems.push(format!(
                    "{}: `{code}` is not in the production code of crates/{}",
                    entry.setting, entry.file
                ));
            }
        }
    }
    for setting in supported {
        if !table.iter().any(|entry| entry.setting == setting.as_str()) {
            problems.push(format!(
                "{setting}: supported, but no reader is recorded: record where production code reads it, or declare it not supported yet"
            ));
        }
    }
    problems
}

fn validate_env(pairs: &[(&str, &str)]) -> Vec<Diagnostic> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    match ServiceSettings::from_env(|name| map.get(name).cloned()) {
        Ok(_) => Vec::new(),
        Err(diagnostics) => diagnostics,
    }
}

/// `None` when `diagnostics` refuse `path` for `capability`, else what is wrong.
fn refusal_problem(
    diagnostics: &[Diagnostic],
    path: &str,
    capability: Capability,
    value: Option<&str>,
) -> Option<String> {
    let refused = diagnostics.iter().any(|d| {
        d.path == path
            && d.message.contains(&capability.reason())
            && value.is_none_or(|v| d.message.contains(v))
    });
    (!refused).then(|| {
        format!(
            "{path}{}: set, but not refused for {capability:?}; got {diagnostics:?}",
            value.map(|v| format!("={v}")).unwrap_or_default()
        )
    })
}

fn supported_env_vars() -> BTreeSet<String> {
    ALL.iter()
        .filter(|var| !matches!(var.support, Support::NotYet(_)))
        .map(|var| var.name.to_string())
        .collect()
}

#[test]
fn every_environment_variable_not_supported_yet_is_refused_when_set() {
    let mut problems = Vec::new();
    for var in ALL {
        match var.support {
            Support::NotYet(capability) => {
                let diagnostics = validate_env(&[(var.name, "true")]);
                problems.extend(refusal_problem(&diagnostics, var.name, capability, None));
            }
            Support::ExceptValues(values) => {
                for (value, capability) in values {
                    let diagnostics = validate_env(&[(var.name, value)]);
                    problems.extend(refusal_problem(
                        &diagnostics,
                        var.name,
                        *capability,
                        Some(value),
                    ));
                }
            }
            Support::Supported => {}
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn every_supported_environment_variable_has_a_reader() {
    let problems = check_readers(ENV_READERS, &supported_env_vars());
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn every_declared_variable_is_in_the_list_and_declared_once() {
    let names: BTreeSet<&str> = ALL.iter().map(|var: &EnvVar| var.name).collect();
    assert_eq!(names.len(), ALL.len(), "a variable is declared twice");
    for reader in ENV_READERS {
        assert!(
            names.contains(reader.setting),
            "{} is read but not declared",
            reader.setting
        );
    }
}

/// The full name of `key` in `section` (`apps[].event_callbacks[].url`).
fn key_path(section: &Section, key: &str) -> String {
    if section.path.is_empty() {
        key.to_string()
    } else {
        format!("{}.{key}", section.path)
    }
}

fn section_at(path: &str) -> &'static Section {
    SECTIONS
        .iter()
        .copied()
        .find(|section| section.path == path)
        .unwrap_or_else(|| panic!("no section {path:?}"))
}

/// The support of each key leading to `section` (outermost first); panics when a section
/// cannot be reached from the root.
fn ancestors(section: &Section) -> Vec<Support> {
    let segments: Vec<&str> = section.path.split('.').filter(|s| !s.is_empty()).collect();
    (0..segments.len())
        .map(|i| {
            let parent = section_at(&segments[..i].join("."));
            let name = segments[i].trim_end_matches("[]");
            parent
                .key(name)
                .unwrap_or_else(|| panic!("{:?} is not a key of {:?}", name, parent.path))
                .support
        })
        .collect()
}

/// A configuration setting `path` (a key path) to `leaf`: the mappings and one-item lists
/// that lead to it, built inside out, and an `app_id` on the app.
fn config_setting(path: &str, leaf: Value) -> Value {
    let mut value = leaf;
    for segment in path.split('.').rev() {
        value = match segment.strip_suffix("[]") {
            Some(list) => json!({ list: [value] }),
            None => json!({ segment: value }),
        };
    }
    if let Some(app) = value
        .get_mut("apps")
        .and_then(|apps| apps.get_mut(0))
        .and_then(Value::as_object_mut)
    {
        app.entry("app_id").or_insert(json!("a"));
    }
    value
}

fn validate_app_config(config: &Value) -> Vec<Diagnostic> {
    let text = config.to_string();
    validate_env(&[("AGENT_RUNTIME_APP_CONFIG", text.as_str())])
}

/// `apps[].browser` → `apps[0].browser`: where the parser reports a key of the first item.
fn reported_path(path: &str) -> String {
    path.replace("[]", "[0]")
}

#[test]
fn every_app_key_not_supported_yet_is_refused_when_set() {
    let mut problems = Vec::new();
    let mut refused = 0;
    for section in SECTIONS {
        for key in section.keys {
            let Support::NotYet(capability) = key.support else {
                continue;
            };
            refused += 1;
            let path = key_path(section, key.name);
            let diagnostics = validate_app_config(&config_setting(&path, json!("x")));
            problems.extend(refusal_problem(
                &diagnostics,
                &reported_path(&path),
                capability,
                None,
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    assert!(refused >= 1, "the refused app keys are declared");
}

#[test]
fn every_supported_app_key_has_a_reader() {
    let mut supported = BTreeSet::new();
    for section in SECTIONS {
        let below_a_refusal = ancestors(section)
            .iter()
            .any(|support| matches!(support, Support::NotYet(_)));
        for key in section.keys {
            if !below_a_refusal && !matches!(key.support, Support::NotYet(_)) {
                supported.insert(key_path(section, key.name));
            }
        }
    }
    let problems = check_readers(APP_KEY_READERS, &supported);
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn the_key_paths_built_here_are_the_parsers() {
    // A supported key set to a value of the wrong type is reported at the path this test uses,
    // so `config_setting` and `reported_path` place keys where the parser looks.
    let diagnostics = validate_app_config(&config_setting(
        "apps[].event_callbacks[].token_env",
        json!(1),
    ));
    assert!(
        diagnostics
            .iter()
            .any(|d| d.path == "apps[0].event_callbacks[0].token_env"
                && d.message.contains("expected a string")),
        "{diagnostics:?}"
    );
}
