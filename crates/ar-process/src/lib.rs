//! The only place that spawns processes: explicit cwd, filtered env, own process group killed on drop, stderr drained,
//! optionally confined (resource limits, per-thread sandboxes the child inherits: [`spawn_confined`]).
//!
//! Every child is started in a process group of its own (the child is the group leader).
//! [`Process::wait`] reaps the leader and then kills whatever is left of the group, and
//! dropping a [`Process`] that was never waited for kills the whole group, so no child of a
//! run or tool call outlives it. Stderr is drained by a background task into a bounded tail
//! (and, for whoever wants them, a bounded channel of lines that never blocks the child).

mod confine;
mod lines;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::mpsc;

pub use confine::{spawn_confined, ChildLimits, Resource, ResourceLimit};
pub use lines::{Line, LineReader, MAX_LINE_BYTES};

/// Bytes of stderr kept in the tail.
pub const STDERR_TAIL_BYTES: usize = 64 * 1024;
/// Stderr lines buffered for a consumer before further lines are only kept in the tail.
pub const STDERR_CHANNEL_LINES: usize = 256;

/// Names inherited from the parent by [`EnvPolicy::standard`].
pub const STANDARD_ENV_ALLOW: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
    "TERM",
];

/// Errors from spawning or supervising a child.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The spec was unusable; nothing was started.
    #[error("invalid process spec: {0}")]
    InvalidSpec(String),
    /// The working directory could not be created or is not a directory.
    #[error("workdir {path}: {source}")]
    Workdir {
        /// The directory asked for.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The program could not be started.
    #[error("spawn {program}: {source}")]
    Spawn {
        /// The program asked for.
        program: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// Waiting for the child failed.
    #[error("wait: {0}")]
    Wait(std::io::Error),
}

/// Which environment the child sees: nothing from the parent except `inherit`, plus `set`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvPolicy {
    /// Names copied from this process's environment when present.
    pub inherit: Vec<String>,
    /// Variables set explicitly; they win over inherited ones.
    pub set: Vec<(String, String)>,
}

impl EnvPolicy {
    /// An empty environment.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Inherits [`STANDARD_ENV_ALLOW`] only.
    pub fn standard() -> Self {
        Self {
            inherit: STANDARD_ENV_ALLOW.iter().map(|s| s.to_string()).collect(),
            set: Vec::new(),
        }
    }

    /// Adds one explicit variable.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.set.push((key.into(), value.into()));
        self
    }

    /// The resulting environment, in order (inherited first, then explicit, last one wins).
    pub fn resolve(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        let mut put = |k: &str, v: String| {
            if let Some(slot) = out.iter_mut().find(|(ek, _)| ek == k) {
                slot.1 = v;
            } else {
                out.push((k.to_string(), v));
            }
        };
        for name in &self.inherit {
            if let Ok(v) = std::env::var(name) {
                put(name, v);
            }
        }
        for (k, v) in &self.set {
            put(k, v.clone());
        }
        out
    }

    fn validate(&self) -> Result<(), ProcessError> {
        for (k, v) in &self.set {
            if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
                return Err(ProcessError::InvalidSpec(format!(
                    "environment variable name {k:?} is not valid"
                )));
            }
        }
        Ok(())
    }
}

/// What the child's stdin is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StdinMode {
    /// `/dev/null`.
    #[default]
    Null,
    /// A pipe the caller writes to (see [`Process::take_stdin`]).
    Piped,
}

/// Everything needed to start one child.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// Program path or name looked up in the child's `PATH`.
    pub program: String,
    /// Arguments after the program name.
    pub args: Vec<String>,
    /// Absolute working directory; created (with `workdir_mode`) when absent and `create_workdir`.
    pub workdir: PathBuf,
    /// Create the working directory when it does not exist.
    pub create_workdir: bool,
    /// Unix permission bits for a created working directory.
    pub workdir_mode: u32,
    /// The child's environment.
    pub env: EnvPolicy,
    /// The child's stdin.
    pub stdin: StdinMode,
}

impl ProcessSpec {
    /// A spec with the standard environment, null stdin and a created 0755 workdir.
    pub fn new(program: impl Into<String>, workdir: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            workdir: workdir.into(),
            create_workdir: true,
            workdir_mode: 0o755,
            env: EnvPolicy::standard(),
            stdin: StdinMode::Null,
        }
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Replaces the environment policy.
    pub fn env(mut self, env: EnvPolicy) -> Self {
        self.env = env;
        self
    }

    /// Sets the stdin mode.
    pub fn stdin(mut self, stdin: StdinMode) -> Self {
        self.stdin = stdin;
        self
    }
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitInfo {
    /// The exit code when the child exited normally.
    pub code: Option<i32>,
    /// The signal number when the child was killed by a signal.
    pub signal: Option<i32>,
}

impl ExitInfo {
    /// The exit code, or -1 when the child was killed by a signal (Go's `ExitCode()` convention).
    pub fn code_or_minus_one(&self) -> i32 {
        self.code.unwrap_or(-1)
    }

    /// True for exit code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(c), _) => write!(f, "exit status {c}"),
            (None, Some(s)) => write!(f, "killed by signal {s}"),
            (None, None) => write!(f, "exit status unknown"),
        }
    }
}

fn exit_info(status: std::process::ExitStatus) -> ExitInfo {
    use std::os::unix::process::ExitStatusExt;
    ExitInfo {
        code: status.code(),
        signal: status.signal(),
    }
}

/// Sends SIGKILL to a child's process group; cheap to clone and usable from any task.
/// Once the group has been swept after the leader was reaped it does nothing, so a
/// recycled group id is never signalled.
#[derive(Debug, Clone)]
pub struct GroupKiller {
    pgid: i32,
    done: Arc<AtomicBool>,
}

impl GroupKiller {
    /// The process group id (equal to the leader's pid).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Kills every process of the group. Returns false when the group was already swept.
    pub fn kill(&self) -> bool {
        if self.done.load(Ordering::SeqCst) {
            return false;
        }
        kill_group(self.pgid);
        true
    }

    fn sweep_and_close(&self) {
        if !self.done.swap(true, Ordering::SeqCst) {
            kill_group(self.pgid);
        }
    }
}

fn kill_group(pgid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pgid) {
        // ESRCH (group already empty) is the normal case after a clean exit.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// The bounded tail of a child's stderr.
#[derive(Debug, Clone, Default)]
pub struct StderrTail {
    inner: Arc<Mutex<VecDeque<u8>>>,
}

impl StderrTail {
    fn push(&self, line: &str) {
        let mut g = match self.inner.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        g.extend(line.as_bytes());
        g.push_back(b'\n');
        while g.len() > STDERR_TAIL_BYTES {
            g.pop_front();
        }
    }

    /// The kept tail as text (at most [`STDERR_TAIL_BYTES`]).
    pub fn snapshot(&self) -> String {
        let g = match self.inner.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let bytes: Vec<u8> = g.iter().copied().collect();
        String::from_utf8_lossy(&bytes).trim_end().to_string()
    }
}

/// A running child in its own process group.
#[derive(Debug)]
pub struct Process {
    child: Child,
    pid: u32,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr_lines: Option<mpsc::Receiver<Line>>,
    stderr_tail: StderrTail,
    stderr_task: Option<tokio::task::JoinHandle<()>>,
    killer: GroupKiller,
}

fn prepare_workdir(spec: &ProcessSpec) -> Result<(), ProcessError> {
    use std::os::unix::fs::DirBuilderExt;
    let dir: &Path = &spec.workdir;
    if dir.as_os_str().is_empty() || !dir.is_absolute() {
        return Err(ProcessError::InvalidSpec(format!(
            "workdir must be an absolute path, got {:?}",
            dir
        )));
    }
    if !dir.exists() {
        if !spec.create_workdir {
            return Err(ProcessError::Workdir {
                path: dir.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "does not exist"),
            });
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(spec.workdir_mode)
            .create(dir)
            .map_err(|source| ProcessError::Workdir {
                path: dir.to_path_buf(),
                source,
            })?;
    }
    if !dir.is_dir() {
        return Err(ProcessError::Workdir {
            path: dir.to_path_buf(),
            source: std::io::Error::other("not a directory"),
        });
    }
    Ok(())
}

/// Starts a child in a new process group with the given directory, environment and stdin.
/// Stdout is piped (read it with [`Process::take_stdout`]); stderr is drained in the background.
pub fn spawn(spec: &ProcessSpec) -> Result<Process, ProcessError> {
    spawn_command(spec, |_| {})
}

/// [`spawn`], with `adjust` given the command last (the confined spawn's pre-exec hook).
fn spawn_command(
    spec: &ProcessSpec,
    adjust: impl FnOnce(&mut Command),
) -> Result<Process, ProcessError> {
    if spec.program.trim().is_empty() {
        return Err(ProcessError::InvalidSpec("program is empty".into()));
    }
    if spec.program.contains('\0') || spec.args.iter().any(|a| a.contains('\0')) {
        return Err(ProcessError::InvalidSpec(
            "program or argument contains NUL".into(),
        ));
    }
    spec.env.validate()?;
    prepare_workdir(spec)?;

    let env = spec.env.resolve();
    // Program lookup must use the child's PATH, not ours.
    let program: PathBuf = if spec.program.contains('/') {
        PathBuf::from(&spec.program)
    } else {
        let path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str())
            .unwrap_or("");
        which_in(&spec.program, path).ok_or_else(|| ProcessError::Spawn {
            program: spec.program.clone(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "not found in the child's PATH",
            ),
        })?
    };
    let mut cmd = Command::new(&program);
    cmd.args(&spec.args)
        .current_dir(&spec.workdir)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(match spec.stdin {
            StdinMode::Null => Stdio::null(),
            StdinMode::Piped => Stdio::piped(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    adjust(&mut cmd);
    let mut child = cmd.spawn().map_err(|source| ProcessError::Spawn {
        program: spec.program.clone(),
        source,
    })?;
    let pid = match child.id() {
        Some(pid) => pid,
        None => {
            return Err(ProcessError::Spawn {
                program: spec.program.clone(),
                source: std::io::Error::other("child exited before its pid was read"),
            })
        }
    };
    let killer = GroupKiller {
        pgid: pid as i32,
        done: Arc::new(AtomicBool::new(false)),
    };
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr_tail = StderrTail::default();
    let (tx, rx) = mpsc::channel(STDERR_CHANNEL_LINES);
    let stderr_task = child.stderr.take().map(|err| {
        let tail = stderr_tail.clone();
        tokio::spawn(async move {
            let mut reader = LineReader::new(err);
            while let Ok(Some(line)) = reader.next_line().await {
                tail.push(&line.text);
                // Never block the child on a slow consumer: the tail keeps everything recent.
                let _ = tx.try_send(line);
            }
        })
    });
    tracing::debug!(pid, program = %spec.program, "spawned process group");
    Ok(Process {
        child,
        pid,
        stdin,
        stdout,
        stderr_lines: Some(rx),
        stderr_tail,
        stderr_task,
        killer,
    })
}

fn which_in(program: &str, path: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let candidate = Path::new(dir).join(program);
        if let Ok(meta) = std::fs::metadata(&candidate) {
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return Some(candidate);
            }
        }
    }
    None
}

/// Looks a program up in `PATH` (the given one, or this process's).
pub fn find_program(program: &str, path: Option<&str>) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return p.is_file().then_some(p);
    }
    match path {
        Some(p) => which_in(program, p),
        None => which_in(program, &std::env::var("PATH").unwrap_or_default()),
    }
}

impl Process {
    /// The leader's pid, which is also the process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A handle that kills the whole group, for use from other tasks (cancel).
    pub fn killer(&self) -> GroupKiller {
        self.killer.clone()
    }

    /// The stdin pipe, when the spec asked for [`StdinMode::Piped`].
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// The stdout line reader (1 MiB lines).
    pub fn take_stdout(&mut self) -> Option<LineReader<ChildStdout>> {
        self.stdout.take().map(LineReader::new)
    }

    /// The stdout pipe itself, for a reader with its own framing (an MCP client's JSON-RPC
    /// lines). Like [`Process::take_stdout`], it can be taken once.
    pub fn take_stdout_raw(&mut self) -> Option<ChildStdout> {
        self.stdout.take()
    }

    /// Stderr lines as they come (bounded; lines beyond the buffer are only in the tail).
    pub fn take_stderr_lines(&mut self) -> Option<mpsc::Receiver<Line>> {
        self.stderr_lines.take()
    }

    /// The bounded stderr tail.
    pub fn stderr_tail(&self) -> StderrTail {
        self.stderr_tail.clone()
    }

    /// Waits for the leader to exit, then kills what is left of its group and lets the
    /// stderr drain finish. Cancel-safe: dropping the future leaves the child running.
    pub async fn wait(&mut self) -> Result<ExitInfo, ProcessError> {
        let status = self.child.wait().await.map_err(ProcessError::Wait)?;
        self.killer.sweep_and_close();
        if let Some(task) = self.stderr_task.take() {
            let _ = task.await;
        }
        Ok(exit_info(status))
    }

    /// Whether the leader has exited, without waiting. When it has, what is left of its
    /// group is killed, as [`Process::wait`] does (the stderr drain is not waited for).
    pub fn try_wait(&mut self) -> Result<Option<ExitInfo>, ProcessError> {
        let Some(status) = self.child.try_wait().map_err(ProcessError::Wait)? else {
            return Ok(None);
        };
        self.killer.sweep_and_close();
        Ok(Some(exit_info(status)))
    }

    /// Kills the whole group now.
    pub fn kill_group(&self) {
        self.killer.kill();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // Kill the group unless it was already swept after the leader was reaped.
        self.killer.sweep_and_close();
        if let Some(task) = self.stderr_task.take() {
            task.abort();
        }
    }
}

/// Pids of live (non-zombie) processes whose process group is `pgid`, read from `/proc`.
/// Used to check that a group is really gone.
pub fn group_members(pgid: i32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the command name (which is in parentheses and may contain spaces).
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // fields[0] = state, fields[1] = ppid, fields[2] = pgrp
        if fields.len() < 3 {
            continue;
        }
        if fields[0] == "Z" || fields[0] == "X" {
            continue;
        }
        if fields[2].parse::<i32>().ok() == Some(pgid) {
            out.push(pid);
        }
    }
    out
}

/// Spawns `program args` plainly (no group, no env filtering, inherited cwd) and waits.
/// This is the baseline the dispatch benchmark compares against.
pub async fn run_plain(program: &str, args: &[&str]) -> Result<ExitInfo, ProcessError> {
    let status = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .map_err(|source| ProcessError::Spawn {
            program: program.to_string(),
            source,
        })?;
    Ok(exit_info(status))
}

/// Runs a program to completion and returns its stdout (at most `limit` bytes kept) and exit.
/// For short probes such as `codex --version`.
pub async fn capture_output(
    spec: &ProcessSpec,
    limit: usize,
) -> Result<(String, ExitInfo), ProcessError> {
    let mut p = spawn(spec)?;
    let mut out = String::new();
    if let Some(mut r) = p.take_stdout() {
        while let Ok(Some(line)) = r.next_line().await {
            if out.len() < limit {
                out.push_str(&line.text);
                out.push('\n');
            }
        }
    }
    let exit = p.wait().await?;
    out.truncate(limit);
    Ok((out, exit))
}
