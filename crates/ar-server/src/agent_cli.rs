//! The agent-CLI adapter: implements the engine's [`AgentCli`] port with ar-dispatch's local
//! process runtime, handing each turn the run's model route. The CLI's own JSON stream (codex
//! `exec --json`, Claude Code `stream-json`, opencode `--format json`) is read by ar-dispatch's
//! parser of that CLI (the one `agent-runtime exec` uses); this adapter turns its typed events
//! into domain [`CliEvent`]s with tool inputs, outputs and usage.
//!
//! Model route per CLI:
//! - codex: a custom model provider `ar` (`-c model_provider="ar"`, its `base_url`,
//!   `wire_api="responses"`, `env_key="AR_MODEL_API_KEY"`) with the key in that variable;
//! - Claude Code: `ANTHROPIC_BASE_URL` (the route's base URL without a trailing `/v1`) and
//!   `ANTHROPIC_API_KEY`;
//! - opencode: an `opencode.json` in the private home's `$XDG_CONFIG_HOME/opencode` declaring provider `ar`
//!   (`@ai-sdk/openai-compatible`, `baseURL`, `apiKey` read from `AR_MODEL_API_KEY`), model `ar/<model>`.
//!
//! When the runtime hands a route, the CLI also gets a private home (`HOME`, `CODEX_HOME`,
//! `XDG_*` under `<root>/.homes/<run>`, removed when the turn ends), so the operator's own CLI
//! configuration and logins neither leak into the run nor override the route. Without a route
//! the CLI runs with the service's environment and its own configuration. The workdir
//! (`<root>/<run>` unless the run's workspace lease names one) is the run's workspace and is kept.
//!
//! The run's own tools (host tools, run MCP tools) reach the CLI when the turn carries
//! [`ToolGatewayAccess`] and the runtime has an [`McpBridge`]: the CLI gets an MCP server named
//! `agent_runtime`, started as `agent-runtime mcp-bridge` with the bridge's settings (the
//! service's loopback URL, the app, the run, the turn's gateway token as
//! `AGENT_RUNTIME_SERVICE_TOKEN`) set for that server alone, never in the CLI's environment:
//! - codex: `-c mcp_servers.agent_runtime.{command,args,env,tool_timeout_sec}`;
//! - Claude Code: `--mcp-config <file>` (`{"mcpServers":{"agent_runtime":{…}}}`) and
//!   `--allowedTools mcp__agent_runtime`;
//! - opencode: `OPENCODE_CONFIG=<file>` with `mcp.agent_runtime` (`type: local`).
//!
//! The files are written to a private directory (`<root>/.bridges/<run>`, mode 0700, files
//! 0600) removed when the turn ends. The gateway records the calls the bridge makes, so the
//! CLI's own reports of them (`agent_runtime.*` from codex, `mcp__agent_runtime__*` from Claude
//! Code, `agent_runtime_*` from opencode) are not reported again.
//!
//! Runs are non-interactive: nobody can answer a CLI's permission prompt. codex runs with
//! `--dangerously-bypass-approvals-and-sandbox` (its sandbox needs kernel features containers
//! often lack) and Claude Code with `--dangerously-skip-permissions` (`IS_SANDBOX=1` lets it do
//! so as root) unless [`AgentCliConfig::bypass_permissions`] is off. Run the service itself in
//! an isolated environment when agents may run arbitrary commands.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ar_config::env::{
    API_BASE_URL, APP_ID, MCP_BRIDGE_HTTP_TIMEOUT_SECONDS, RUN_ID, SERVICE_TOKEN,
};
use ar_core::agent_cli::{
    AgentCli, AgentCliError, CliControl, CliEvent, CliOutcome, CliTurn, CliTurnRequest,
    ToolGatewayAccess,
};
use ar_core::model::ModelRoute;
use ar_core::{RuntimeKind, Usage};
use ar_dispatch::providers::toml_string;
use ar_dispatch::{
    AgentEvent, AgentOutput, ClaudeProvider, CodexProvider, CodexSandbox, LocalConfig,
    LocalRuntime, OpenCodeProvider, Provider, ProviderUsage, Run, RunError, RunEvents, RunSpec,
    State,
};
use futures::StreamExt;
use serde_json::json;

/// Environment variable carrying the model key to codex and opencode.
pub const MODEL_KEY_ENV: &str = "AR_MODEL_API_KEY";

/// The name of the bridge's MCP server in every CLI's configuration.
pub const BRIDGE_SERVER: &str = "agent_runtime";

/// How CLIs start the MCP bridge to their run's tools.
#[derive(Debug, Clone)]
pub struct McpBridge {
    /// The `agent-runtime` executable, started as `<program> mcp-bridge`.
    pub program: PathBuf,
    /// The service's base URL as this host reaches it (loopback).
    pub base_url: String,
    /// Bound of one gateway request, and of one tool call in the CLI's MCP client.
    pub timeout: Duration,
}

/// How the adapter runs CLIs.
#[derive(Debug, Clone)]
pub struct AgentCliConfig {
    /// Per-run workdirs (`<root>/<run id>`) and private homes (`<root>/.homes/<run id>`).
    pub root: PathBuf,
    /// Programs by runtime kind (only installed CLIs are listed).
    pub programs: HashMap<RuntimeKind, String>,
    /// Skip the CLIs' approval prompts and codex's sandbox (see the module docs).
    pub bypass_permissions: bool,
    /// The MCP bridge offered to turns that carry gateway access; `None`: no bridge here.
    pub bridge: Option<McpBridge>,
}

impl AgentCliConfig {
    /// Looks `codex`, `claude` and `opencode` up on this process's `PATH`.
    pub fn detect(root: impl Into<PathBuf>) -> Self {
        let mut programs = HashMap::new();
        for (kind, program) in [
            (RuntimeKind::Codex, "codex"),
            (RuntimeKind::ClaudeCode, "claude"),
            (RuntimeKind::OpenCode, "opencode"),
        ] {
            if let Some(path) = ar_process::find_program(program, None) {
                programs.insert(kind, path.display().to_string());
            }
        }
        AgentCliConfig {
            root: root.into(),
            programs,
            bypass_permissions: true,
            bridge: None,
        }
    }

    /// Offers `bridge` to turns that carry gateway access.
    pub fn with_bridge(mut self, bridge: McpBridge) -> Self {
        self.bridge = Some(bridge);
        self
    }

    /// The runtime kinds whose CLI was found, in contract order.
    pub fn kinds(&self) -> Vec<RuntimeKind> {
        RuntimeKind::ALL
            .iter()
            .copied()
            .filter(|kind| self.programs.contains_key(kind))
            .collect()
    }
}

/// [`AgentCli`] over ar-dispatch's [`LocalRuntime`].
#[derive(Debug, Clone)]
pub struct DispatchAgentCli {
    config: AgentCliConfig,
}

impl DispatchAgentCli {
    pub fn new(config: AgentCliConfig) -> Self {
        DispatchAgentCli { config }
    }

    pub fn config(&self) -> &AgentCliConfig {
        &self.config
    }

    /// The turn's workdir, created: the request's (absolute) or `<root>/<run id>`.
    fn workdir(&self, request: &CliTurnRequest) -> Result<PathBuf, AgentCliError> {
        let workdir = match &request.workdir {
            Some(dir) if Path::new(dir).is_absolute() => PathBuf::from(dir),
            Some(dir) => {
                return Err(AgentCliError::Invalid(format!(
                    "workdir {dir:?} must be absolute"
                )))
            }
            None => self.config.root.join(&request.run_id),
        };
        create_dir(&workdir)?;
        Ok(workdir)
    }

    /// How the request's CLI starts, with its model route and its bridge.
    fn launch(
        &self,
        request: &CliTurnRequest,
        program: String,
        dirs: (&Path, Option<&Path>),
        bridge: Option<&BridgeServer>,
    ) -> Result<Launch, AgentCliError> {
        let route = request.route.as_ref();
        let permissions = Permissions::of(request, self.config.bypass_permissions);
        match request.kind {
            RuntimeKind::Codex => Ok(codex_launch(program, route, permissions, bridge)),
            RuntimeKind::ClaudeCode => claude_launch(program, route, permissions, bridge),
            RuntimeKind::OpenCode => opencode_launch(program, route, dirs, permissions, bridge),
            other => Err(AgentCliError::Unavailable(other)),
        }
    }

    /// The turn's bridge server, when the turn carries gateway access and this runtime has a
    /// bridge; its private directory is created (empty).
    fn bridge_server(
        &self,
        request: &CliTurnRequest,
    ) -> Result<Option<BridgeServer>, AgentCliError> {
        let (Some(access), Some(bridge)) = (&request.tool_gateway, &self.config.bridge) else {
            return Ok(None);
        };
        let dir = self.config.root.join(".bridges").join(&request.run_id);
        create_private_dir(&dir)?;
        Ok(Some(BridgeServer::new(
            bridge,
            access,
            &request.run_id,
            dir,
        )))
    }
}

/// The bridge as one turn's MCP server: its command, its settings and where the config files
/// that carry them go.
struct BridgeServer {
    command: String,
    args: Vec<String>,
    /// The bridge's settings, set for the bridge process alone.
    env: Vec<(String, String)>,
    timeout_secs: u64,
    /// Private (0700), removed when the turn ends.
    dir: PathBuf,
}

impl BridgeServer {
    fn new(bridge: &McpBridge, access: &ToolGatewayAccess, run_id: &str, dir: PathBuf) -> Self {
        let timeout_secs = bridge.timeout.as_secs().max(1);
        let env = [
            (API_BASE_URL.name, bridge.base_url.clone()),
            (APP_ID.name, access.app_id.clone()),
            (RUN_ID.name, run_id.to_string()),
            (SERVICE_TOKEN.name, access.token.expose().to_string()),
            (
                MCP_BRIDGE_HTTP_TIMEOUT_SECONDS.name,
                timeout_secs.to_string(),
            ),
        ];
        BridgeServer {
            command: bridge.program.display().to_string(),
            args: vec!["mcp-bridge".to_string()],
            env: env
                .into_iter()
                .map(|(name, value)| (name.to_string(), value))
                .collect(),
            timeout_secs,
            dir,
        }
    }

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
    fn write(&self, name: &str, contents: &serde_json::Value) -> Result<PathBuf, AgentCliError> {
        let path = self.dir.join(name);
        write_private(&path, contents.to_string().as_bytes())?;
        Ok(path)
    }
}

/// The `-c` overrides that declare the bridge to codex: the settings as an inline table (TOML
/// keys and basic strings), and a tool timeout as long as the bridge's own bound (codex's
/// default would cut a long host command short).
fn codex_bridge_overrides(bridge: &BridgeServer) -> Vec<String> {
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

/// A directory only this user may enter.
fn create_private_dir(dir: &Path) -> Result<(), AgentCliError> {
    create_dir(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|error| {
            AgentCliError::Start(format!("securing {}: {error}", dir.display()))
        })?;
    }
    Ok(())
}

/// Writes a file only this user may read.
fn write_private(path: &Path, contents: &[u8]) -> Result<(), AgentCliError> {
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
        .map_err(|error| AgentCliError::Start(format!("writing {}: {error}", path.display())))
}

/// Whether a tool the CLI reported is one of the bridge's: those calls went through the
/// gateway, which recorded them.
fn is_bridged(kind: RuntimeKind, tool_name: &str) -> bool {
    let prefix = match kind {
        RuntimeKind::Codex => format!("{BRIDGE_SERVER}."),
        RuntimeKind::ClaudeCode => format!("mcp__{BRIDGE_SERVER}__"),
        RuntimeKind::OpenCode => format!("{BRIDGE_SERVER}_"),
        _ => return false,
    };
    tool_name.starts_with(&prefix)
}

fn create_dir(dir: &Path) -> Result<(), AgentCliError> {
    std::fs::create_dir_all(dir)
        .map_err(|error| AgentCliError::Start(format!("creating {}: {error}", dir.display())))
}

/// What a turn's CLI may do without asking (nobody is there to answer a prompt).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Permissions {
    /// The CLI's own defaults ([`AgentCliConfig::bypass_permissions`] off).
    Default,
    /// Its checks bypassed: the operator isolates the service.
    Bypass,
    /// The run's workspace is read-only: the CLI's read-only mode (codex `--sandbox
    /// read-only`, Claude Code `--permission-mode plan`, opencode's `plan` agent).
    ReadOnly,
}

impl Permissions {
    fn of(request: &CliTurnRequest, bypass: bool) -> Self {
        match (request.read_only, bypass) {
            (true, _) => Permissions::ReadOnly,
            (false, true) => Permissions::Bypass,
            (false, false) => Permissions::Default,
        }
    }
}

/// How one turn's CLI starts: its provider (arguments), environment and model name.
struct Launch {
    provider: Arc<dyn Provider>,
    env: Vec<(String, String)>,
    model: String,
}

/// The route's key, when it has one.
fn route_key(route: &ModelRoute) -> Option<&str> {
    route
        .api_key
        .as_ref()
        .map(|key| key.expose())
        .filter(|key| !key.is_empty())
}

/// codex: the route as a custom model provider `ar` (`-c` overrides), the key in
/// [`MODEL_KEY_ENV`]; the bridge as MCP server [`BRIDGE_SERVER`].
fn codex_launch(
    program: String,
    route: Option<&ModelRoute>,
    permissions: Permissions,
    bridge: Option<&BridgeServer>,
) -> Launch {
    let mut extra_args = Vec::new();
    let mut env = Vec::new();
    if permissions == Permissions::Bypass {
        extra_args.push("--dangerously-bypass-approvals-and-sandbox".to_string());
    }
    let sandbox = match permissions {
        Permissions::ReadOnly => CodexSandbox::ReadOnly,
        Permissions::Default | Permissions::Bypass => CodexSandbox::WorkspaceWrite,
    };
    for item in bridge.map(codex_bridge_overrides).unwrap_or_default() {
        extra_args.extend(["-c".to_string(), item]);
    }
    if let Some(route) = route {
        let mut overrides = vec![
            "model_provider=\"ar\"".to_string(),
            "model_providers.ar.name=\"ar\"".to_string(),
            format!(
                "model_providers.ar.base_url={}",
                toml_string(route.base_url.trim_end_matches('/'))
            ),
            "model_providers.ar.wire_api=\"responses\"".to_string(),
        ];
        if let Some(key) = route_key(route) {
            overrides.push(format!(
                "model_providers.ar.env_key={}",
                toml_string(MODEL_KEY_ENV)
            ));
            env.push((MODEL_KEY_ENV.to_string(), key.to_string()));
        }
        for item in overrides {
            extra_args.extend(["-c".to_string(), item]);
        }
    }
    Launch {
        provider: Arc::new(CodexProvider {
            program,
            extra_args,
            sandbox,
        }),
        env,
        model: route.map(|route| route.model.clone()).unwrap_or_default(),
    }
}

/// Claude Code: partial messages (text deltas), no telemetry or updates, the route as
/// `ANTHROPIC_BASE_URL` (without a trailing `/v1`) and `ANTHROPIC_API_KEY`, the bridge in an
/// `--mcp-config` file with its tools allowed.
fn claude_launch(
    program: String,
    route: Option<&ModelRoute>,
    permissions: Permissions,
    bridge: Option<&BridgeServer>,
) -> Result<Launch, AgentCliError> {
    // Text deltas arrive as `stream_event` lines before each complete message.
    let mut extra_args = vec!["--include-partial-messages".to_string()];
    let mut env = Vec::new();
    match permissions {
        Permissions::Bypass => {
            extra_args.push("--dangerously-skip-permissions".into());
            env.push(("IS_SANDBOX".to_string(), "1".to_string()));
        }
        // Plan mode: Claude Code reads and answers, and edits or runs nothing.
        Permissions::ReadOnly => {
            extra_args.extend(["--permission-mode".to_string(), "plan".to_string()]);
        }
        Permissions::Default => {}
    }
    if let Some(bridge) = bridge {
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
    if let Some(route) = route {
        let base = route.base_url.trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base);
        env.push(("ANTHROPIC_BASE_URL".to_string(), base.to_string()));
        if let Some(key) = route_key(route) {
            env.push(("ANTHROPIC_API_KEY".to_string(), key.to_string()));
        }
    }
    Ok(Launch {
        provider: Arc::new(ClaudeProvider {
            program,
            extra_args,
        }),
        env,
        model: route.map(|route| route.model.clone()).unwrap_or_default(),
    })
}

/// opencode: its project directory in `PWD`, the route as provider `ar` in the private home's
/// global `opencode.json` (`$XDG_CONFIG_HOME/opencode`; the key read from [`MODEL_KEY_ENV`]),
/// model `ar/<model>`; the bridge in a config file of its own (`OPENCODE_CONFIG`, merged with
/// the others). Nothing is written into the workdir, which may be a repository the run commits.
fn opencode_launch(
    program: String,
    route: Option<&ModelRoute>,
    (workdir, home): (&Path, Option<&Path>),
    permissions: Permissions,
    bridge: Option<&BridgeServer>,
) -> Result<Launch, AgentCliError> {
    let mut env = vec![("PWD".to_string(), workdir.display().to_string())];
    if let Some(bridge) = bridge {
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
    if let Some(route) = route {
        let mut options = json!({"baseURL": route.base_url.trim_end_matches('/')});
        if let Some(key) = route_key(route) {
            options["apiKey"] = json!(format!("{{env:{MODEL_KEY_ENV}}}"));
            env.push((MODEL_KEY_ENV.to_string(), key.to_string()));
        } else {
            options["apiKey"] = json!("none");
        }
        let config = json!({
            "$schema": "https://opencode.ai/config.json",
            "provider": {
                "ar": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Agent Runtime",
                    "options": options,
                    "models": { route.model.clone(): { "name": route.model } }
                }
            }
        });
        // The global configuration of the turn's private home, not the workdir: the workdir
        // may be a repository the run commits.
        let dir = home
            .ok_or_else(|| AgentCliError::Invalid("a model route needs a private home".into()))?
            .join(".config/opencode");
        create_dir(&dir)?;
        write_private(&dir.join("opencode.json"), config.to_string().as_bytes())?;
        if !route.model.is_empty() {
            model = format!("ar/{}", route.model);
        }
    }
    Ok(Launch {
        provider: Arc::new(OpenCodeProvider {
            program,
            // opencode has no sandbox flag; its built-in `plan` agent denies edits and asks
            // before commands (refused: nobody answers).
            extra_args: if permissions == Permissions::ReadOnly {
                vec!["--agent".to_string(), "plan".to_string()]
            } else {
                Vec::new()
            },
        }),
        env,
        model,
    })
}

fn private_home_env(home: &Path) -> Result<Vec<(String, String)>, AgentCliError> {
    let dirs = [
        ("HOME", home.to_path_buf()),
        ("CODEX_HOME", home.join(".codex")),
        ("XDG_CONFIG_HOME", home.join(".config")),
        ("XDG_DATA_HOME", home.join(".local/share")),
        ("XDG_CACHE_HOME", home.join(".cache")),
        ("XDG_STATE_HOME", home.join(".local/state")),
    ];
    let mut env = Vec::new();
    for (name, dir) in dirs {
        create_dir(&dir)?;
        env.push((name.to_string(), dir.display().to_string()));
    }
    Ok(env)
}

fn check_run_id(run_id: &str) -> Result<(), AgentCliError> {
    let fine = !run_id.is_empty()
        && run_id != "."
        && run_id != ".."
        && run_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if fine {
        Ok(())
    } else {
        Err(AgentCliError::Invalid(format!(
            "run id {run_id:?} cannot name a directory"
        )))
    }
}

#[async_trait::async_trait]
impl AgentCli for DispatchAgentCli {
    fn serves(&self, kind: RuntimeKind) -> bool {
        self.config.programs.contains_key(&kind)
    }

    fn bridges_tools(&self, kind: RuntimeKind) -> bool {
        self.config.bridge.is_some() && self.serves(kind)
    }

    async fn start_turn(&self, request: CliTurnRequest) -> Result<CliTurn, AgentCliError> {
        let program = self
            .config
            .programs
            .get(&request.kind)
            .cloned()
            .ok_or(AgentCliError::Unavailable(request.kind))?;
        check_run_id(&request.run_id)?;
        let workdir = self.workdir(&request)?;
        let home = request
            .route
            .is_some()
            .then(|| self.config.root.join(".homes").join(&request.run_id));
        let mut env = match &home {
            Some(home) => private_home_env(home)?,
            None => Vec::new(),
        };
        let bridge = self.bridge_server(&request)?;
        let mut scratch: Vec<PathBuf> = home.iter().cloned().collect();
        scratch.extend(bridge.as_ref().map(|bridge| bridge.dir.clone()));
        let dirs = (workdir.as_path(), home.as_deref());
        let launch = match self.launch(&request, program, dirs, bridge.as_ref()) {
            Ok(launch) => launch,
            Err(error) => {
                remove_scratch(&scratch).await;
                return Err(error);
            }
        };
        env.extend(launch.env);
        env.extend(request.env.iter().cloned());
        let runtime = LocalRuntime::empty(LocalConfig::new(&self.config.root))
            .with_provider(launch.provider.clone());
        let spec = RunSpec {
            agent: launch.provider.agent().to_string(),
            model: launch.model,
            prompt: request.prompt.clone(),
            workdir: workdir.display().to_string(),
            env: env
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect(),
            ..Default::default()
        };
        let run = match runtime.start(spec).await {
            Ok(run) => Arc::new(run),
            Err(error) => {
                remove_scratch(&scratch).await;
                return Err(AgentCliError::Start(error.to_string()));
            }
        };
        let Some(outputs) = run.events() else {
            return Err(AgentCliError::Start("the run's events were taken".into()));
        };
        let reader = TurnReader {
            run: run.clone(),
            outputs,
            queue: VecDeque::new(),
            done: false,
            workdir: workdir.display().to_string(),
            scratch,
            bridged: bridge.is_some().then_some(request.kind),
            error: String::new(),
        };
        Ok(CliTurn {
            events: reader.into_stream(),
            control: Arc::new(RunHandle(run)),
        })
    }
}

/// Cancel and signal of a dispatched run. Dropping the last handle of a running run kills it.
struct RunHandle(Arc<Run<AgentOutput>>);

#[async_trait::async_trait]
impl CliControl for RunHandle {
    fn cancel(&self) {
        self.0.cancel();
    }

    async fn signal(&self, input: &str) -> Result<(), AgentCliError> {
        self.0.signal(input).await.map_err(|error| match error {
            RunError::Finished => AgentCliError::Finished,
            RunError::SignalUnsupported(_) => AgentCliError::SignalUnsupported,
            other => AgentCliError::Signal(other.to_string()),
        })
    }
}

/// Reads the run's typed output and queues the domain events it means.
struct TurnReader {
    run: Arc<Run<AgentOutput>>,
    outputs: RunEvents<AgentOutput>,
    queue: VecDeque<CliEvent>,
    done: bool,
    workdir: String,
    /// The turn's private home and bridge directory, removed when the turn ends (each turn
    /// starts afresh).
    scratch: Vec<PathBuf>,
    /// The CLI kind whose bridge calls to leave out, when the turn has a bridge.
    bridged: Option<RuntimeKind>,
    /// The failure the CLI reported in its stream (`turn.failed`, an error result).
    error: String,
}

impl TurnReader {
    fn into_stream(self) -> futures::stream::BoxStream<'static, CliEvent> {
        futures::stream::unfold(self, |mut reader| async move {
            loop {
                if let Some(next) = reader.queue.pop_front() {
                    return Some((next, reader));
                }
                if reader.done {
                    return None;
                }
                reader.advance().await;
            }
        })
        .boxed()
    }

    async fn advance(&mut self) {
        match self.outputs.next().await {
            Some(AgentOutput::Started) => self.queue.push_back(CliEvent::Started {
                workdir: self.workdir.clone(),
            }),
            Some(AgentOutput::Line { text, events }) => {
                let before = self.queue.len();
                for event in events {
                    self.take(event);
                }
                if self.queue.len() == before {
                    self.queue.push_back(CliEvent::Diagnostic { text });
                }
            }
            Some(AgentOutput::Stderr(text)) => self.queue.push_back(CliEvent::Diagnostic { text }),
            Some(AgentOutput::Exited { .. }) | None => self.exit().await,
        }
    }

    /// Queues what one event of the CLI's stream means for the run.
    fn take(&mut self, event: AgentEvent) {
        if let (
            Some(kind),
            AgentEvent::ToolStarted { name, .. } | AgentEvent::ToolFinished { name, .. },
        ) = (self.bridged, &event)
        {
            if is_bridged(kind, name) {
                return;
            }
        }
        let cli_event = match event {
            AgentEvent::TextDelta(text) => CliEvent::AssistantDelta { text },
            AgentEvent::Message(text) => CliEvent::AssistantCompleted { text },
            AgentEvent::ToolStarted { id, name, input } => {
                CliEvent::ToolStarted { id, name, input }
            }
            AgentEvent::ToolFinished {
                id,
                name,
                input,
                output,
                is_error,
            } => CliEvent::ToolFinished {
                id,
                name,
                input,
                output,
                is_error,
            },
            AgentEvent::Usage(usage) => CliEvent::Usage(turn_usage(usage)),
            AgentEvent::Failed(error) => {
                self.error = error;
                return;
            }
            // Subagents and notices are the CLI's own business; the transcript has no place for them.
            AgentEvent::Subagent { .. } | AgentEvent::Notice(_) => return,
        };
        self.queue.push_back(cli_event);
    }

    async fn exit(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let status = self.run.wait_status().await;
        remove_scratch(&std::mem::take(&mut self.scratch)).await;
        let outcome = match status.state {
            State::Succeeded if self.error.is_empty() => CliOutcome::Succeeded,
            State::Canceled => CliOutcome::Cancelled,
            _ => CliOutcome::Failed,
        };
        let error = match outcome {
            CliOutcome::Succeeded => String::new(),
            _ if !self.error.is_empty() => self.error.clone(),
            _ => status.err.clone(),
        };
        self.queue.push_back(CliEvent::Exited {
            outcome,
            exit_code: status.exit_code,
            error,
        });
    }
}

/// Removes a turn's private directories (its home, its bridge's config files).
async fn remove_scratch(dirs: &[PathBuf]) {
    for dir in dirs {
        if let Err(error) = tokio::fs::remove_dir_all(dir).await {
            tracing::debug!(%error, dir = %dir.display(), "could not remove a CLI turn's directory");
        }
    }
}

fn turn_usage(usage: ProviderUsage) -> Usage {
    Usage {
        input_tokens: usage.input_tokens,
        cached_input_tokens: usage.cached_input_tokens,
        output_tokens: usage.output_tokens,
        reasoning_output_tokens: usage.reasoning_tokens,
        total_tokens: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ar_core::secret::Secret;
    use ar_dispatch::RunSpec;

    const TOKEN: &str = "art_run_turn-token";

    fn bridge(dir: &Path) -> BridgeServer {
        let bridge = McpBridge {
            program: PathBuf::from("/opt/agent-runtime"),
            base_url: "http://127.0.0.1:8090".into(),
            timeout: Duration::from_secs(300),
        };
        let access = ToolGatewayAccess {
            app_id: "app".into(),
            token: Secret::new(TOKEN),
        };
        BridgeServer::new(&bridge, &access, "run_1", dir.to_path_buf())
    }

    fn args_of(launch: &Launch) -> String {
        let spec = RunSpec {
            prompt: "hi".into(),
            ..Default::default()
        };
        launch.provider.command(&spec).unwrap().args.join(" ")
    }

    fn holds_token(launch: &Launch) -> bool {
        launch.env.iter().any(|(_, value)| value.contains(TOKEN))
    }

    fn read_json(path: &str) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[cfg(unix)]
    fn mode_of(path: &str) -> u32 {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// A read-only workspace puts each CLI in its own read-only mode and never bypasses its
    /// permission checks, even where the operator bypasses them for other runs.
    #[test]
    fn a_read_only_workspace_selects_each_clis_read_only_mode() {
        let workdir = tempfile::tempdir().unwrap();
        let mut request = CliTurnRequest {
            run_id: "run_1".into(),
            kind: RuntimeKind::Codex,
            prompt: String::new(),
            workdir: None,
            read_only: true,
            route: None,
            env: Vec::new(),
            tool_gateway: None,
        };
        let read_only = Permissions::of(&request, true);
        assert_eq!(read_only, Permissions::ReadOnly);
        let codex = args_of(&codex_launch("codex".into(), None, read_only, None));
        assert!(codex.contains("--sandbox read-only"), "{codex}");
        assert!(!codex.contains("dangerously"), "{codex}");
        let claude = claude_launch("claude".into(), None, read_only, None).unwrap();
        let args = args_of(&claude);
        assert!(args.contains("--permission-mode plan"), "{args}");
        assert!(!args.contains("dangerously") && claude.env.iter().all(|(k, _)| k != "IS_SANDBOX"));
        let opencode = opencode_launch(
            "opencode".into(),
            None,
            (workdir.path(), None),
            read_only,
            None,
        )
        .unwrap();
        assert!(args_of(&opencode).contains("--agent plan"));

        request.read_only = false;
        let bypass = Permissions::of(&request, true);
        let codex = args_of(&codex_launch("codex".into(), None, bypass, None));
        assert!(
            codex.contains("--sandbox workspace-write --skip-git-repo-check"),
            "{codex}"
        );
        assert!(
            codex.contains("--dangerously-bypass-approvals-and-sandbox"),
            "{codex}"
        );
        let opencode = opencode_launch(
            "opencode".into(),
            None,
            (workdir.path(), None),
            bypass,
            None,
        )
        .unwrap();
        assert!(!args_of(&opencode).contains("--agent"));
    }

    #[test]
    fn codex_declares_the_bridge_in_overrides() {
        let dir = tempfile::tempdir().unwrap();
        let launch = codex_launch(
            "codex".into(),
            None,
            Permissions::Default,
            Some(&bridge(dir.path())),
        );
        let args = args_of(&launch);
        for expected in [
            r#"mcp_servers.agent_runtime.command="/opt/agent-runtime""#,
            r#"mcp_servers.agent_runtime.args=["mcp-bridge"]"#,
            r#"AGENT_RUNTIME_SERVICE_TOKEN="art_run_turn-token""#,
            r#"AGENT_RUNTIME_API_BASE_URL="http://127.0.0.1:8090""#,
            r#"AGENT_RUNTIME_APP_ID="app""#,
            r#"AGENT_RUNTIME_RUN_ID="run_1""#,
            r#"AGENT_RUNTIME_MCP_BRIDGE_HTTP_TIMEOUT_SECONDS="300""#,
            "mcp_servers.agent_runtime.tool_timeout_sec=300",
        ] {
            assert!(args.contains(expected), "{expected} in {args}");
        }
        assert!(
            !holds_token(&launch),
            "the token is the bridge's, not codex's"
        );
        let without = codex_launch("codex".into(), None, Permissions::Default, None);
        assert!(!args_of(&without).contains("mcp_servers"));
    }

    #[test]
    fn claude_code_reads_the_bridge_from_a_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let launch = claude_launch(
            "claude".into(),
            None,
            Permissions::Default,
            Some(&bridge(dir.path())),
        )
        .unwrap();
        let args = args_of(&launch);
        assert!(!args.contains(TOKEN) && !holds_token(&launch), "{args}");
        assert!(args.contains("--allowedTools mcp__agent_runtime"), "{args}");
        let path = args
            .split_once("--mcp-config ")
            .and_then(|(_, rest)| rest.split(' ').next())
            .unwrap();
        let server = &read_json(path)["mcpServers"]["agent_runtime"];
        assert_eq!(server["command"], "/opt/agent-runtime");
        assert_eq!(server["args"], json!(["mcp-bridge"]));
        assert_eq!(server["env"]["AGENT_RUNTIME_SERVICE_TOKEN"], TOKEN);
        assert_eq!(server["env"]["AGENT_RUNTIME_RUN_ID"], "run_1");
        #[cfg(unix)]
        assert_eq!(mode_of(path), 0o600);
        let without = claude_launch("claude".into(), None, Permissions::Default, None).unwrap();
        assert!(!args_of(&without).contains("--mcp-config"));
    }

    #[test]
    fn opencode_reads_the_bridge_and_the_route_from_configs_outside_the_workdir() {
        let dir = tempfile::tempdir().unwrap();
        let workdir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let route = ModelRoute {
            provider: "openai_compatible".into(),
            model: "mock-model".into(),
            base_url: "http://127.0.0.1:9/v1".into(),
            api_key: Some(Secret::new("sk-route")),
            controls: None,
            account_id: None,
        };
        let launch = opencode_launch(
            "opencode".into(),
            Some(&route),
            (workdir.path(), Some(home.path())),
            Permissions::Default,
            Some(&bridge(dir.path())),
        )
        .unwrap();
        assert_eq!(launch.model, "ar/mock-model");
        // The route is the private home's global configuration, its key only named there.
        let global = home.path().join(".config/opencode/opencode.json");
        let global = read_json(global.to_str().unwrap());
        assert_eq!(
            global["provider"]["ar"]["options"]["baseURL"],
            "http://127.0.0.1:9/v1"
        );
        assert!(!global.to_string().contains("sk-route"));
        let (_, path) = launch
            .env
            .iter()
            .find(|(name, _)| name == "OPENCODE_CONFIG")
            .cloned()
            .unwrap();
        assert!(path.starts_with(&dir.path().display().to_string()));
        let server = &read_json(&path)["mcp"]["agent_runtime"];
        assert_eq!(server["type"], "local");
        assert_eq!(
            server["command"],
            json!(["/opt/agent-runtime", "mcp-bridge"])
        );
        assert_eq!(server["environment"]["AGENT_RUNTIME_SERVICE_TOKEN"], TOKEN);
        #[cfg(unix)]
        assert_eq!(mode_of(&path), 0o600);
        assert!(!holds_token(&launch));
        assert_eq!(std::fs::read_dir(workdir.path()).unwrap().count(), 0);
        let without = opencode_launch(
            "opencode".into(),
            None,
            (workdir.path(), None),
            Permissions::Default,
            None,
        )
        .unwrap();
        assert!(without
            .env
            .iter()
            .all(|(name, _)| name != "OPENCODE_CONFIG"));
    }

    #[test]
    fn each_clis_name_of_a_bridged_tool_is_known() {
        for (kind, name, bridged) in [
            (RuntimeKind::Codex, "agent_runtime.get_context", true),
            (RuntimeKind::Codex, "shell", false),
            (RuntimeKind::Codex, "other.get_context", false),
            (
                RuntimeKind::ClaudeCode,
                "mcp__agent_runtime__mcp__docs__lookup",
                true,
            ),
            (RuntimeKind::ClaudeCode, "mcp__docs__lookup", false),
            (RuntimeKind::ClaudeCode, "Bash", false),
            (RuntimeKind::OpenCode, "agent_runtime_get_context", true),
            (RuntimeKind::OpenCode, "bash", false),
            (RuntimeKind::NativeSdk, "agent_runtime.get_context", false),
        ] {
            assert_eq!(is_bridged(kind, name), bridged, "{kind} {name}");
        }
    }
}
