//! `LocalRuntime`: runs agent CLIs as local processes (one process group per run) through
//! ar-process, reading each one's stdout with its provider's [`crate::stream`] parser.
//!
//! A run's output is first [`AgentOutput`] (typed); [`Runtime::dispatch`] hands it over as
//! the wire [`RunEvent`]s, [`LocalRuntime::start`] as it is.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ar_process::{EnvPolicy, ExitInfo, GroupKiller, ProcessError, ProcessSpec, StdinMode};
use async_trait::async_trait;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio_util::sync::CancellationToken;

use crate::event::{EventType, RunEvent, State, Status};
use crate::providers::{
    ClaudeProvider, CodexProvider, CommandProvider, NamedCommandProvider, OpenCodeProvider,
    Provider, ProviderCommand, TurnProtocol,
};
use crate::run::{run_id_for, DispatchError, Run, RunControl, RunError, RunSink, Runtime};
use crate::spec::{RunSpec, SpecError};
use crate::stream::{AgentEvent, StreamParser, WireProjection};
use crate::turn::{TurnResources, TurnScratch};

/// Configuration of a [`LocalRuntime`].
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// Where per-run directories (`<root>/<run id>`) are made for specs without a `Workdir`,
    /// and turns' private homes and bridge files (`<root>/.homes`, `<root>/.bridges`).
    pub workspace_root: PathBuf,
    /// What CLI turns (`RunSpec.turn`) are set up with; `None`: specs with a turn are refused.
    pub turns: Option<TurnResources>,
}

impl LocalConfig {
    /// Runs under `workspace_root`, without turn setups.
    pub fn new(workspace_root: impl Into<PathBuf>) -> Self {
        Self {
            workspace_root: workspace_root.into(),
            turns: None,
        }
    }

    /// Sets CLI turns up with `resources`.
    pub fn with_turns(mut self, resources: TurnResources) -> Self {
        self.turns = Some(resources);
        self
    }
}

/// Runs agents as local processes. Agents are looked up by `RunSpec::agent`. A child inherits
/// only the standard allow-list of this process's environment
/// ([`ar_process::STANDARD_ENV_ALLOW`]), then gets its provider's variables and the spec's `Env`.
pub struct LocalRuntime {
    name: String,
    config: LocalConfig,
    providers: HashMap<String, Arc<dyn Provider>>,
}

impl std::fmt::Debug for LocalRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut agents: Vec<&String> = self.providers.keys().collect();
        agents.sort();
        f.debug_struct("LocalRuntime")
            .field("name", &self.name)
            .field("agents", &agents)
            .finish()
    }
}

impl LocalRuntime {
    /// A runtime with no agents; add them with [`LocalRuntime::with_provider`].
    pub fn empty(config: LocalConfig) -> Self {
        Self {
            name: "local".into(),
            config,
            providers: HashMap::new(),
        }
    }

    /// A runtime with `codex`, `claude`, `opencode` (default programs from PATH) and `command`.
    pub fn standard(config: LocalConfig) -> Self {
        Self::empty(config)
            .with_provider(Arc::new(CodexProvider::default()))
            .with_provider(Arc::new(ClaudeProvider::default()))
            .with_provider(Arc::new(OpenCodeProvider::default()))
            .with_provider(Arc::new(CommandProvider))
    }

    /// Adds (or replaces) the provider for its agent name.
    pub fn with_provider(mut self, provider: Arc<dyn Provider>) -> Self {
        self.providers
            .insert(provider.agent().to_string(), provider);
        self
    }

    /// Adds a `command:NAME` agent.
    pub fn with_named_command(self, cmd: NamedCommandProvider) -> Self {
        self.with_provider(Arc::new(cmd))
    }

    /// Removes an agent (e.g. `command` on a node, which must not run arbitrary argv).
    pub fn without_agent(mut self, agent: &str) -> Self {
        self.providers.remove(agent);
        self
    }

    /// Renames the runtime (for logs).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The agent names served with the program each runs (`None` for command agents),
    /// sorted by name.
    pub fn agent_programs(&self) -> Vec<(String, Option<String>)> {
        let mut v: Vec<(String, Option<String>)> = self
            .providers
            .iter()
            .map(|(agent, provider)| (agent.clone(), provider.program().map(str::to_string)))
            .collect();
        v.sort();
        v
    }

    /// The agent names served, sorted.
    pub fn agents(&self) -> Vec<String> {
        let mut v: Vec<String> = self.providers.keys().cloned().collect();
        v.sort();
        v
    }

    fn workdir_for(&self, spec: &RunSpec, run_id: &str) -> Result<PathBuf, DispatchError> {
        if spec.workdir.is_empty() {
            return Ok(self.config.workspace_root.join(run_id));
        }
        let p = PathBuf::from(&spec.workdir);
        if !p.is_absolute() {
            return Err(DispatchError::Spec(SpecError::Decode(format!(
                "Workdir {:?} must be absolute",
                spec.workdir
            ))));
        }
        Ok(p)
    }

    /// Spawns the agent of `spec` and supervises it in the background; `to_events` turns
    /// each piece of its output into the run's events. A spec with a turn is set up first
    /// ([`crate::turn`]): its scratch and egress proxy end with the process.
    async fn launch<E, F>(&self, spec: RunSpec, to_events: F) -> Result<Run<E>, DispatchError>
    where
        E: Send + 'static,
        F: FnMut(&str, AgentOutput) -> Vec<E> + Send + 'static,
    {
        let provider = self.provider_for(&spec)?;
        let run_id = run_id_for(&spec)?;
        let workdir = self.workdir_for(&spec, &run_id)?;
        let mut spec_env = spec.env_pairs()?;
        let (provider, spec, scratch) = match &spec.turn {
            None => (provider, spec, None),
            Some(_) => {
                let resources =
                    self.config
                        .turns
                        .as_ref()
                        .ok_or_else(|| DispatchError::Policy {
                            code: "turns_unavailable",
                            message: "this runtime does not set up agent CLI turns".into(),
                        })?;
                let root = &self.config.workspace_root;
                let prepared = crate::turn::prepare(
                    resources,
                    root,
                    &spec,
                    &run_id,
                    &workdir,
                    provider.as_ref(),
                )
                .await?;
                let mut env = prepared.env;
                env.append(&mut spec_env);
                spec_env = env;
                (prepared.provider, prepared.spec, Some(prepared.scratch))
            }
        };
        let cmd = provider.command(&spec)?;
        let mut process = ar_process::spawn(&self.process_spec(&cmd, workdir, spec_env))?;
        let token = CancellationToken::new();
        let (sink, parts) = RunSink::channel(run_id, token.clone());
        let control = Arc::new(LocalControl {
            token,
            killer: process.killer(),
            stdin: Arc::new(tokio::sync::Mutex::new(process.take_stdin())),
            agent: spec.agent.clone(),
            turns: cmd.turns,
            turns_sent: AtomicUsize::new(usize::from(cmd.turns.is_some())),
        });
        control.write_first_line(cmd.initial_input, cmd.stdin_open);
        let supervisor = Supervisor {
            process,
            sink,
            parser: provider.parser(),
            control: control.clone(),
            to_events,
            turns_ended: 0,
            scratch,
        };
        tokio::spawn(supervisor.run());
        Ok(Run::new(parts, control))
    }

    /// The provider of the spec's agent, for the legacy authority only.
    fn provider_for(&self, spec: &RunSpec) -> Result<Arc<dyn Provider>, DispatchError> {
        spec.validate_authority()?;
        if !spec.authority.is_empty() {
            return Err(DispatchError::Policy {
                code: crate::consts::ERROR_CHAT_POLICY_UNAVAILABLE,
                message: "the local process runtime only serves the legacy authority".into(),
            });
        }
        self.providers
            .get(&spec.agent)
            .cloned()
            .ok_or_else(|| DispatchError::UnknownAgent(spec.agent.clone()))
    }

    /// The process of a run: the allow-listed environment, then the provider's variables,
    /// then the spec's own.
    fn process_spec(
        &self,
        cmd: &ProviderCommand,
        workdir: PathBuf,
        spec_env: Vec<(String, String)>,
    ) -> ProcessSpec {
        let mut env = EnvPolicy::standard();
        env.set.extend(cmd.env.iter().cloned());
        env.set.extend(spec_env);
        ProcessSpec {
            program: cmd.program.clone(),
            args: cmd.args.clone(),
            workdir,
            create_workdir: true,
            workdir_mode: 0o755,
            env,
            stdin: if cmd.stdin_open || cmd.initial_input.is_some() {
                StdinMode::Piped
            } else {
                StdinMode::Null
            },
        }
    }
}

/// What the local runtime reads from an agent process, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentOutput {
    /// The process started.
    Started,
    /// One stdout line and what the agent's parser read in it (nothing, for a line it does
    /// not know).
    Line {
        text: String,
        events: Vec<AgentEvent>,
    },
    /// One stderr line.
    Stderr(String),
    /// The place that ran the agent went away before it ended (a node that died or became
    /// unreachable, a node shutting down); the next item is `Exited`.
    Lost(String),
    /// The process ended; always last. `egress` is the turn's proxy report, when it had one.
    Exited {
        code: i32,
        canceled: bool,
        egress: Option<crate::egress::EgressReport>,
    },
}

/// The wire events of one piece of a run's output; `raw`: every stdout line as a `stdout`
/// event (a turn's caller parses the lines itself).
fn wire_events(
    projection: &mut WireProjection,
    raw: bool,
    run_id: &str,
    agent: &str,
    output: AgentOutput,
) -> Vec<RunEvent> {
    match output {
        AgentOutput::Started => vec![RunEvent::new(run_id, EventType::Started, agent)],
        AgentOutput::Line { text, .. } if raw => {
            vec![RunEvent::new(run_id, EventType::Stdout, text)]
        }
        AgentOutput::Line { text, events } => projection.line(run_id, text, events),
        AgentOutput::Stderr(text) => vec![RunEvent::new(run_id, EventType::Stderr, text)],
        AgentOutput::Lost(reason) => vec![RunEvent::error(run_id, reason, "")],
        AgentOutput::Exited {
            code,
            canceled,
            egress,
        } => {
            let mut exited = if canceled {
                RunEvent::exited_canceled(run_id, code)
            } else {
                RunEvent::exited(run_id, code)
            };
            exited.egress = egress;
            vec![exited]
        }
    }
}

struct LocalControl {
    token: CancellationToken,
    killer: GroupKiller,
    stdin: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    agent: String,
    turns: Option<TurnProtocol>,
    /// Turns sent so far (changed only while holding the stdin lock).
    turns_sent: AtomicUsize,
}

impl LocalControl {
    /// Writes the first stdin line in the background (a large prompt must not block dispatch
    /// on a child that reads slowly), holding the stdin lock from here on so any signal is
    /// written after it; then closes stdin unless the agent reads more.
    fn write_first_line(&self, first: Option<String>, keep_open: bool) {
        let Ok(mut guard) = self.stdin.clone().try_lock_owned() else {
            return;
        };
        tokio::spawn(async move {
            if let (Some(first), Some(pipe)) = (first, guard.as_mut()) {
                let mut line = first.into_bytes();
                line.push(b'\n');
                // A child that exits before reading its first line is reported by its exit status.
                let _ = pipe.write_all(&line).await;
                let _ = pipe.flush().await;
            }
            if !keep_open {
                guard.take();
            }
        });
    }
}

#[async_trait]
impl RunControl for LocalControl {
    fn cancel(&self) {
        self.token.cancel();
        self.killer.kill();
    }
    async fn signal(&self, input: &str) -> Result<(), RunError> {
        let mut g = self.stdin.lock().await;
        let Some(stdin) = g.as_mut() else {
            return Err(RunError::SignalUnsupported(self.agent.clone()));
        };
        let line = match self.turns {
            Some(t) => (t.encode)(input),
            None => input.to_string(),
        };
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        let res = async {
            stdin.write_all(&buf).await?;
            stdin.flush().await
        }
        .await;
        match res {
            Ok(()) => {
                self.turns_sent.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(RunError::Finished),
            Err(e) => Err(RunError::Io(e.to_string())),
        }
    }
}

#[async_trait]
impl Runtime for LocalRuntime {
    fn name(&self) -> &str {
        &self.name
    }

    async fn dispatch(&self, spec: RunSpec) -> Result<Run, DispatchError> {
        let agent = spec.agent.clone();
        let raw = spec.turn.is_some();
        let mut projection = WireProjection::default();
        self.launch(spec, move |run_id, output| {
            wire_events(&mut projection, raw, run_id, &agent, output)
        })
        .await
    }

    async fn start(&self, spec: RunSpec) -> Result<Run<AgentOutput>, DispatchError> {
        self.launch(spec, |_, output| vec![output]).await
    }
}

/// Supervises one local run: reads the process's output until it has exited and both pipes
/// are drained, then sets the final status.
struct Supervisor<E, F> {
    process: ar_process::Process,
    sink: RunSink<E>,
    parser: Box<dyn StreamParser>,
    control: Arc<LocalControl>,
    to_events: F,
    turns_ended: usize,
    /// A turn's scratch and proxy, finished once the process has ended.
    scratch: Option<TurnScratch>,
}

/// How the supervised process ended.
struct Ending {
    exit: Option<Result<ExitInfo, ProcessError>>,
    canceled: bool,
}

impl<E, F> Supervisor<E, F>
where
    E: Send + 'static,
    F: FnMut(&str, AgentOutput) -> Vec<E> + Send + 'static,
{
    async fn run(mut self) {
        self.emit(AgentOutput::Started).await;
        let ending = self.pump().await;
        // The stdin pipe is closed once the run is over.
        self.control.stdin.lock().await.take();
        let canceled = ending.canceled || self.sink.cancel_token().is_cancelled();
        let status = final_status(ending.exit, canceled, &self.process.stderr_tail());
        let egress = match self.scratch.as_mut() {
            Some(scratch) => scratch.finish().await,
            None => None,
        };
        let exited = AgentOutput::Exited {
            code: status.exit_code,
            canceled: status.state == State::Canceled,
            egress,
        };
        let last = (self.to_events)(self.sink.id(), exited);
        self.sink.finish(status, last).await;
    }

    /// Reads stdout and stderr and waits for the exit, killing the group on cancel.
    async fn pump(&mut self) -> Ending {
        let token = self.sink.cancel_token().clone();
        let mut stdout = self.process.take_stdout();
        let mut stderr = self.process.take_stderr_lines();
        let mut ending = Ending {
            exit: None,
            canceled: false,
        };
        while stdout.is_some() || stderr.is_some() || ending.exit.is_none() {
            tokio::select! {
                _ = token.cancelled(), if !ending.canceled => {
                    ending.canceled = true;
                    self.control.killer.kill();
                }
                line = async {
                    match stdout.as_mut() {
                        Some(r) => r.next_line().await,
                        None => Ok(None),
                    }
                }, if stdout.is_some() => match line {
                    Ok(Some(line)) => self.stdout_line(line.text).await,
                    _ => stdout = None,
                },
                line = async {
                    match stderr.as_mut() {
                        Some(r) => r.recv().await,
                        None => None,
                    }
                }, if stderr.is_some() => match line {
                    Some(line) => self.emit(AgentOutput::Stderr(line.text)).await,
                    None => stderr = None,
                },
                exit = self.process.wait(), if ending.exit.is_none() => ending.exit = Some(exit),
            }
        }
        ending
    }

    async fn stdout_line(&mut self, text: String) {
        self.count_turn_end(&text);
        let events = self.parser.parse(&text);
        self.emit(AgentOutput::Line { text, events }).await;
    }

    /// Once every turn sent has ended, closes stdin so the agent exits. A signal holding the
    /// lock is a turn on its way: stdin stays open (and this never waits, the agent may be
    /// blocked on us).
    fn count_turn_end(&mut self, line: &str) {
        let Some(turns) = self.control.turns else {
            return;
        };
        if !(turns.is_turn_end)(line) {
            return;
        }
        self.turns_ended += 1;
        if let Ok(mut stdin) = self.control.stdin.try_lock() {
            if self.turns_ended >= self.control.turns_sent.load(Ordering::SeqCst) {
                stdin.take();
            }
        }
    }

    async fn emit(&mut self, output: AgentOutput) {
        for event in (self.to_events)(self.sink.id(), output) {
            self.sink.emit(event).await;
        }
    }
}

/// The final status of a run: cancelled, succeeded, or failed with the last lines of its
/// stderr.
fn final_status(
    exit: Option<Result<ExitInfo, ProcessError>>,
    canceled: bool,
    tail: &ar_process::StderrTail,
) -> Status {
    let info = match exit {
        Some(Ok(info)) => info,
        Some(Err(e)) => return Status::ended(State::Failed, -1, e.to_string()),
        None => return Status::ended(State::Failed, -1, "process was not waited for"),
    };
    let code = info.code_or_minus_one();
    if canceled {
        return Status::ended(State::Canceled, code, "canceled");
    }
    if info.success() {
        return Status::ended(State::Succeeded, code, "");
    }
    let tail = tail.snapshot();
    let lines: Vec<&str> = tail.lines().collect();
    let last = lines[lines.len().saturating_sub(5)..].join("\n");
    let err = if last.is_empty() {
        info.to_string()
    } else {
        format!("{info}: {last}")
    };
    Status::ended(State::Failed, code, err)
}
