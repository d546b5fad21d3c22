//! Every environment variable the service reads, declared once, and the typed settings built from them.
//!
//! Each variable is a documented [`EnvVar`] constant that states its [`Support`]; [`ALL`] lists
//! them for the generated docs table ([`markdown_table`]). [`ServiceSettings::from_env`] reads
//! them through a lookup closure, validates every value, refuses every variable this version
//! does not support yet, and returns all problems at once. Secrets become
//! [`ar_core::secret::Secret`] or [`EncryptionKey`], whose `Debug` never shows the value.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use ar_core::secret::Secret;
use base64::Engine as _;
use url::Url;

use crate::app::AppConfig;
use crate::support::{Capability, Support};
use crate::temporal_tls::{self, ClientCertificate, PemForm, TemporalTls};
use crate::Diagnostic;

/// Declaration of one environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvVar {
    pub name: &'static str,
    /// Default as documented (what the service uses when the variable is unset).
    pub default: Option<&'static str>,
    /// The value is a credential: never logged, never shown.
    pub secret: bool,
    /// Section of the docs table.
    pub group: &'static str,
    pub description: &'static str,
    /// Whether this version reads it, or refuses it when set.
    pub support: Support,
}

impl EnvVar {
    const fn new(
        group: &'static str,
        name: &'static str,
        default: Option<&'static str>,
        description: &'static str,
    ) -> Self {
        EnvVar {
            name,
            default,
            secret: false,
            group,
            description,
            support: Support::Supported,
        }
    }

    const fn secret(group: &'static str, name: &'static str, description: &'static str) -> Self {
        EnvVar {
            name,
            default: None,
            secret: true,
            group,
            description,
            support: Support::Supported,
        }
    }

    /// Declared for the original's deployments, refused when set: `capability` is missing.
    const fn not_yet(self, capability: Capability) -> Self {
        EnvVar {
            support: Support::NotYet(capability),
            ..self
        }
    }
}

const SERVER: &str = "server";
const STORE: &str = "store";
const MODELS: &str = "models";
const EVENTS: &str = "events";
const DURABLE: &str = "durable";
const MCP: &str = "mcp";
const STUDIO: &str = "studio";
const WORKSPACES: &str = "workspaces";
const NODE: &str = "node";
const MCP_BRIDGE: &str = "mcp-bridge";
const CLI: &str = "cli";

// --- server ---------------------------------------------------------------------------------

/// Listen address of the HTTP API (`host:port`; Go-style `:port` means all interfaces).
pub const ADDR: EnvVar = EnvVar::new(
    SERVER,
    "AGENT_RUNTIME_ADDR",
    Some("127.0.0.1:8090"),
    "Listen address of the HTTP API (`host:port`, `:port` = all interfaces).",
);
/// Bearer token every `/v1`, `/v2` and `/internal` request must carry.
pub const SERVICE_TOKEN: EnvVar = EnvVar::secret(SERVER, "AGENT_RUNTIME_SERVICE_TOKEN", "Bearer token required on every API request. Without it the server refuses to start unless anonymous access is allowed. `agent-runtime mcp-bridge` sends it to the service.");
/// Local-development escape hatch: serve without a service token.
pub const ALLOW_ANONYMOUS: EnvVar = EnvVar::new(
    SERVER,
    "AGENT_RUNTIME_ALLOW_ANONYMOUS",
    Some("false"),
    "Serve without a service token (local development only). Truthy: 1, true, t, yes, y, on.",
);
/// App configuration: inline JSON/YAML or `@/path/to/file`.
pub const APP_CONFIG: EnvVar = EnvVar::new(
    SERVER,
    "AGENT_RUNTIME_APP_CONFIG",
    None,
    "App configuration: inline JSON or YAML, or `@/path/to/file`.",
);
/// Identity of this process as owner of run leases.
pub const INSTANCE_ID: EnvVar = EnvVar::new(
    SERVER,
    "AGENT_RUNTIME_INSTANCE_ID",
    None,
    "Identity of this process as owner of run leases (generated when unset).",
);

/// How long a run's lease lasts without a heartbeat.
pub const LEASE_TTL_SECONDS: EnvVar = EnvVar::new(
    SERVER,
    "AGENT_RUNTIME_LEASE_TTL_SECONDS",
    Some("30"),
    "Seconds a run's ownership lease lasts without a heartbeat; another replica takes the run over after it expires.",
);
/// How often orphaned runs are looked for.
pub const SWEEP_INTERVAL_SECONDS: EnvVar = EnvVar::new(
    SERVER,
    "AGENT_RUNTIME_SWEEP_INTERVAL_SECONDS",
    Some("10"),
    "Seconds between looks for runs whose owner died.",
);

/// How many threads run the service's async work.
pub const WORKER_THREADS: EnvVar = EnvVar::new(
    SERVER,
    "AGENT_RUNTIME_WORKER_THREADS",
    Some("cores - 1, at least 1"),
    "Threads that run the service's async work (HTTP, run loops, inline SQLite). One core is left to agent CLIs, blocking work and the host by default; on two cores a single worker also spends markedly less CPU per run than two that keep waking each other.",
);

/// The worker thread count: `AGENT_RUNTIME_WORKER_THREADS`, else one less than the cores
/// (at least one). An unparseable or zero value is a diagnostic naming the variable.
pub fn worker_threads(get: impl Fn(&str) -> Option<String>) -> Result<usize, Diagnostic> {
    match get(WORKER_THREADS.name).map(|value| value.trim().to_string()) {
        Some(value) if !value.is_empty() => match value.parse::<usize>() {
            Ok(count) if count > 0 => Ok(count),
            _ => Err(Diagnostic::new(
                WORKER_THREADS.name,
                format!("expected a positive whole number, got {value:?}"),
            )),
        },
        _ => {
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            Ok(cores.saturating_sub(1).max(1))
        }
    }
}

/// Log filter of every subcommand.
pub const LOG: EnvVar = EnvVar::new(
    SERVER,
    "AGENT_RUNTIME_LOG",
    Some("info"),
    "Log filter in `tracing` env-filter syntax (e.g. `info,agent_runtime::events=debug`); logs go to standard error.",
);

// --- store ----------------------------------------------------------------------------------

/// Which database holds durable state.
pub const STORE_DRIVER: EnvVar = EnvVar::new(
    STORE,
    "AGENT_RUNTIME_STORE_DRIVER",
    Some("sqlite"),
    "Durable state backend: `sqlite`, `postgres` or `memory`.",
);
/// SQLite database: a file path or a `sqlite:` URL.
pub const SQLITE_DSN: EnvVar = EnvVar::new(STORE, "AGENT_RUNTIME_SQLITE_DSN", Some("$XDG_DATA_HOME/agent-runtime/agent-runtime.db"), "SQLite database: a file path or a `sqlite:` URL. Default is in the user's data directory (`$XDG_DATA_HOME` or `$HOME/.local/share`).");
/// PostgreSQL connection URL (wins over the `PG*` variables).
pub const DATABASE_URL: EnvVar = EnvVar::secret(
    STORE,
    "DATABASE_URL",
    "PostgreSQL connection URL; when unset the URL is built from the `PG*` variables.",
);
pub const PGHOST: EnvVar = EnvVar::new(
    STORE,
    "PGHOST",
    Some("localhost"),
    "PostgreSQL host (or a Unix socket directory starting with `/`).",
);
pub const PGPORT: EnvVar = EnvVar::new(STORE, "PGPORT", Some("5432"), "PostgreSQL port.");
pub const PGDATABASE: EnvVar = EnvVar::new(STORE, "PGDATABASE", None, "PostgreSQL database name.");
pub const PGUSER: EnvVar = EnvVar::new(STORE, "PGUSER", None, "PostgreSQL user.");
pub const PGPASSWORD: EnvVar = EnvVar::secret(STORE, "PGPASSWORD", "PostgreSQL password.");
pub const PGSSLMODE: EnvVar = EnvVar::new(
    STORE,
    "PGSSLMODE",
    None,
    "PostgreSQL `sslmode` (disable, prefer, require, verify-ca, verify-full).",
);
/// Base of the default SQLite location.
pub const XDG_DATA_HOME: EnvVar = EnvVar::new(
    STORE,
    "XDG_DATA_HOME",
    Some("$HOME/.local/share"),
    "User data directory; the default SQLite file lives in `agent-runtime/` below it.",
);
/// Fallback base of the default SQLite location.
pub const HOME: EnvVar = EnvVar::new(
    STORE,
    "HOME",
    None,
    "Home directory, used when `XDG_DATA_HOME` is unset.",
);

// --- models ---------------------------------------------------------------------------------

pub const OPENAI_API_KEY: EnvVar = EnvVar::secret(
    MODELS,
    "OPENAI_API_KEY",
    "Global OpenAI key (provider `openai`).",
);
pub const OPENAI_BASE_URL: EnvVar = EnvVar::new(
    MODELS,
    "OPENAI_BASE_URL",
    Some("https://api.openai.com/v1"),
    "OpenAI API base URL.",
);
pub const ANTHROPIC_API_KEY: EnvVar = EnvVar::secret(
    MODELS,
    "ANTHROPIC_API_KEY",
    "Global Anthropic key (provider `anthropic`).",
);
pub const ANTHROPIC_BASE_URL: EnvVar = EnvVar::new(
    MODELS,
    "ANTHROPIC_BASE_URL",
    Some("https://api.anthropic.com"),
    "Anthropic API base URL.",
);
pub const OPENROUTER_API_KEY: EnvVar = EnvVar::secret(
    MODELS,
    "OPENROUTER_API_KEY",
    "Global OpenRouter key (providers `openrouter`, `openrouter_responses`).",
);
pub const OPENROUTER_BASE_URL: EnvVar = EnvVar::new(
    MODELS,
    "OPENROUTER_BASE_URL",
    Some("https://openrouter.ai/api/v1"),
    "OpenRouter API base URL.",
);
/// Provider of agents that name none.
pub const NATIVE_PROVIDER: EnvVar = EnvVar::new(
    MODELS,
    "AGENT_RUNTIME_NATIVE_PROVIDER",
    Some("anthropic"),
    "Default model provider for native agents that name none (`openai_chatgpt` only with AGENT_RUNTIME_CHATGPT_ENABLED; its runs must bring an `oauth` credential).",
);
/// Model of agents that name neither provider nor model.
pub const NATIVE_MODEL: EnvVar = EnvVar::new(
    MODELS,
    "AGENT_RUNTIME_NATIVE_MODEL",
    None,
    "Default model of the default provider (AGENT_RUNTIME_NATIVE_PROVIDER) for agents that name no model; unset, the provider's own default.",
);
/// Refused by design: a run without a model fails instead of getting a made-up reply.
pub const ALLOW_DETERMINISTIC_FALLBACK: EnvVar = EnvVar::new(
    MODELS,
    "AGENT_RUNTIME_ALLOW_DETERMINISTIC_FALLBACK",
    Some("false"),
    "The original's stand-in reply when no model is configured. Refused by design unless off: a run without a model fails with a clear message instead.",
)
.not_yet(Capability::DeterministicModel);
/// The `openai_chatgpt` provider (ChatGPT subscriptions), off unless enabled.
pub const CHATGPT_ENABLED: EnvVar = EnvVar::new(
    MODELS,
    "AGENT_RUNTIME_CHATGPT_ENABLED",
    Some("false"),
    "Serve the `openai_chatgpt` provider: Responses requests to the ChatGPT subscription backend with a run's `oauth` credential (access token, expiry, account, connection), renewed only through the app's `model_credential_callback`. Truthy: 1, true, t, yes, y, on.",
);
/// Where `openai_chatgpt` requests go.
pub const CHATGPT_BASE_URL: EnvVar = EnvVar::new(
    MODELS,
    "AGENT_RUNTIME_CHATGPT_BASE_URL",
    Some("https://chatgpt.com/backend-api/codex"),
    "Base URL of the ChatGPT subscription backend (`{base}/responses`); an addition of this version, for tests and proxies.",
);
/// The OAuth issuer of Codex's ChatGPT device sign-in.
pub const CODEX_LOGIN_ISSUER: EnvVar = EnvVar::new(
    MODELS,
    "AGENT_RUNTIME_CODEX_LOGIN_ISSUER",
    None,
    "OAuth issuer that `codex app-server` signs in against for `POST /v1/runs/{id}/codex-auth/device-code/start` (unset: codex's own, auth.openai.com); with AGENT_RUNTIME_CHATGPT_BASE_URL set, the app-server reads the account from that backend too. An addition of this version, for tests and proxies.",
);
/// Key that encrypts per-run model credentials at rest.
pub const MODEL_CREDENTIAL_ENCRYPTION_KEY: EnvVar = EnvVar::secret(MODELS, "AGENT_RUNTIME_MODEL_CREDENTIAL_ENCRYPTION_KEY", "AES-256 key for per-run model credentials: 32 raw bytes or base64 of 32 bytes. Same value on API and workers.");

// --- events ---------------------------------------------------------------------------------

/// Global event sinks (CSV).
pub const EVENT_SINK: EnvVar = EnvVar::new(EVENTS, "AGENT_RUNTIME_EVENT_SINK", Some("log"), "Global event sinks, comma separated: `log` (`slog`: each event's type, app, run and sequence in the service log at debug level, target `agent_runtime::events`), `nats` (`jetstream`: every event on NATS JetStream, persisted ones from the durable log), `callback` (`http`, `webhook`: every app's persisted events POSTed to AGENT_RUNTIME_EVENT_CALLBACK_URL through the durable outbox), or `none` (`noop`) alone. Any other value stops the service.");
pub const NATS_URL: EnvVar = EnvVar::secret(
    EVENTS,
    "AGENT_RUNTIME_NATS_URL",
    "NATS server URL, or several comma separated (required with the `nats` sink; may carry credentials, so it is never logged).",
);
pub const NATS_STREAM: EnvVar = EnvVar::new(
    EVENTS,
    "AGENT_RUNTIME_NATS_STREAM",
    Some("AGENT_RUNTIME_EVENTS"),
    "JetStream stream name.",
);
pub const NATS_STREAM_SUBJECTS: EnvVar = EnvVar::new(
    EVENTS,
    "AGENT_RUNTIME_NATS_STREAM_SUBJECTS",
    Some("agent-runtime.events.>"),
    "Subjects of the stream, comma separated (they must cover the v1 and v2 subjects).",
);
pub const NATS_SUBJECT_TEMPLATE: EnvVar = EnvVar::new(
    EVENTS,
    "AGENT_RUNTIME_NATS_SUBJECT_TEMPLATE",
    Some("agent-runtime.events.{app_id}.{run_id}.{event_type}"),
    "Subject of each v1 event; placeholders `{app_id}`, `{run_id}`, `{event_type}` (or `{type}`).",
);
/// Not in the original (whose v2 subject is fixed): lets a deployment, or a test, move the v2
/// family beside a custom v1 template; the default is the original's subject.
pub const NATS_V2_SUBJECT_TEMPLATE: EnvVar = EnvVar::new(
    EVENTS,
    "AGENT_RUNTIME_NATS_V2_SUBJECT_TEMPLATE",
    Some("agent-runtime.events.v2.{app_id}.{run_id}.{event_type}"),
    "Subject of each event of a v2 app in v2 form (its v1 form goes to the v1 subject too); same placeholders.",
);
pub const NATS_CLIENT_NAME: EnvVar = EnvVar::new(
    EVENTS,
    "AGENT_RUNTIME_NATS_CLIENT_NAME",
    Some("agent-runtime"),
    "NATS connection name.",
);
/// Not in the original (whose replicas do not talk to each other).
pub const NATS_REPLICA_SUBJECT_PREFIX: EnvVar = EnvVar::new(
    EVENTS,
    "AGENT_RUNTIME_NATS_REPLICA_SUBJECT_PREFIX",
    Some("agent-runtime.replicas"),
    "Prefix of the NATS core subjects the replicas of one deployment share with the `nats` sink (`{prefix}.live.{run_id}`: a run's live events for SSE readers on other replicas; `{prefix}.owner`: cancel, pause and steer for a run's owner; `{prefix}.watch`: the runs a replica's readers watch). Keep it outside the stream's subjects.",
);
pub const NATS_ENSURE_STREAM: EnvVar = EnvVar::new(
    EVENTS,
    "AGENT_RUNTIME_NATS_ENSURE_STREAM",
    Some("true"),
    "Create or update the stream at startup (file storage, limits retention, discard old, 2 min duplicate window, 7 days, 512 MiB).",
);
/// Legacy global callback receiving events of all apps (sink `callback`).
pub const EVENT_CALLBACK_URL: EnvVar = EnvVar::new(
    EVENTS,
    "AGENT_RUNTIME_EVENT_CALLBACK_URL",
    None,
    "Legacy global event callback URL (sink `callback`; receives every app's persisted events, v1 envelope).",
);
pub const EVENT_CALLBACK_TOKEN: EnvVar = EnvVar::secret(
    EVENTS,
    "AGENT_RUNTIME_EVENT_CALLBACK_TOKEN",
    "Bearer token of the legacy global event callback.",
);

// --- durable --------------------------------------------------------------------------------

/// Temporal frontend; setting it enables durable execution.
pub const TEMPORAL_ADDRESS: EnvVar = EnvVar::new(
    DURABLE,
    "TEMPORAL_ADDRESS",
    None,
    "Temporal frontend `host:port` (or an `http(s)://` URL); enables durable execution: `serve` starts durable runs as workflows, `worker` executes them.",
);
pub const TEMPORAL_NAMESPACE: EnvVar = EnvVar::new(
    DURABLE,
    "TEMPORAL_NAMESPACE",
    Some("default"),
    "Temporal namespace (with TEMPORAL_ADDRESS only).",
);
pub const TEMPORAL_TASK_QUEUE_PREFIX: EnvVar = EnvVar::new(
    DURABLE,
    "TEMPORAL_TASK_QUEUE_PREFIX",
    None,
    "Prefix of every Temporal task queue name (with TEMPORAL_ADDRESS only).",
);
pub const TEMPORAL_API_KEY: EnvVar = EnvVar::new(
    DURABLE,
    "TEMPORAL_API_KEY",
    None,
    "API key sent to Temporal as a bearer token (turns TLS on unless TEMPORAL_TLS=false or an `http://` address says plain text, as the Temporal CLI does; with TEMPORAL_ADDRESS only).",
);
pub const DURABLE_RECONCILE_SECONDS: EnvVar = EnvVar::new(
    DURABLE,
    "AGENT_RUNTIME_DURABLE_RECONCILE_SECONDS",
    Some("30"),
    "Seconds between passes of `serve`'s durable reconciler, and how long a durable run's row must sit unchanged before it is inspected.",
);
pub const DURABLE_TURNS_PER_WORKFLOW_RUN: EnvVar = EnvVar::new(
    DURABLE,
    "AGENT_RUNTIME_DURABLE_TURNS_PER_WORKFLOW_RUN",
    Some("200"),
    "Turns a durable run's workflow executes before it continues as new (a fresh history).",
);
pub const TEMPORAL_TLS: EnvVar = EnvVar::new(
    DURABLE,
    "TEMPORAL_TLS",
    Some("false"),
    "Connect to Temporal over TLS (the system's roots unless TEMPORAL_TLS_CA_PATH or _DATA; when unset, on with an `https://` address, TEMPORAL_API_KEY or any TEMPORAL_TLS_* file, PEM or name). `false` with an API key: plain text with the key, as the Temporal CLI does (a warning at startup).",
);
pub const TEMPORAL_TLS_CA_PATH: EnvVar = EnvVar::new(
    DURABLE,
    "TEMPORAL_TLS_CA_PATH",
    None,
    "PEM file of the CA certificates that verify Temporal's server certificate, instead of the system's roots (turns TLS on; read at startup).",
);
pub const TEMPORAL_TLS_CA_DATA: EnvVar = EnvVar::new(
    DURABLE,
    "TEMPORAL_TLS_CA_DATA",
    None,
    "TEMPORAL_TLS_CA_PATH's PEM given inline (not both; turns TLS on; checked at startup).",
);
pub const TEMPORAL_TLS_CERT_PATH: EnvVar = EnvVar::new(
    DURABLE,
    "TEMPORAL_TLS_CERT_PATH",
    None,
    "PEM file of the client certificate (chain) for mTLS; needs TEMPORAL_TLS_KEY_PATH or _DATA (turns TLS on; read at startup).",
);
pub const TEMPORAL_TLS_CERT_DATA: EnvVar = EnvVar::new(
    DURABLE,
    "TEMPORAL_TLS_CERT_DATA",
    None,
    "TEMPORAL_TLS_CERT_PATH's PEM given inline (not both; needs TEMPORAL_TLS_KEY_PATH or _DATA; turns TLS on; checked at startup).",
);
pub const TEMPORAL_TLS_KEY_PATH: EnvVar = EnvVar::new(
    DURABLE,
    "TEMPORAL_TLS_KEY_PATH",
    None,
    "PEM file of the client certificate's private key (PKCS#8, PKCS#1 or SEC1); needs TEMPORAL_TLS_CERT_PATH or _DATA (read at startup, never shown).",
);
pub const TEMPORAL_TLS_KEY_DATA: EnvVar = EnvVar::secret(
    DURABLE,
    "TEMPORAL_TLS_KEY_DATA",
    "TEMPORAL_TLS_KEY_PATH's PEM given inline (not both; needs TEMPORAL_TLS_CERT_PATH or _DATA; checked at startup, never shown).",
);
pub const TEMPORAL_TLS_SERVER_NAME: EnvVar = EnvVar::new(
    DURABLE,
    "TEMPORAL_TLS_SERVER_NAME",
    None,
    "Name sent (SNI) and verified in Temporal's server certificate instead of TEMPORAL_ADDRESS's host (turns TLS on).",
);
/// Refused by design: the server's certificate is always verified.
pub const TEMPORAL_TLS_DISABLE_HOST_VERIFICATION: EnvVar = EnvVar::new(
    DURABLE,
    "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION",
    Some("false"),
    "The Temporal CLI's switch that skips verifying the server's certificate. Refused by design unless off: trust the server's CA with TEMPORAL_TLS_CA_PATH and name its certificate with TEMPORAL_TLS_SERVER_NAME instead.",
)
.not_yet(Capability::UnverifiedTls);

// --- mcp ------------------------------------------------------------------------------------

pub const MCP_CREDENTIAL_ENCRYPTION_KEY: EnvVar = EnvVar::secret(
    MCP,
    "AGENT_RUNTIME_MCP_CREDENTIAL_ENCRYPTION_KEY",
    "AES-256 key for run-scoped MCP credentials: 32 raw bytes or base64 of 32 bytes.",
);
pub const MCP_ALLOWED_HOSTS: EnvVar = EnvVar::new(
    MCP,
    "AGENT_RUNTIME_MCP_ALLOWED_HOSTS",
    None,
    "Optional allowlist of run MCP hosts, comma separated (exact or `*.suffix`).",
);
pub const MCP_ALLOW_PRIVATE_NETWORKS: EnvVar = EnvVar::new(
    MCP,
    "AGENT_RUNTIME_MCP_ALLOW_PRIVATE_NETWORKS",
    Some("false"),
    "Allow run MCP servers, and fetch_url, on private or loopback addresses.",
);
pub const MCP_ALLOW_HTTP: EnvVar = EnvVar::new(
    MCP,
    "AGENT_RUNTIME_MCP_ALLOW_HTTP",
    Some("false"),
    "Allow plain-HTTP run MCP servers and fetch_url of plain-HTTP URLs.",
);

// --- workspaces ------------------------------------------------------------------------------

pub const GITHUB_API_BASE: EnvVar = EnvVar::new(
    WORKSPACES,
    "AGENT_RUNTIME_GITHUB_API_BASE",
    Some("https://api.github.com"),
    "GitHub REST API base of repository workspaces' `open_pr` delivery.",
);
pub const GITHUB_TOKEN_AR: EnvVar = EnvVar::secret(
    WORKSPACES,
    "AGENT_RUNTIME_GITHUB_TOKEN",
    "GitHub token of the REST calls (`open_pr`) when the repository spec's auth carries none.",
);
pub const GITHUB_TOKEN: EnvVar = EnvVar::secret(
    WORKSPACES,
    "GITHUB_TOKEN",
    "Read when AGENT_RUNTIME_GITHUB_TOKEN is unset.",
);
pub const GH_TOKEN: EnvVar = EnvVar::secret(
    WORKSPACES,
    "GH_TOKEN",
    "Read when AGENT_RUNTIME_GITHUB_TOKEN and GITHUB_TOKEN are unset.",
);

// --- studio and nodes -----------------------------------------------------------------------

pub const STUDIO_URL: EnvVar = EnvVar::new(
    STUDIO,
    "AGENT_RUNTIME_STUDIO_URL",
    None,
    "URL of a studio this service registers itself with as a runtime.",
);
pub const STUDIO_ADDR: EnvVar = EnvVar::new(
    STUDIO,
    "AGENT_RUNTIME_STUDIO_ADDR",
    None,
    "Listen address of a standalone studio (`agent-runtime studio`).",
);
pub const STUDIO_TOKEN: EnvVar = EnvVar::secret(
    STUDIO,
    "AGENT_RUNTIME_STUDIO_TOKEN",
    "Bearer token of a hosted studio: required by `agent-runtime studio` when set (without it the studio answers loopback only), and sent by this service's link to AGENT_RUNTIME_STUDIO_URL.",
);
pub const STUDIO_MAX_TOKENS_PER_EXPERIMENT: EnvVar = EnvVar::new(
    STUDIO,
    "AGENT_RUNTIME_STUDIO_MAX_TOKENS_PER_EXPERIMENT",
    Some("0"),
    "Tokens one studio experiment may spend on this service before its next command is refused (0: no cap).",
);
pub const STUDIO_MAX_RUNS_PER_EXPERIMENT: EnvVar = EnvVar::new(
    STUDIO,
    "AGENT_RUNTIME_STUDIO_MAX_RUNS_PER_EXPERIMENT",
    Some("0"),
    "Runs one studio experiment may start on this service, reserved at admission (0: no cap).",
);
pub const NODE_ADDR: EnvVar = EnvVar::new(
    NODE,
    "AGENT_RUNTIME_NODE_ADDR",
    None,
    "Listen address of `agent-runtime node`.",
);
pub const NODE_TOKEN: EnvVar = EnvVar::secret(
    NODE,
    "AGENT_RUNTIME_NODE_TOKEN",
    "Bearer token between the cluster router and nodes.",
);
/// The fleet: nodes that run this service's agent-CLI runs.
pub const NODES: EnvVar = EnvVar::new(
    NODE,
    "AGENT_RUNTIME_NODES",
    None,
    "Nodes (`agent-runtime node`) that run this service's agent-CLI runs: JSON or YAML inline, or `@/path/to/file`; a list of `{name, url, token | token_env, labels, max_concurrent_runs, allow_http}`, or a mapping with `nodes`, `service_url` (how the nodes' MCP bridges reach this service) and `health_interval_seconds`. Unset: CLI runs run on this machine.",
);

// --- MCP bridge (`agent-runtime mcp-bridge`, read by the bridge only) -----------------------

/// The service whose run tool gateway the MCP bridge serves.
pub const API_BASE_URL: EnvVar = EnvVar::new(
    MCP_BRIDGE,
    "AGENT_RUNTIME_API_BASE_URL",
    None,
    "Base URL of the service whose run tool gateway `agent-runtime mcp-bridge` serves (required by the bridge).",
);
/// The app of the run the MCP bridge serves.
pub const APP_ID: EnvVar = EnvVar::new(
    MCP_BRIDGE,
    "AGENT_RUNTIME_APP_ID",
    None,
    "App of the run whose tools `agent-runtime mcp-bridge` serves (required by the bridge); also the app the `agents` and `runs` commands work in when `--app` is not given.",
);
/// The run the MCP bridge serves.
pub const RUN_ID: EnvVar = EnvVar::new(
    MCP_BRIDGE,
    "AGENT_RUNTIME_RUN_ID",
    None,
    "Run whose effective tools `agent-runtime mcp-bridge` serves (required by the bridge).",
);
/// How long the MCP bridge waits for one gateway request.
pub const MCP_BRIDGE_HTTP_TIMEOUT_SECONDS: EnvVar = EnvVar::new(
    MCP_BRIDGE,
    "AGENT_RUNTIME_MCP_BRIDGE_HTTP_TIMEOUT_SECONDS",
    Some("300"),
    "Seconds `agent-runtime mcp-bridge` waits for one answer of the run tool gateway (a tool call included).",
);

/// How long a client may take to send a request's headers.
pub const HTTP_HEADER_READ_TIMEOUT_SECONDS: EnvVar = EnvVar::new(
    SERVER,
    "AGENT_RUNTIME_HTTP_HEADER_READ_TIMEOUT_SECONDS",
    Some("30"),
    "Seconds a client gets to send a request's headers before its connection is closed; also how long an idle keep-alive connection stays open.",
);
/// How long a client may pause while sending a request body.
pub const HTTP_BODY_READ_TIMEOUT_SECONDS: EnvVar = EnvVar::new(
    SERVER,
    "AGENT_RUNTIME_HTTP_BODY_READ_TIMEOUT_SECONDS",
    Some("30"),
    "Longest pause, in seconds, while a client sends a request body; the request is then answered 408 and its connection closed.",
);
/// How many connections one client address may hold open.
pub const HTTP_MAX_CONNECTIONS_PER_CLIENT: EnvVar = EnvVar::new(
    SERVER,
    "AGENT_RUNTIME_HTTP_MAX_CONNECTIONS_PER_CLIENT",
    Some("256"),
    "Open connections one client IP address may hold; further ones are answered 429 and closed. 0 turns the limit off (behind a proxy every client shares its address).",
);

// --- the client commands (`agent-runtime agents|runs`, read by them only) --------------------

/// The service the `agents` and `runs` commands talk to.
pub const URL: EnvVar = EnvVar::new(
    CLI,
    "AGENT_RUNTIME_URL",
    Some("http://127.0.0.1:8090"),
    "Base URL of the service the `agents` and `runs` commands talk to (`--url`). Their token is `AGENT_RUNTIME_SERVICE_TOKEN`, else the file `--token-file`, else the development token `serve` generated (`service-token` in its data directory).",
);

/// Every declared variable, in docs order.
pub const ALL: &[EnvVar] = &[
    ADDR,
    SERVICE_TOKEN,
    ALLOW_ANONYMOUS,
    APP_CONFIG,
    INSTANCE_ID,
    LEASE_TTL_SECONDS,
    WORKER_THREADS,
    SWEEP_INTERVAL_SECONDS,
    LOG,
    STORE_DRIVER,
    SQLITE_DSN,
    DATABASE_URL,
    PGHOST,
    PGPORT,
    PGDATABASE,
    PGUSER,
    PGPASSWORD,
    PGSSLMODE,
    XDG_DATA_HOME,
    HOME,
    OPENAI_API_KEY,
    OPENAI_BASE_URL,
    ANTHROPIC_API_KEY,
    ANTHROPIC_BASE_URL,
    OPENROUTER_API_KEY,
    OPENROUTER_BASE_URL,
    NATIVE_PROVIDER,
    NATIVE_MODEL,
    ALLOW_DETERMINISTIC_FALLBACK,
    CHATGPT_ENABLED,
    CHATGPT_BASE_URL,
    CODEX_LOGIN_ISSUER,
    MODEL_CREDENTIAL_ENCRYPTION_KEY,
    EVENT_SINK,
    NATS_URL,
    NATS_STREAM,
    NATS_STREAM_SUBJECTS,
    NATS_SUBJECT_TEMPLATE,
    NATS_V2_SUBJECT_TEMPLATE,
    NATS_CLIENT_NAME,
    NATS_REPLICA_SUBJECT_PREFIX,
    NATS_ENSURE_STREAM,
    EVENT_CALLBACK_URL,
    EVENT_CALLBACK_TOKEN,
    TEMPORAL_ADDRESS,
    TEMPORAL_NAMESPACE,
    TEMPORAL_TASK_QUEUE_PREFIX,
    TEMPORAL_API_KEY,
    TEMPORAL_TLS,
    TEMPORAL_TLS_CA_PATH,
    TEMPORAL_TLS_CA_DATA,
    TEMPORAL_TLS_CERT_PATH,
    TEMPORAL_TLS_CERT_DATA,
    TEMPORAL_TLS_KEY_PATH,
    TEMPORAL_TLS_KEY_DATA,
    TEMPORAL_TLS_SERVER_NAME,
    TEMPORAL_TLS_DISABLE_HOST_VERIFICATION,
    DURABLE_RECONCILE_SECONDS,
    DURABLE_TURNS_PER_WORKFLOW_RUN,
    MCP_CREDENTIAL_ENCRYPTION_KEY,
    MCP_ALLOWED_HOSTS,
    MCP_ALLOW_PRIVATE_NETWORKS,
    MCP_ALLOW_HTTP,
    GITHUB_API_BASE,
    GITHUB_TOKEN_AR,
    GITHUB_TOKEN,
    GH_TOKEN,
    STUDIO_URL,
    STUDIO_ADDR,
    STUDIO_TOKEN,
    STUDIO_MAX_TOKENS_PER_EXPERIMENT,
    STUDIO_MAX_RUNS_PER_EXPERIMENT,
    NODE_ADDR,
    NODE_TOKEN,
    NODES,
    API_BASE_URL,
    APP_ID,
    RUN_ID,
    MCP_BRIDGE_HTTP_TIMEOUT_SECONDS,
    HTTP_HEADER_READ_TIMEOUT_SECONDS,
    HTTP_BODY_READ_TIMEOUT_SECONDS,
    HTTP_MAX_CONNECTIONS_PER_CLIENT,
    URL,
];

/// The docs table of every variable (Markdown), grouped in declaration order.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| Variable | Group | Default | Secret | Supported | Description |\n|---|---|---|---|---|---|\n",
    );
    for var in ALL {
        let default = var
            .default
            .map(|d| format!("`{d}`"))
            .unwrap_or_else(|| "–".to_string());
        let secret = if var.secret { "yes" } else { "" };
        let support = match var.support {
            Support::Supported => "yes".to_string(),
            Support::ExceptValues(values) => {
                let refused: Vec<_> = values.iter().map(|(v, _)| format!("`{v}`")).collect();
                format!("yes, except {}", refused.join(", "))
            }
            Support::NotYet(capability) if capability.by_design() => {
                format!("no, by design ({})", capability.describe())
            }
            Support::NotYet(capability) => format!("not yet ({})", capability.describe()),
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            var.name,
            var.group,
            default.replace('|', "\\|"),
            secret,
            support,
            var.description.replace('|', "\\|")
        ));
    }
    out
}

/// The file beside the database where `serve` keeps the development token it generated.
pub const GENERATED_TOKEN_FILE: &str = "service-token";

/// The store the environment `lookup` configures, diagnostics left out: what a client command
/// needs to find the data directory of the `serve` started in the same environment.
pub fn store_settings(lookup: impl Fn(&str) -> Option<String>) -> StoreSettings {
    let mut r = Reader {
        lookup: &lookup,
        diagnostics: Vec::new(),
    };
    read_store(&mut r)
}

/// The directory of the files the service keeps beside its database (the generated token,
/// the development credential key, the instance id): the SQLite file's directory, else
/// `$XDG_DATA_HOME/agent-runtime`, `$HOME/.local/share/agent-runtime` or the temp directory.
pub fn data_dir(store: &StoreSettings, lookup: impl Fn(&str) -> Option<String>) -> PathBuf {
    if let StoreSettings::Sqlite { dsn } = store {
        let path = dsn
            .strip_prefix("sqlite://")
            .or_else(|| dsn.strip_prefix("sqlite:"))
            .unwrap_or(dsn);
        let path = path.split('?').next().unwrap_or(path);
        if let Some(parent) = std::path::Path::new(path).parent() {
            if !parent.as_os_str().is_empty() {
                return parent.to_path_buf();
            }
        }
    }
    let base = lookup(XDG_DATA_HOME.name)
        .map(PathBuf::from)
        .or_else(|| lookup(HOME.name).map(|home| PathBuf::from(home).join(".local/share")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("agent-runtime")
}

/// Lookup of the real process environment, for production callers of `from_env`.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

// --- value parsing --------------------------------------------------------------------------

/// Truthy strings (case-insensitive): `1, true, t, yes, y, on`.
pub fn is_truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "t" | "yes" | "y" | "on"
    )
}

fn is_falsy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "" | "0" | "false" | "f" | "no" | "n" | "off"
    )
}

/// A 32-byte AES-256 key. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct EncryptionKey([u8; 32]);

impl EncryptionKey {
    /// Accepts exactly 32 raw bytes, or standard/URL-safe base64 (padded or not) of 32 bytes.
    pub fn parse(value: &str) -> Result<Self, String> {
        let raw = value.as_bytes();
        if raw.len() == 32 {
            let mut key = [0u8; 32];
            key.copy_from_slice(raw);
            return Ok(EncryptionKey(key));
        }
        let trimmed = value.trim();
        let engines = [
            base64::engine::general_purpose::STANDARD,
            base64::engine::general_purpose::STANDARD_NO_PAD,
            base64::engine::general_purpose::URL_SAFE,
            base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ];
        for engine in engines {
            if let Ok(bytes) = engine.decode(trimmed) {
                if let Ok(key) = <[u8; 32]>::try_from(bytes.as_slice()) {
                    return Ok(EncryptionKey(key));
                }
                return Err(format!("must decode to 32 bytes, got {}", bytes.len()));
            }
        }
        Err("must be 32 raw bytes or base64 of 32 bytes".to_string())
    }

    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Debug for EncryptionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EncryptionKey([redacted])")
    }
}

/// Reads variables through the lookup and collects diagnostics.
struct Reader<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
    diagnostics: Vec<Diagnostic>,
}

impl Reader<'_> {
    /// The trimmed value, `None` when unset or blank.
    fn get(&self, var: &EnvVar) -> Option<String> {
        (self.lookup)(var.name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    /// The untrimmed value (for raw 32-byte keys, where spaces may be key bytes).
    fn get_raw(&self, var: &EnvVar) -> Option<String> {
        (self.lookup)(var.name).filter(|v| !v.trim().is_empty())
    }

    fn string_or_default(&self, var: &EnvVar) -> String {
        self.get(var)
            .unwrap_or_else(|| var.default.unwrap_or_default().to_string())
    }

    fn secret(&self, var: &EnvVar) -> Option<Secret> {
        self.get(var).map(Secret::new)
    }

    /// The value passed through `check`, whose error is reported against the variable.
    fn checked<T>(
        &mut self,
        var: &EnvVar,
        check: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let value = self.get(var)?;
        match check(&value) {
            Ok(checked) => Some(checked),
            Err(message) => {
                self.report(var, message);
                None
            }
        }
    }

    fn report(&mut self, var: &EnvVar, message: impl Into<String>) {
        self.diagnostics.push(Diagnostic::new(var.name, message));
    }

    /// A whole number of seconds in `1..=max`, or the declared default.
    fn seconds(&mut self, var: &EnvVar, max: u64) -> std::time::Duration {
        let default = var.default.and_then(|d| d.parse().ok()).unwrap_or(1);
        let value = match self.get(var) {
            None => default,
            Some(text) => match text.trim().parse::<u64>() {
                Ok(n) if (1..=max).contains(&n) => n,
                _ => {
                    self.report(
                        var,
                        format!("must be a whole number of seconds between 1 and {max}"),
                    );
                    default
                }
            },
        };
        std::time::Duration::from_secs(value)
    }

    /// A whole number of 0 or more, or the declared default.
    fn count(&mut self, var: &EnvVar) -> i64 {
        let default = var.default.and_then(|d| d.parse().ok()).unwrap_or(0);
        match self.get(var) {
            None => default,
            Some(text) => match text.parse::<i64>() {
                Ok(n) if n >= 0 => n,
                _ => {
                    self.report(var, "must be a whole number of 0 or more");
                    default
                }
            },
        }
    }

    fn flag(&mut self, var: &EnvVar) -> bool {
        let default = var.default.map(is_truthy).unwrap_or(false);
        match self.get(var) {
            None => default,
            Some(v) if is_truthy(&v) => true,
            Some(v) if is_falsy(&v) => false,
            Some(v) => {
                self.report(
                    var,
                    format!("{v:?} is not a boolean (use true/false, 1/0, yes/no, on/off)"),
                );
                default
            }
        }
    }

    fn url(&mut self, var: &EnvVar, default: Option<&str>) -> Option<Url> {
        let value = self.get(var).or_else(|| default.map(str::to_string))?;
        match Url::parse(&value) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => Some(url),
            Ok(_) => {
                self.report(var, "must be an absolute http(s) URL");
                None
            }
            Err(err) => {
                self.report(var, format!("is not a valid URL: {err}"));
                None
            }
        }
    }

    fn socket_addr(&mut self, var: &EnvVar) -> Option<SocketAddr> {
        let value = self.get(var).or_else(|| var.default.map(str::to_string))?;
        match parse_listen_addr(&value) {
            Ok(addr) => Some(addr),
            Err(message) => {
                self.report(var, message);
                None
            }
        }
    }

    fn key(&mut self, var: &EnvVar) -> Option<EncryptionKey> {
        let value = self.get_raw(var)?;
        match EncryptionKey::parse(&value) {
            Ok(key) => Some(key),
            Err(message) => {
                self.report(var, message);
                None
            }
        }
    }

    /// A subject template, or the declared default when unset.
    fn subject_template(&mut self, var: &EnvVar) -> String {
        let template = self.string_or_default(var);
        if let Err(message) = check_subject_template(&template) {
            self.report(var, message);
        }
        template
    }

    fn csv(&self, var: &EnvVar) -> Vec<String> {
        split_csv(&self.string_or_default(var))
    }

    /// Reports `value` of `var` when this version refuses it ([`Support::ExceptValues`]).
    fn refuses_value(&mut self, var: &EnvVar, value: &str) -> bool {
        match var.support.refused_value(value) {
            Some(capability) => {
                self.diagnostics
                    .push(capability.value_refusal(var.name, value));
                true
            }
            None => false,
        }
    }

    /// Reports every variable that is set although this version does not support it
    /// ([`Support::NotYet`]); an on/off variable whose default is off may be set to off.
    fn refuse_unsupported(&mut self) {
        for var in ALL {
            let Support::NotYet(capability) = var.support else {
                continue;
            };
            let Some(value) = self.get(var) else {
                continue;
            };
            let off_as_by_default = var.default == Some("false") && is_falsy(&value);
            if !off_as_by_default {
                self.diagnostics.push(capability.refusal(var.name));
            }
        }
    }
}

fn split_csv(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Parses a listen address: `host:port`, `:port` (all interfaces) or `localhost:port`.
pub fn parse_listen_addr(value: &str) -> Result<SocketAddr, String> {
    let value = value.trim();
    if let Some(port) = value.strip_prefix(':') {
        let port: u16 = port
            .parse()
            .map_err(|_| format!("{value:?} has no valid port"))?;
        return Ok(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)));
    }
    if let Ok(addr) = value.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if let Some(port) = value.strip_prefix("localhost:") {
        let port: u16 = port
            .parse()
            .map_err(|_| format!("{value:?} has no valid port"))?;
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    Err(format!(
        "{value:?} is not a listen address (expected ip:port, localhost:port or :port)"
    ))
}

// --- settings -------------------------------------------------------------------------------

/// Where durable state lives.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreSettings {
    Memory,
    /// `dsn` is a file path or a `sqlite:` URL, as given (or the default file path).
    Sqlite {
        dsn: String,
    },
    /// Connection URL (contains the password, hence secret).
    Postgres {
        url: Secret,
    },
}

impl StoreSettings {
    pub fn driver(&self) -> &'static str {
        match self {
            StoreSettings::Memory => "memory",
            StoreSettings::Sqlite { .. } => "sqlite",
            StoreSettings::Postgres { .. } => "postgres",
        }
    }
}

/// A model vendor's global settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderSettings {
    pub api_key: Option<Secret>,
    pub base_url: Url,
    /// The base URL came from the environment rather than the default.
    pub base_url_overridden: bool,
}

impl ProviderSettings {
    /// A global key is present (`configured` in capabilities).
    pub fn configured(&self) -> bool {
        self.api_key.is_some()
    }
}

/// Model-related settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSettings {
    pub openai: ProviderSettings,
    pub anthropic: ProviderSettings,
    pub openrouter: ProviderSettings,
    /// `openai_chatgpt` is served (AGENT_RUNTIME_CHATGPT_ENABLED).
    pub chatgpt_enabled: bool,
    /// Base URL of the ChatGPT subscription backend.
    pub chatgpt_base_url: Url,
    /// The issuer of Codex's device sign-in (`None`: codex's own).
    pub codex_login_issuer: Option<Url>,
    pub native_provider: String,
    /// The default provider's model for agents that name none: the configured one, else the
    /// provider's default.
    pub native_model: String,
    pub credential_encryption_key: Option<EncryptionKey>,
}

/// Providers a native agent may name.
pub const NATIVE_PROVIDERS: &[&str] = &[
    "anthropic",
    "openai",
    "openrouter",
    "openrouter_responses",
    "openai_chatgpt",
    "openai_compatible",
];

/// Default model of a provider when `AGENT_RUNTIME_NATIVE_MODEL` is unset.
pub fn default_native_model(provider: &str) -> &'static str {
    match provider {
        "openai" | "openai_chatgpt" => "gpt-5.6-terra",
        "openrouter" | "openrouter_responses" => "openai/gpt-5.6-terra",
        "anthropic" => "claude-opus-4-8",
        _ => "",
    }
}

/// Global event sinks.
#[derive(Debug, Clone, PartialEq)]
pub struct EventSettings {
    /// The `log` sink: every published event is written to the service log (the default; off
    /// with `none`).
    pub log: bool,
    /// The `nats` sink.
    pub nats: Option<NatsSettings>,
    /// The `callback` sink: the legacy global callback.
    pub callback: Option<GlobalCallbackSettings>,
}

/// The NATS JetStream sink.
#[derive(Debug, Clone, PartialEq)]
pub struct NatsSettings {
    /// One server URL or several, comma separated (may carry credentials, hence secret).
    pub url: Secret,
    pub stream: String,
    pub stream_subjects: Vec<String>,
    /// Subject of v1 events.
    pub subject_template: String,
    /// Subject of v2 apps' events in v2 form.
    pub v2_subject_template: String,
    pub client_name: String,
    /// Prefix of the replica link's subjects.
    pub replica_subject_prefix: String,
    /// Create or update the stream at startup.
    pub ensure_stream: bool,
}

/// The legacy global event callback (every app's persisted events).
#[derive(Debug, Clone, PartialEq)]
pub struct GlobalCallbackSettings {
    pub url: Url,
    pub token: Option<Secret>,
}

impl GlobalCallbackSettings {
    /// Name of its outbox cursor: stable for a URL, another URL starts afresh. Like an app
    /// callback's (`*` for every app), without the query string, which may carry a token.
    pub fn cursor_name(&self) -> String {
        let host = self.url.host_str().unwrap_or_default();
        let port = self.url.port().map(|p| format!(":{p}")).unwrap_or_default();
        format!(
            "callback:*:{host}{port}{}#{:016x}",
            self.url.path(),
            crate::app::fnv1a(self.url.as_str())
        )
    }
}

/// This service's link to an external studio, and the experiment caps it registers with.
#[derive(Debug, Clone, PartialEq)]
pub struct StudioSettings {
    pub url: Option<Url>,
    /// The studio's bearer token (sent by this service's link to `url`).
    pub token: Option<Secret>,
    /// Experiment caps this service registers with (0: none).
    pub max_tokens_per_experiment: i64,
    pub max_runs_per_experiment: i64,
}

/// Every setting of the service process, validated.
///
/// `AGENT_RUNTIME_STUDIO_ADDR` and `AGENT_RUNTIME_NODE_*` are not here: the `studio` and
/// `node` subcommands read them.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceSettings {
    pub addr: SocketAddr,
    pub service_token: Option<Secret>,
    pub allow_anonymous: bool,
    pub instance_id: Option<String>,
    /// Lifetime of a run ownership lease without a heartbeat.
    pub lease_ttl: std::time::Duration,
    /// Interval of the orphaned-run sweep.
    pub sweep_interval: std::time::Duration,
    /// Parsed `AGENT_RUNTIME_APP_CONFIG` (empty when unset).
    pub app_config: AppConfig,
    pub store: StoreSettings,
    pub models: ModelSettings,
    pub events: EventSettings,
    pub studio: StudioSettings,
    pub http: HttpSettings,
    pub mcp: McpSettings,
    /// `AGENT_RUNTIME_GITHUB_API_BASE`: where repository workspaces open pull requests.
    /// `None`: GitHub's public API.
    pub github_api_base: Option<Url>,
    /// `AGENT_RUNTIME_GITHUB_TOKEN`, else `GITHUB_TOKEN`, else `GH_TOKEN`: the GitHub token
    /// of repository workspaces whose spec's auth carries none.
    pub github_token: Option<Secret>,
    /// `AGENT_RUNTIME_NODES`: the fleet (no nodes when unset).
    pub nodes: crate::nodes::NodesConfig,
    /// `TEMPORAL_*`: durable execution, when `TEMPORAL_ADDRESS` is set.
    pub durable: Option<DurableSettings>,
}

/// Where durable runs are scheduled: the Temporal frontend and how to reach it.
#[derive(Debug, Clone, PartialEq)]
pub struct DurableSettings {
    /// `host:port` or an `http(s)://` URL, as given.
    pub address: String,
    pub namespace: String,
    /// Prepended to every task queue name.
    pub task_queue_prefix: String,
    pub api_key: Option<Secret>,
    /// `None`: plain HTTP/2. On with `TEMPORAL_TLS`, an API key, an `https://` address or any
    /// `TEMPORAL_TLS_*` setting.
    pub tls: Option<TemporalTls>,
    /// The reconciler's period and the age of the rows it inspects.
    pub reconcile_every: std::time::Duration,
    /// Turns per workflow run before it continues as new.
    pub turns_per_workflow_run: u64,
}

impl ServiceSettings {
    /// Reads and validates every variable through `lookup` (use [`process_env`] in production).
    /// Returns all problems at once: invalid values, variables this version does not support
    /// yet, and the app configuration's diagnostics.
    pub fn from_env(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<ServiceSettings, Vec<Diagnostic>> {
        let mut r = Reader {
            lookup: &lookup,
            diagnostics: Vec::new(),
        };
        r.refuse_unsupported();
        if let Err(diagnostic) = worker_threads(&lookup) {
            r.diagnostics.push(diagnostic);
        }
        let addr = r
            .socket_addr(&ADDR)
            .unwrap_or_else(|| SocketAddr::from((Ipv4Addr::LOCALHOST, 8090)));
        let service_token = r.secret(&SERVICE_TOKEN);
        let allow_anonymous = r.flag(&ALLOW_ANONYMOUS);
        let instance_id = read_instance_id(&mut r);
        let lease_ttl = r.seconds(&LEASE_TTL_SECONDS, 3600);
        let sweep_interval = r.seconds(&SWEEP_INTERVAL_SECONDS, 3600);
        let app_config = read_app_config(&mut r);
        let store = read_store(&mut r);
        let models = read_models(&mut r);
        let events = read_events(&mut r);
        let studio = StudioSettings {
            url: r.url(&STUDIO_URL, None),
            token: r.secret(&STUDIO_TOKEN),
            max_tokens_per_experiment: r.count(&STUDIO_MAX_TOKENS_PER_EXPERIMENT),
            max_runs_per_experiment: r.count(&STUDIO_MAX_RUNS_PER_EXPERIMENT),
        };
        let http = read_http(&mut r);
        let mcp = read_mcp(&mut r);
        let github_api_base = r.url(&GITHUB_API_BASE, None);
        let github_token = [&GITHUB_TOKEN_AR, &GITHUB_TOKEN, &GH_TOKEN]
            .into_iter()
            .find_map(|var| {
                r.secret(var)
                    .filter(|token| !token.expose().trim().is_empty())
            });
        let nodes = read_nodes(&mut r);
        let durable = read_durable(&mut r);
        if !r.diagnostics.is_empty() {
            return Err(r.diagnostics);
        }
        Ok(ServiceSettings {
            addr,
            service_token,
            allow_anonymous,
            instance_id,
            lease_ttl,
            sweep_interval,
            app_config,
            store,
            models,
            events,
            studio,
            http,
            mcp,
            github_api_base,
            github_token,
            nodes,
            durable,
        })
    }

    /// Whether requests must carry the service token.
    pub fn service_auth_enabled(&self) -> bool {
        self.service_token.is_some()
    }
}

fn read_instance_id(r: &mut Reader<'_>) -> Option<String> {
    let id = r.get(&INSTANCE_ID)?;
    if let Err(message) = ar_core::ids::validate_external_id("instance id", &id) {
        r.report(&INSTANCE_ID, message);
    }
    Some(id)
}

/// `AGENT_RUNTIME_NODES`, with its diagnostics added to the environment's.
fn read_nodes(r: &mut Reader<'_>) -> crate::nodes::NodesConfig {
    let Some(source) = (r.lookup)(NODES.name).filter(|v| !v.trim().is_empty()) else {
        return crate::nodes::NodesConfig::default();
    };
    match crate::nodes::NodesConfig::load(NODES.name, &source, r.lookup) {
        Ok(config) => config,
        Err(diagnostics) => {
            r.diagnostics.extend(diagnostics);
            crate::nodes::NodesConfig::default()
        }
    }
}

/// `AGENT_RUNTIME_APP_CONFIG`, with its diagnostics added to the environment's.
fn read_app_config(r: &mut Reader<'_>) -> AppConfig {
    let Some(source) = (r.lookup)(APP_CONFIG.name).filter(|v| !v.trim().is_empty()) else {
        return AppConfig::default();
    };
    match AppConfig::load(&source, r.lookup) {
        Ok(config) => config,
        Err(diagnostics) => {
            r.diagnostics.extend(diagnostics);
            AppConfig::default()
        }
    }
}

fn read_store(r: &mut Reader<'_>) -> StoreSettings {
    let driver = r.string_or_default(&STORE_DRIVER).to_ascii_lowercase();
    match driver.as_str() {
        "memory" => StoreSettings::Memory,
        "postgres" | "postgresql" => match postgres_url(r) {
            Some(url) => StoreSettings::Postgres { url },
            None => {
                r.report(
                    &DATABASE_URL,
                    "the postgres store needs DATABASE_URL or PGHOST/PGDATABASE (and PGUSER, PGPASSWORD as needed)",
                );
                StoreSettings::Memory
            }
        },
        "sqlite" => StoreSettings::Sqlite {
            dsn: r.get(&SQLITE_DSN).unwrap_or_else(|| default_sqlite_path(r)),
        },
        other => {
            r.report(
                &STORE_DRIVER,
                format!("unknown store driver {other:?} (expected sqlite, postgres or memory)"),
            );
            StoreSettings::Memory
        }
    }
}

/// `$XDG_DATA_HOME/agent-runtime/agent-runtime.db`, else `$HOME/.local/share/...`, else the
/// working directory (a process without a home still starts).
fn default_sqlite_path(r: &Reader<'_>) -> String {
    let base = r.get(&XDG_DATA_HOME).map(PathBuf::from).or_else(|| {
        r.get(&HOME)
            .map(|home| PathBuf::from(home).join(".local").join("share"))
    });
    match base {
        Some(base) => base
            .join("agent-runtime")
            .join("agent-runtime.db")
            .to_string_lossy()
            .into_owned(),
        None => "agent-runtime.db".to_string(),
    }
}

/// `DATABASE_URL`, else a URL built from the `PG*` variables when any of them is set.
fn postgres_url(r: &mut Reader<'_>) -> Option<Secret> {
    if let Some(url) = r.get(&DATABASE_URL) {
        match Url::parse(&url) {
            Ok(parsed) if matches!(parsed.scheme(), "postgres" | "postgresql") => {
                return Some(Secret::new(url))
            }
            // Never echo the value: it carries the password.
            _ => r.report(&DATABASE_URL, "must be a postgres:// or postgresql:// URL"),
        }
        return None;
    }
    let host = r.get(&PGHOST);
    let port = r.get(&PGPORT);
    let database = r.get(&PGDATABASE);
    let user = r.get(&PGUSER);
    let password = r.get(&PGPASSWORD);
    let sslmode = r.get(&PGSSLMODE);
    if host.is_none() && database.is_none() && user.is_none() {
        return None;
    }
    let port_num = match port.as_deref().map(str::parse::<u16>) {
        None => None,
        Some(Ok(port)) => Some(port),
        Some(Err(_)) => {
            r.report(&PGPORT, "must be a port number");
            None
        }
    };
    // A host starting with '/' is a Unix socket directory, passed as the `host` parameter.
    let socket_dir = host
        .as_deref()
        .filter(|h| h.starts_with('/'))
        .map(str::to_string);
    let tcp_host = match (&host, &socket_dir) {
        (Some(h), None) => h.clone(),
        _ => "localhost".to_string(),
    };
    let mut url = match Url::parse(&format!("postgres://{}", bracket_ipv6(&tcp_host))) {
        Ok(url) => url,
        Err(_) => {
            r.report(&PGHOST, "is not a valid host name");
            return None;
        }
    };
    // Setting parts of a URL that has a host cannot fail, except for odd characters in the user
    // name, which we report.
    if url.set_port(port_num).is_err() {
        r.report(&PGPORT, "cannot be applied to the URL");
    }
    if let Some(user) = &user {
        if url.set_username(user).is_err() {
            r.report(&PGUSER, "cannot be used in a URL");
        }
    }
    if password.is_some() && url.set_password(password.as_deref()).is_err() {
        r.report(&PGPASSWORD, "cannot be used in a URL");
    }
    url.set_path(&format!("/{}", database.unwrap_or_default()));
    {
        let mut query = url.query_pairs_mut();
        if let Some(dir) = &socket_dir {
            query.append_pair("host", dir);
        }
        if let Some(mode) = &sslmode {
            query.append_pair("sslmode", mode);
        }
    }
    if url.query() == Some("") {
        url.set_query(None);
    }
    Some(Secret::new(url.to_string()))
}

fn bracket_ipv6(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

fn read_provider(r: &mut Reader<'_>, key: &EnvVar, base: &EnvVar) -> ProviderSettings {
    ProviderSettings {
        api_key: r.secret(key),
        base_url: read_base_url(r, base),
        base_url_overridden: r.get(base).is_some(),
    }
}

/// A provider's base URL: the variable's, else its default.
fn read_base_url(r: &mut Reader<'_>, base: &EnvVar) -> Url {
    let default = base.default.unwrap_or_default();
    r.url(base, Some(default))
        .or_else(|| Url::parse(default).ok())
        // Reached only when the variable held an invalid URL: that is already reported, so
        // `from_env` returns `Err` and this placeholder is discarded. Parsing a literal URL
        // cannot fail.
        .unwrap_or_else(|| Url::parse("https://invalid.invalid").expect("literal URL parses"))
}

fn read_models(r: &mut Reader<'_>) -> ModelSettings {
    let openai = read_provider(r, &OPENAI_API_KEY, &OPENAI_BASE_URL);
    let anthropic = read_provider(r, &ANTHROPIC_API_KEY, &ANTHROPIC_BASE_URL);
    let openrouter = read_provider(r, &OPENROUTER_API_KEY, &OPENROUTER_BASE_URL);
    let native_provider = r.string_or_default(&NATIVE_PROVIDER).to_ascii_lowercase();
    if !r.refuses_value(&NATIVE_PROVIDER, &native_provider)
        && !NATIVE_PROVIDERS.contains(&native_provider.as_str())
    {
        r.report(
            &NATIVE_PROVIDER,
            format!(
                "unknown provider {native_provider:?} (expected one of {})",
                NATIVE_PROVIDERS.join(", ")
            ),
        );
    }
    let native_model = r
        .get(&NATIVE_MODEL)
        .unwrap_or_else(|| default_native_model(&native_provider).to_string());
    let chatgpt_enabled = r.flag(&CHATGPT_ENABLED);
    if native_provider == "openai_chatgpt" && !chatgpt_enabled {
        r.report(
            &NATIVE_PROVIDER,
            "openai_chatgpt needs AGENT_RUNTIME_CHATGPT_ENABLED=true",
        );
    }
    ModelSettings {
        openai,
        anthropic,
        openrouter,
        chatgpt_enabled,
        chatgpt_base_url: read_base_url(r, &CHATGPT_BASE_URL),
        codex_login_issuer: r.url(&CODEX_LOGIN_ISSUER, None),
        native_provider,
        native_model,
        credential_encryption_key: r.key(&MODEL_CREDENTIAL_ENCRYPTION_KEY),
    }
}

/// The sinks `AGENT_RUNTIME_EVENT_SINK` names.
#[derive(Debug, Default)]
struct SinkChoice {
    log: bool,
    nats: bool,
    callback: bool,
    none: bool,
}

fn read_events(r: &mut Reader<'_>) -> EventSettings {
    let mut choice = SinkChoice::default();
    for item in r.csv(&EVENT_SINK) {
        match item.to_ascii_lowercase().as_str() {
            "log" | "slog" => choice.log = true,
            "nats" | "jetstream" => choice.nats = true,
            "callback" | "http" | "webhook" => choice.callback = true,
            "none" | "noop" => choice.none = true,
            _ => r.report(
                &EVENT_SINK,
                format!("unknown event sink {item:?} (expected log, nats, callback or none)"),
            ),
        }
    }
    if choice.none && (choice.log || choice.nats || choice.callback) {
        r.report(&EVENT_SINK, "`none` cannot be combined with other sinks");
    }
    let on = !choice.none;
    EventSettings {
        log: on && choice.log,
        nats: if on && choice.nats {
            read_nats(r)
        } else {
            None
        },
        callback: if on && choice.callback {
            read_global_callback(r)
        } else {
            None
        },
    }
}

fn read_nats(r: &mut Reader<'_>) -> Option<NatsSettings> {
    let url = r.get(&NATS_URL);
    match &url {
        None => r.report(&NATS_URL, "is required with the nats event sink"),
        Some(url) => {
            for server in split_csv(url) {
                if let Err(message) = check_nats_server(&server) {
                    r.report(&NATS_URL, message);
                }
            }
        }
    }
    let stream = r.string_or_default(&NATS_STREAM);
    if let Err(message) = check_stream_name(&stream) {
        r.report(&NATS_STREAM, message);
    }
    let stream_subjects = r.csv(&NATS_STREAM_SUBJECTS);
    for subject in &stream_subjects {
        if subject.chars().any(char::is_whitespace) {
            r.report(
                &NATS_STREAM_SUBJECTS,
                format!("{subject:?} is not a subject (it has white space)"),
            );
        }
    }
    let subject_template = r.subject_template(&NATS_SUBJECT_TEMPLATE);
    let v2_subject_template = r.subject_template(&NATS_V2_SUBJECT_TEMPLATE);
    let replica_subject_prefix = r.string_or_default(&NATS_REPLICA_SUBJECT_PREFIX);
    if replica_subject_prefix.is_empty()
        || replica_subject_prefix
            .chars()
            .any(|c| c.is_whitespace() || c == '*' || c == '>')
    {
        r.report(
            &NATS_REPLICA_SUBJECT_PREFIX,
            "is not a subject prefix (empty, white space or a wildcard)",
        );
    }
    Some(NatsSettings {
        url: Secret::new(url?),
        stream,
        stream_subjects,
        subject_template,
        v2_subject_template,
        client_name: r.string_or_default(&NATS_CLIENT_NAME),
        replica_subject_prefix,
        ensure_stream: r.flag(&NATS_ENSURE_STREAM),
    })
}

/// One server of `AGENT_RUNTIME_NATS_URL`: `host:port` or a `nats`, `tls`, `ws` or `wss` URL.
/// The messages never repeat the value, which may carry a password or token.
fn check_nats_server(server: &str) -> Result<(), String> {
    let with_scheme = if server.contains("://") {
        server.to_string()
    } else {
        format!("nats://{server}")
    };
    match Url::parse(&with_scheme) {
        Ok(url) if !matches!(url.scheme(), "nats" | "tls" | "ws" | "wss") => Err(format!(
            "a server URL has the scheme {:?} (expected nats, tls, ws or wss)",
            url.scheme()
        )),
        Ok(url) if !url.has_host() => Err("a server URL has no host".to_string()),
        Ok(_) => Ok(()),
        Err(error) => Err(format!("a server URL is not valid: {error}")),
    }
}

/// JetStream stream names are one token without wildcards or path separators.
fn check_stream_name(name: &str) -> Result<(), String> {
    if name
        .chars()
        .any(|c| c.is_whitespace() || matches!(c, '.' | '*' | '>' | '/' | '\\'))
    {
        return Err(format!(
            "{name:?} is not a stream name (no white space, `.`, `*`, `>`, `/` or `\\`)"
        ));
    }
    Ok(())
}

/// A subject template renders dot-separated tokens, none empty, without wildcards or spaces.
fn check_subject_template(template: &str) -> Result<(), String> {
    if template
        .chars()
        .any(|c| c.is_whitespace() || matches!(c, '*' | '>'))
    {
        return Err(format!(
            "{template:?} is not a subject template (no white space, `*` or `>`)"
        ));
    }
    if template.split('.').any(str::is_empty) {
        return Err(format!("{template:?} has an empty subject token"));
    }
    Ok(())
}

fn read_global_callback(r: &mut Reader<'_>) -> Option<GlobalCallbackSettings> {
    if r.get(&EVENT_CALLBACK_URL).is_none() {
        r.report(
            &EVENT_CALLBACK_URL,
            "is required with the callback event sink",
        );
        return None;
    }
    Some(GlobalCallbackSettings {
        url: r.url(&EVENT_CALLBACK_URL, None)?,
        token: r.secret(&EVENT_CALLBACK_TOKEN),
    })
}

/// Run-scoped MCP servers: the key their credentials are sealed with (run MCP is offered only
/// with one) and the destination policy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpSettings {
    pub credential_encryption_key: Option<EncryptionKey>,
    /// Hosts a server may be on (exact or `*.suffix`); empty: any.
    pub allowed_hosts: Vec<String>,
    pub allow_private_networks: bool,
    pub allow_http: bool,
}

fn read_mcp(r: &mut Reader<'_>) -> McpSettings {
    McpSettings {
        credential_encryption_key: r.key(&MCP_CREDENTIAL_ENCRYPTION_KEY),
        allowed_hosts: r
            .csv(&MCP_ALLOWED_HOSTS)
            .into_iter()
            .map(|host| host.to_ascii_lowercase())
            .collect(),
        allow_private_networks: r.flag(&MCP_ALLOW_PRIVATE_NETWORKS),
        allow_http: r.flag(&MCP_ALLOW_HTTP),
    }
}

/// Limits on the connections of HTTP clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpSettings {
    pub header_read_timeout: std::time::Duration,
    pub body_read_timeout: std::time::Duration,
    /// Open connections per client IP address; 0: no limit.
    pub max_connections_per_client: usize,
}

/// The `TEMPORAL_TLS_*` settings: each turns TLS on, none means anything without an address.
const TEMPORAL_TLS_SETTINGS: [&EnvVar; 7] = [
    &TEMPORAL_TLS_CA_PATH,
    &TEMPORAL_TLS_CA_DATA,
    &TEMPORAL_TLS_CERT_PATH,
    &TEMPORAL_TLS_CERT_DATA,
    &TEMPORAL_TLS_KEY_PATH,
    &TEMPORAL_TLS_KEY_DATA,
    &TEMPORAL_TLS_SERVER_NAME,
];

/// `TEMPORAL_*`: none without an address; the other settings alone would be ignored, so they
/// are refused.
fn read_durable(r: &mut Reader<'_>) -> Option<DurableSettings> {
    let tls_on = r.flag(&TEMPORAL_TLS);
    let Some(address) = r.get(&TEMPORAL_ADDRESS) else {
        let set_alone = [
            &TEMPORAL_NAMESPACE,
            &TEMPORAL_TASK_QUEUE_PREFIX,
            &TEMPORAL_API_KEY,
            &DURABLE_RECONCILE_SECONDS,
            &DURABLE_TURNS_PER_WORKFLOW_RUN,
        ];
        for var in set_alone.into_iter().chain(TEMPORAL_TLS_SETTINGS) {
            if r.get(var).is_some() {
                r.report(
                    var,
                    "is set but TEMPORAL_ADDRESS is not (durable execution is off)",
                );
            }
        }
        if tls_on {
            r.report(
                &TEMPORAL_TLS,
                "is on but TEMPORAL_ADDRESS is not (durable execution is off)",
            );
        }
        return None;
    };
    let bare = address
        .strip_prefix("http://")
        .or_else(|| address.strip_prefix("https://"))
        .unwrap_or(&address);
    let port_ok = bare
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0));
    if !port_ok || bare.contains('/') {
        r.report(
            &TEMPORAL_ADDRESS,
            format!("{address:?} is not a host:port (e.g. 127.0.0.1:7233)"),
        );
        return None;
    }
    let api_key = r.secret(&TEMPORAL_API_KEY);
    let tls = read_temporal_tls(r, &address, api_key.is_some());
    let reconcile_every = r.seconds(&DURABLE_RECONCILE_SECONDS, 3600);
    let turns_per_workflow_run = match r.count(&DURABLE_TURNS_PER_WORKFLOW_RUN) {
        turns @ 1..=10_000 => turns as u64,
        _ => {
            r.report(
                &DURABLE_TURNS_PER_WORKFLOW_RUN,
                "must be between 1 and 10000",
            );
            200
        }
    };
    Some(DurableSettings {
        reconcile_every,
        turns_per_workflow_run,
        tls,
        address,
        namespace: r.string_or_default(&TEMPORAL_NAMESPACE),
        task_queue_prefix: r.get(&TEMPORAL_TASK_QUEUE_PREFIX).unwrap_or_default(),
        api_key,
    })
}

/// Whether TLS is asked for in so many words: `TEMPORAL_TLS` (when it is a boolean) or the
/// address's scheme. The two disagreeing is a contradiction, refused rather than resolved.
fn explicit_tls(r: &mut Reader<'_>, address: &str) -> Option<bool> {
    let setting = r
        .get(&TEMPORAL_TLS)
        .and_then(|value| (is_truthy(&value) || is_falsy(&value)).then(|| is_truthy(&value)));
    let scheme = if address.starts_with("https://") {
        Some(true)
    } else if address.starts_with("http://") {
        Some(false)
    } else {
        None
    };
    match (setting, scheme) {
        (Some(true), Some(false)) => r.report(
            &TEMPORAL_TLS,
            "is on but TEMPORAL_ADDRESS is http:// (use https:// or host:port)",
        ),
        (Some(false), Some(true)) => r.report(
            &TEMPORAL_TLS,
            "is off but TEMPORAL_ADDRESS is https:// (use http:// or host:port)",
        ),
        _ => {}
    }
    setting.or(scheme)
}

/// TLS to Temporal: as `TEMPORAL_TLS` or the address's scheme say, else on with any
/// `TEMPORAL_TLS_*` setting or an API key (as the Temporal CLI does; `TEMPORAL_TLS=false` with
/// a key is plain text with the key). A `TEMPORAL_TLS_*` setting where plain text is asked
/// for is a contradiction, refused rather than resolved either way.
fn read_temporal_tls(r: &mut Reader<'_>, address: &str, api_key: bool) -> Option<TemporalTls> {
    let explicit = explicit_tls(r, address);
    let given = TEMPORAL_TLS_SETTINGS
        .into_iter()
        .find(|var| r.get(var).is_some());
    if let (Some(given), Some(false)) = (given, explicit) {
        let name = given.name;
        if address.starts_with("http://") {
            let message = format!("is http:// but {name} is set (use https:// or host:port)");
            r.report(&TEMPORAL_ADDRESS, message);
        } else {
            let message = format!("is off but {name} is set (a TLS setting means TLS)");
            r.report(&TEMPORAL_TLS, message);
        }
    }
    if !explicit.unwrap_or(given.is_some() || api_key) {
        return None;
    }
    let server_name = r.checked(&TEMPORAL_TLS_SERVER_NAME, |name| {
        temporal_tls::check_server_name(name).map(|()| name.to_string())
    });
    let ca = read_pem(
        r,
        (&TEMPORAL_TLS_CA_PATH, &TEMPORAL_TLS_CA_DATA),
        temporal_tls::certificates,
    );
    Some(TemporalTls {
        ca_form: ca.as_ref().map_or(PemForm::Path, |(_, form)| *form),
        ca_pem: ca.map(|(pem, _)| pem),
        client_cert: read_client_certificate(r),
        server_name,
    })
}

/// A PEM setting given as a file (`path`) or inline (`data`), passed through `check`; both
/// at once is a contradiction. `None` when neither is set or it is refused.
fn read_pem<T>(
    r: &mut Reader<'_>,
    (path, data): (&EnvVar, &EnvVar),
    check: fn(Vec<u8>) -> Result<T, String>,
) -> Option<(T, PemForm)> {
    if r.get(path).is_some() && r.get(data).is_some() {
        let message = format!("is set beside {} (give it one way)", path.name);
        r.report(data, message);
        return None;
    }
    if let Some(read) = r.checked(path, |file| temporal_tls::read_file(file, check)) {
        return Some((read, PemForm::Path));
    }
    let read = r.checked(data, |text| check(text.as_bytes().to_vec()))?;
    Some((read, PemForm::Data))
}

/// `TEMPORAL_TLS_CERT_*` and `TEMPORAL_TLS_KEY_*` (each a file or inline): both or neither.
fn read_client_certificate(r: &mut Reader<'_>) -> Option<ClientCertificate> {
    let cert_vars = (&TEMPORAL_TLS_CERT_PATH, &TEMPORAL_TLS_CERT_DATA);
    let key_vars = (&TEMPORAL_TLS_KEY_PATH, &TEMPORAL_TLS_KEY_DATA);
    let cert = read_pem(r, cert_vars, temporal_tls::certificates);
    let key = read_pem(r, key_vars, temporal_tls::private_key);
    let given = |r: &Reader<'_>, (path, data): (&EnvVar, &EnvVar)| {
        [path, data]
            .into_iter()
            .find(|var| r.get(var).is_some())
            .map(|var| var.name)
    };
    match (given(r, cert_vars), given(r, key_vars)) {
        (Some(cert), None) => r.report(
            &TEMPORAL_TLS_KEY_PATH,
            format!("(or TEMPORAL_TLS_KEY_DATA) is required with {cert} (a client certificate needs its private key)"),
        ),
        (None, Some(key)) => r.report(
            &TEMPORAL_TLS_CERT_PATH,
            format!("(or TEMPORAL_TLS_CERT_DATA) is required with {key} (a private key needs its certificate)"),
        ),
        _ => {}
    }
    let ((cert_pem, cert_form), (key_pem, _)) = (cert?, key?);
    Some(ClientCertificate {
        cert_pem,
        cert_form,
        key_pem,
    })
}

fn read_http(r: &mut Reader<'_>) -> HttpSettings {
    HttpSettings {
        header_read_timeout: r.seconds(&HTTP_HEADER_READ_TIMEOUT_SECONDS, 3600),
        body_read_timeout: r.seconds(&HTTP_BODY_READ_TIMEOUT_SECONDS, 3600),
        max_connections_per_client: usize::try_from(r.count(&HTTP_MAX_CONNECTIONS_PER_CLIENT))
            .unwrap_or(usize::MAX),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn paths(diagnostics: &[Diagnostic]) -> Vec<&str> {
        diagnostics.iter().map(|d| d.path.as_str()).collect()
    }

    #[test]
    fn defaults_without_any_variable() {
        let settings = ServiceSettings::from_env(lookup(&[("HOME", "/home/u")])).unwrap();
        assert_eq!(settings.addr, "127.0.0.1:8090".parse().unwrap());
        assert!(settings.service_token.is_none());
        assert!(!settings.allow_anonymous);
        assert_eq!(
            settings.store,
            StoreSettings::Sqlite {
                dsn: "/home/u/.local/share/agent-runtime/agent-runtime.db".into()
            }
        );
        assert_eq!(settings.models.native_provider, "anthropic");
        assert_eq!(settings.models.native_model, "claude-opus-4-8");
        assert_eq!(
            settings.models.openai.base_url.as_str(),
            "https://api.openai.com/v1"
        );
        assert!(!settings.models.openai.base_url_overridden);
        assert!(settings.events.log);
        assert!(settings.app_config.apps.is_empty());
    }

    #[test]
    fn xdg_data_home_wins_over_home() {
        let settings =
            ServiceSettings::from_env(lookup(&[("HOME", "/home/u"), ("XDG_DATA_HOME", "/data")]))
                .unwrap();
        assert_eq!(
            settings.store,
            StoreSettings::Sqlite {
                dsn: "/data/agent-runtime/agent-runtime.db".into()
            }
        );
    }

    #[test]
    fn truthy_values() {
        for value in ["1", "true", "T", "Yes", "y", "ON"] {
            let settings =
                ServiceSettings::from_env(lookup(&[("AGENT_RUNTIME_ALLOW_ANONYMOUS", value)]))
                    .unwrap();
            assert!(settings.allow_anonymous, "{value}");
        }
        for value in ["0", "false", "off", ""] {
            let settings =
                ServiceSettings::from_env(lookup(&[("AGENT_RUNTIME_ALLOW_ANONYMOUS", value)]))
                    .unwrap();
            assert!(!settings.allow_anonymous, "{value}");
        }
    }

    #[test]
    fn go_style_and_localhost_addresses() {
        assert_eq!(
            parse_listen_addr(":8090").unwrap(),
            "0.0.0.0:8090".parse().unwrap()
        );
        assert_eq!(
            parse_listen_addr("localhost:9").unwrap(),
            "127.0.0.1:9".parse().unwrap()
        );
        assert_eq!(
            parse_listen_addr("[::1]:9").unwrap(),
            "[::1]:9".parse().unwrap()
        );
        assert!(parse_listen_addr("nowhere").is_err());
    }

    #[test]
    fn postgres_url_built_from_pg_variables() {
        let settings = ServiceSettings::from_env(lookup(&[
            ("AGENT_RUNTIME_STORE_DRIVER", "postgres"),
            ("PGHOST", "db.internal"),
            ("PGPORT", "6543"),
            ("PGDATABASE", "runtime"),
            ("PGUSER", "svc"),
            ("PGPASSWORD", "p@ss word"),
            ("PGSSLMODE", "require"),
        ]))
        .unwrap();
        let StoreSettings::Postgres { url } = &settings.store else {
            panic!("expected postgres")
        };
        assert_eq!(
            url.expose(),
            "postgres://svc:p%40ss%20word@db.internal:6543/runtime?sslmode=require"
        );
        assert!(!format!("{settings:?}").contains("p%40ss"));
    }

    #[test]
    fn postgres_unix_socket_and_database_url() {
        let settings = ServiceSettings::from_env(lookup(&[
            ("AGENT_RUNTIME_STORE_DRIVER", "postgres"),
            ("PGHOST", "/var/run/postgresql"),
            ("PGDATABASE", "test"),
        ]))
        .unwrap();
        let StoreSettings::Postgres { url } = &settings.store else {
            panic!("expected postgres")
        };
        assert_eq!(
            url.expose(),
            "postgres://localhost/test?host=%2Fvar%2Frun%2Fpostgresql"
        );

        let settings = ServiceSettings::from_env(lookup(&[
            ("AGENT_RUNTIME_STORE_DRIVER", "postgres"),
            ("DATABASE_URL", "postgres://u:secret@127.0.0.1:5432/test"),
            ("PGHOST", "ignored"),
        ]))
        .unwrap();
        let StoreSettings::Postgres { url } = &settings.store else {
            panic!("expected postgres")
        };
        assert_eq!(url.expose(), "postgres://u:secret@127.0.0.1:5432/test");
    }

    #[test]
    fn encryption_keys_raw_and_base64() {
        let raw = "0123456789abcdef0123456789abcdef";
        assert_eq!(EncryptionKey::parse(raw).unwrap().bytes(), raw.as_bytes());
        let b64 = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        assert_eq!(EncryptionKey::parse(&b64).unwrap().bytes(), &[7u8; 32]);
        assert!(EncryptionKey::parse("c2hvcnQ=").is_err());
        assert!(EncryptionKey::parse("not a key at all!").is_err());
        assert_eq!(
            format!("{:?}", EncryptionKey::parse(raw).unwrap()),
            "EncryptionKey([redacted])"
        );
    }

    #[test]
    fn secrets_never_in_debug() {
        let settings = ServiceSettings::from_env(lookup(&[
            ("AGENT_RUNTIME_SERVICE_TOKEN", "tok-very-secret"),
            ("OPENAI_API_KEY", "sk-very-secret"),
            ("AGENT_RUNTIME_STUDIO_TOKEN", "studio-very-secret"),
        ]))
        .unwrap();
        let debug = format!("{settings:?}");
        assert!(!debug.contains("very-secret"), "{debug}");
        assert_eq!(
            settings.service_token.as_ref().unwrap().expose(),
            "tok-very-secret"
        );
        assert!(settings.models.openai.configured());
    }

    #[test]
    fn all_problems_reported_at_once() {
        let err = ServiceSettings::from_env(lookup(&[
            ("AGENT_RUNTIME_ADDR", "nowhere"),
            ("AGENT_RUNTIME_ALLOW_ANONYMOUS", "maybe"),
            ("AGENT_RUNTIME_STORE_DRIVER", "mysql"),
            ("OPENAI_BASE_URL", "ftp://x"),
            ("AGENT_RUNTIME_NATIVE_PROVIDER", "gemini"),
            ("AGENT_RUNTIME_MODEL_CREDENTIAL_ENCRYPTION_KEY", "short"),
            ("AGENT_RUNTIME_EVENT_SINK", "log,kafka"),
            ("AGENT_RUNTIME_WORKER_THREADS", "0"),
            ("TEMPORAL_ADDRESS", "127.0.0.1"),
            ("AGENT_RUNTIME_APP_CONFIG", "apps: [{app_id: a, bogus: 1}]"),
        ]))
        .unwrap_err();
        let got = paths(&err);
        for expected in [
            "AGENT_RUNTIME_ADDR",
            "AGENT_RUNTIME_ALLOW_ANONYMOUS",
            "AGENT_RUNTIME_STORE_DRIVER",
            "OPENAI_BASE_URL",
            "AGENT_RUNTIME_NATIVE_PROVIDER",
            "AGENT_RUNTIME_MODEL_CREDENTIAL_ENCRYPTION_KEY",
            "AGENT_RUNTIME_EVENT_SINK",
            "AGENT_RUNTIME_WORKER_THREADS",
            "TEMPORAL_ADDRESS",
            "apps[0].bogus",
        ] {
            assert!(got.contains(&expected), "missing {expected} in {got:?}");
        }
    }

    fn messages_at(diagnostics: &[Diagnostic], path: &str) -> Vec<String> {
        diagnostics
            .iter()
            .filter(|d| d.path == path)
            .map(|d| d.message.clone())
            .collect()
    }

    #[test]
    fn every_event_sink_works_and_an_unknown_one_is_refused() {
        let settings =
            ServiceSettings::from_env(lookup(&[("AGENT_RUNTIME_EVENT_SINK", "slog")])).unwrap();
        assert!(settings.events.log);
        assert!(settings.events.nats.is_none() && settings.events.callback.is_none());
        let settings =
            ServiceSettings::from_env(lookup(&[("AGENT_RUNTIME_EVENT_SINK", "noop")])).unwrap();
        assert!(!settings.events.log);

        for (sink, log) in [("log,nats", true), ("JetStream", false)] {
            let settings = ServiceSettings::from_env(lookup(&[
                ("AGENT_RUNTIME_EVENT_SINK", sink),
                ("AGENT_RUNTIME_NATS_URL", "nats://u:pw@127.0.0.1:4222"),
            ]))
            .unwrap();
            assert_eq!(settings.events.log, log, "{sink}");
            let nats = settings.events.nats.expect("nats sink");
            assert_eq!(nats.url.expose(), "nats://u:pw@127.0.0.1:4222");
            assert_eq!(nats.stream, "AGENT_RUNTIME_EVENTS");
            assert_eq!(nats.stream_subjects, vec!["agent-runtime.events.>"]);
            assert_eq!(
                nats.subject_template,
                "agent-runtime.events.{app_id}.{run_id}.{event_type}"
            );
            assert_eq!(
                nats.v2_subject_template,
                "agent-runtime.events.v2.{app_id}.{run_id}.{event_type}"
            );
            assert_eq!(nats.client_name, "agent-runtime");
            assert_eq!(nats.replica_subject_prefix, "agent-runtime.replicas");
            assert!(nats.ensure_stream);
            assert!(!format!("{nats:?}").contains("pw@"), "the URL is secret");
        }
        for sink in ["callback", "http", "Webhook"] {
            let settings = ServiceSettings::from_env(lookup(&[
                ("AGENT_RUNTIME_EVENT_SINK", sink),
                (
                    "AGENT_RUNTIME_EVENT_CALLBACK_URL",
                    "https://hooks.example/all",
                ),
                ("AGENT_RUNTIME_EVENT_CALLBACK_TOKEN", "cb-very-secret"),
            ]))
            .unwrap();
            let callback = settings.events.callback.expect("callback sink");
            assert_eq!(callback.url.as_str(), "https://hooks.example/all");
            assert_eq!(callback.token.unwrap().expose(), "cb-very-secret");
        }

        let err = ServiceSettings::from_env(lookup(&[("AGENT_RUNTIME_EVENT_SINK", "log, kafka")]))
            .unwrap_err();
        let messages = messages_at(&err, "AGENT_RUNTIME_EVENT_SINK");
        assert_eq!(messages.len(), 1, "{err:?}");
        assert!(messages[0].contains("\"kafka\""), "{messages:?}");
        let err = ServiceSettings::from_env(lookup(&[("AGENT_RUNTIME_EVENT_SINK", "log,none")]))
            .unwrap_err();
        assert!(messages_at(&err, "AGENT_RUNTIME_EVENT_SINK")[0].contains("cannot be combined"));
    }

    #[test]
    fn the_nats_and_callback_sinks_need_their_settings_and_check_them() {
        let err =
            ServiceSettings::from_env(lookup(&[("AGENT_RUNTIME_EVENT_SINK", "nats,callback")]))
                .unwrap_err();
        assert_eq!(
            paths(&err),
            vec!["AGENT_RUNTIME_NATS_URL", "AGENT_RUNTIME_EVENT_CALLBACK_URL"]
        );
        let err = ServiceSettings::from_env(lookup(&[
            ("AGENT_RUNTIME_EVENT_SINK", "nats,callback"),
            (
                "AGENT_RUNTIME_NATS_URL",
                "nats://127.0.0.1:4222, http://x:pw@h:1",
            ),
            ("AGENT_RUNTIME_NATS_STREAM", "a.b"),
            ("AGENT_RUNTIME_NATS_STREAM_SUBJECTS", "ok.>, not ok"),
            ("AGENT_RUNTIME_NATS_SUBJECT_TEMPLATE", "x.{app_id}.*"),
            ("AGENT_RUNTIME_NATS_V2_SUBJECT_TEMPLATE", "x..{run_id}"),
            ("AGENT_RUNTIME_NATS_REPLICA_SUBJECT_PREFIX", "links.>"),
            ("AGENT_RUNTIME_NATS_ENSURE_STREAM", "maybe"),
            ("AGENT_RUNTIME_EVENT_CALLBACK_URL", "ftp://h/x"),
        ]))
        .unwrap_err();
        assert_eq!(
            paths(&err),
            vec![
                "AGENT_RUNTIME_NATS_URL",
                "AGENT_RUNTIME_NATS_STREAM",
                "AGENT_RUNTIME_NATS_STREAM_SUBJECTS",
                "AGENT_RUNTIME_NATS_SUBJECT_TEMPLATE",
                "AGENT_RUNTIME_NATS_V2_SUBJECT_TEMPLATE",
                "AGENT_RUNTIME_NATS_REPLICA_SUBJECT_PREFIX",
                "AGENT_RUNTIME_NATS_ENSURE_STREAM",
                "AGENT_RUNTIME_EVENT_CALLBACK_URL",
            ]
        );
        assert!(!format!("{err:?}").contains("pw@"), "{err:?}");
        // Several servers, a bare host:port, and every custom setting.
        let settings = ServiceSettings::from_env(lookup(&[
            ("AGENT_RUNTIME_EVENT_SINK", "nats"),
            ("AGENT_RUNTIME_NATS_URL", "127.0.0.1:4222,tls://n2:4222"),
            ("AGENT_RUNTIME_NATS_STREAM", "EVENTS_T"),
            ("AGENT_RUNTIME_NATS_STREAM_SUBJECTS", "t.v1.>, t.v2.>"),
            (
                "AGENT_RUNTIME_NATS_SUBJECT_TEMPLATE",
                "t.v1.{app_id}.{type}",
            ),
            (
                "AGENT_RUNTIME_NATS_V2_SUBJECT_TEMPLATE",
                "t.v2.{app_id}.{type}",
            ),
            ("AGENT_RUNTIME_NATS_CLIENT_NAME", "rt-1"),
            ("AGENT_RUNTIME_NATS_ENSURE_STREAM", "off"),
        ]))
        .unwrap();
        let nats = settings.events.nats.unwrap();
        assert_eq!(nats.stream_subjects, vec!["t.v1.>", "t.v2.>"]);
        assert_eq!(nats.subject_template, "t.v1.{app_id}.{type}");
        assert_eq!(nats.v2_subject_template, "t.v2.{app_id}.{type}");
        assert_eq!(
            (nats.client_name.as_str(), nats.ensure_stream),
            ("rt-1", false)
        );
        // Under `none`, or without their sink, the sinks' settings are not read.
        let settings = ServiceSettings::from_env(lookup(&[
            ("AGENT_RUNTIME_EVENT_SINK", "log"),
            ("AGENT_RUNTIME_NATS_URL", "nats://127.0.0.1:4222"),
        ]))
        .unwrap();
        assert!(settings.events.nats.is_none());
    }

    #[test]
    fn temporal_settings_without_an_address_are_refused() {
        // A Temporal namespace without an address would be ignored, so it is refused.
        let err = ServiceSettings::from_env(lookup(&[
            ("TEMPORAL_NAMESPACE", "default"),
            ("AGENT_RUNTIME_CHATGPT_ENABLED", "yes"),
        ]))
        .unwrap_err();
        assert_eq!(paths(&err), vec!["TEMPORAL_NAMESPACE"]);
        assert!(err[0].message.contains("TEMPORAL_ADDRESS is not"));
    }

    #[test]
    fn temporal_address_enables_durable_execution() {
        let settings = ServiceSettings::from_env(lookup(&[
            ("TEMPORAL_ADDRESS", "127.0.0.1:7233"),
            ("TEMPORAL_TASK_QUEUE_PREFIX", "staging-"),
        ]))
        .unwrap();
        let durable = settings.durable.unwrap();
        assert_eq!(durable.namespace, "default");
        assert_eq!(durable.task_queue_prefix, "staging-");
        assert!(durable.tls.is_none());
        let settings = ServiceSettings::from_env(lookup(&[
            ("TEMPORAL_ADDRESS", "temporal.example:7233"),
            ("TEMPORAL_API_KEY", "k"),
        ]))
        .unwrap();
        assert_eq!(settings.durable.unwrap().tls, Some(TemporalTls::default()));
        assert!(ServiceSettings::from_env(lookup(&[]))
            .unwrap()
            .durable
            .is_none());
    }

    const PEM_CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIBCgKCAQEA\n-----END CERTIFICATE-----\n";
    const PEM_KEY: &str =
        "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n";

    /// A directory with `ca.pem`, `cert.pem` and `key.pem` (PEM-framed, as the checks read them)
    /// and `notes.txt`, which is no PEM.
    fn tls_files() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            ("ca.pem", PEM_CERT),
            ("cert.pem", PEM_CERT),
            ("key.pem", PEM_KEY),
            ("notes.txt", "just words"),
        ] {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    fn at(dir: &tempfile::TempDir, name: &str) -> String {
        dir.path().join(name).display().to_string()
    }

    /// The CA, certificate and key paths of [`tls_files`].
    fn tls_paths(dir: &tempfile::TempDir) -> (String, String, String) {
        (at(dir, "ca.pem"), at(dir, "cert.pem"), at(dir, "key.pem"))
    }

    #[test]
    fn temporal_tls_files_and_server_name_are_read_and_turn_tls_on() {
        let dir = tls_files();
        let (ca, cert, key) = tls_paths(&dir);
        let settings = ServiceSettings::from_env(lookup(&[
            ("TEMPORAL_ADDRESS", "temporal.internal:7233"),
            ("TEMPORAL_TLS_CA_PATH", &ca),
            ("TEMPORAL_TLS_CERT_PATH", &cert),
            ("TEMPORAL_TLS_KEY_PATH", &key),
            ("TEMPORAL_TLS_SERVER_NAME", "frontend.temporal.internal"),
        ]))
        .unwrap();
        let tls = settings.durable.unwrap().tls.expect("TLS on");
        assert_eq!(tls.ca_pem.as_deref(), Some(PEM_CERT.as_bytes()));
        let client = tls.client_cert.expect("client certificate");
        assert_eq!(client.cert_pem, PEM_CERT.as_bytes());
        assert_eq!(client.key_pem.expose(), PEM_KEY);
        assert_eq!(
            tls.server_name.as_deref(),
            Some("frontend.temporal.internal")
        );
        // Any one of them alone turns TLS on, the rest as by default.
        let settings = ServiceSettings::from_env(lookup(&[
            ("TEMPORAL_ADDRESS", "temporal.internal:7233"),
            ("TEMPORAL_TLS_SERVER_NAME", "10.0.0.7"),
        ]))
        .unwrap();
        let tls = settings.durable.unwrap().tls.expect("TLS on");
        assert!(tls.ca_pem.is_none() && tls.client_cert.is_none());
        let debug = format!("{tls:?}");
        assert!(debug.contains("10.0.0.7"), "{debug}");
    }

    #[test]
    fn temporal_tls_key_material_never_shows() {
        let dir = tls_files();
        let settings = ServiceSettings::from_env(lookup(&[
            ("TEMPORAL_ADDRESS", "temporal.internal:7233"),
            ("TEMPORAL_TLS_CERT_PATH", &at(&dir, "cert.pem")),
            ("TEMPORAL_TLS_KEY_PATH", &at(&dir, "key.pem")),
        ]))
        .unwrap();
        let debug = format!("{settings:?}");
        assert!(!debug.contains("c2VjcmV0"), "{debug}");
        assert!(debug.contains("[redacted]"), "{debug}");
        // A malformed key file is refused without quoting it.
        let bad = at(&dir, "bad-key.pem");
        let broken =
            "-----BEGIN PRIVATE KEY-----\nc2VjcmV0!!not-base64\n-----END PRIVATE KEY-----\n";
        std::fs::write(&bad, broken).unwrap();
        let err = ServiceSettings::from_env(lookup(&[
            ("TEMPORAL_ADDRESS", "temporal.internal:7233"),
            ("TEMPORAL_TLS_CERT_PATH", &at(&dir, "cert.pem")),
            ("TEMPORAL_TLS_KEY_PATH", &bad),
        ]))
        .unwrap_err();
        assert_eq!(paths(&err), vec!["TEMPORAL_TLS_KEY_PATH"]);
        assert!(
            err[0].message.contains("holds no PEM private key"),
            "{err:?}"
        );
        assert!(!format!("{err:?}").contains("c2VjcmV0"), "{err:?}");
    }

    #[test]
    fn unreadable_or_malformed_temporal_tls_files_are_refused_by_name() {
        let dir = tls_files();
        let err = ServiceSettings::from_env(lookup(&[
            ("TEMPORAL_ADDRESS", "temporal.internal:7233"),
            ("TEMPORAL_TLS_CA_PATH", &at(&dir, "missing.pem")),
            ("TEMPORAL_TLS_CERT_PATH", &at(&dir, "notes.txt")),
            ("TEMPORAL_TLS_KEY_PATH", &at(&dir, "cert.pem")),
            ("TEMPORAL_TLS_SERVER_NAME", "not a name"),
        ]))
        .unwrap_err();
        assert_eq!(
            paths(&err),
            vec![
                "TEMPORAL_TLS_SERVER_NAME",
                "TEMPORAL_TLS_CA_PATH",
                "TEMPORAL_TLS_CERT_PATH",
                "TEMPORAL_TLS_KEY_PATH",
            ]
        );
        assert!(err[0].message.contains("not a DNS name"), "{err:?}");
        assert!(err[1].message.contains("cannot read") && err[1].message.contains("missing.pem"));
        assert!(
            err[2].message.contains("holds no PEM certificate"),
            "{err:?}"
        );
        assert!(
            err[3].message.contains("holds no PEM private key"),
            "{err:?}"
        );
    }

    #[test]
    fn temporal_tls_contradictions_and_half_client_certificates_are_refused() {
        let dir = tls_files();
        let (ca, cert, key) = tls_paths(&dir);
        let refused = |pairs: &[(&str, &str)]| {
            let mut all = vec![("TEMPORAL_ADDRESS", "temporal.internal:7233")];
            all.extend_from_slice(pairs);
            ServiceSettings::from_env(lookup(&all)).unwrap_err()
        };
        let err = refused(&[("TEMPORAL_TLS_CERT_PATH", &cert)]);
        assert_eq!(paths(&err), vec!["TEMPORAL_TLS_KEY_PATH"]);
        assert!(err[0]
            .message
            .contains("is required with TEMPORAL_TLS_CERT_PATH"));
        let err = refused(&[("TEMPORAL_TLS_KEY_PATH", &key)]);
        assert_eq!(paths(&err), vec!["TEMPORAL_TLS_CERT_PATH"]);
        let err = refused(&[("TEMPORAL_TLS", "false"), ("TEMPORAL_TLS_CA_PATH", &ca)]);
        assert_eq!(paths(&err), vec!["TEMPORAL_TLS"]);
        assert!(err[0]
            .message
            .contains("is off but TEMPORAL_TLS_CA_PATH is set"));
        let err = ServiceSettings::from_env(lookup(&[
            ("TEMPORAL_ADDRESS", "http://temporal.internal:7233"),
            ("TEMPORAL_TLS_CA_PATH", &ca),
        ]))
        .unwrap_err();
        assert_eq!(paths(&err), vec!["TEMPORAL_ADDRESS"]);
        assert!(err[0]
            .message
            .contains("is http:// but TEMPORAL_TLS_CA_PATH is set"));
    }

    /// The settings with `pairs` beside a `TEMPORAL_ADDRESS` without a scheme.
    fn with_address(pairs: &[(&str, &str)]) -> Result<ServiceSettings, Vec<Diagnostic>> {
        let mut all = vec![("TEMPORAL_ADDRESS", "temporal.internal:7233")];
        all.extend_from_slice(pairs);
        ServiceSettings::from_env(lookup(&all))
    }

    #[test]
    fn temporal_tls_pem_given_inline_works_like_the_files() {
        let settings = with_address(&[
            ("TEMPORAL_TLS_CA_DATA", PEM_CERT),
            ("TEMPORAL_TLS_CERT_DATA", PEM_CERT),
            ("TEMPORAL_TLS_KEY_DATA", PEM_KEY),
        ])
        .unwrap();
        let debug = format!("{settings:?}");
        assert!(!debug.contains("c2VjcmV0"), "{debug}");
        let tls = settings
            .durable
            .unwrap()
            .tls
            .expect("inline PEM turns TLS on");
        // The value as given, but for the blank around it.
        assert_eq!(tls.ca_pem.as_deref(), Some(PEM_CERT.trim().as_bytes()));
        assert_eq!(tls.ca_form, PemForm::Data);
        let client = tls.client_cert.expect("client certificate");
        assert_eq!(client.cert_pem, PEM_CERT.trim().as_bytes());
        assert_eq!(client.cert_form, PemForm::Data);
        assert_eq!(client.key_pem.expose(), PEM_KEY.trim());
        // A file and inline PEM mix: the certificate from a file, its key inline.
        let dir = tls_files();
        let settings = with_address(&[
            ("TEMPORAL_TLS_CERT_PATH", &at(&dir, "cert.pem")),
            ("TEMPORAL_TLS_KEY_DATA", PEM_KEY),
        ])
        .unwrap();
        let client = settings.durable.unwrap().tls.unwrap().client_cert.unwrap();
        assert_eq!(client.cert_form, PemForm::Path);
        assert_eq!(client.key_pem.expose(), PEM_KEY.trim());
    }

    #[test]
    fn malformed_inline_temporal_tls_pem_is_refused_by_name_never_quoting_a_key() {
        let broken_key =
            "-----BEGIN PRIVATE KEY-----\nc2VjcmV0!!not-base64\n-----END PRIVATE KEY-----\n";
        let err = with_address(&[
            ("TEMPORAL_TLS_CA_DATA", "just words"),
            (
                "TEMPORAL_TLS_CERT_DATA",
                "-----BEGIN CERTIFICATE-----\nMIIB",
            ),
            ("TEMPORAL_TLS_KEY_DATA", broken_key),
        ])
        .unwrap_err();
        assert_eq!(
            paths(&err),
            vec![
                "TEMPORAL_TLS_CA_DATA",
                "TEMPORAL_TLS_CERT_DATA",
                "TEMPORAL_TLS_KEY_DATA"
            ]
        );
        assert!(
            err[0].message.starts_with("holds no PEM certificate"),
            "{err:?}"
        );
        assert!(err[1].message.starts_with("is not valid PEM"), "{err:?}");
        assert!(
            err[2].message.starts_with("holds no PEM private key"),
            "{err:?}"
        );
        assert!(!format!("{err:?}").contains("c2VjcmV0"), "{err:?}");
        // A certificate where the key belongs is no key.
        let err = with_address(&[
            ("TEMPORAL_TLS_CERT_DATA", PEM_CERT),
            ("TEMPORAL_TLS_KEY_DATA", PEM_CERT),
        ])
        .unwrap_err();
        assert_eq!(paths(&err), vec!["TEMPORAL_TLS_KEY_DATA"]);
        // Half a client certificate, inline, names what is missing.
        let err = with_address(&[("TEMPORAL_TLS_CERT_DATA", PEM_CERT)]).unwrap_err();
        assert_eq!(paths(&err), vec!["TEMPORAL_TLS_KEY_PATH"]);
        assert!(
            err[0]
                .message
                .contains("TEMPORAL_TLS_KEY_DATA) is required with TEMPORAL_TLS_CERT_DATA"),
            "{err:?}"
        );
        let err = with_address(&[("TEMPORAL_TLS_KEY_DATA", PEM_KEY)]).unwrap_err();
        assert_eq!(paths(&err), vec!["TEMPORAL_TLS_CERT_PATH"]);
        assert!(!format!("{err:?}").contains("c2VjcmV0"), "{err:?}");
    }

    #[test]
    fn a_temporal_tls_path_beside_its_inline_pem_is_refused() {
        let dir = tls_files();
        let (ca, cert, key) = tls_paths(&dir);
        let err = with_address(&[
            ("TEMPORAL_TLS_CA_PATH", &ca),
            ("TEMPORAL_TLS_CA_DATA", PEM_CERT),
            ("TEMPORAL_TLS_CERT_PATH", &cert),
            ("TEMPORAL_TLS_CERT_DATA", PEM_CERT),
            ("TEMPORAL_TLS_KEY_PATH", &key),
            ("TEMPORAL_TLS_KEY_DATA", PEM_KEY),
        ])
        .unwrap_err();
        assert_eq!(
            paths(&err),
            vec![
                "TEMPORAL_TLS_CA_DATA",
                "TEMPORAL_TLS_CERT_DATA",
                "TEMPORAL_TLS_KEY_DATA"
            ]
        );
        for (diagnostic, path) in err.iter().zip(["CA", "CERT", "KEY"]) {
            let beside = format!("is set beside TEMPORAL_TLS_{path}_PATH");
            assert!(diagnostic.message.contains(&beside), "{err:?}");
        }
        assert!(!format!("{err:?}").contains("c2VjcmV0"), "{err:?}");
    }

    #[test]
    fn disabling_temporal_host_verification_is_refused_saying_what_to_set() {
        for address in [None, Some("temporal.internal:7233")] {
            for on in ["true", "1", "yes"] {
                let mut pairs = vec![("TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", on)];
                pairs.extend(address.map(|a| ("TEMPORAL_ADDRESS", a)));
                let err = ServiceSettings::from_env(lookup(&pairs)).unwrap_err();
                assert_eq!(paths(&err), vec!["TEMPORAL_TLS_DISABLE_HOST_VERIFICATION"]);
                let message = &err[0].message;
                assert!(
                    message.contains("never turns off verification"),
                    "{message}"
                );
                assert!(message.contains("TEMPORAL_TLS_CA_PATH"), "{message}");
                assert!(message.contains("TEMPORAL_TLS_SERVER_NAME"), "{message}");
            }
        }
        // Off is what this runtime does, with or without an address.
        assert!(ServiceSettings::from_env(lookup(&[(
            "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION",
            "false"
        )]))
        .is_ok());
        assert!(with_address(&[("TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", "0")]).is_ok());
    }

    #[test]
    fn temporal_api_key_with_tls_off_is_plain_text_with_the_key() {
        let key = ("TEMPORAL_API_KEY", "k-3c1e");
        // As the Temporal CLI: a key turns TLS on unless TLS is turned off.
        let durable = with_address(&[key]).unwrap().durable.unwrap();
        assert_eq!(durable.tls, Some(TemporalTls::default()));
        let durable = with_address(&[key, ("TEMPORAL_TLS", "false")])
            .unwrap()
            .durable
            .unwrap();
        assert!(durable.tls.is_none(), "{durable:?}");
        assert_eq!(durable.api_key.unwrap().expose(), "k-3c1e");
        // An http:// address asks for plain text as well.
        let settings = ServiceSettings::from_env(lookup(&[
            ("TEMPORAL_ADDRESS", "http://temporal.internal:7233"),
            key,
        ]))
        .unwrap();
        let durable = settings.durable.unwrap();
        assert!(durable.tls.is_none() && durable.api_key.is_some());
    }

    #[test]
    fn temporal_tls_against_the_address_scheme_is_refused() {
        let at_address = |address: &str, tls: &str| {
            ServiceSettings::from_env(lookup(&[
                ("TEMPORAL_ADDRESS", address),
                ("TEMPORAL_TLS", tls),
            ]))
        };
        let err = at_address("https://temporal.internal:7233", "false").unwrap_err();
        assert_eq!(paths(&err), vec!["TEMPORAL_TLS"]);
        assert!(err[0]
            .message
            .contains("is off but TEMPORAL_ADDRESS is https://"));
        let err = at_address("http://temporal.internal:7233", "true").unwrap_err();
        assert_eq!(paths(&err), vec!["TEMPORAL_TLS"]);
        assert!(err[0]
            .message
            .contains("is on but TEMPORAL_ADDRESS is http://"));
        // Agreeing, or the scheme alone, is fine.
        let tls = |settings: ServiceSettings| settings.durable.unwrap().tls;
        assert!(tls(at_address("https://temporal.internal:7233", "true").unwrap()).is_some());
        assert!(tls(at_address("http://temporal.internal:7233", "false").unwrap()).is_none());
        let https = ServiceSettings::from_env(lookup(&[(
            "TEMPORAL_ADDRESS",
            "https://temporal.internal:7233",
        )]));
        assert!(tls(https.unwrap()).is_some());
    }

    #[test]
    fn temporal_tls_settings_without_an_address_are_refused_by_name() {
        let dir = tls_files();
        let (ca, cert, key) = tls_paths(&dir);
        let err = ServiceSettings::from_env(lookup(&[
            ("TEMPORAL_TLS_CA_PATH", &ca),
            ("TEMPORAL_TLS_CERT_PATH", &cert),
            ("TEMPORAL_TLS_KEY_PATH", &key),
            ("TEMPORAL_TLS_SERVER_NAME", "temporal.internal"),
            ("TEMPORAL_TLS_CA_DATA", PEM_CERT),
            ("TEMPORAL_TLS_CERT_DATA", PEM_CERT),
            ("TEMPORAL_TLS_KEY_DATA", PEM_KEY),
        ]))
        .unwrap_err();
        assert_eq!(
            paths(&err),
            vec![
                "TEMPORAL_TLS_CA_PATH",
                "TEMPORAL_TLS_CA_DATA",
                "TEMPORAL_TLS_CERT_PATH",
                "TEMPORAL_TLS_CERT_DATA",
                "TEMPORAL_TLS_KEY_PATH",
                "TEMPORAL_TLS_KEY_DATA",
                "TEMPORAL_TLS_SERVER_NAME",
            ]
        );
        assert!(!format!("{err:?}").contains("c2VjcmV0"), "{err:?}");
        assert!(err
            .iter()
            .all(|d| d.message.contains("is set but TEMPORAL_ADDRESS is not")));
    }

    #[test]
    fn unsupported_switches_may_be_set_to_off() {
        let settings = ServiceSettings::from_env(lookup(&[
            ("AGENT_RUNTIME_CHATGPT_ENABLED", "false"),
            ("AGENT_RUNTIME_ALLOW_DETERMINISTIC_FALLBACK", "0"),
        ]));
        assert!(settings.is_ok(), "{settings:?}");
    }

    #[test]
    fn the_deterministic_fallback_is_refused_saying_why() {
        let err = ServiceSettings::from_env(lookup(&[(
            "AGENT_RUNTIME_ALLOW_DETERMINISTIC_FALLBACK",
            "true",
        )]))
        .unwrap_err();
        assert_eq!(
            paths(&err),
            vec!["AGENT_RUNTIME_ALLOW_DETERMINISTIC_FALLBACK"]
        );
        assert!(
            format!("{err:?}").contains("never answers with a stand-in model"),
            "{err:?}"
        );
    }

    #[test]
    fn chatgpt_is_served_only_when_enabled() {
        let err = ServiceSettings::from_env(lookup(&[(
            "AGENT_RUNTIME_NATIVE_PROVIDER",
            "openai_chatgpt",
        )]))
        .unwrap_err();
        assert_eq!(paths(&err), vec!["AGENT_RUNTIME_NATIVE_PROVIDER"]);
        assert!(
            err[0].message.contains("AGENT_RUNTIME_CHATGPT_ENABLED"),
            "{err:?}"
        );
        let settings = ServiceSettings::from_env(lookup(&[
            ("AGENT_RUNTIME_NATIVE_PROVIDER", "openai_chatgpt"),
            ("AGENT_RUNTIME_CHATGPT_ENABLED", "true"),
            (
                "AGENT_RUNTIME_CHATGPT_BASE_URL",
                "http://127.0.0.1:9/backend-api/codex",
            ),
        ]))
        .unwrap();
        assert!(settings.models.chatgpt_enabled);
        assert_eq!(
            settings.models.chatgpt_base_url.as_str(),
            "http://127.0.0.1:9/backend-api/codex"
        );
        let settings = ServiceSettings::from_env(lookup(&[])).unwrap();
        assert!(!settings.models.chatgpt_enabled);
        assert_eq!(
            settings.models.chatgpt_base_url.as_str(),
            "https://chatgpt.com/backend-api/codex"
        );
    }

    #[test]
    fn native_model_overrides_the_default_providers_model() {
        let settings = ServiceSettings::from_env(lookup(&[
            ("AGENT_RUNTIME_NATIVE_PROVIDER", "openai"),
            ("AGENT_RUNTIME_NATIVE_MODEL", "gpt-custom"),
        ]))
        .unwrap();
        assert_eq!(settings.models.native_model, "gpt-custom");
        let settings =
            ServiceSettings::from_env(lookup(&[("AGENT_RUNTIME_NATIVE_PROVIDER", "openrouter")]))
                .unwrap();
        assert_eq!(settings.models.native_model, "openai/gpt-5.6-terra");
    }

    #[test]
    fn the_table_says_what_is_not_supported() {
        let table = markdown_table();
        assert!(
            table.contains("no, by design (a deterministic stand-in model)"),
            "{table}"
        );
    }

    #[test]
    fn table_lists_every_variable_once() {
        let table = markdown_table();
        for var in ALL {
            assert_eq!(
                table.matches(&format!("| `{}` |", var.name)).count(),
                1,
                "{}",
                var.name
            );
        }
        let mut names: Vec<_> = ALL.iter().map(|v| v.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
    }
}
