//! The ChatGPT-subscription text-only lane as the service runs it: each turn of an agent that
//! asks for it goes through ar-dispatch's [`SubscriptionRuntime`] (seed 000's
//! `RuntimeContractCodexSubscriptionExecV1`: the pinned codex, the exact argv, an empty 0700
//! directory, the strict JSONL state machine that kills the process group at the first active
//! item) instead of the CLI's usual setup. The spec's text-only policy pins what this process
//! resolved (adapter, codex version, executable and `exec --help` revisions, the developer
//! instruction), so the lane's `ValidateAuthority` and pin checks hold it to exactly that. The
//! app's ChatGPT sign-in is written (0600) into a private `CODEX_HOME` of the turn, removed
//! when the turn's stream ends. The validated `ResponseMetadata` goes with the answer to the
//! engine, which records it on the run's message.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ar_core::agent_cli::{
    AgentCliError, CliControl, CliEvent, CliOutcome, CliTurn, CliTurnRequest, SubscriptionTurn,
};
use ar_core::Usage;
use ar_dispatch::consts::*;
use ar_dispatch::subscription::sha256_hex;
use ar_dispatch::{
    AuthorityMode, CodexExecutable, DispatchError, EventType, Run, RunSpec, Runtime, State,
    SubscriptionConfig, SubscriptionRuntime, TextOnlyPolicy,
};
use futures::StreamExt;
use tokio::sync::OnceCell;

/// How the service runs the lane.
#[derive(Debug, Clone)]
pub struct LaneSettings {
    /// The codex program.
    pub program: String,
    /// Deployment `-c` overrides (the ChatGPT backend when it is not codex's own).
    pub overrides: Vec<String>,
}

/// The lane: its settings, and the codex executable resolved (and pinned) at first use.
#[derive(Debug)]
pub struct Lane {
    settings: LaneSettings,
    root: PathBuf,
    executable: OnceCell<CodexExecutable>,
}

impl Lane {
    /// A lane whose scratch (homes, target directories) lives under `root`.
    pub fn new(settings: LaneSettings, root: PathBuf) -> Self {
        Lane {
            settings,
            root,
            executable: OnceCell::new(),
        }
    }

    async fn executable(&self) -> Result<&CodexExecutable, AgentCliError> {
        self.executable
            .get_or_try_init(|| async {
                let probe = self.root.join("probe");
                create_private(&probe).map_err(|e| AgentCliError::Start(e.to_string()))?;
                let env = lane_env(&probe);
                CodexExecutable::resolve(&self.settings.program, env, &probe)
                    .await
                    .map_err(|e| AgentCliError::Start(e.to_string()))
            })
            .await
    }

    /// Starts the lane's turn of `request`.
    pub async fn start(
        &self,
        request: &CliTurnRequest,
        turn: &SubscriptionTurn,
    ) -> Result<CliTurn, AgentCliError> {
        let mut executable = self.executable().await?.clone();
        let home = Home::create(&self.root, &request.run_id, turn)?;
        executable.env = lane_env(&home.0);
        let targets = self.root.join("targets");
        create_private(&targets).map_err(|e| AgentCliError::Start(e.to_string()))?;
        let mut config = SubscriptionConfig::new(executable);
        config.provider_overrides = self.settings.overrides.clone();
        config.temp_root = targets;
        let runtime = SubscriptionRuntime::new(config);
        let spec = lane_spec(&runtime, request, turn);
        let run = runtime.dispatch(spec).await.map_err(|error| match error {
            DispatchError::Policy { message, .. } => AgentCliError::Invalid(message),
            error if error.is_client_error() => AgentCliError::Invalid(error.to_string()),
            error => AgentCliError::Start(error.to_string()),
        })?;
        let run = Arc::new(run);
        let events = run
            .events()
            .ok_or_else(|| AgentCliError::Start("the run's events were taken".into()))?;
        let workdir = format!("lane:{}", request.run_id);
        let started = futures::stream::once(async move { CliEvent::Started { workdir } });
        let waiter = run.clone();
        let body = events.flat_map(|event| futures::stream::iter(cli_events(event)));
        let end = futures::stream::once(async move {
            let status = waiter.wait().await;
            drop(home);
            exited(status)
        });
        Ok(CliTurn {
            events: started.chain(body).chain(end).boxed(),
            control: Arc::new(LaneControl(run)),
            machine: ar_dispatch::cluster::LOCAL_MACHINE.to_string(),
        })
    }
}

/// The environment codex gets: `PATH`, and `home` as its `HOME` and `CODEX_HOME`.
fn lane_env(home: &Path) -> Vec<(String, String)> {
    let home = home.display().to_string();
    vec![
        (
            "PATH".into(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
        ),
        ("HOME".into(), home.clone()),
        ("CODEX_HOME".into(), home),
    ]
}

/// The spec of the lane's turn, its policy pinned to what `runtime` resolved.
fn lane_spec(
    runtime: &SubscriptionRuntime,
    request: &CliTurnRequest,
    turn: &SubscriptionTurn,
) -> RunSpec {
    let exe = runtime.executable();
    let isolation = sha256_hex(
        ar_dispatch::subscription::DISABLED_FEATURES
            .join("\n")
            .as_bytes(),
    );
    let mut policy = TextOnlyPolicy {
        policy_id: POLICY_CODEX_SUBSCRIPTION_CHAT_V1.into(),
        model: turn.model.clone(),
        reasoning_effort: REASONING_EFFORT_MEDIUM.into(),
        reasoning_context: REASONING_CONTEXT_CURRENT_TURN.into(),
        request_timeout_millis: REQUEST_TIMEOUT_MILLIS,
        developer_instruction_revision: runtime.developer_instruction_revision(),
        account_type: ACCOUNT_TYPE_CHATGPT.into(),
        account_plan: turn.account_plan.clone(),
        selected_adapter_id: ADAPTER_CODEX_SUBSCRIPTION.into(),
        selected_adapter_revision: runtime.adapter_revision().to_string(),
        selected_codex_version: exe.version.clone(),
        selected_codex_executable_revision: exe.executable_revision.clone(),
        selected_codex_schema_revision: exe.schema_revision.clone(),
        thread_mode: THREAD_MODE_EPHEMERAL.into(),
        sandbox_mode: SANDBOX_MODE_READ_ONLY.into(),
        approval_policy: APPROVAL_POLICY_NEVER.into(),
        workdir_mode: WORKDIR_MODE_EMPTY_PER_TARGET.into(),
        dynamic_tools_mode: TOOLS_MODE_NONE.into(),
        mcp_mode: TOOLS_MODE_NONE.into(),
        command_policy: RESOURCE_POLICY_DENY_AND_FAIL.into(),
        file_read_policy: RESOURCE_POLICY_DENY_AND_FAIL.into(),
        isolation_revision: isolation,
        ..TextOnlyPolicy::default()
    };
    policy.policy_revision = sha256_hex(
        serde_json::to_string(&policy)
            .unwrap_or_default()
            .as_bytes(),
    );
    RunSpec {
        run_id: request.run_id.clone(),
        agent: AGENT_CODEX_SUBSCRIPTION.into(),
        model: turn.model.clone(),
        prompt: request.prompt.clone(),
        profile: format!("{AGENT_CODEX_SUBSCRIPTION}:{}", turn.model),
        authority: AuthorityMode::chat_subscription_isolated_v1(),
        runtime_contract: RUNTIME_CONTRACT_CODEX_SUBSCRIPTION_EXEC_V1.into(),
        text_only_policy: Some(policy),
        ..RunSpec::default()
    }
}

/// What one of the lane's events means for the run.
fn cli_events(event: ar_dispatch::RunEvent) -> Vec<CliEvent> {
    match event.kind {
        EventType::Message => {
            let usage = event.response.as_ref().map(|meta| Usage {
                input_tokens: meta.usage.input_tokens,
                cached_input_tokens: meta.usage.cached_input_tokens,
                output_tokens: meta.usage.output_tokens,
                reasoning_output_tokens: meta.usage.reasoning_tokens,
                total_tokens: 0,
            });
            let metadata = event
                .response
                .as_ref()
                .and_then(|meta| serde_json::to_value(meta).ok());
            let mut out = vec![CliEvent::AssistantCompleted {
                text: event.data,
                metadata,
            }];
            out.extend(usage.map(CliEvent::Usage));
            out
        }
        EventType::Error => vec![CliEvent::Diagnostic {
            text: format!("{}: {}", event.error_code, event.data),
        }],
        EventType::Stderr => vec![CliEvent::Diagnostic { text: event.data }],
        _ => Vec::new(),
    }
}

fn exited(status: ar_dispatch::Status) -> CliEvent {
    let outcome = match status.state {
        State::Succeeded => CliOutcome::Succeeded,
        State::Canceled => CliOutcome::Cancelled,
        _ => CliOutcome::Failed,
    };
    CliEvent::Exited {
        outcome,
        exit_code: status.exit_code,
        error: match outcome {
            CliOutcome::Succeeded => String::new(),
            _ => status.err,
        },
    }
}

/// A turn's private `CODEX_HOME` holding the sign-in; removed when dropped.
struct Home(PathBuf);

impl Home {
    fn create(root: &Path, run_id: &str, turn: &SubscriptionTurn) -> Result<Home, AgentCliError> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let dir = root
            .join("homes")
            .join(format!("{run_id}-{}", ar_core::ids::new_id("turn")));
        let start = |e: std::io::Error| AgentCliError::Start(format!("lane home: {e}"));
        create_private(&dir).map_err(start)?;
        let home = Home(dir);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(home.0.join("auth.json"))
            .map_err(start)?;
        file.write_all(turn.auth_json.expose().as_bytes())
            .map_err(start)?;
        Ok(home)
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn create_private(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Cancel of a lane turn (it reads no input while it runs).
struct LaneControl(Arc<Run>);

#[async_trait::async_trait]
impl CliControl for LaneControl {
    fn cancel(&self) {
        self.0.cancel();
    }

    async fn signal(&self, _: &str) -> Result<(), AgentCliError> {
        Err(AgentCliError::SignalUnsupported)
    }
}
