//! The agent-CLI adapter: implements the engine's [`AgentCli`] port with ar-dispatch's local
//! process runtime, handing each turn the run's model route and turning the CLI's own JSON
//! stream (codex `exec --json`, Claude Code `stream-json`, opencode `--format json`) into
//! domain [`CliEvent`]s with tool inputs, outputs and usage.
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
use ar_core::{RuntimeKind, Usage};
use ar_dispatch::providers::{Classified, ProviderCommand};
use ar_dispatch::{
    ClaudeProvider, CodexProvider, DispatchError, EventType, LocalConfig, LocalRuntime,
    OpenCodeProvider, Provider, Run, RunError, RunEvent, RunEvents, RunSpec, Runtime, State,
};
use futures::StreamExt;
use serde_json::{json, Value};

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
}

/// Wraps a dispatch provider so every stdout line reaches the adapter unclassified: the
/// adapter reads the CLIs' JSON itself (dispatch's classifiers keep only summaries).
struct RawLines<P>(P);

impl<P: Provider> Provider for RawLines<P> {
    fn agent(&self) -> &str {
        self.0.agent()
    }
    fn command(&self, spec: &RunSpec) -> Result<ProviderCommand, DispatchError> {
        self.0.command(spec)
    }
    fn classify(&self, line: &str) -> Vec<Classified> {
        vec![Classified {
            kind: EventType::Stdout,
            data: line.to_string(),
        }]
    }
}

/// A TOML basic string (JSON string escaping is valid TOML for these values).
fn toml_string(value: &str) -> String {
    Value::String(value.to_string()).to_string()
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
        std::fs::create_dir_all(&dir).map_err(|error| {
            AgentCliError::Start(format!("creating {}: {error}", dir.display()))
        })?;
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
        let workdir = match &request.workdir {
            Some(dir) if Path::new(dir).is_absolute() => PathBuf::from(dir),
            Some(dir) => {
                return Err(AgentCliError::Invalid(format!(
                    "workdir {dir:?} must be absolute"
                )))
            }
            None => self.config.root.join(&request.run_id),
        };
        std::fs::create_dir_all(&workdir).map_err(|error| {
            AgentCliError::Start(format!("creating {}: {error}", workdir.display()))
        })?;
        let mut env: Vec<(String, String)> = Vec::new();
        let home = request
            .route
            .is_some()
            .then(|| self.config.root.join(".homes").join(&request.run_id));
        if let Some(home) = &home {
            env.extend(private_home_env(home)?);
        }
        let mut extra: Vec<String> = Vec::new();
        let model = request
            .route
            .as_ref()
            .map(|route| route.model.clone())
            .unwrap_or_default();
        let provider: Arc<dyn Provider> = match request.kind {
            RuntimeKind::Codex => {
                if self.config.bypass_permissions {
                    extra.push("--dangerously-bypass-approvals-and-sandbox".into());
                }
                if let Some(route) = &request.route {
                    let mut overrides = vec![
                        "model_provider=\"ar\"".to_string(),
                        "model_providers.ar.name=\"ar\"".to_string(),
                        format!(
                            "model_providers.ar.base_url={}",
                            toml_string(route.base_url.trim_end_matches('/'))
                        ),
                        "model_providers.ar.wire_api=\"responses\"".to_string(),
                    ];
                    if let Some(key) = route.api_key.as_ref().filter(|key| !key.is_empty()) {
                        overrides.push(format!(
                            "model_providers.ar.env_key={}",
                            toml_string(MODEL_KEY_ENV)
                        ));
                        env.push((MODEL_KEY_ENV.to_string(), key.expose().to_string()));
                    }
                    for item in overrides {
                        extra.push("-c".into());
                        extra.push(item);
                    }
                }
                Arc::new(RawLines(CodexProvider {
                    program,
                    extra_args: extra,
                }))
            }
            RuntimeKind::ClaudeCode => {
                // Text deltas arrive as `stream_event` lines before each complete message.
                extra.push("--include-partial-messages".into());
                if self.config.bypass_permissions {
                    extra.push("--dangerously-skip-permissions".into());
                    env.push(("IS_SANDBOX".into(), "1".into()));
                }
                for name in [
                    "DISABLE_TELEMETRY",
                    "DISABLE_AUTOUPDATER",
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
                ] {
                    env.push((name.to_string(), "1".to_string()));
                }
                if let Some(route) = &request.route {
                    let base = route.base_url.trim_end_matches('/');
                    let base = base.strip_suffix("/v1").unwrap_or(base);
                    env.push(("ANTHROPIC_BASE_URL".into(), base.to_string()));
                    if let Some(key) = route.api_key.as_ref().filter(|key| !key.is_empty()) {
                        env.push(("ANTHROPIC_API_KEY".into(), key.expose().to_string()));
                    }
                }
                Arc::new(RawLines(ClaudeProvider {
                    program,
                    extra_args: extra,
                    stream_input: true,
                }))
            }
            RuntimeKind::OpenCode => {
                // opencode takes its project directory from PWD.
                env.push(("PWD".into(), workdir.display().to_string()));
                if let Some(route) = &request.route {
                    let mut options = json!({"baseURL": route.base_url.trim_end_matches('/')});
                    if let Some(key) = route.api_key.as_ref().filter(|key| !key.is_empty()) {
                        options["apiKey"] = json!(format!("{{env:{MODEL_KEY_ENV}}}"));
                        env.push((MODEL_KEY_ENV.to_string(), key.expose().to_string()));
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
                }
                Arc::new(RawLines(OpenCodeProvider {
                    program,
                    extra_args: extra,
                }))
            }
            other => return Err(AgentCliError::Unavailable(other)),
        };
        let model = match (request.kind, model.is_empty()) {
            (RuntimeKind::OpenCode, false) => format!("ar/{model}"),
            _ => model,
        };
        env.extend(request.env.iter().cloned());
        let runtime = LocalRuntime::empty(LocalConfig::new(&self.config.root))
            .with_provider(provider.clone());
        let spec = RunSpec {
            agent: provider.agent().to_string(),
            model,
            prompt: request.prompt.clone(),
            workdir: workdir.display().to_string(),
            env: env
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect(),
            ..Default::default()
        };
        let run = runtime
            .dispatch(spec)
            .await
            .map_err(|error| AgentCliError::Start(error.to_string()))?;
        let run = Arc::new(run);
        let Some(events) = run.events() else {
            return Err(AgentCliError::Start("the run's events were taken".into()));
        };
        let reader = TurnReader {
            run: run.clone(),
            events,
            parser: LineParser::new(request.kind),
            queue: VecDeque::new(),
            done: false,
            workdir: workdir.display().to_string(),
            home,
        };
        let stream = futures::stream::unfold(reader, |mut reader| async move {
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
        .boxed();
        Ok(CliTurn {
            events: stream,
            control: Arc::new(RunHandle(run)),
        })
    }
}

/// Cancel and signal of a dispatched run. Dropping the last handle of a running run kills it.
struct RunHandle(Arc<Run>);

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

/// Reads dispatch events and queues the domain events they mean.
struct TurnReader {
    run: Arc<Run>,
    events: RunEvents,
    parser: LineParser,
    queue: VecDeque<CliEvent>,
    done: bool,
    workdir: String,
    /// The turn's private home, removed when the turn ends (each turn starts afresh).
    home: Option<PathBuf>,
}

impl TurnReader {
    async fn advance(&mut self) {
        match self.events.next().await {
            Some(event) => self.take(event).await,
            None => self.exit().await,
        }
    }

    async fn take(&mut self, event: RunEvent) {
        match event.kind {
            EventType::Started => self.queue.push_back(CliEvent::Started {
                workdir: self.workdir.clone(),
            }),
            EventType::Stdout => {
                let parsed = self.parser.parse(&event.data);
                self.queue.extend(parsed);
            }
            EventType::Exited => self.exit().await,
            _ => self
                .queue
                .push_back(CliEvent::Diagnostic { text: event.data }),
        }
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
            State::Succeeded if self.parser.error.is_empty() => CliOutcome::Succeeded,
            State::Canceled => CliOutcome::Cancelled,
            _ => CliOutcome::Failed,
        };
        let error = match outcome {
            CliOutcome::Succeeded => String::new(),
            _ if !self.parser.error.is_empty() => self.parser.error.clone(),
            _ => status.err.clone(),
        };
        self.queue.push_back(CliEvent::Exited {
            outcome,
            exit_code: status.exit_code,
            error,
        });
    }
}

fn text_at<'a>(value: &'a Value, path: &[&str]) -> &'a str {
    let mut current = value;
    for key in path {
        match current.get(*key) {
            Some(next) => current = next,
            None => return "",
        }
    }
    current.as_str().unwrap_or_default()
}

fn int_at(value: &Value, path: &[&str]) -> i64 {
    let mut current = value;
    for key in path {
        match current.get(*key) {
            Some(next) => current = next,
            None => return 0,
        }
    }
    current.as_i64().unwrap_or_default()
}

/// Text of a tool result: a string, or the text blocks of a content array.
fn content_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Turns one CLI's stdout lines into domain events.
pub struct LineParser {
    kind: RuntimeKind,
    /// Tool calls seen starting: id → (name, input) (Claude Code reports results separately).
    tools: HashMap<String, (String, Value)>,
    /// The failure the CLI reported in its stream (`turn.failed`, an error result).
    pub error: String,
}

impl LineParser {
    pub fn new(kind: RuntimeKind) -> Self {
        LineParser {
            kind,
            tools: HashMap::new(),
            error: String::new(),
        }
    }

    /// The events of one line (an unrecognised line is a diagnostic).
    pub fn parse(&mut self, line: &str) -> Vec<CliEvent> {
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            return vec![CliEvent::Diagnostic {
                text: line.to_string(),
            }];
        };
        let events = match self.kind {
            RuntimeKind::Codex => self.codex(&value),
            RuntimeKind::ClaudeCode => self.claude(&value),
            RuntimeKind::OpenCode => self.opencode(&value),
            _ => Vec::new(),
        };
        if events.is_empty() {
            vec![CliEvent::Diagnostic {
                text: line.to_string(),
            }]
        } else {
            events
        }
    }

    fn codex_tool(item: &Value) -> Option<(String, Value)> {
        match text_at(item, &["type"]) {
            "command_execution" => Some((
                "shell".into(),
                json!({"command": text_at(item, &["command"])}),
            )),
            "file_change" => Some((
                "apply_patch".into(),
                json!({"changes": item.get("changes").cloned().unwrap_or(Value::Null)}),
            )),
            "mcp_tool_call" => Some((
                format!(
                    "{}.{}",
                    text_at(item, &["server"]),
                    text_at(item, &["tool"])
                ),
                item.get("arguments").cloned().unwrap_or(Value::Null),
            )),
            "web_search" => Some((
                "web_search".into(),
                json!({"query": text_at(item, &["query"])}),
            )),
            _ => None,
        }
    }

    fn codex(&mut self, value: &Value) -> Vec<CliEvent> {
        let item = value.get("item").cloned().unwrap_or(Value::Null);
        let id = text_at(&item, &["id"]).to_string();
        match text_at(value, &["type"]) {
            "item.started" => match Self::codex_tool(&item) {
                Some((name, input)) => vec![CliEvent::ToolStarted { id, name, input }],
                None => Vec::new(),
            },
            "item.completed" => {
                if text_at(&item, &["type"]) == "agent_message" {
                    return vec![CliEvent::AssistantCompleted {
                        text: text_at(&item, &["text"]).to_string(),
                    }];
                }
                let Some((name, input)) = Self::codex_tool(&item) else {
                    return Vec::new();
                };
                let status = text_at(&item, &["status"]);
                let (output, is_error) = match text_at(&item, &["type"]) {
                    "command_execution" => {
                        let code = item.get("exit_code").and_then(Value::as_i64);
                        (
                            text_at(&item, &["aggregated_output"]).to_string(),
                            status == "failed" || code.is_some_and(|code| code != 0),
                        )
                    }
                    "file_change" => {
                        let paths: Vec<&str> = item
                            .get("changes")
                            .and_then(Value::as_array)
                            .map(|changes| changes.iter().map(|c| text_at(c, &["path"])).collect())
                            .unwrap_or_default();
                        (format!("changed {}", paths.join(", ")), status == "failed")
                    }
                    "mcp_tool_call" => {
                        let error = text_at(&item, &["error", "message"]);
                        if error.is_empty() {
                            (
                                item.get("result")
                                    .map(|r| content_text(r.get("content").unwrap_or(r)))
                                    .unwrap_or_default(),
                                status == "failed",
                            )
                        } else {
                            (error.to_string(), true)
                        }
                    }
                    _ => (String::new(), status == "failed"),
                };
                vec![CliEvent::ToolFinished {
                    id,
                    name,
                    input,
                    output,
                    is_error,
                }]
            }
            "turn.completed" => {
                let usage = value.get("usage").cloned().unwrap_or(Value::Null);
                vec![CliEvent::Usage(Usage {
                    input_tokens: int_at(&usage, &["input_tokens"]),
                    cached_input_tokens: int_at(&usage, &["cached_input_tokens"]),
                    output_tokens: int_at(&usage, &["output_tokens"]),
                    reasoning_output_tokens: int_at(&usage, &["reasoning_output_tokens"]),
                    total_tokens: 0,
                })]
            }
            "turn.failed" => {
                self.error = text_at(value, &["error", "message"]).to_string();
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    fn claude(&mut self, value: &Value) -> Vec<CliEvent> {
        let blocks = value
            .get("message")
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        match text_at(value, &["type"]) {
            "stream_event" => {
                let event = value.get("event").unwrap_or(&Value::Null);
                if text_at(event, &["type"]) == "content_block_delta"
                    && text_at(event, &["delta", "type"]) == "text_delta"
                {
                    let text = text_at(event, &["delta", "text"]);
                    if !text.is_empty() {
                        return vec![CliEvent::AssistantDelta {
                            text: text.to_string(),
                        }];
                    }
                }
                // Other stream events (message and block boundaries, tool input) are diagnostics.
                Vec::new()
            }
            "assistant" => {
                let mut out = Vec::new();
                for block in blocks {
                    match text_at(&block, &["type"]) {
                        "text" => {
                            let text = text_at(&block, &["text"]);
                            if !text.is_empty() {
                                out.push(CliEvent::AssistantCompleted {
                                    text: text.to_string(),
                                });
                            }
                        }
                        "tool_use" => {
                            let id = text_at(&block, &["id"]).to_string();
                            let name = text_at(&block, &["name"]).to_string();
                            let input = block.get("input").cloned().unwrap_or(json!({}));
                            self.tools.insert(id.clone(), (name.clone(), input.clone()));
                            out.push(CliEvent::ToolStarted { id, name, input });
                        }
                        _ => {}
                    }
                }
                out
            }
            "user" => {
                let mut out = Vec::new();
                for block in blocks {
                    if text_at(&block, &["type"]) != "tool_result" {
                        continue;
                    }
                    let id = text_at(&block, &["tool_use_id"]).to_string();
                    let (name, input) = self
                        .tools
                        .remove(&id)
                        .unwrap_or_else(|| ("tool".to_string(), json!({})));
                    out.push(CliEvent::ToolFinished {
                        id,
                        name,
                        input,
                        output: content_text(block.get("content").unwrap_or(&Value::Null)),
                        is_error: block.get("is_error").and_then(Value::as_bool) == Some(true),
                    });
                }
                out
            }
            "result" => {
                if value.get("is_error").and_then(Value::as_bool) == Some(true) {
                    self.error = match text_at(value, &["result"]) {
                        "" => text_at(value, &["subtype"]).to_string(),
                        text => text.to_string(),
                    };
                }
                let usage = value.get("usage").cloned().unwrap_or(Value::Null);
                let cached = int_at(&usage, &["cache_read_input_tokens"]);
                let written = int_at(&usage, &["cache_creation_input_tokens"]);
                vec![CliEvent::Usage(Usage {
                    input_tokens: int_at(&usage, &["input_tokens"]) + cached + written,
                    cached_input_tokens: cached,
                    output_tokens: int_at(&usage, &["output_tokens"]),
                    reasoning_output_tokens: 0,
                    total_tokens: 0,
                })]
            }
            _ => Vec::new(),
        }
    }

    fn opencode(&mut self, value: &Value) -> Vec<CliEvent> {
        let part = value.get("part").cloned().unwrap_or(Value::Null);
        match text_at(value, &["type"]) {
            "text" => {
                let text = text_at(&part, &["text"]);
                if text.is_empty() {
                    Vec::new()
                } else {
                    vec![CliEvent::AssistantCompleted {
                        text: text.to_string(),
                    }]
                }
            }
            "tool_use" => {
                let id = match text_at(&part, &["callID"]) {
                    "" => text_at(&part, &["id"]).to_string(),
                    id => id.to_string(),
                };
                let name = text_at(&part, &["tool"]).to_string();
                let state = part.get("state").cloned().unwrap_or(Value::Null);
                let input = state.get("input").cloned().unwrap_or(json!({}));
                match text_at(&state, &["status"]) {
                    "completed" => vec![CliEvent::ToolFinished {
                        id,
                        name,
                        input,
                        output: content_text(state.get("output").unwrap_or(&Value::Null)),
                        is_error: false,
                    }],
                    "error" => vec![CliEvent::ToolFinished {
                        id,
                        name,
                        input,
                        output: content_text(state.get("error").unwrap_or(&Value::Null)),
                        is_error: true,
                    }],
                    _ => vec![CliEvent::ToolStarted { id, name, input }],
                }
            }
            "step_finish" => {
                let tokens = part.get("tokens").cloned().unwrap_or(Value::Null);
                let cached = int_at(&tokens, &["cache", "read"]);
                vec![CliEvent::Usage(Usage {
                    input_tokens: int_at(&tokens, &["input"]) + cached,
                    cached_input_tokens: cached,
                    output_tokens: int_at(&tokens, &["output"]),
                    reasoning_output_tokens: int_at(&tokens, &["reasoning"]),
                    total_tokens: 0,
                })]
            }
            "error" => {
                self.error = match text_at(value, &["error", "data", "message"]) {
                    "" => match text_at(value, &["error", "message"]) {
                        "" => value
                            .get("error")
                            .map(|e| e.to_string())
                            .unwrap_or_default(),
                        text => text.to_string(),
                    },
                    text => text.to_string(),
                };
                Vec::new()
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_command_and_usage() {
        let mut parser = LineParser::new(RuntimeKind::Codex);
        let started = parser.parse(r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#);
        assert!(
            matches!(&started[0], CliEvent::ToolStarted { id, name, .. } if id == "item_1" && name == "shell")
        );
        let done = parser.parse(r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"a.txt\n","exit_code":0,"status":"completed"}}"#);
        assert!(
            matches!(&done[0], CliEvent::ToolFinished { output, is_error: false, .. } if output == "a.txt\n")
        );
        let usage = parser.parse(r#"{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":3}}"#);
        assert!(
            matches!(&usage[0], CliEvent::Usage(u) if u.input_tokens == 10 && u.cached_input_tokens == 4)
        );
        parser.parse(r#"{"type":"turn.failed","error":{"message":"boom"}}"#);
        assert_eq!(parser.error, "boom");
    }

    #[test]
    fn claude_tool_result_pairs_with_its_call() {
        let mut parser = LineParser::new(RuntimeKind::ClaudeCode);
        parser.parse(r#"{"type":"assistant","message":{"content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]}}"#);
        let result = parser.parse(r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"x"}],"is_error":false}]}}"#);
        assert!(
            matches!(&result[0], CliEvent::ToolFinished { name, output, input, .. } if name == "Bash" && output == "x" && input["command"] == "ls")
        );
    }

    #[test]
    fn claude_partial_messages_are_deltas() {
        let mut parser = LineParser::new(RuntimeKind::ClaudeCode);
        let delta = parser.parse(r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}}"#);
        assert_eq!(delta, vec![CliEvent::AssistantDelta { text: "Hel".into() }]);
    }

    #[test]
    fn opencode_text_tool_and_tokens() {
        let mut parser = LineParser::new(RuntimeKind::OpenCode);
        let text = parser.parse(r#"{"type":"text","part":{"type":"text","text":"hi"}}"#);
        assert_eq!(
            text,
            vec![CliEvent::AssistantCompleted { text: "hi".into() }]
        );
        let tool = parser.parse(r#"{"type":"tool_use","part":{"tool":"bash","callID":"c1","state":{"status":"completed","input":{"command":"ls"},"output":"a"}}}"#);
        assert!(
            matches!(&tool[0], CliEvent::ToolFinished { id, output, .. } if id == "c1" && output == "a")
        );
        let usage = parser.parse(r#"{"type":"step_finish","part":{"tokens":{"input":5,"output":2,"reasoning":0,"cache":{"read":1,"write":0}}}}"#);
        assert!(matches!(&usage[0], CliEvent::Usage(u) if u.input_tokens == 6));
        let other = parser.parse("plain text");
        assert!(matches!(&other[0], CliEvent::Diagnostic { .. }));
    }
}
