//! The app configuration (`AGENT_RUNTIME_APP_CONFIG`): decoding, full validation with every diagnostic, and the validated per-app settings.
//!
//! Decoding goes JSON first, then YAML, into a `serde_json::Value` that is then walked by hand
//! rather than through `#[derive(Deserialize)]`: serde stops at the first error, while operators
//! fixing a config file want every problem (wrong types, unknown keys, bad URLs, missing
//! environment variables) listed in one pass.
//!
//! Every key is declared in [`keys`] with its support. Sections of capabilities this version
//! does not have yet (browser tools, the model
//! credential callback) are validated and refused; [`AppSettings`] holds only what the runtime
//! uses.

pub mod keys;
mod reader;
mod rules;
mod summary;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use ar_core::secret::Secret;
use ar_core::tool::ToolDefinition;
use ar_core::{EventProtocol, RiskLevel};
use serde_json::Value;
use url::Url;

use crate::Diagnostic;
use reader::{Ctx, Obj};
use rules::{check_endpoint_base_url, check_endpoint_id, check_name, check_url, UrlRules};

pub use rules::join_endpoint;
pub use summary::{kind as summary_kind, ComponentSummary, DoctorReport};

/// The validated configuration of every app, by app id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppConfig {
    pub apps: BTreeMap<String, AppSettings>,
}

/// One app's host integration: the parts of its configuration this version uses.
#[derive(Debug, Clone, PartialEq)]
pub struct AppSettings {
    pub app_id: String,
    pub event_protocol: EventProtocol,
    /// Host target-context endpoint; `None` means the static provider.
    pub context: Option<HttpEndpoint>,
    pub event_callbacks: Vec<EventCallback>,
    pub command_provider: Option<CommandProvider>,
    /// The host's skill provider (`by-id`, `active-by-key`).
    pub skill_provider: Option<SkillProvider>,
    /// Deployment-owned MCP providers, in configuration order.
    pub mcp_providers: Vec<McpProvider>,
    pub model_endpoints: Vec<ModelEndpointBinding>,
    pub require_run_model_credentials: bool,
    /// Where the app's runs get their workspaces (`host_prepared`: the `http` transport).
    pub workspace_provider: Option<WorkspaceProvider>,
    /// Where the runtime asks for a fresh run model credential (near expiry, after a 401).
    pub model_credential_callback: Option<HttpEndpoint>,
}

/// A URL the runtime POSTs to, with an optional bearer token.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpEndpoint {
    pub url: Url,
    pub token: Option<Secret>,
}

/// An HTTP event callback of one app.
#[derive(Debug, Clone, PartialEq)]
pub struct EventCallback {
    pub url: Url,
    pub token: Option<Secret>,
    /// Event types delivered; empty = all persisted events.
    pub event_types: Vec<String>,
}

impl EventCallback {
    /// A stable name for the callback's outbox cursor: survives reordering of the list and
    /// carries no query string (which may hold a token) — a hash of the full URL tells apart
    /// callbacks that differ only in their query.
    pub fn cursor_name(&self, app_id: &str) -> String {
        let host = self.url.host_str().unwrap_or_default();
        let port = self.url.port().map(|p| format!(":{p}")).unwrap_or_default();
        format!(
            "callback:{app_id}:{host}{port}{}#{:016x}",
            self.url.path(),
            fnv1a(self.url.as_str())
        )
    }

    /// Whether an event of this type is delivered here.
    pub fn accepts(&self, event_type: &str) -> bool {
        self.event_types.is_empty() || self.event_types.iter().any(|t| t == event_type)
    }
}

/// 64-bit FNV-1a: tiny, and stable across Rust releases (unlike `DefaultHasher`).
pub(crate) fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Transport of a deployment-owned MCP provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpTransport {
    /// Simple JSON API (`POST {url}/call`).
    Http,
    /// MCP JSON-RPC over streamable HTTP.
    StreamableHttp,
    /// A local MCP server process.
    Stdio,
}

impl McpTransport {
    pub fn as_str(self) -> &'static str {
        match self {
            McpTransport::Http => "http",
            McpTransport::StreamableHttp => "streamable_http",
            McpTransport::Stdio => "stdio",
        }
    }
}

/// How provider tool names are exposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolNamespace {
    /// `<prefix><tool>` (the default).
    Prefixed,
    /// Canonical tool names; collisions with global tools are rejected at load.
    None,
}

/// What happens when the provider's catalog cannot be loaded at startup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartupPolicy {
    /// Start anyway; the provider's tools appear once loaded.
    Optional,
    /// The process stays unready until a catalog loads.
    Required,
}

/// Default pause before re-listing a provider after an unknown tool was called.
pub const DEFAULT_UNKNOWN_REFRESH_COOLDOWN: Duration = Duration::from_secs(30);

/// A deployment-owned MCP provider of an app.
#[derive(Debug, Clone, PartialEq)]
pub struct McpProvider {
    pub name: String,
    pub transport: McpTransport,
    /// For `http` and `streamable_http`.
    pub url: Option<Url>,
    pub token: Option<Secret>,
    /// For `stdio`.
    pub command: Option<String>,
    pub args: Vec<String>,
    /// Extra environment of the stdio process (values may be credentials).
    pub env: BTreeMap<String, Secret>,
    pub tool_prefix: Option<String>,
    pub allowed_tools: Vec<String>,
    pub tool_namespace: ToolNamespace,
    pub refresh_interval: Option<Duration>,
    pub startup_policy: StartupPolicy,
    pub unknown_refresh_cooldown: Duration,
}

impl McpProvider {
    /// Prefix of exposed tool names: the configured one, else the provider name (empty when the
    /// namespace is `none`).
    pub fn effective_prefix(&self) -> String {
        match self.tool_namespace {
            ToolNamespace::None => String::new(),
            ToolNamespace::Prefixed => self
                .tool_prefix
                .clone()
                .unwrap_or_else(|| self.name.clone()),
        }
    }
}

/// A host command declared under `command_provider.commands`.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCommand {
    pub name: String,
    pub description: String,
    pub category: String,
    pub input_schema: Value,
    pub mutating: bool,
    pub risk_level: Option<RiskLevel>,
    pub supported_target_types: Vec<String>,
}

impl HostCommand {
    /// The tool the model sees for this command.
    pub fn to_tool_definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name.clone(),
            description: self.description.clone(),
            category: if self.category.is_empty() {
                "host".to_string()
            } else {
                self.category.clone()
            },
            input_schema: self.input_schema.clone(),
            mutating: self.mutating,
            risk_level: self.risk_level,
            supported_target_types: self.supported_target_types.clone(),
        }
    }
}

/// The app's command provider (`POST {base_url}/execute`).
#[derive(Debug, Clone, PartialEq)]
pub struct CommandProvider {
    pub base_url: Url,
    pub token: Option<Secret>,
    /// The commands declared under `commands` (our extension). `None` when the key is absent,
    /// as in a config written for the original: the provider then offers the original's
    /// built-in catalogue (`ar_tools::command_catalog`). An empty list offers no command.
    pub commands: Option<Vec<HostCommand>>,
}

impl CommandProvider {
    pub fn execute_url(&self) -> String {
        join_endpoint(&self.base_url, "execute")
    }
}

/// Transport of the workspace provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkspaceTransport {
    /// The host prepares the workspace (`/prepare`, `/finalize`, `/cleanup`).
    Http,
    /// The host returns a repository spec; the runtime clones.
    Repository,
}

impl WorkspaceTransport {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkspaceTransport::Http => "http",
            WorkspaceTransport::Repository => "repository",
        }
    }
}

/// The app's workspace provider.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkspaceProvider {
    pub transport: WorkspaceTransport,
    pub base_url: Url,
    pub token: Option<Secret>,
    /// Where repository checkouts go (repository transport only).
    pub root_dir: Option<PathBuf>,
}

/// The app's skill provider: skill lookups at `base_url`, packages at `package_base_url`.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillProvider {
    pub base_url: Url,
    pub token: Option<Secret>,
    pub package_base_url: Option<Url>,
    pub package_token: Option<Secret>,
}

/// Browser tools of an app (validated, then refused: not supported yet).
#[derive(Debug, Clone, PartialEq)]
pub struct BrowserSettings {
    pub enabled: bool,
    /// `*` or host names, optionally `*.suffix`.
    pub allowed_domains: Vec<String>,
    pub artifact_provider: Option<ArtifactProvider>,
}

/// Where browser screenshots and recordings are uploaded.
#[derive(Debug, Clone, PartialEq)]
pub struct ArtifactProvider {
    pub upload_endpoint: Url,
    pub token: Option<Secret>,
}

/// Authentication of an approved model endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointAuthMode {
    ApiKey,
    None,
}

impl EndpointAuthMode {
    pub fn as_str(self) -> &'static str {
        match self {
            EndpointAuthMode::ApiKey => "api_key",
            EndpointAuthMode::None => "none",
        }
    }
}

/// An approved `openai_compatible` endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelEndpointBinding {
    pub id: String,
    /// Canonical, without trailing slash.
    pub base_url: String,
    pub auth_mode: EndpointAuthMode,
    pub allow_http: bool,
}

impl ModelEndpointBinding {
    /// The secret-free binding pinned into runs.
    pub fn to_run_endpoint(&self) -> ar_core::run::ModelEndpoint {
        ar_core::run::ModelEndpoint {
            id: self.id.clone(),
            base_url: self.base_url.clone(),
            auth_mode: self.auth_mode.as_str().to_string(),
        }
    }
}

impl AppConfig {
    /// Parses the value of `AGENT_RUNTIME_APP_CONFIG`: inline JSON/YAML, or `@/path/file`.
    /// `lookup` resolves `*_env` fields.
    pub fn load(
        source: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<AppConfig, Vec<Diagnostic>> {
        let trimmed = source.trim();
        if let Some(path) = trimmed.strip_prefix('@') {
            let path = path.trim();
            return match std::fs::read_to_string(path) {
                Ok(text) => AppConfig::parse(&text, lookup),
                Err(err) => Err(vec![Diagnostic::new(
                    crate::env::APP_CONFIG.name,
                    format!("cannot read {path}: {err}"),
                )]),
            };
        }
        AppConfig::parse(trimmed, lookup)
    }

    /// Parses configuration text: JSON first, then YAML.
    pub fn parse(
        text: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<AppConfig, Vec<Diagnostic>> {
        if text.trim().is_empty() {
            return Ok(AppConfig::default());
        }
        let value = match serde_json::from_str::<Value>(text) {
            Ok(value) => value,
            Err(json_err) => match serde_yaml::from_str::<Value>(text) {
                Ok(value) => value,
                Err(yaml_err) => {
                    // Text that looks like JSON gets the JSON error, which is the helpful one.
                    let message = if text.trim_start().starts_with('{') {
                        format!("invalid JSON: {json_err}")
                    } else {
                        format!("invalid YAML: {yaml_err}")
                    };
                    return Err(vec![Diagnostic::new(crate::env::APP_CONFIG.name, message)]);
                }
            },
        };
        AppConfig::from_value(&value, lookup)
    }

    /// Validates an already decoded document.
    pub fn from_value(
        value: &Value,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<AppConfig, Vec<Diagnostic>> {
        let mut ctx = Ctx {
            lookup,
            diagnostics: Vec::new(),
        };
        let mut config = AppConfig::default();
        if value.is_null() {
            return Ok(config);
        }
        let Some(root) = Obj::new(&mut ctx, String::new(), value, &keys::ROOT) else {
            return Err(ctx.diagnostics);
        };
        let mut first_index: BTreeMap<String, usize> = BTreeMap::new();
        for (index, (path, item)) in root.list(&mut ctx, "apps").into_iter().enumerate() {
            // Duplicates are detected on the raw id so they are reported even when the app has
            // other problems.
            let raw_id = raw_str(item, "app_id").unwrap_or_default();
            if !raw_id.is_empty() {
                if let Some(first) = first_index.get(raw_id) {
                    ctx.report(
                        format!("{path}.app_id"),
                        format!("duplicate app_id {raw_id:?} (first defined in apps[{first}])"),
                    );
                } else {
                    first_index.insert(raw_id.to_string(), index);
                }
            }
            if let Some(app) = parse_app(&mut ctx, path, item) {
                config.apps.entry(app.app_id.clone()).or_insert(app);
            }
        }
        if ctx.diagnostics.is_empty() {
            Ok(config)
        } else {
            Err(ctx.diagnostics)
        }
    }

    pub fn app(&self, app_id: &str) -> Option<&AppSettings> {
        self.apps.get(app_id)
    }

    pub fn app_ids(&self) -> impl Iterator<Item = &str> {
        self.apps.keys().map(String::as_str)
    }
}

fn parse_app(ctx: &mut Ctx<'_>, path: String, value: &Value) -> Option<AppSettings> {
    let obj = Obj::new(ctx, path, value, &keys::APP)?;
    let before = ctx.diagnostics.len();
    let app_id = parse_app_id(ctx, &obj);
    let event_protocol = parse_event_protocol(ctx, &obj);
    let context = parse_context(ctx, &obj);
    let event_callbacks = parse_unique_list(
        ctx,
        &obj,
        ("event_callbacks", "url"),
        |_| "duplicate callback URL (each callback keeps its own delivery cursor)".to_string(),
        parse_event_callback,
    );
    let command_provider = obj
        .object(ctx, "command_provider", &keys::COMMAND_PROVIDER)
        .and_then(|p| parse_command_provider(ctx, &p));
    let skill_provider = obj
        .object(ctx, "skill_provider", &keys::SKILL_PROVIDER)
        .and_then(|p| parse_skill_provider(ctx, &p));
    let mcp_providers = parse_unique_list(
        ctx,
        &obj,
        ("mcp_providers", "name"),
        |name| format!("duplicate MCP provider name {name:?}"),
        parse_mcp_provider,
    );
    let model_endpoints = parse_unique_list(
        ctx,
        &obj,
        ("model_endpoints", "id"),
        |id| format!("duplicate model endpoint id {id:?}"),
        parse_model_endpoint,
    );
    let require_run_model_credentials = obj
        .bool(ctx, "require_run_model_credentials")
        .unwrap_or(false);
    let workspace_provider = obj
        .object(ctx, "workspace_provider", &keys::WORKSPACE_PROVIDER)
        .and_then(|p| parse_workspace_provider(ctx, &p));
    let model_credential_callback = obj
        .object(
            ctx,
            "model_credential_callback",
            &keys::MODEL_CREDENTIAL_CALLBACK,
        )
        .and_then(|c| parse_model_credential_callback(ctx, &c));
    validate_refused_sections(ctx, &obj);
    if ctx.diagnostics.len() != before {
        return None;
    }
    Some(AppSettings {
        app_id: app_id?,
        event_protocol,
        context,
        event_callbacks,
        command_provider,
        skill_provider,
        mcp_providers,
        model_endpoints,
        require_run_model_credentials,
        model_credential_callback,
        workspace_provider,
    })
}

fn parse_app_id(ctx: &mut Ctx<'_>, obj: &Obj<'_>) -> Option<String> {
    let app_id = obj.required_string(ctx, "app_id")?;
    if let Err(message) = ar_core::ids::validate_external_id("app_id", &app_id) {
        ctx.report(obj.path_of("app_id"), message);
    }
    Some(app_id)
}

fn parse_event_protocol(ctx: &mut Ctx<'_>, obj: &Obj<'_>) -> EventProtocol {
    match obj.string(ctx, "event_protocol") {
        None => EventProtocol::V1,
        Some(text) => EventProtocol::parse(&text).unwrap_or_else(|err| {
            ctx.report(obj.path_of("event_protocol"), err.to_string());
            EventProtocol::V1
        }),
    }
}

/// The target-context endpoint (`context_endpoint` with its token); `None` is the static provider.
fn parse_context(ctx: &mut Ctx<'_>, obj: &Obj<'_>) -> Option<HttpEndpoint> {
    let token = obj.secret(ctx, "context_token", "context_token_env");
    let Some(raw) = obj.string(ctx, "context_endpoint") else {
        if token.is_some() {
            ctx.report(
                obj.path_of("context_endpoint"),
                "is required when a context token is set",
            );
        }
        return None;
    };
    let rules = UrlRules {
        allow_query: true,
        ..UrlRules::default()
    };
    check_url(ctx, &obj.path_of("context_endpoint"), &raw, rules)
        .map(|url| HttpEndpoint { url, token })
}

/// The items of the list `key`, each parsed by `parse`. An item whose `id_key` repeats an
/// earlier item's is reported with `duplicate(id)`; ids are compared on the raw text, so even
/// items with other problems are checked.
fn parse_unique_list<T>(
    ctx: &mut Ctx<'_>,
    obj: &Obj<'_>,
    (key, id_key): (&str, &str),
    duplicate: impl Fn(&str) -> String,
    parse: impl Fn(&mut Ctx<'_>, String, &Value) -> Option<T>,
) -> Vec<T> {
    let mut parsed = Vec::new();
    let mut seen = BTreeSet::new();
    for (path, item) in obj.list(ctx, key) {
        if let Some(id) = raw_str(item, id_key) {
            if !seen.insert(id.to_string()) {
                ctx.report(format!("{path}.{id_key}"), duplicate(id));
            }
        }
        if let Some(value) = parse(ctx, path, item) {
            parsed.push(value);
        }
    }
    parsed
}

/// The sections of capabilities this version does not have yet. [`Obj::new`] refused each one
/// that is set; their contents are still validated so `config validate` lists every problem
/// at once. The parsed values are dropped until the capability exists.
fn validate_refused_sections(ctx: &mut Ctx<'_>, obj: &Obj<'_>) {
    if let Some(b) = obj.object(ctx, "browser", &keys::BROWSER) {
        let _ = parse_browser(ctx, &b);
    }
}

/// A trimmed, non-empty string field of a list item, read before full validation (for
/// duplicate detection across items that may have other problems).
fn raw_str<'v>(item: &'v Value, key: &str) -> Option<&'v str> {
    item.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn parse_event_callback(ctx: &mut Ctx<'_>, path: String, value: &Value) -> Option<EventCallback> {
    let obj = Obj::new(ctx, path, value, &keys::EVENT_CALLBACK)?;
    let token = obj.secret(ctx, "token", "token_env");
    let url = obj.required_string(ctx, "url").and_then(|raw| {
        check_url(
            ctx,
            &obj.path_of("url"),
            &raw,
            UrlRules {
                allow_query: true,
                ..UrlRules::default()
            },
        )
    });
    let mut event_types = Vec::new();
    for (index, event_type) in obj.string_list(ctx, "event_types").into_iter().enumerate() {
        let item_path = format!("{}[{index}]", obj.path_of("event_types"));
        let kind = ar_core::EventKind::parse(&event_type).ok();
        if kind.is_some_and(ar_core::EventKind::is_transient) {
            ctx.report(item_path, format!("{event_type:?} is a transient event; it is streamed live and never delivered to callbacks"));
        } else if kind.is_none() {
            ctx.report(item_path, format!("unknown event type {event_type:?}"));
        } else if event_types.contains(&event_type) {
            ctx.report(item_path, format!("duplicate event type {event_type:?}"));
        } else {
            event_types.push(event_type);
        }
    }
    Some(EventCallback {
        url: url?,
        token,
        event_types,
    })
}

/// Reads `transport`, reporting values outside `allowed`; `default` when unset.
fn transport<'a>(
    ctx: &mut Ctx<'_>,
    obj: &Obj<'_>,
    allowed: &[&'a str],
    default: &'a str,
) -> Option<&'a str> {
    match obj.string(ctx, "transport") {
        None => Some(default),
        Some(value) => match allowed.iter().find(|a| a.eq_ignore_ascii_case(&value)) {
            Some(found) => Some(*found),
            None => {
                ctx.report(
                    obj.path_of("transport"),
                    format!(
                        "unsupported transport {value:?} (supported: {})",
                        allowed.join(", ")
                    ),
                );
                None
            }
        },
    }
}

fn required_base_url(ctx: &mut Ctx<'_>, obj: &Obj<'_>, key: &str) -> Option<Url> {
    let raw = obj.required_string(ctx, key)?;
    check_url(ctx, &obj.path_of(key), &raw, UrlRules::default())
}

fn parse_mcp_provider(ctx: &mut Ctx<'_>, path: String, value: &Value) -> Option<McpProvider> {
    let obj = Obj::new(ctx, path, value, &keys::MCP_PROVIDER)?;
    let before = ctx.diagnostics.len();
    let name = obj.required_string(ctx, "name");
    if let Some(name) = &name {
        check_name(ctx, &obj.path_of("name"), name, 64);
    }
    let connection = parse_mcp_connection(ctx, &obj);
    let naming = parse_mcp_tool_naming(ctx, &obj);
    let refresh_interval = obj.duration(ctx, "refresh_interval");
    if refresh_interval.is_some_and(|d| d < Duration::from_secs(1)) {
        ctx.report(obj.path_of("refresh_interval"), "must be at least 1s");
    }
    let startup_policy = match obj.string(ctx, "startup_policy").as_deref() {
        None | Some("optional") | Some("best_effort") => StartupPolicy::Optional,
        Some("required") => StartupPolicy::Required,
        Some(other) => {
            ctx.report(
                obj.path_of("startup_policy"),
                format!("unknown startup_policy {other:?} (expected optional or required)"),
            );
            StartupPolicy::Optional
        }
    };
    let unknown_refresh_cooldown = obj
        .duration(ctx, "unknown_refresh_cooldown")
        .unwrap_or(DEFAULT_UNKNOWN_REFRESH_COOLDOWN);
    if ctx.diagnostics.len() != before {
        return None;
    }
    let connection = connection?;
    Some(McpProvider {
        name: name?,
        transport: connection.transport,
        url: connection.url,
        token: connection.token,
        command: connection.command,
        args: connection.args,
        env: connection.env,
        tool_prefix: naming.tool_prefix,
        allowed_tools: naming.allowed_tools,
        tool_namespace: naming.tool_namespace,
        refresh_interval,
        startup_policy,
        unknown_refresh_cooldown,
    })
}

/// How the runtime reaches an MCP provider.
struct McpConnection {
    transport: McpTransport,
    url: Option<Url>,
    token: Option<Secret>,
    command: Option<String>,
    args: Vec<String>,
    env: BTreeMap<String, Secret>,
}

/// The transport and the fields it needs: a URL (and token) for HTTP, a command for stdio.
/// Fields of the other transport are reported.
fn parse_mcp_connection(ctx: &mut Ctx<'_>, obj: &Obj<'_>) -> Option<McpConnection> {
    let transport = match transport(ctx, obj, &["http", "streamable_http", "stdio"], "http") {
        Some("stdio") => Some(McpTransport::Stdio),
        Some("streamable_http") => Some(McpTransport::StreamableHttp),
        Some(_) => Some(McpTransport::Http),
        None => None,
    };
    let token = obj.secret(ctx, "token", "token_env");
    let command = obj.string(ctx, "command");
    let args = obj.string_list(ctx, "args");
    let env = obj
        .string_map(ctx, "env")
        .into_iter()
        .map(|(k, v)| (k, Secret::new(v)))
        .collect::<BTreeMap<_, _>>();
    let mut url = None;
    match transport? {
        McpTransport::Stdio => {
            if command.is_none() {
                ctx.report(
                    obj.path_of("command"),
                    "is required for the stdio transport",
                );
            }
            for key in ["url", "token", "token_env"] {
                if obj.has(key) {
                    ctx.report(obj.path_of(key), "is not used by the stdio transport");
                }
            }
        }
        McpTransport::Http | McpTransport::StreamableHttp => {
            url = required_base_url(ctx, obj, "url");
            for key in ["command", "args", "env"] {
                if obj.has(key) {
                    ctx.report(obj.path_of(key), "is only used by the stdio transport");
                }
            }
        }
    }
    Some(McpConnection {
        transport: transport?,
        url,
        token,
        command,
        args,
        env,
    })
}

/// How a provider's tools are named and which of them are exposed.
struct McpToolNaming {
    tool_prefix: Option<String>,
    allowed_tools: Vec<String>,
    tool_namespace: ToolNamespace,
}

fn parse_mcp_tool_naming(ctx: &mut Ctx<'_>, obj: &Obj<'_>) -> McpToolNaming {
    let tool_prefix = obj.string(ctx, "tool_prefix");
    if let Some(prefix) = &tool_prefix {
        if !prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            ctx.report(
                obj.path_of("tool_prefix"),
                "may only contain letters, digits, '_', '-' and '.'",
            );
        }
    }
    let allowed_tools = obj.string_list(ctx, "allowed_tools");
    let tool_namespace = match obj.string(ctx, "tool_namespace").as_deref() {
        None | Some("prefix") | Some("prefixed") => ToolNamespace::Prefixed,
        Some("none") => {
            if tool_prefix.is_some() {
                ctx.report(
                    obj.path_of("tool_prefix"),
                    "cannot be combined with tool_namespace: none",
                );
            }
            ToolNamespace::None
        }
        Some(other) => {
            ctx.report(
                obj.path_of("tool_namespace"),
                format!("unknown tool_namespace {other:?} (expected prefix or none)"),
            );
            ToolNamespace::Prefixed
        }
    };
    McpToolNaming {
        tool_prefix,
        allowed_tools,
        tool_namespace,
    }
}

fn parse_command_provider(ctx: &mut Ctx<'_>, obj: &Obj<'_>) -> Option<CommandProvider> {
    let transport_ok = transport(ctx, obj, &["http"], "http").is_some();
    let token = obj.secret(ctx, "token", "token_env");
    let base_url = required_base_url(ctx, obj, "base_url");
    let commands = obj.value("commands").is_some().then(|| {
        parse_unique_list(
            ctx,
            obj,
            ("commands", "name"),
            |name| format!("duplicate command {name:?}"),
            parse_host_command,
        )
    });
    let base_url = base_url?;
    transport_ok.then_some(CommandProvider {
        base_url,
        token,
        commands,
    })
}

fn parse_host_command(ctx: &mut Ctx<'_>, path: String, value: &Value) -> Option<HostCommand> {
    let cmd = Obj::new(ctx, path, value, &keys::HOST_COMMAND)?;
    let cmd = &cmd;
    let before = ctx.diagnostics.len();
    let name = cmd.required_string(ctx, "name");
    if let Some(name) = &name {
        check_name(ctx, &cmd.path_of("name"), name, 64);
    }
    let description = cmd.string(ctx, "description").unwrap_or_default();
    let category = cmd.string(ctx, "category").unwrap_or_default();
    let input_schema = match cmd.value("input_schema") {
        None => serde_json::json!({"type": "object", "properties": {}}),
        Some(schema @ Value::Object(map)) => {
            if map
                .get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t != "object")
            {
                ctx.report(
                    cmd.path_of("input_schema.type"),
                    "a command's input schema must describe an object",
                );
            }
            schema.clone()
        }
        Some(_) => {
            ctx.report(cmd.path_of("input_schema"), "must be a JSON schema object");
            Value::Null
        }
    };
    let mutating = cmd.bool(ctx, "mutating").unwrap_or(false);
    let risk_level = parse_risk_level(ctx, cmd, mutating);
    let supported_target_types = cmd.string_list(ctx, "supported_target_types");
    if ctx.diagnostics.len() != before {
        return None;
    }
    Some(HostCommand {
        name: name?,
        description,
        category,
        input_schema,
        mutating,
        risk_level,
        supported_target_types,
    })
}

/// `risk_level`, which must agree with `mutating` (read ⇔ not mutating).
fn parse_risk_level(ctx: &mut Ctx<'_>, cmd: &Obj<'_>, mutating: bool) -> Option<RiskLevel> {
    let level = cmd
        .string(ctx, "risk_level")
        .and_then(|text| match RiskLevel::parse(&text) {
            Ok(level) => Some(level),
            Err(err) => {
                ctx.report(cmd.path_of("risk_level"), err.to_string());
                None
            }
        });
    match level {
        Some(RiskLevel::Read) if mutating => ctx.report(
            cmd.path_of("risk_level"),
            "a mutating command cannot have risk_level read",
        ),
        Some(level) if !mutating && level != RiskLevel::Read => ctx.report(
            cmd.path_of("risk_level"),
            format!("risk_level {level} requires mutating: true"),
        ),
        _ => {}
    }
    level
}

fn parse_workspace_provider(ctx: &mut Ctx<'_>, obj: &Obj<'_>) -> Option<WorkspaceProvider> {
    let transport = match transport(ctx, obj, &["http", "repository"], "http") {
        Some("repository") => Some(WorkspaceTransport::Repository),
        Some(_) => Some(WorkspaceTransport::Http),
        None => None,
    };
    let token = obj.secret(ctx, "token", "token_env");
    let base_url = required_base_url(ctx, obj, "base_url");
    let root_dir = obj.string(ctx, "root_dir").map(PathBuf::from);
    if root_dir.is_none() && transport == Some(WorkspaceTransport::Repository) {
        ctx.report(
            obj.path_of("root_dir"),
            "is required by the repository transport (where checkouts go)",
        );
    }
    if let Some(dir) = &root_dir {
        if transport == Some(WorkspaceTransport::Http) {
            ctx.report(
                obj.path_of("root_dir"),
                "is only used by the repository transport",
            );
        } else if !dir.is_absolute() {
            ctx.report(obj.path_of("root_dir"), "must be an absolute path");
        }
    }
    Some(WorkspaceProvider {
        transport: transport?,
        base_url: base_url?,
        token,
        root_dir,
    })
}

fn parse_skill_provider(ctx: &mut Ctx<'_>, obj: &Obj<'_>) -> Option<SkillProvider> {
    let transport_ok = transport(ctx, obj, &["http"], "http").is_some();
    let token = obj.secret(ctx, "token", "token_env");
    let base_url = required_base_url(ctx, obj, "base_url");
    let package_base_url = obj.string(ctx, "package_base_url").and_then(|raw| {
        check_url(
            ctx,
            &obj.path_of("package_base_url"),
            &raw,
            UrlRules::default(),
        )
    });
    let package_token = obj.secret(ctx, "package_token", "package_token_env");
    if package_token.is_some() && !obj.has("package_base_url") {
        ctx.report(
            obj.path_of("package_base_url"),
            "is required when a package token is set",
        );
    }
    let base_url = base_url?;
    transport_ok.then_some(SkillProvider {
        base_url,
        token,
        package_base_url,
        package_token,
    })
}

fn parse_browser(ctx: &mut Ctx<'_>, obj: &Obj<'_>) -> BrowserSettings {
    let enabled = obj.bool(ctx, "enabled").unwrap_or(false);
    let mut allowed_domains = Vec::new();
    for (index, domain) in obj
        .string_list(ctx, "allowed_domains")
        .into_iter()
        .enumerate()
    {
        let host = domain.strip_prefix("*.").unwrap_or(&domain);
        let valid = domain == "*"
            || (!host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
                && !host.starts_with('.')
                && !host.ends_with('.'));
        if valid {
            allowed_domains.push(domain.to_ascii_lowercase());
        } else {
            ctx.report(
                format!("{}[{index}]", obj.path_of("allowed_domains")),
                format!("{domain:?} is not a domain pattern (use \"*\", \"example.com\" or \"*.example.com\")"),
            );
        }
    }
    let artifact_provider = obj
        .object(ctx, "artifact_provider", &keys::ARTIFACT_PROVIDER)
        .and_then(|p| {
            let transport_ok = transport(ctx, &p, &["http"], "http").is_some();
            let token = p.secret(ctx, "token", "token_env");
            let raw = p.required_string(ctx, "upload_endpoint")?;
            let url = check_url(
                ctx,
                &p.path_of("upload_endpoint"),
                &raw,
                UrlRules::default(),
            )?;
            transport_ok.then_some(ArtifactProvider {
                upload_endpoint: url,
                token,
            })
        });
    BrowserSettings {
        enabled,
        allowed_domains,
        artifact_provider,
    }
}

/// The host's model-credential refresh callback: https (http only to loopback), no query.
fn parse_model_credential_callback(ctx: &mut Ctx<'_>, obj: &Obj<'_>) -> Option<HttpEndpoint> {
    let token = obj.secret(ctx, "token", "token_env");
    let raw = obj.required_string(ctx, "url")?;
    let rules = UrlRules {
        allow_query: false,
        https_unless_loopback: true,
    };
    check_url(ctx, &obj.path_of("url"), &raw, rules).map(|url| HttpEndpoint { url, token })
}

fn parse_model_endpoint(
    ctx: &mut Ctx<'_>,
    path: String,
    value: &Value,
) -> Option<ModelEndpointBinding> {
    let obj = Obj::new(ctx, path, value, &keys::MODEL_ENDPOINT)?;
    let before = ctx.diagnostics.len();
    let id = obj.required_string(ctx, "id");
    if let Some(id) = &id {
        check_endpoint_id(ctx, &obj.path_of("id"), id);
    }
    let allow_http = obj.bool(ctx, "allow_http").unwrap_or(false);
    let base_url = obj
        .required_string(ctx, "base_url")
        .and_then(|raw| check_endpoint_base_url(ctx, &obj.path_of("base_url"), &raw, allow_http));
    let auth_mode = match obj.required_string(ctx, "auth_mode").as_deref() {
        Some("api_key") => Some(EndpointAuthMode::ApiKey),
        Some("none") => Some(EndpointAuthMode::None),
        Some(other) => {
            ctx.report(
                obj.path_of("auth_mode"),
                format!("unknown auth_mode {other:?} (expected api_key or none)"),
            );
            None
        }
        None => None,
    };
    if ctx.diagnostics.len() != before {
        return None;
    }
    Some(ModelEndpointBinding {
        id: id?,
        base_url: base_url?,
        auth_mode: auth_mode?,
        allow_http,
    })
}
