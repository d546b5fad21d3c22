//! Spawning and supervising one checked command.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ar_core::tool::ToolOutput;
use ar_process::{
    ChildLimits, EnvPolicy, Process, ProcessSpec, Resource, ResourceLimit, StdinMode,
};
use serde_json::json;
use tokio::io::AsyncReadExt;

use super::output::Tail;
use super::pids::PidsCgroup;
use super::sandbox::{toolchain_dirs, Rules, SandboxReport};
use super::Checked;
use crate::error::{ToolError, ToolResult};
use crate::host::Inner;
use crate::Access;

/// How often the supervisor counts the group's processes and looks for the leader's exit.
const WATCH_INTERVAL: Duration = Duration::from_millis(20);
/// Names copied from this process's environment; everything else is left out.
const INHERITED_ENV: &[&str] = &[
    "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "USER", "LOGNAME",
];

/// Why a command stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Exited,
    TimedOut,
    OutputFlood,
    TooManyProcesses,
}

fn environment(inner: &Inner, checked: &Checked) -> (EnvPolicy, Option<PathBuf>) {
    let scratch = inner.scratch.path();
    let path = inner
        .policy
        .path
        .clone()
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".to_string());
    let mut env = EnvPolicy {
        inherit: INHERITED_ENV.iter().map(|s| s.to_string()).collect(),
        set: Vec::new(),
    }
    .with("PATH", path)
    .with("HOME", scratch.join("home").display().to_string())
    .with("TMPDIR", scratch.join("tmp").display().to_string())
    .with(
        "XDG_CACHE_HOME",
        scratch.join("cache").display().to_string(),
    )
    .with(
        "CARGO_HOME",
        scratch.join("cache/cargo").display().to_string(),
    )
    .with("GOPATH", scratch.join("cache/go").display().to_string())
    .with(
        "GOCACHE",
        scratch.join("cache/go-build").display().to_string(),
    )
    .with("GOFLAGS", "-modcacherw")
    .with(
        "npm_config_cache",
        scratch.join("cache/npm").display().to_string(),
    )
    .with(
        "PIP_CACHE_DIR",
        scratch.join("cache/pip").display().to_string(),
    )
    .with("GIT_TERMINAL_PROMPT", "0")
    .with("GIT_PAGER", "cat")
    .with("PAGER", "cat");
    if inner.access == Access::ReadOnly {
        env = env.with("GIT_OPTIONAL_LOCKS", "0");
    }
    // rustup's toolchains stay where the operator installed them (read-only to commands).
    let rustup = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".rustup")))
        .filter(|p| {
            p.join("toolchains").is_dir() && matches!(checked.program.as_str(), "cargo" | "rustc")
        });
    if let Some(home) = &rustup {
        env = env.with("RUSTUP_HOME", home.display().to_string());
    }
    (env, rustup)
}

fn limits(inner: &Inner, timeout: Duration) -> Vec<ResourceLimit> {
    let policy = &inner.policy;
    vec![
        ResourceLimit::new(Resource::Data, policy.memory_bytes),
        ResourceLimit::new(Resource::FileSize, policy.file_size_bytes),
        ResourceLimit::new(Resource::CoreFile, 0),
        // CPU time past the wall-clock timeout (a spinning group is killed before this).
        ResourceLimit::new(Resource::CpuSeconds, timeout.as_secs() + 5),
    ]
}

fn spawn(
    inner: &Inner,
    checked: &Checked,
    cgroup: Option<&PidsCgroup>,
) -> ToolResult<(Process, SandboxReport)> {
    let (env, rustup) = environment(inner, checked);
    let child_path = env
        .set
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone());
    let resolved =
        ar_process::find_program(&checked.program, child_path.as_deref()).ok_or_else(|| {
            ToolError::new(format!(
                "program {:?} is allowed but not installed (not found in the command's PATH)",
                checked.program
            ))
        })?;
    let mut read = toolchain_dirs(&resolved, &checked.program, rustup.as_deref());
    read.extend(inner.policy.extra_read_paths.iter().cloned());
    let spec = ProcessSpec {
        program: checked.program.clone(),
        args: checked.args.clone(),
        workdir: checked.workdir.clone(),
        create_workdir: false,
        workdir_mode: 0o755,
        env,
        stdin: StdinMode::Null,
    };
    let rules = Rules {
        root: inner.root.fd(),
        writable: inner.access == Access::ReadWrite,
        scratch: inner.scratch.path(),
        read,
        require: inner.policy.require_landlock,
    };
    let limits = limits(inner, checked.timeout);
    let child = ChildLimits {
        limits: &limits,
        cgroup_procs: cgroup.map(PidsCgroup::procs_fd),
    };
    ar_process::spawn_confined(&spec, child, move || rules.restrict()).map_err(|e| match &e {
        ar_process::ProcessError::Spawn { source, .. }
            if source.kind() == std::io::ErrorKind::Unsupported =>
        {
            ToolError::new(source.to_string())
        }
        _ => ToolError::new(format!("could not start {:?}: {e}", checked.program)),
    })
}

/// Runs a checked command to its end and reports it.
pub(crate) async fn execute(inner: &Inner, checked: Checked) -> ToolResult<ToolOutput> {
    // One command of a run at a time: they share the run's cgroup, whose leftovers are
    // killed when a command ends.
    let _one_at_a_time = inner.commands.lock().await;
    let started = Instant::now();
    let cgroup = inner
        .cgroup
        .get_or_init(|| PidsCgroup::create(inner.policy.max_processes))
        .as_ref();
    let baseline = cgroup.map_or(0, PidsCgroup::refused);
    let (mut process, sandbox) = spawn(inner, &checked, cgroup)?;
    let mut stdout = Tail::new(inner.policy.output_bytes);
    let watch = Watch {
        cgroup: cgroup.map(|c| (c, baseline)),
        pgid: process.pid() as i32,
        max: inner.policy.max_processes,
    };
    let stop = supervise(inner, &checked, &watch, &mut process, &mut stdout).await;
    process.kill_group();
    if let Some(cgroup) = cgroup {
        cgroup.kill_all();
    }
    let exit = match tokio::time::timeout(Duration::from_secs(5), process.wait()).await {
        Ok(Ok(exit)) => Some(exit),
        _ => None,
    };
    let stderr = process.stderr_tail().snapshot();
    let limit = if cgroup.is_some() {
        "cgroup"
    } else {
        "watchdog"
    };
    let mut output = report(
        inner,
        &checked,
        stop,
        exit,
        &stdout,
        &stderr,
        sandbox,
        started.elapsed(),
    );
    if let Some(structured) = output.structured.as_mut() {
        structured["process_limit"] = json!(limit);
    }
    Ok(output)
}

/// How the supervisor sees the command's process count.
struct Watch<'a> {
    /// The cgroup and its refusals before this command.
    cgroup: Option<(&'a PidsCgroup, u64)>,
    pgid: i32,
    max: usize,
}

impl Watch<'_> {
    /// Whether the command reached its process limit: the kernel refused a fork in its pids
    /// cgroup, or (without one) its process group has grown past the limit.
    fn over(&self) -> bool {
        match self.cgroup {
            Some((cgroup, before)) => cgroup.refused() > before,
            None => ar_process::group_members(self.pgid).len() > self.max,
        }
    }
}

/// Reads stdout into the tail until it closes, watching the clock, the output volume and
/// the process count; then waits for the leader.
async fn supervise(
    inner: &Inner,
    checked: &Checked,
    limit: &Watch<'_>,
    process: &mut Process,
    stdout: &mut Tail,
) -> Stop {
    let deadline = tokio::time::Instant::now() + checked.timeout;
    let mut pipe = process.take_stdout_raw();
    let mut stderr_lines = process.take_stderr_lines();
    let mut stderr_bytes: u64 = 0;
    let mut buf = vec![0u8; 64 * 1024];
    // The first look after one interval: a quick command is done before it.
    let mut watch =
        tokio::time::interval_at(tokio::time::Instant::now() + WATCH_INTERVAL, WATCH_INTERVAL);
    loop {
        tokio::select! {
            read = async { match pipe.as_mut() { Some(p) => p.read(&mut buf).await, None => std::future::pending().await } } => {
                match read {
                    Ok(0) | Err(_) => pipe = None,
                    Ok(n) => stdout.push(&buf[..n]),
                }
            }
            line = async { match stderr_lines.as_mut() { Some(r) => r.recv().await, None => std::future::pending().await } } => {
                match line {
                    Some(line) => stderr_bytes += line.text.len() as u64 + 1,
                    None => stderr_lines = None,
                }
            }
            _ = tokio::time::sleep_until(deadline) => return Stop::TimedOut,
            _ = watch.tick() => {
                if limit.over() {
                    return Stop::TooManyProcesses;
                }
                // Once the leader has exited, what is left of its group goes with it, so the
                // pipes close even when a background child held them open.
                let _ = process.try_wait();
            }
        }
        if stdout.total() + stderr_bytes > inner.policy.output_stop_bytes {
            return Stop::OutputFlood;
        }
        if pipe.is_none() && stderr_lines.is_none() {
            break;
        }
    }
    // Both pipes closed: a program may still be working without them.
    loop {
        tokio::select! {
            _ = process.wait() => return Stop::Exited,
            _ = tokio::time::sleep_until(deadline) => return Stop::TimedOut,
            _ = watch.tick() => {
                if limit.over() {
                    return Stop::TooManyProcesses;
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn report(
    inner: &Inner,
    checked: &Checked,
    stop: Stop,
    exit: Option<ar_process::ExitInfo>,
    stdout: &Tail,
    stderr: &str,
    sandbox: SandboxReport,
    elapsed: Duration,
) -> ToolOutput {
    let mut text = String::new();
    if stdout.cut() {
        text.push_str(&format!(
            "[output cut: showing the last {} of {} bytes]\n",
            inner.policy.output_bytes,
            stdout.total()
        ));
    }
    text.push_str(&stdout.text());
    if !stderr.is_empty() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("[stderr]\n");
        text.push_str(stderr);
    }
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    let status = exit
        .map(|e| e.to_string())
        .unwrap_or_else(|| "exit status unknown".to_string());
    let failure = match stop {
        Stop::TimedOut => Some(format!(
            "Command timed out after {} seconds and was stopped.",
            checked.timeout.as_secs()
        )),
        Stop::OutputFlood => Some(format!(
            "Command printed more than {} bytes and was stopped.",
            inner.policy.output_stop_bytes
        )),
        Stop::TooManyProcesses => Some(format!(
            "Command reached its limit of {} processes and threads and was stopped.",
            inner.policy.max_processes
        )),
        Stop::Exited if exit.is_some_and(|e| e.success()) => None,
        Stop::Exited => Some(format!("Command failed: {status}.")),
    };
    match &failure {
        Some(why) => text.push_str(why),
        None => text.push_str(&format!("[{status}]")),
    }
    if sandbox.state != super::SandboxState::Full {
        text.push_str(&format!("\n[sandbox: {}]", sandbox.describe()));
    }
    if failure.is_some() && denied(&text) {
        text.push_str(match inner.access {
            Access::ReadWrite => "\nNote: commands can write only inside the workspace; paths outside it are not accessible.",
            Access::ReadOnly => "\nNote: this workspace is read-only; commands cannot write anywhere in it.",
        });
    }
    let structured = json!({
        "exit_code": exit.and_then(|e| e.code),
        "signal": exit.and_then(|e| e.signal),
        "timed_out": stop == Stop::TimedOut,
        "stopped": stop != Stop::Exited,
        "output_bytes": stdout.total(),
        "output_cut": stdout.cut(),
        "duration_ms": elapsed.as_millis() as u64,
        "sandbox": sandbox,
    });
    let mut output = if failure.is_some() {
        ToolOutput::error(text)
    } else {
        ToolOutput::text(text)
    };
    output.structured = Some(structured);
    output
}

fn denied(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    lower.contains("permission denied")
        || lower.contains("read-only file system")
        || lower.contains("operation not permitted")
}
