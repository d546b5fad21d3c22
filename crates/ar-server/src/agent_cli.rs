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
//! - opencode: an `opencode.json` in the workdir declaring provider `ar`
//!   (`@ai-sdk/openai-compatible`, `baseURL`, `apiKey` read from `AR_MODEL_API_KEY`), model `ar/<model>`.
//!
//! When the runtime hands a route, the CLI also gets a private home (`HOME`, `CODEX_HOME`,
//! `XDG_*` under `<root>/.homes/<run>`, removed when the turn ends), so the operator's own CLI
//! configuration and logins neither leak into the run nor override the route. Without a route
//! the CLI runs with the service's environment and its own configuration. The workdir
//! (`<root>/<run>` unless the run's workspace lease names one) is the run's workspace and is kept.
//!
//! Runs are non-interactive: nobody can answer a CLI's permission prompt. codex runs with
//! `--dangerously-bypass-approvals-and-sandbox` (its sandbox needs kernel features containers
//! often lack) and Claude Code with `--dangerously-skip-permissions` (`IS_SANDBOX=1` lets it do
//! so as root) unless [`AgentCliConfig::bypass_permissions`] is off. Run the service itself in
//! an isolated environment when agents may run arbitrary commands.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ar_core::agent_cli::{
    AgentCli, AgentCliError, CliControl, CliEvent, CliOutcome, CliTurn, CliTurnRequest,
};
use ar_core::model::ModelRoute;
use ar_core::{RuntimeKind, Usage};
use ar_dispatch::providers::toml_string;
use ar_dispatch::{
    AgentEvent, AgentOutput, ClaudeProvider, CodexProvider, LocalConfig, LocalRuntime,
    OpenCodeProvider, Provider, ProviderUsage, Run, RunError, RunEvents, RunSpec, State,
};
use futures::StreamExt;
use serde_json::json;

/// Environment variable carrying the model key to codex and opencode.
pub const MODEL_KEY_ENV: &str = "AR_MODEL_API_KEY";

/// How the adapter runs CLIs.
#[derive(Debug, Clone)]
pub struct AgentCliConfig {
    /// Per-run workdirs (`<root>/<run id>`) and private homes (`<root>/.homes/<run id>`).
    pub root: PathBuf,
    /// Programs by runtime kind (only installed CLIs are listed).
    pub programs: HashMap<RuntimeKind, String>,
    /// Skip the CLIs' approval prompts and codex's sandbox (see the module docs).
    pub bypass_permissions: bool,
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
        }
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

    /// How the request's CLI starts, with its model route.
    fn launch(
        &self,
        request: &CliTurnRequest,
        program: String,
        workdir: &Path,
    ) -> Result<Launch, AgentCliError> {
        let route = request.route.as_ref();
        let bypass = self.config.bypass_permissions;
        match request.kind {
            RuntimeKind::Codex => Ok(codex_launch(program, route, bypass)),
            RuntimeKind::ClaudeCode => Ok(claude_launch(program, route, bypass)),
            RuntimeKind::OpenCode => opencode_launch(program, route, workdir),
            other => Err(AgentCliError::Unavailable(other)),
        }
    }
}

fn create_dir(dir: &Path) -> Result<(), AgentCliError> {
    std::fs::create_dir_all(dir)
        .map_err(|error| AgentCliError::Start(format!("creating {}: {error}", dir.display())))
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
/// [`MODEL_KEY_ENV`].
fn codex_launch(program: String, route: Option<&ModelRoute>, bypass: bool) -> Launch {
    let mut extra_args = Vec::new();
    let mut env = Vec::new();
    if bypass {
        extra_args.push("--dangerously-bypass-approvals-and-sandbox".to_string());
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
        }),
        env,
        model: route.map(|route| route.model.clone()).unwrap_or_default(),
    }
}

/// Claude Code: partial messages (text deltas), no telemetry or updates, the route as
/// `ANTHROPIC_BASE_URL` (without a trailing `/v1`) and `ANTHROPIC_API_KEY`.
fn claude_launch(program: String, route: Option<&ModelRoute>, bypass: bool) -> Launch {
    // Text deltas arrive as `stream_event` lines before each complete message.
    let mut extra_args = vec!["--include-partial-messages".to_string()];
    let mut env = Vec::new();
    if bypass {
        extra_args.push("--dangerously-skip-permissions".into());
        env.push(("IS_SANDBOX".to_string(), "1".to_string()));
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
    Launch {
        provider: Arc::new(ClaudeProvider {
            program,
            extra_args,
        }),
        env,
        model: route.map(|route| route.model.clone()).unwrap_or_default(),
    }
}

/// opencode: its project directory in `PWD`, the route as provider `ar` in the workdir's
/// `opencode.json` (the key read from [`MODEL_KEY_ENV`]), model `ar/<model>`.
fn opencode_launch(
    program: String,
    route: Option<&ModelRoute>,
    workdir: &Path,
) -> Result<Launch, AgentCliError> {
    let mut env = vec![("PWD".to_string(), workdir.display().to_string())];
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
        let path = workdir.join("opencode.json");
        std::fs::write(&path, config.to_string()).map_err(|error| {
            AgentCliError::Start(format!("writing {}: {error}", path.display()))
        })?;
        if !route.model.is_empty() {
            model = format!("ar/{}", route.model);
        }
    }
    Ok(Launch {
        provider: Arc::new(OpenCodeProvider {
            program,
            extra_args: Vec::new(),
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
        let launch = self.launch(&request, program, &workdir)?;
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
        let run = runtime
            .start(spec)
            .await
            .map_err(|error| AgentCliError::Start(error.to_string()))?;
        let run = Arc::new(run);
        let Some(outputs) = run.events() else {
            return Err(AgentCliError::Start("the run's events were taken".into()));
        };
        let reader = TurnReader {
            run: run.clone(),
            outputs,
            queue: VecDeque::new(),
            done: false,
            workdir: workdir.display().to_string(),
            home,
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
    /// The turn's private home, removed when the turn ends (each turn starts afresh).
    home: Option<PathBuf>,
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
        if let Some(home) = self.home.take() {
            if let Err(error) = tokio::fs::remove_dir_all(&home).await {
                tracing::debug!(%error, home = %home.display(), "could not remove a CLI home");
            }
        }
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

fn turn_usage(usage: ProviderUsage) -> Usage {
    Usage {
        input_tokens: usage.input_tokens,
        cached_input_tokens: usage.cached_input_tokens,
        output_tokens: usage.output_tokens,
        reasoning_output_tokens: usage.reasoning_tokens,
        total_tokens: 0,
    }
}
