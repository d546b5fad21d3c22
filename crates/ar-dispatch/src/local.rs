//! `LocalRuntime`: runs agent CLIs as local processes (one process group per run) through ar-process.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use ar_process::{EnvPolicy, GroupKiller, ProcessSpec, StdinMode};
use async_trait::async_trait;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio_util::sync::CancellationToken;

use crate::event::{EventType, RunEvent, State, Status};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::providers::{
    ClaudeProvider, CodexProvider, CommandProvider, NamedCommandProvider, OpenCodeProvider,
    Provider, TurnProtocol,
};
use crate::run::{run_id_for, DispatchError, Run, RunControl, RunError, RunSink, Runtime};
use crate::spec::{RunSpec, SpecError};

/// Configuration of a [`LocalRuntime`].
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// Where per-run directories (`<root>/<run id>`) are made for specs without a `Workdir`.
    pub workspace_root: PathBuf,
    /// Names inherited from this process's environment (the allow-list).
    pub env_allow: Vec<String>,
    /// Variables every child gets (before the spec's own `Env`).
    pub base_env: Vec<(String, String)>,
    /// Wall-clock limit per run; past it the process group is killed and the run fails with
    /// `error_code` `deadline_exceeded`. `None` = no limit.
    pub deadline: Option<std::time::Duration>,
}

impl LocalConfig {
    /// Standard allow-list ([`ar_process::STANDARD_ENV_ALLOW`]) and the given workspace root.
    pub fn new(workspace_root: impl Into<PathBuf>) -> Self {
        Self {
            workspace_root: workspace_root.into(),
            env_allow: ar_process::STANDARD_ENV_ALLOW
                .iter()
                .map(|s| s.to_string())
                .collect(),
            base_env: Vec::new(),
            deadline: None,
        }
    }
}

/// Runs agents as local processes. Agents are looked up by `RunSpec::agent`.
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
        spec.validate_authority()?;
        if !spec.authority.is_empty() {
            return Err(DispatchError::Policy {
                code: crate::consts::ERROR_CHAT_POLICY_UNAVAILABLE,
                message: "the local process runtime only serves the legacy authority".into(),
            });
        }
        let provider = self
            .providers
            .get(&spec.agent)
            .cloned()
            .ok_or_else(|| DispatchError::UnknownAgent(spec.agent.clone()))?;
        let run_id = run_id_for(&spec)?;
        let workdir = self.workdir_for(&spec, &run_id)?;
        let env_pairs = spec.env_pairs()?;
        let cmd = provider.command(&spec)?;

        let mut env = EnvPolicy {
            inherit: self.config.env_allow.clone(),
            set: self.config.base_env.clone(),
        };
        env.set.extend(cmd.env.iter().cloned());
        env.set.extend(env_pairs);
        let pspec = ProcessSpec {
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
        };
        let mut process = ar_process::spawn(&pspec)?;
        let stdin = process.take_stdin();
        let token = CancellationToken::new();
        let (sink, parts) = RunSink::channel(run_id.clone(), token.clone());
        let control = Arc::new(LocalControl {
            token: token.clone(),
            killer: process.killer(),
            stdin: Arc::new(tokio::sync::Mutex::new(stdin)),
            agent: spec.agent.clone(),
            turns: cmd.turns,
            turns_sent: AtomicUsize::new(usize::from(cmd.turns.is_some())),
        });
        // The first line is written in the background (a large prompt must not block
        // dispatch on a child that reads slowly), holding the stdin lock from here on so
        // any signal is written after it.
        if let Ok(mut guard) = control.stdin.clone().try_lock_owned() {
            let first = cmd.initial_input.clone();
            let keep_open = cmd.stdin_open;
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
        tokio::spawn(drive(
            process,
            sink,
            provider,
            spec.agent.clone(),
            control.clone(),
            self.config.deadline,
        ));
        Ok(Run::new(parts, control))
    }
}

async fn drive(
    mut process: ar_process::Process,
    sink: RunSink,
    provider: Arc<dyn Provider>,
    agent: String,
    control: Arc<LocalControl>,
    deadline: Option<std::time::Duration>,
) {
    let run_id = sink.id().to_string();
    let token = sink.cancel_token().clone();
    sink.emit(RunEvent::new(&run_id, EventType::Started, agent))
        .await;
    let mut stdout = process.take_stdout();
    let mut stderr = process.take_stderr_lines();
    let tail = process.stderr_tail();
    let mut exit: Option<Result<ar_process::ExitInfo, ar_process::ProcessError>> = None;
    let mut canceled = false;
    let mut timed_out = false;
    let mut turns_ended = 0usize;
    let timer = tokio::time::sleep(deadline.unwrap_or(std::time::Duration::ZERO));
    tokio::pin!(timer);
    loop {
        let stdout_open = stdout.is_some();
        let stderr_open = stderr.is_some();
        if !stdout_open && !stderr_open && exit.is_some() {
            break;
        }
        tokio::select! {
            _ = token.cancelled(), if !canceled => {
                canceled = true;
                control.killer.kill();
            }
            _ = &mut timer, if deadline.is_some() && !timed_out && exit.is_none() => {
                timed_out = true;
                control.killer.kill();
            }
            line = async {
                match stdout.as_mut() {
                    Some(r) => r.next_line().await,
                    None => Ok(None),
                }
            }, if stdout_open => {
                match line {
                    Ok(Some(l)) => {
                        if let Some(t) = control.turns {
                            if (t.is_turn_end)(&l.text) {
                                turns_ended += 1;
                                // Every turn sent has ended: close stdin so the agent exits.
                                // A signal holding the lock is a turn on its way: keep stdin
                                // open (and never wait here, the agent may be blocked on us).
                                if let Ok(mut g) = control.stdin.try_lock() {
                                    if turns_ended >= control.turns_sent.load(Ordering::SeqCst) {
                                        g.take();
                                    }
                                }
                            }
                        }
                        for c in provider.classify(&l.text) {
                            sink.emit(RunEvent::new(&run_id, c.kind, c.data)).await;
                        }
                    }
                    _ => stdout = None,
                }
            }
            line = async {
                match stderr.as_mut() {
                    Some(r) => r.recv().await,
                    None => None,
                }
            }, if stderr_open => {
                match line {
                    Some(l) => sink.emit(RunEvent::new(&run_id, EventType::Stderr, l.text)).await,
                    None => stderr = None,
                }
            }
            res = process.wait(), if exit.is_none() => {
                exit = Some(res);
            }
        }
    }
    // The stdin pipe is closed once the run is over.
    control.stdin.lock().await.take();
    let canceled = canceled || token.is_cancelled();
    let (status, code) = match exit {
        Some(Ok(info)) => {
            let code = info.code_or_minus_one();
            let status = if canceled {
                Status::ended(State::Canceled, code, "canceled")
            } else if timed_out {
                let secs = deadline.map(|d| d.as_secs_f64()).unwrap_or(0.0);
                Status::ended(
                    State::Failed,
                    code,
                    format!("deadline_exceeded: killed after {secs} s"),
                )
            } else if info.success() {
                Status::ended(State::Succeeded, code, "")
            } else {
                let t = tail.snapshot();
                let last: String = t
                    .lines()
                    .rev()
                    .take(5)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n");
                let err = if last.is_empty() {
                    info.to_string()
                } else {
                    format!("{info}: {last}")
                };
                Status::ended(State::Failed, code, err)
            };
            (status, code)
        }
        Some(Err(e)) => (Status::ended(State::Failed, -1, e.to_string()), -1),
        None => (
            Status::ended(State::Failed, -1, "process was not waited for"),
            -1,
        ),
    };
    if timed_out && !canceled {
        sink.emit(RunEvent::error(
            &run_id,
            status.err.clone(),
            "deadline_exceeded",
        ))
        .await;
    }
    let exited = if status.state == State::Canceled {
        RunEvent::exited_canceled(&run_id, code)
    } else {
        RunEvent::exited(&run_id, code)
    };
    sink.finish(status, vec![exited]).await;
}
