//! The codex-subscription text-only lane: pinned executable, exact argv, fresh 0700 workdir, 120 s deadline, strict JSONL state machine.
//!
//! Each target runs `codex exec` in a fresh, empty, mode-0700 directory that is removed
//! afterwards, with null stdin and only the environment the resolved executable holds.
//! The JSONL stream must be exactly: one `thread.started`, one `turn.started`, one
//! completed `agent_message` with non-blank text, one `turn.completed` with valid usage
//! (reasoning items tolerated, one pinned code-mode "fail closed" error item tolerated).
//! Any active item (`command_execution`, `file_read`, `file_change`, `mcp_tool_call`,
//! `web_search`, …) is a `chat_authority_violation`: the process group is killed at once.
//! On success the run emits exactly one `message` event carrying validated
//! [`ResponseMetadata`], then `exited`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ar_process::{EnvPolicy, ProcessSpec, StdinMode};
use async_trait::async_trait;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::consts::*;
use crate::event::{EventType, ProviderUsage, ResponseMetadata, RunEvent, State, Status};
use crate::providers::toml_string;
use crate::run::{run_id_for, DispatchError, Run, RunSink, Runtime, TokenControl};
use crate::spec::RunSpec;
use crate::stream::char_prefix;

/// Features switched off with `--disable` on every subscription run.
pub const DISABLED_FEATURES: &[&str] = &[
    "shell_tool",
    "unified_exec",
    "apps",
    "browser_use",
    "computer_use",
    "image_generation",
    "in_app_browser",
    "multi_agent",
    "memories",
    "plugins",
    "skill_search",
    "workspace_dependencies",
    "code_mode",
    "code_mode_host",
    "code_mode_host_grpc",
    "code_mode_host_output_truncation",
    "code_mode_interrupt",
    "code_mode_only",
    "code_mode_only_strict_3p_tools",
    "code_mode_prewarm",
    "code_mode_tool_search",
];

/// The one error item the lane tolerates (codex reports that code mode failed closed).
/// Matched as: message starts with this prefix and contains `fail closed`.
pub const CODE_MODE_FAIL_CLOSED_PREFIX: &str = "Code Mode";

/// The default pinned developer instruction.
pub const DEFAULT_DEVELOPER_INSTRUCTIONS: &str = "You are a text-only chat assistant. Answer in plain text. Do not run commands, read or write files, browse, or call tools.";

/// Lowercase hex SHA-256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A pinned codex executable: where it is, what it is, and the environment it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexExecutable {
    /// Absolute path.
    pub program: PathBuf,
    /// `codex --version` output (e.g. `codex-cli 0.171.0`).
    pub version: String,
    /// SHA-256 of the executable file.
    pub executable_revision: String,
    /// SHA-256 of the `codex exec --help` text (the CLI surface the argv is pinned against).
    pub schema_revision: String,
    /// The whole environment the child gets (for example `PATH`, `HOME`, a private `CODEX_HOME`).
    pub env: Vec<(String, String)>,
}

/// Why resolving the executable failed.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// Not found.
    #[error("codex executable {0:?} not found")]
    NotFound(String),
    /// Reading or probing it failed.
    #[error("codex executable probe failed: {0}")]
    Probe(String),
}

impl CodexExecutable {
    /// Finds `program` (in the given env's `PATH` when it has no `/`), hashes it and probes
    /// its version and exec help. `probe_dir` is an existing directory the probes run in.
    pub async fn resolve(
        program: &str,
        env: Vec<(String, String)>,
        probe_dir: &Path,
    ) -> Result<Self, ResolveError> {
        let path_var = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone());
        let found = ar_process::find_program(program, path_var.as_deref())
            .ok_or_else(|| ResolveError::NotFound(program.to_string()))?;
        let real = std::fs::canonicalize(&found).map_err(|e| ResolveError::Probe(e.to_string()))?;
        let bytes = std::fs::read(&real).map_err(|e| ResolveError::Probe(e.to_string()))?;
        let executable_revision = sha256_hex(&bytes);
        let program_str = found.to_string_lossy().to_string();
        let probe = |args: &[&str]| {
            let mut spec = ProcessSpec::new(program_str.clone(), probe_dir);
            spec.args = args.iter().map(|s| s.to_string()).collect();
            spec.create_workdir = false;
            spec.env = EnvPolicy {
                inherit: Vec::new(),
                set: env.clone(),
            };
            spec
        };
        let (version, exit) = ar_process::capture_output(&probe(&["--version"]), 4096)
            .await
            .map_err(|e| ResolveError::Probe(e.to_string()))?;
        if !exit.success() {
            return Err(ResolveError::Probe(format!("--version: {exit}")));
        }
        let (help, exit) = ar_process::capture_output(&probe(&["exec", "--help"]), 1 << 20)
            .await
            .map_err(|e| ResolveError::Probe(e.to_string()))?;
        if !exit.success() {
            return Err(ResolveError::Probe(format!("exec --help: {exit}")));
        }
        Ok(Self {
            program: found,
            version: version.trim().to_string(),
            executable_revision,
            schema_revision: sha256_hex(help.as_bytes()),
            env,
        })
    }
}

/// Configuration of the lane.
#[derive(Debug, Clone)]
pub struct SubscriptionConfig {
    /// The pinned executable.
    pub executable: CodexExecutable,
    /// The pinned developer instruction; its SHA-256 must equal the policy's
    /// `developer_instruction_revision`.
    pub developer_instructions: String,
    /// Parent of the per-target temporary directories.
    pub temp_root: PathBuf,
    /// Deadline per target (120 s).
    pub deadline: Duration,
    /// Deployment `-c` overrides appended after the pinned ones (e.g. a model provider
    /// route). They are part of the adapter revision.
    pub provider_overrides: Vec<String>,
}

impl SubscriptionConfig {
    /// Defaults: the default developer instruction, the system temp dir, 120 s, no overrides.
    pub fn new(executable: CodexExecutable) -> Self {
        Self {
            executable,
            developer_instructions: DEFAULT_DEVELOPER_INSTRUCTIONS.to_string(),
            temp_root: std::env::temp_dir(),
            deadline: Duration::from_millis(REQUEST_TIMEOUT_MILLIS as u64),
            provider_overrides: Vec::new(),
        }
    }
}

/// The subscription lane runtime (agent `codex-subscription`).
#[derive(Debug, Clone)]
pub struct SubscriptionRuntime {
    config: Arc<SubscriptionConfig>,
    adapter_revision: String,
}

/// The pinned `-c` overrides (before deployment overrides).
fn pinned_overrides(developer_instructions: &str) -> Vec<String> {
    vec![
        format!("approval_policy={}", toml_string(APPROVAL_POLICY_NEVER)),
        format!(
            "developer_instructions={}",
            toml_string(developer_instructions)
        ),
        format!(
            "model_reasoning_effort={}",
            toml_string(REASONING_EFFORT_MEDIUM)
        ),
        "web_search=\"disabled\"".to_string(),
        "tools.web_search=false".to_string(),
        "include_permissions_instructions=false".to_string(),
        "include_environment_context=false".to_string(),
        "include_apps_instructions=false".to_string(),
        "include_collaboration_mode_instructions=false".to_string(),
    ]
}

/// The exact argv (after the program) for one target.
pub fn subscription_argv(
    prompt: &str,
    dir: &Path,
    model: &str,
    developer_instructions: &str,
    provider_overrides: &[String],
) -> Vec<String> {
    // A prompt that starts with '-' would be parsed as an option; a leading space keeps it text.
    let prompt = if prompt.starts_with('-') {
        format!(" {prompt}")
    } else {
        prompt.to_string()
    };
    let mut a: Vec<String> = vec![
        "exec".into(),
        prompt,
        "--json".into(),
        "--sandbox".into(),
        "read-only".into(),
        "--skip-git-repo-check".into(),
        "--ephemeral".into(),
        "--ignore-user-config".into(),
        "--ignore-rules".into(),
        "--strict-config".into(),
        "-C".into(),
        dir.to_string_lossy().to_string(),
        "--model".into(),
        model.to_string(),
    ];
    for o in pinned_overrides(developer_instructions)
        .iter()
        .chain(provider_overrides.iter())
    {
        a.push("-c".into());
        a.push(o.clone());
    }
    for f in DISABLED_FEATURES {
        a.push("--disable".into());
        a.push((*f).to_string());
    }
    a
}

impl SubscriptionRuntime {
    /// A lane over a pinned executable.
    pub fn new(config: SubscriptionConfig) -> Self {
        let template = subscription_argv(
            "<prompt>",
            Path::new("<dir>"),
            "<model>",
            "<developer_instructions>",
            &config.provider_overrides,
        );
        let adapter_revision =
            sha256_hex(format!("{ADAPTER_CODEX_SUBSCRIPTION}\n{}", template.join("\n")).as_bytes());
        Self {
            config: Arc::new(config),
            adapter_revision,
        }
    }

    /// The adapter revision this lane reports as observed (pin it in the policy).
    pub fn adapter_revision(&self) -> &str {
        &self.adapter_revision
    }

    /// The SHA-256 of the pinned developer instruction.
    pub fn developer_instruction_revision(&self) -> String {
        sha256_hex(self.config.developer_instructions.as_bytes())
    }

    /// The executable this lane runs.
    pub fn executable(&self) -> &CodexExecutable {
        &self.config.executable
    }

    fn check_pins(&self, spec: &RunSpec) -> Result<(), DispatchError> {
        let p = match &spec.text_only_policy {
            Some(p) => p,
            None => return Err(policy("text_only_policy is required")),
        };
        let exe = &self.config.executable;
        let checks = [
            (
                "selected_adapter_revision",
                &p.selected_adapter_revision,
                &self.adapter_revision,
            ),
            (
                "selected_codex_version",
                &p.selected_codex_version,
                &exe.version,
            ),
            (
                "selected_codex_executable_revision",
                &p.selected_codex_executable_revision,
                &exe.executable_revision,
            ),
            (
                "selected_codex_schema_revision",
                &p.selected_codex_schema_revision,
                &exe.schema_revision,
            ),
        ];
        for (name, want, have) in checks {
            if want != have {
                return Err(policy(&format!(
                    "{name} {want:?} does not match the resolved adapter ({have:?})"
                )));
            }
        }
        if p.developer_instruction_revision != self.developer_instruction_revision() {
            return Err(policy(
                "developer_instruction_revision does not match the pinned instruction",
            ));
        }
        if spec.prompt.trim().is_empty() {
            return Err(policy("prompt is empty"));
        }
        Ok(())
    }
}

fn policy(message: &str) -> DispatchError {
    DispatchError::Policy {
        code: ERROR_CHAT_POLICY_UNAVAILABLE,
        message: message.to_string(),
    }
}

#[async_trait]
impl Runtime for SubscriptionRuntime {
    fn name(&self) -> &str {
        "codex-subscription"
    }

    async fn dispatch(&self, spec: RunSpec) -> Result<Run, DispatchError> {
        spec.validate_authority()?;
        if spec.authority.as_str() != AUTHORITY_CHAT_SUBSCRIPTION_ISOLATED_V1 {
            return Err(policy(
                "the subscription lane requires authority chat_subscription_isolated_v1",
            ));
        }
        self.check_pins(&spec)?;
        let run_id = run_id_for(&spec)?;
        let dir = fresh_dir(&self.config.temp_root, &run_id)?;
        let argv = subscription_argv(
            &spec.prompt,
            &dir,
            &spec.model,
            &self.config.developer_instructions,
            &self.config.provider_overrides,
        );
        let pspec = ProcessSpec {
            program: self.config.executable.program.to_string_lossy().to_string(),
            args: argv,
            workdir: dir.clone(),
            create_workdir: false,
            workdir_mode: 0o700,
            env: EnvPolicy {
                inherit: Vec::new(),
                set: self.config.executable.env.clone(),
            },
            stdin: StdinMode::Null,
        };
        let process = match ar_process::spawn(&pspec) {
            Ok(p) => p,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e.into());
            }
        };
        let token = CancellationToken::new();
        let (sink, parts) = RunSink::channel(run_id, token.clone());
        let policy = spec.text_only_policy.clone().unwrap_or_default();
        let observed = Observed {
            adapter_revision: self.adapter_revision.clone(),
            version: self.config.executable.version.clone(),
            executable_revision: self.config.executable.executable_revision.clone(),
            schema_revision: self.config.executable.schema_revision.clone(),
        };
        let control = Arc::new(TokenControl {
            token: token.clone(),
            agent: AGENT_CODEX_SUBSCRIPTION.to_string(),
        });
        let deadline = self.config.deadline;
        tokio::spawn(drive(
            process,
            sink,
            Pins { policy, observed },
            deadline,
            dir,
        ));
        Ok(Run::new(parts, control))
    }
}

fn fresh_dir(root: &Path, run_id: &str) -> Result<PathBuf, DispatchError> {
    use std::os::unix::fs::DirBuilderExt;
    let name = format!(
        "ar-sub-{}-{}",
        run_id.replace(':', "_"),
        ulid::Ulid::new().to_string().to_lowercase()
    );
    let dir = root.join(name);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|source| {
            DispatchError::Process(ar_process::ProcessError::Workdir {
                path: dir.clone(),
                source,
            })
        })?;
    Ok(dir)
}

#[derive(Debug, Clone)]
struct Observed {
    adapter_revision: String,
    version: String,
    executable_revision: String,
    schema_revision: String,
}

/// What the state machine concluded from a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Keep reading.
    Continue,
    /// An active item: kill now.
    Violation(String),
    /// A protocol failure.
    Failed(String),
}

/// The strict JSONL state machine of one subscription turn.
#[derive(Debug, Default, Clone)]
pub struct TurnMachine {
    thread_id: Option<String>,
    turn_started: bool,
    message: Option<String>,
    usage: Option<ProviderUsage>,
    code_mode_error_seen: bool,
}

fn usage_from(v: &Value) -> Option<ProviderUsage> {
    let u = v.get("usage")?.as_object()?;
    let num = |k: &str| u.get(k).and_then(Value::as_i64);
    let reasoning = num("reasoning_output_tokens").or_else(|| num("reasoning_tokens"));
    Some(ProviderUsage {
        input_tokens: num("input_tokens")?,
        cached_input_tokens: num("cached_input_tokens").unwrap_or(0),
        output_tokens: num("output_tokens")?,
        reasoning_tokens: reasoning.unwrap_or(0),
    })
}

impl TurnMachine {
    /// Feeds one stdout line.
    pub fn feed(&mut self, line: &str) -> Verdict {
        if line.trim().is_empty() {
            return Verdict::Continue;
        }
        let v: Value = match serde_json::from_str(line) {
            Ok(v @ Value::Object(_)) => v,
            _ => return Verdict::Failed(format!("malformed JSONL line: {}", clip(line))),
        };
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        if self.usage.is_some() {
            return Verdict::Failed(format!("{kind} after turn.completed"));
        }
        match kind {
            "thread.started" => self.thread_started(&v),
            "turn.started" => self.turn_started(),
            "item.started" | "item.updated" | "item.completed" => self.item(kind, &v),
            "turn.completed" => self.turn_completed(&v),
            "turn.failed" => Verdict::Failed(format!(
                "turn.failed: {}",
                clip(
                    v.pointer("/error/message")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                )
            )),
            "error" => Verdict::Failed(format!(
                "error: {}",
                clip(v.get("message").and_then(Value::as_str).unwrap_or(""))
            )),
            other => Verdict::Failed(format!("unexpected event {other:?}")),
        }
    }

    fn thread_started(&mut self, v: &Value) -> Verdict {
        if self.thread_id.is_some() {
            return Verdict::Failed("duplicate thread.started".into());
        }
        match v.get("thread_id").and_then(Value::as_str) {
            Some(t) if !t.trim().is_empty() => {
                self.thread_id = Some(t.to_string());
                Verdict::Continue
            }
            _ => Verdict::Failed("thread.started without thread_id".into()),
        }
    }

    fn turn_started(&mut self) -> Verdict {
        if self.thread_id.is_none() {
            return Verdict::Failed("turn.started before thread.started".into());
        }
        if self.turn_started {
            return Verdict::Failed("duplicate turn.started".into());
        }
        self.turn_started = true;
        Verdict::Continue
    }

    /// An item event: reasoning is tolerated, one agent message is the answer, one pinned
    /// code-mode error is tolerated, anything else active is a violation.
    fn item(&mut self, kind: &str, v: &Value) -> Verdict {
        if !self.turn_started {
            return Verdict::Failed(format!("{kind} outside a turn"));
        }
        let item = v.get("item").unwrap_or(&Value::Null);
        match item.get("type").and_then(Value::as_str).unwrap_or("") {
            "reasoning" => Verdict::Continue,
            "agent_message" if kind != "item.completed" => Verdict::Continue,
            "agent_message" => self.agent_message(item),
            "error" => {
                let msg = item.get("message").and_then(Value::as_str).unwrap_or("");
                let pinned =
                    msg.starts_with(CODE_MODE_FAIL_CLOSED_PREFIX) && msg.contains("fail closed");
                if pinned && !self.code_mode_error_seen {
                    self.code_mode_error_seen = kind == "item.completed";
                    Verdict::Continue
                } else {
                    Verdict::Failed(format!("error item: {}", clip(msg)))
                }
            }
            "" => Verdict::Failed(format!("{kind} without item type")),
            active => Verdict::Violation(format!("active item {active:?} ({kind})")),
        }
    }

    fn agent_message(&mut self, item: &Value) -> Verdict {
        if self.message.is_some() {
            return Verdict::Failed("duplicate agent_message".into());
        }
        let text = item.get("text").and_then(Value::as_str).unwrap_or("");
        if text.trim().is_empty() {
            return Verdict::Failed("blank agent_message".into());
        }
        self.message = Some(text.to_string());
        Verdict::Continue
    }

    fn turn_completed(&mut self, v: &Value) -> Verdict {
        if !self.turn_started {
            return Verdict::Failed("turn.completed outside a turn".into());
        }
        match usage_from(v) {
            Some(u) => {
                self.usage = Some(u);
                Verdict::Continue
            }
            None => Verdict::Failed("turn.completed without valid usage".into()),
        }
    }

    /// The completed turn: thread id, message and usage, when all were seen.
    pub fn result(&self) -> Option<(String, String, ProviderUsage)> {
        Some((self.thread_id.clone()?, self.message.clone()?, self.usage?))
    }
}

fn clip(s: &str) -> String {
    char_prefix(s, 300).to_string()
}

enum Outcome {
    Ok,
    Violation(String),
    Failed(String),
    Canceled,
    Deadline,
}

/// What the run was pinned to and what actually ran, for the response metadata.
struct Pins {
    policy: crate::spec::TextOnlyPolicy,
    observed: Observed,
}

async fn drive(
    mut process: ar_process::Process,
    sink: RunSink,
    pins: Pins,
    deadline: Duration,
    dir: PathBuf,
) {
    let run_id = sink.id().to_string();
    let token = sink.cancel_token().clone();
    let killer = process.killer();
    sink.emit(RunEvent::new(
        &run_id,
        EventType::Started,
        AGENT_CODEX_SUBSCRIPTION,
    ))
    .await;
    let mut machine = TurnMachine::default();
    let timer = tokio::time::sleep(deadline);
    tokio::pin!(timer);
    let mut outcome = read_turn(&mut process, &mut machine, &token, timer.as_mut()).await;
    if !matches!(outcome, Outcome::Ok) {
        killer.kill();
    }
    let exit = tokio::select! {
        r = process.wait() => r.ok(),
        _ = &mut timer, if matches!(outcome, Outcome::Ok) => {
            outcome = Outcome::Deadline;
            killer.kill();
            process.wait().await.ok()
        }
    };
    let code = exit.map(|e| e.code_or_minus_one()).unwrap_or(-1);
    let tail = process.stderr_tail().snapshot();
    // The per-target directory is gone before anyone can observe the end of the run.
    drop(process);
    let _ = std::fs::remove_dir_all(&dir);
    if matches!(outcome, Outcome::Ok) {
        if token.is_cancelled() {
            outcome = Outcome::Canceled;
        } else if code != 0 {
            let last = tail.lines().last().unwrap_or("").to_string();
            outcome = Outcome::Failed(format!("codex exited with status {code}: {last}"));
        }
    }
    let (status, events) = conclude(&run_id, outcome, &machine, &pins, code, deadline);
    sink.finish(status, events).await;
}

/// Reads stdout to the end, or until something is wrong: a violation, a protocol failure,
/// the deadline or a cancel.
async fn read_turn(
    process: &mut ar_process::Process,
    machine: &mut TurnMachine,
    token: &CancellationToken,
    mut timer: std::pin::Pin<&mut tokio::time::Sleep>,
) -> Outcome {
    let Some(mut stdout) = process.take_stdout() else {
        return Outcome::Ok;
    };
    loop {
        tokio::select! {
            _ = token.cancelled() => return Outcome::Canceled,
            _ = &mut timer => return Outcome::Deadline,
            line = stdout.next_line() => match line {
                Ok(Some(l)) => match machine.feed(&l.text) {
                    Verdict::Continue => {}
                    Verdict::Violation(m) => return Outcome::Violation(m),
                    Verdict::Failed(m) => return Outcome::Failed(m),
                },
                Ok(None) => return Outcome::Ok,
                Err(e) => return Outcome::Failed(format!("reading stdout: {e}")),
            }
        }
    }
}

/// The final status and events of a run that ended with `outcome`.
fn conclude(
    run_id: &str,
    outcome: Outcome,
    machine: &TurnMachine,
    pins: &Pins,
    code: i32,
    deadline: Duration,
) -> (Status, Vec<RunEvent>) {
    match outcome {
        Outcome::Ok => match machine.result() {
            Some((thread_id, text, usage)) => {
                let meta = pins.response(thread_id, usage);
                match meta.validate() {
                    Ok(()) => {
                        let mut msg = RunEvent::new(run_id, EventType::Message, text);
                        msg.response = Some(meta);
                        (
                            Status::ended(State::Succeeded, code, ""),
                            vec![msg, RunEvent::exited(run_id, code)],
                        )
                    }
                    Err(e) => failed(run_id, code, ERROR_PROVIDER_FAILED, e.to_string()),
                }
            }
            None => failed(
                run_id,
                code,
                ERROR_PROVIDER_RESULT_UNKNOWN,
                "stream ended before a complete turn".into(),
            ),
        },
        Outcome::Violation(m) => failed(run_id, code, ERROR_CHAT_AUTHORITY_VIOLATION, m),
        Outcome::Failed(m) => failed(run_id, code, ERROR_PROVIDER_FAILED, m),
        Outcome::Deadline => failed(
            run_id,
            code,
            ERROR_PROVIDER_RESULT_UNKNOWN,
            format!("deadline of {} ms passed", deadline.as_millis()),
        ),
        Outcome::Canceled => (
            Status::ended(State::Canceled, code, "canceled"),
            vec![RunEvent::exited_canceled(run_id, code)],
        ),
    }
}

impl Pins {
    /// The evidence of a completed turn: the selected identities from the policy, the
    /// observed ones from the resolved adapter.
    fn response(&self, thread_id: String, usage: ProviderUsage) -> ResponseMetadata {
        let (policy, observed) = (&self.policy, &self.observed);
        ResponseMetadata {
            provider_thread_id: thread_id,
            requested_model: policy.model.clone(),
            resolved_model: UNKNOWN_PROVIDER_IDENTITY.into(),
            selected_adapter_id: policy.selected_adapter_id.clone(),
            selected_adapter_revision: policy.selected_adapter_revision.clone(),
            selected_codex_version: policy.selected_codex_version.clone(),
            selected_codex_executable_revision: policy.selected_codex_executable_revision.clone(),
            selected_codex_schema_revision: policy.selected_codex_schema_revision.clone(),
            observed_adapter_id: ADAPTER_CODEX_SUBSCRIPTION.into(),
            observed_adapter_revision: observed.adapter_revision.clone(),
            observed_codex_version: observed.version.clone(),
            observed_codex_executable_revision: observed.executable_revision.clone(),
            observed_codex_schema_revision: observed.schema_revision.clone(),
            terminal_status: TERMINAL_STATUS_COMPLETED.into(),
            usage_source: USAGE_SOURCE_CODEX_EXEC_JSONL.into(),
            usage,
        }
    }
}

fn failed(run_id: &str, code: i32, error_code: &str, message: String) -> (Status, Vec<RunEvent>) {
    (
        Status::ended(State::Failed, code, format!("{error_code}: {message}")),
        vec![
            RunEvent::error(run_id, message, error_code),
            RunEvent::exited(run_id, code),
        ],
    )
}
