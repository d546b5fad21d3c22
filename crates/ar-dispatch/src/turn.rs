//! Coding-agent CLI turns: what a caller asks of the runtime that starts one turn of codex,
//! Claude Code or opencode ([`TurnSetup`], `RunSpec.turn`, our extension of the seed's spec),
//! and how that runtime sets the turn up — here or on a node, the same way.
//!
//! A turn with a model route never gets the route's key. The runtime starts a model egress
//! proxy for the turn ([`crate::egress`]) and hands the CLI the proxy's loopback address and a
//! placeholder token:
//! - codex: a custom model provider `ar` (`-c model_provider="ar"`, its `base_url` = the
//!   proxy, `wire_api="responses"`, `env_key="AR_MODEL_API_KEY"`), the placeholder in that
//!   variable;
//! - Claude Code: `ANTHROPIC_BASE_URL` (the proxy, without the route's trailing `/v1`, which
//!   Claude Code adds) and `ANTHROPIC_API_KEY` = the placeholder;
//! - opencode: an `opencode.json` in the private home's `$XDG_CONFIG_HOME/opencode` declaring
//!   provider `ar` (`@ai-sdk/openai-compatible`, `baseURL` = the proxy, `apiKey` read from
//!   `AR_MODEL_API_KEY`), model `ar/<model>`.
//!
//! A turn with a route also gets a private home (`HOME`, `CODEX_HOME`, `XDG_*` under
//! `<root>/.homes/<run>`), so the operator's own CLI configuration and logins neither leak into
//! the run nor override the route. The run's own tools reach the CLI through the MCP bridge
//! when the turn carries a [`TurnBridge`] and the runtime knows its bridge program: an MCP
//! server named `agent_runtime`, started as `<program> mcp-bridge` with the bridge's settings
//! set for that server alone, never in the CLI's environment:
//! - codex: `-c mcp_servers.agent_runtime.{command,args,env,tool_timeout_sec}`;
//! - Claude Code: `--mcp-config <file>` and `--allowedTools mcp__agent_runtime`;
//! - opencode: `OPENCODE_CONFIG=<file>` with `mcp.agent_runtime` (`type: local`).
//!
//! The files go to a private directory (`<root>/.bridges/<run>`, mode 0700, files 0600).
//! Homes, bridge files and the proxy are the turn's scratch, removed and stopped when the
//! process has ended. Permissions ([`TurnPermissions`]): nobody answers a CLI's prompts in a
//! run, so the caller chooses between the CLI's own defaults, its checks bypassed (codex
//! `--dangerously-bypass-approvals-and-sandbox`, Claude Code `--dangerously-skip-permissions`
//! with `IS_SANDBOX=1`), and its read-only mode (codex `--sandbox read-only`, Claude Code
//! `--permission-mode plan`, opencode's `plan` agent), never bypassed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ar_core::secret::Secret;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::egress::{EgressLimits, EgressProxy, EgressRoute};
use crate::providers::{
    toml_string, ClaudeProvider, CodexProvider, CodexSandbox, OpenCodeProvider, Provider,
};
use crate::run::DispatchError;
use crate::spec::{RunSpec, SpecError};

/// The variable carrying the placeholder to codex and opencode.
pub const MODEL_KEY_ENV: &str = "AR_MODEL_API_KEY";
/// The name of the bridge's MCP server in every CLI's configuration.
pub const BRIDGE_SERVER: &str = "agent_runtime";

/// One CLI turn's setup (`RunSpec.turn`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnSetup {
    /// The run's model route; `None` leaves the CLI on its own configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<TurnRoute>,
    /// What the CLI may do without asking.
    #[serde(default)]
    pub permissions: TurnPermissions,
    /// The MCP bridge to the run's tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<TurnBridge>,
}

/// A model route: the CLI reaches it through the turn's egress proxy only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnRoute {
    /// Base URL of the model API (`…/v1`).
    pub base_url: String,
    /// The model the CLI asks for.
    #[serde(default)]
    pub model: String,
    /// The route's key, held by the proxy; never given to the CLI.
    #[serde(
        default,
        with = "secret_field",
        skip_serializing_if = "Option::is_none"
    )]
    pub api_key: Option<Secret>,
    /// The ChatGPT account a subscription token acts for: the proxy adds it to every call as
    /// `ChatGPT-Account-ID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
}

/// What a turn's CLI may do without asking (nobody is there to answer a prompt).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnPermissions {
    /// The CLI's own defaults.
    #[default]
    CliDefault,
    /// Its checks bypassed: the operator isolates the machine.
    Bypass,
    /// The workspace is read-only: the CLI's read-only mode.
    ReadOnly,
}

/// The MCP bridge of a turn: its settings (`AGENT_RUNTIME_*` variables of `agent-runtime
/// mcp-bridge`), set for the bridge process alone.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnBridge {
    /// Variables of the bridge process, in order (they carry the turn's gateway token).
    pub env: Vec<(String, String)>,
    /// Bound of one bridged tool call, in seconds.
    pub timeout_secs: u64,
}

impl std::fmt::Debug for TurnBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.env.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("TurnBridge")
            .field("env", &names)
            .field("timeout_secs", &self.timeout_secs)
            .finish()
    }
}

/// `Option<Secret>` as an optional JSON string.
mod secret_field {
    use ar_core::secret::Secret;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Option<Secret>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(secret) => s.serialize_str(secret.expose()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Secret>, D::Error> {
        Ok(Option::<String>::deserialize(d)?.map(Secret::new))
    }
}

/// What the runtime needs to set turns up.
#[derive(Debug, Clone)]
pub struct TurnResources {
    /// `agent-runtime`, started as `<program> mcp-bridge` (`None`: turns with a bridge are refused).
    pub bridge_program: Option<PathBuf>,
    /// Bounds of each turn's egress proxy.
    pub egress_limits: EgressLimits,
    /// The proxies' upstream client (shared: its connections are reused across turns).
    pub upstream: reqwest::Client,
}

/// A prepared turn: the provider that starts the CLI and its environment, and the scratch
/// that ends with the process.
pub(crate) struct PreparedTurn {
    pub(crate) provider: Arc<dyn Provider>,
    /// The spec as the provider reads it (the model the CLI is given).
    pub(crate) spec: RunSpec,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) scratch: TurnScratch,
}

/// What a turn leaves behind until its process ends: its private directories and its proxy.
#[derive(Debug, Default)]
pub struct TurnScratch {
    dirs: Vec<PathBuf>,
    proxy: Option<EgressProxy>,
}

impl TurnScratch {
    /// Stops the proxy and removes the directories; the proxy's report.
    pub(crate) async fn finish(&mut self) -> Option<crate::egress::EgressReport> {
        let report = self.proxy.take().map(|proxy| {
            proxy.stop();
            proxy.report()
        });
        for dir in std::mem::take(&mut self.dirs) {
            if let Err(error) = tokio::fs::remove_dir_all(&dir).await {
                tracing::debug!(%error, dir = %dir.display(), "could not remove a CLI turn's directory");
            }
        }
        report
    }
}

impl Drop for TurnScratch {
    fn drop(&mut self) {
        for dir in &self.dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Sets up the turn of `spec` for the CLI `base` serves: scratch, proxy, arguments, environment.
pub(crate) async fn prepare(
    resources: &TurnResources,
    root: &Path,
    spec: &RunSpec,
    run_id: &str,
    workdir: &Path,
    base: &dyn Provider,
) -> Result<PreparedTurn, DispatchError> {
    let Some(setup) = &spec.turn else {
        return Err(invalid("prepare called without a turn"));
    };
    let program = base
        .program()
        .ok_or_else(|| invalid(&format!("agent {:?} takes no turn setup", spec.agent)))?
        .to_string();
    check_dir_name(run_id)?;
    let mut scratch = TurnScratch::default();
    let mut env = Vec::new();
    let home = match &setup.route {
        Some(_) => {
            let home = root.join(".homes").join(run_id);
            scratch.dirs.push(home.clone());
            env.extend(private_home_env(&home)?);
            Some(home)
        }
        None => None,
    };
    let bridge = bridge_files(resources, root, setup, run_id, &mut scratch)?;
    let grant = match &setup.route {
        Some(route) => Some(start_proxy(resources, spec, route, &mut scratch).await?),
        None => None,
    };
    let ctx = LaunchContext {
        program,
        setup,
        grant: grant.as_ref(),
        bridge: bridge.as_ref(),
        workdir,
        home: home.as_deref(),
    };
    let launch = match spec.agent.as_str() {
        "codex" => codex_launch(&ctx),
        "claude" => claude_launch(&ctx)?,
        "opencode" => opencode_launch(&ctx)?,
        other => return Err(invalid(&format!("agent {other:?} takes no turn setup"))),
    };
    env.extend(launch.env);
    let mut spec = spec.clone();
    spec.model = launch.model;
    Ok(PreparedTurn {
        provider: launch.provider,
        spec,
        env,
        scratch,
    })
}

fn invalid(message: &str) -> DispatchError {
    DispatchError::Spec(SpecError::Decode(message.to_string()))
}

/// The proxy of a turn and what the CLI is told of it.
struct Grant {
    /// The proxy's base URL for this CLI.
    base_url: String,
    placeholder: Secret,
}

/// Starts the turn's proxy for the route; Claude Code is given the route's path without its
/// trailing `/v1` (it adds `/v1/messages` itself), the others the route's path.
async fn start_proxy(
    resources: &TurnResources,
    spec: &RunSpec,
    route: &TurnRoute,
    scratch: &mut TurnScratch,
) -> Result<Grant, DispatchError> {
    let url = reqwest::Url::parse(route.base_url.trim())
        .map_err(|error| invalid(&format!("model route {:?}: {error}", route.base_url)))?;
    let path = url.path().trim_end_matches('/');
    let cli_path = match spec.agent.as_str() {
        "claude" => path.strip_suffix("/v1").unwrap_or(path),
        _ => path,
    };
    let egress = EgressRoute {
        base_url: route.base_url.clone(),
        credential: route.api_key.clone(),
        headers: route
            .account_id
            .iter()
            .map(|account| ("chatgpt-account-id".to_string(), account.clone()))
            .collect(),
    };
    let proxy = EgressProxy::start(
        &egress,
        cli_path,
        resources.egress_limits,
        resources.upstream.clone(),
    )
    .await
    .map_err(|error| match error {
        crate::egress::EgressError::Route(_) => invalid(&error.to_string()),
        crate::egress::EgressError::Bind(_) => DispatchError::Setup(error.to_string()),
    })?;
    let grant = Grant {
        base_url: proxy.base_url(),
        placeholder: proxy.placeholder().clone(),
    };
    scratch.proxy = Some(proxy);
    Ok(grant)
}

/// Everything one CLI's launch is built from.
struct LaunchContext<'a> {
    program: String,
    setup: &'a TurnSetup,
    grant: Option<&'a Grant>,
    bridge: Option<&'a BridgeFiles>,
    workdir: &'a Path,
    home: Option<&'a Path>,
}

impl LaunchContext<'_> {
    fn model(&self) -> String {
        self.setup
            .route
            .as_ref()
            .map(|route| route.model.clone())
            .unwrap_or_default()
    }
}

/// How one turn's CLI starts: its provider (arguments), environment and model name.
struct Launch {
    provider: Arc<dyn Provider>,
    env: Vec<(String, String)>,
    model: String,
}

/// The bridge of one turn: its command, its settings and where its config files go.
struct BridgeFiles {
    command: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    timeout_secs: u64,
    dir: PathBuf,
}

impl BridgeFiles {
    /// The settings as a JSON object (Claude Code's `env`, opencode's `environment`).
    fn env_json(&self) -> serde_json::Value {
        let map: serde_json::Map<String, serde_json::Value> = self
            .env
            .iter()
            .map(|(name, value)| (name.clone(), json!(value)))
            .collect();
        serde_json::Value::Object(map)
    }

    /// Writes `name` in the private directory (mode 0600); its path.
    fn write(&self, name: &str, contents: &serde_json::Value) -> Result<PathBuf, DispatchError> {
        let path = self.dir.join(name);
        write_private(&path, contents.to_string().as_bytes())?;
        Ok(path)
    }
}

/// The turn's bridge, when it asks for one; its private directory is created (empty).
fn bridge_files(
    resources: &TurnResources,
    root: &Path,
    setup: &TurnSetup,
    run_id: &str,
    scratch: &mut TurnScratch,
) -> Result<Option<BridgeFiles>, DispatchError> {
    let Some(bridge) = &setup.bridge else {
        return Ok(None);
    };
    let Some(program) = &resources.bridge_program else {
        return Err(DispatchError::Policy {
            code: "bridge_unavailable",
            message: "this runtime has no MCP bridge program for the run's tools".into(),
        });
    };
    let dir = root.join(".bridges").join(run_id);
    create_private_dir(&dir)?;
    scratch.dirs.push(dir.clone());
    Ok(Some(BridgeFiles {
        command: program.display().to_string(),
        args: vec!["mcp-bridge".to_string()],
        env: bridge.env.clone(),
        timeout_secs: bridge.timeout_secs.max(1),
        dir,
    }))
}

/// The `-c` overrides that declare the bridge to codex: the settings as an inline table, and
/// a tool timeout as long as the bridge's own bound.
fn codex_bridge_overrides(bridge: &BridgeFiles) -> Vec<String> {
    let key = format!("mcp_servers.{BRIDGE_SERVER}");
    let env: Vec<String> = bridge
        .env
        .iter()
        .map(|(name, value)| format!("{name}={}", toml_string(value)))
        .collect();
    let args: Vec<String> = bridge.args.iter().map(|arg| toml_string(arg)).collect();
    vec![
        format!("{key}.command={}", toml_string(&bridge.command)),
        format!("{key}.args=[{}]", args.join(",")),
        format!("{key}.env={{{}}}", env.join(",")),
        format!("{key}.tool_timeout_sec={}", bridge.timeout_secs),
    ]
}

/// codex: the proxy as custom model provider `ar`, the placeholder in [`MODEL_KEY_ENV`]; the
/// bridge as MCP server [`BRIDGE_SERVER`].
fn codex_launch(ctx: &LaunchContext<'_>) -> Launch {
    let permissions = ctx.setup.permissions;
    let mut extra_args = Vec::new();
    let mut env = Vec::new();
    if permissions == TurnPermissions::Bypass {
        extra_args.push("--dangerously-bypass-approvals-and-sandbox".to_string());
    }
    let sandbox = match permissions {
        TurnPermissions::ReadOnly => CodexSandbox::ReadOnly,
        TurnPermissions::CliDefault | TurnPermissions::Bypass => CodexSandbox::WorkspaceWrite,
    };
    for item in ctx.bridge.map(codex_bridge_overrides).unwrap_or_default() {
        extra_args.extend(["-c".to_string(), item]);
    }
    if let Some(grant) = ctx.grant {
        let overrides = [
            "model_provider=\"ar\"".to_string(),
            "model_providers.ar.name=\"ar\"".to_string(),
            format!(
                "model_providers.ar.base_url={}",
                toml_string(&grant.base_url)
            ),
            "model_providers.ar.wire_api=\"responses\"".to_string(),
            format!("model_providers.ar.env_key={}", toml_string(MODEL_KEY_ENV)),
        ];
        for item in overrides {
            extra_args.extend(["-c".to_string(), item]);
        }
        env.push((
            MODEL_KEY_ENV.to_string(),
            grant.placeholder.expose().to_string(),
        ));
    }
    Launch {
        provider: Arc::new(CodexProvider {
            program: ctx.program.clone(),
            extra_args,
            sandbox,
        }),
        env,
        model: ctx.model(),
    }
}

/// Claude Code: partial messages (text deltas), no telemetry or updates, the proxy as
/// `ANTHROPIC_BASE_URL` and the placeholder as `ANTHROPIC_API_KEY`, the bridge in an
/// `--mcp-config` file with its tools allowed.
fn claude_launch(ctx: &LaunchContext<'_>) -> Result<Launch, DispatchError> {
    // Text deltas arrive as `stream_event` lines before each complete message.
    let mut extra_args = vec!["--include-partial-messages".to_string()];
    let mut env = Vec::new();
    match ctx.setup.permissions {
        TurnPermissions::Bypass => {
            extra_args.push("--dangerously-skip-permissions".into());
            env.push(("IS_SANDBOX".to_string(), "1".to_string()));
        }
        // Plan mode: Claude Code reads and answers, and edits or runs nothing.
        TurnPermissions::ReadOnly => {
            extra_args.extend(["--permission-mode".to_string(), "plan".to_string()]);
        }
        TurnPermissions::CliDefault => {}
    }
    if let Some(bridge) = ctx.bridge {
        let config = json!({"mcpServers": {BRIDGE_SERVER: {
            "type": "stdio",
            "command": bridge.command,
            "args": bridge.args,
            "env": bridge.env_json(),
        }}});
        let path = bridge.write("claude-mcp.json", &config)?;
        // Both options take lists: each is followed by another option, never by the prompt
        // (which goes to stdin).
        extra_args.extend([
            "--mcp-config".to_string(),
            path.display().to_string(),
            "--allowedTools".to_string(),
            format!("mcp__{BRIDGE_SERVER}"),
        ]);
    }
    for name in [
        "DISABLE_TELEMETRY",
        "DISABLE_AUTOUPDATER",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
    ] {
        env.push((name.to_string(), "1".to_string()));
    }
    if let Some(grant) = ctx.grant {
        env.push(("ANTHROPIC_BASE_URL".to_string(), grant.base_url.clone()));
        env.push((
            "ANTHROPIC_API_KEY".to_string(),
            grant.placeholder.expose().to_string(),
        ));
    }
    Ok(Launch {
        provider: Arc::new(ClaudeProvider {
            program: ctx.program.clone(),
            extra_args,
        }),
        env,
        model: ctx.model(),
    })
}

/// opencode: its project directory in `PWD`, the proxy as provider `ar` in the private home's
/// global `opencode.json` (the placeholder read from [`MODEL_KEY_ENV`]), model `ar/<model>`;
/// the bridge in a config file of its own (`OPENCODE_CONFIG`, merged with the others). Nothing
/// is written into the workdir, which may be a repository the run commits.
fn opencode_launch(ctx: &LaunchContext<'_>) -> Result<Launch, DispatchError> {
    let mut env = vec![("PWD".to_string(), ctx.workdir.display().to_string())];
    if let Some(bridge) = ctx.bridge {
        let mut command = vec![bridge.command.clone()];
        command.extend(bridge.args.iter().cloned());
        let config = json!({
            "$schema": "https://opencode.ai/config.json",
            "mcp": {BRIDGE_SERVER: {
                "type": "local",
                "command": command,
                "environment": bridge.env_json(),
                "enabled": true,
                "timeout": bridge.timeout_secs * 1000,
            }}
        });
        let path = bridge.write("opencode.json", &config)?;
        env.push(("OPENCODE_CONFIG".to_string(), path.display().to_string()));
    }
    let mut model = String::new();
    if let Some(grant) = ctx.grant {
        opencode_provider_config(ctx, grant)?;
        env.push((
            MODEL_KEY_ENV.to_string(),
            grant.placeholder.expose().to_string(),
        ));
        let name = ctx.model();
        if !name.is_empty() {
            model = format!("ar/{name}");
        }
    }
    Ok(Launch {
        provider: Arc::new(OpenCodeProvider {
            program: ctx.program.clone(),
            // opencode has no sandbox flag; its built-in `plan` agent denies edits and asks
            // before commands (refused: nobody answers).
            extra_args: if ctx.setup.permissions == TurnPermissions::ReadOnly {
                vec!["--agent".to_string(), "plan".to_string()]
            } else {
                Vec::new()
            },
        }),
        env,
        model,
    })
}

/// Writes provider `ar` (the proxy) into the private home's global opencode configuration.
fn opencode_provider_config(ctx: &LaunchContext<'_>, grant: &Grant) -> Result<(), DispatchError> {
    let name = ctx.model();
    let config = json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "ar": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Agent Runtime",
                "options": {"baseURL": grant.base_url, "apiKey": format!("{{env:{MODEL_KEY_ENV}}}")},
                "models": { name.clone(): { "name": name } }
            }
        }
    });
    let dir = ctx
        .home
        .ok_or_else(|| invalid("a model route needs a private home"))?
        .join(".config/opencode");
    create_dir(&dir)?;
    write_private(&dir.join("opencode.json"), config.to_string().as_bytes())
}

/// `HOME`, `CODEX_HOME` and the `XDG_*` directories of a private home, created.
fn private_home_env(home: &Path) -> Result<Vec<(String, String)>, DispatchError> {
    let dirs = [
        ("HOME", home.to_path_buf()),
        ("CODEX_HOME", home.join(".codex")),
        ("XDG_CONFIG_HOME", home.join(".config")),
        ("XDG_DATA_HOME", home.join(".local/share")),
        ("XDG_CACHE_HOME", home.join(".cache")),
        ("XDG_STATE_HOME", home.join(".local/state")),
    ];
    create_private_dir(home)?;
    let mut env = Vec::new();
    for (name, dir) in dirs {
        create_dir(&dir)?;
        env.push((name.to_string(), dir.display().to_string()));
    }
    Ok(env)
}

/// A run id that can name a directory.
fn check_dir_name(run_id: &str) -> Result<(), DispatchError> {
    let fine = !run_id.is_empty()
        && run_id != "."
        && run_id != ".."
        && run_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    if fine {
        Ok(())
    } else {
        Err(invalid(&format!(
            "run id {run_id:?} cannot name a directory"
        )))
    }
}

fn create_dir(dir: &Path) -> Result<(), DispatchError> {
    std::fs::create_dir_all(dir).map_err(|error| io_error(dir, "creating", error))
}

fn io_error(path: &Path, doing: &str, error: std::io::Error) -> DispatchError {
    DispatchError::Setup(format!("{doing} {}: {error}", path.display()))
}

/// A directory only this user may enter.
fn create_private_dir(dir: &Path) -> Result<(), DispatchError> {
    create_dir(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|error| io_error(dir, "securing", error))?;
    }
    Ok(())
}

/// Writes a file only this user may read.
fn write_private(path: &Path, contents: &[u8]) -> Result<(), DispatchError> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    options
        .open(path)
        .and_then(|mut file| file.write_all(contents))
        .map_err(|error| io_error(path, "writing", error))
}

/// Whether a tool a CLI reported is one of the bridge's (those calls went through the run
/// tool gateway, which recorded them).
pub fn is_bridged(agent: &str, tool_name: &str) -> bool {
    let prefix = match agent {
        "codex" => format!("{BRIDGE_SERVER}."),
        "claude" => format!("mcp__{BRIDGE_SERVER}__"),
        "opencode" => format!("{BRIDGE_SERVER}_"),
        _ => return false,
    };
    tool_name.starts_with(&prefix)
}

#[cfg(test)]
mod tests;
