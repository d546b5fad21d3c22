//! `run_command`: an allow-listed program with arguments, no shell, confined and bounded.
//!
//! A call is checked first (program a bare name on the allow-list, no shell syntax, the
//! read-only subset in a read-only workspace, the working directory resolved beneath the
//! root), then spawned through `ar-process` in its own process group with a filtered
//! environment, rlimits (heap, file size, CPU, no core files), the run's pids cgroup
//! (`pids.rs`) and Landlock (`sandbox.rs`), and supervised (`run.rs`): its output is kept to
//! the last bytes; a flood of output, reaching the process limit or the timeout stops it all.

mod output;
mod pids;
mod run;
mod sandbox;

use std::path::PathBuf;
use std::time::Duration;

use ar_core::tool::ToolOutput;
use serde::Deserialize;

pub(crate) use pids::PidsCgroup;
pub use sandbox::{SandboxReport, SandboxState};

/// Whether the kernel can cap the processes of a command here (a writable pids cgroup). As
/// root, `RLIMIT_NPROC` binds nothing, so without one a fork bomb is only chased by a
/// watchdog; tests that launch one must not run then.
pub fn kernel_process_limit_available() -> bool {
    PidsCgroup::create(1).is_some()
}

use crate::error::{ToolError, ToolResult};
use crate::host::Inner;
use crate::Access;

/// What `run_command` allows and how it bounds a command.
#[derive(Debug, Clone)]
pub struct CommandPolicy {
    /// Programs that may be run, by name (looked up in the command's `PATH`).
    pub allowed_programs: Vec<String>,
    /// The subset allowed in a read-only workspace (`git` further only with read-only
    /// subcommands).
    pub read_only_programs: Vec<String>,
    /// Timeout when the call gives none.
    pub default_timeout: Duration,
    /// The largest timeout a call may ask for.
    pub max_timeout: Duration,
    /// Bytes of output returned (the last ones; stdout and stderr each).
    pub output_bytes: usize,
    /// Output after which the command is stopped.
    pub output_stop_bytes: u64,
    /// Heap limit (`RLIMIT_DATA`) of each process.
    pub memory_bytes: u64,
    /// The largest file a command may write (`RLIMIT_FSIZE`).
    pub file_size_bytes: u64,
    /// Tasks (processes and threads) the command may have at once: the kernel refuses more
    /// (pids cgroup), and a command that reaches the limit is stopped.
    pub max_processes: usize,
    /// Refuse to run when the kernel does not enforce Landlock (default true).
    pub require_landlock: bool,
    /// Extra directories commands may read and execute from (toolchains elsewhere).
    pub extra_read_paths: Vec<PathBuf>,
    /// The command's `PATH`; `None` inherits this process's.
    pub path: Option<String>,
    /// Refuse `git push` (a repository workspace whose delivery is a preview).
    pub deny_git_push: bool,
}

/// The original's allow-list.
const DEFAULT_PROGRAMS: &[&str] = &[
    "go", "npm", "npx", "node", "pnpm", "yarn", "make", "git", "ls", "cat", "grep", "rg", "find",
    "head", "tail", "wc", "diff", "echo", "mkdir", "cp", "mv", "rm", "pwd", "python", "python3",
    "pip", "pip3", "pytest", "uv", "poetry", "cargo", "rustc",
];
/// Programs that only read, for read-only workspaces.
const DEFAULT_READ_ONLY_PROGRAMS: &[&str] = &[
    "pwd", "ls", "cat", "grep", "rg", "head", "tail", "wc", "diff", "echo", "git",
];

impl Default for CommandPolicy {
    fn default() -> Self {
        Self {
            allowed_programs: DEFAULT_PROGRAMS.iter().map(|s| s.to_string()).collect(),
            read_only_programs: DEFAULT_READ_ONLY_PROGRAMS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(900),
            output_bytes: 50_000,
            output_stop_bytes: 32 * 1024 * 1024,
            memory_bytes: 4 * 1024 * 1024 * 1024,
            file_size_bytes: 1024 * 1024 * 1024,
            max_processes: 1024,
            require_landlock: true,
            deny_git_push: false,
            extra_read_paths: Vec::new(),
            path: None,
        }
    }
}

#[derive(Deserialize)]
struct RunInput {
    #[serde(default)]
    program: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    working_directory: Option<String>,
    #[serde(default)]
    timeout_seconds: Option<i64>,
    #[serde(default)]
    command: Option<String>,
}

/// A checked command, ready to spawn.
pub(crate) struct Checked {
    pub program: String,
    pub args: Vec<String>,
    pub workdir: PathBuf,
    pub timeout: Duration,
}

/// A private directory per host for commands' `HOME`, `TMPDIR` and caches, outside the
/// root (tool caches would otherwise show up in the workspace), removed with the host.
pub(crate) struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    pub fn create() -> std::io::Result<Self> {
        let dir = tempfile::Builder::new().prefix("ar-workspace-").tempdir()?;
        for sub in ["home", "tmp", "cache"] {
            std::fs::create_dir(dir.path().join(sub))?;
        }
        Ok(Self { dir })
    }

    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// Shell operators as whole arguments, and the starts of redirections and substitutions.
const SHELL_TOKENS: &[&str] = &[
    "|", "||", "&", "&&", ";", ";;", ">", ">>", "<", "<<", "<<<", "2>", "2>>", "2>&1", "1>&2",
    ">&", "&>", "|&",
];
const SHELL_STARTS: &[&str] = &[">", "<", "|", "&&", ";", "2>", "&>", "$("];
/// Characters refused in the deprecated `command` string, as the original does.
const COMMAND_STRING_OPERATORS: &[char] = &['|', '&', ';', '<', '>', '(', ')', '`', '$'];

fn shell_syntax(arg: &str) -> bool {
    SHELL_TOKENS.contains(&arg)
        || SHELL_STARTS.iter().any(|s| arg.starts_with(s))
        || arg.contains("$(")
}

fn program_and_args(input: &RunInput) -> ToolResult<(String, Vec<String>)> {
    let program = input.program.trim();
    if !program.is_empty() {
        return Ok((program.to_string(), input.args.clone()));
    }
    let command = input.command.as_deref().unwrap_or("").trim();
    if command.is_empty() {
        return Err(ToolError::new(
            "program is required (with its arguments in args)",
        ));
    }
    if command.contains(COMMAND_STRING_OPERATORS) {
        return Err(ToolError::new(
            "shell operators are not allowed: there is no shell; give program and args",
        ));
    }
    let mut words = command.split_whitespace().map(str::to_string);
    let program = words.next().unwrap_or_default();
    Ok((program, words.collect()))
}

fn check_program(
    policy: &CommandPolicy,
    access: Access,
    program: &str,
    args: &[String],
) -> ToolResult<()> {
    if program.contains('/') {
        return Err(ToolError::new(format!(
            "program must be a name from the allow-list, not a path (got {program:?})"
        )));
    }
    if program
        .chars()
        .any(|c| c.is_whitespace() || COMMAND_STRING_OPERATORS.contains(&c) || c == '\0')
    {
        return Err(ToolError::new(format!(
            "program must be one name (got {program:?}); put its arguments in args; there is no shell"
        )));
    }
    if !policy.allowed_programs.iter().any(|p| p == program) {
        let mut allowed = policy.allowed_programs.clone();
        allowed.sort();
        return Err(ToolError::new(format!(
            "program {program:?} is not allowed; allowed programs: {}",
            allowed.join(", ")
        )));
    }
    if program == "git" && policy.deny_git_push && pushes(args) {
        return Err(ToolError::new(
            "git push is blocked: this run's delivery is a preview",
        ));
    }
    if access == Access::ReadOnly {
        let permitted = policy.read_only_programs.iter().any(|p| p == program)
            && (program != "git" || read_only_git(args));
        if !permitted {
            return Err(ToolError::new(format!(
                "{program:?} with these arguments is not permitted in a read-only workspace"
            )));
        }
    }
    Ok(())
}

/// Whether git arguments may push (any `push` or `send-pack` word: options before the
/// subcommand cannot hide it).
fn pushes(args: &[String]) -> bool {
    args.iter().any(|a| a == "push" || a == "send-pack")
}

/// Git subcommands that only read (`diff` without `--output`).
fn read_only_git(args: &[String]) -> bool {
    let Some(sub) = args.first() else {
        return false;
    };
    match sub.as_str() {
        "status" | "log" | "show" | "rev-parse" | "ls-files" | "grep" | "blame" => true,
        "diff" => !args
            .iter()
            .any(|a| a == "--output" || a.starts_with("--output=")),
        _ => false,
    }
}

fn check(inner: &Inner, input: RunInput) -> ToolResult<Checked> {
    let (program, args) = program_and_args(&input)?;
    if let Some(bad) = args.iter().find(|a| shell_syntax(a)) {
        return Err(ToolError::new(format!(
            "shell operators are not allowed (argument {bad:?}): there is no shell; run one program with its arguments"
        )));
    }
    if args.iter().any(|a| a.contains('\0')) {
        return Err(ToolError::new("an argument contains a NUL byte"));
    }
    check_program(&inner.policy, inner.access, &program, &args)?;
    let timeout = match input.timeout_seconds {
        None | Some(0) => inner.policy.default_timeout,
        Some(s) if s >= 1 && (s as u64) <= inner.policy.max_timeout.as_secs() => {
            Duration::from_secs(s as u64)
        }
        Some(s) => {
            return Err(ToolError::new(format!(
                "timeout_seconds must be between 1 and {} (got {s})",
                inner.policy.max_timeout.as_secs()
            )))
        }
    };
    let workdir = match input.working_directory.as_deref().map(str::trim) {
        None | Some("") | Some(".") => inner.root.real_path().to_path_buf(),
        Some(dir) => inner.root.dir_real_path(dir)?,
    };
    Ok(Checked {
        program,
        args,
        workdir,
        timeout,
    })
}

/// Runs one `run_command` call.
pub(crate) async fn run(inner: &Inner, input: serde_json::Value) -> ToolResult<ToolOutput> {
    let input: RunInput = crate::host::parse("run_command", input)?;
    let checked = check(inner, input)?;
    run::execute(inner, checked).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_syntax_is_recognised() {
        for bad in [
            "|",
            "&&",
            ";",
            ">",
            ">out.txt",
            "2>&1",
            "$(whoami)",
            "x$(id)",
            "<in",
        ] {
            assert!(shell_syntax(bad), "{bad}");
        }
        for fine in ["a|b", "--format=%h <%ae>", "-n", "foo;bar", "x>y"] {
            assert!(!shell_syntax(fine), "{fine}");
        }
    }

    #[test]
    fn a_preview_refuses_git_push_in_any_form() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let policy = CommandPolicy {
            deny_git_push: true,
            ..CommandPolicy::default()
        };
        for refused in [
            &["push"][..],
            &["-C", ".", "push", "origin"],
            &["send-pack", "x"],
        ] {
            let error = check_program(&policy, Access::ReadWrite, "git", &args(refused));
            assert!(error.is_err(), "{refused:?}");
        }
        assert!(check_program(&policy, Access::ReadWrite, "git", &args(&["status"])).is_ok());
        let open = CommandPolicy::default();
        assert!(check_program(&open, Access::ReadWrite, "git", &args(&["push"])).is_ok());
    }

    #[test]
    fn read_only_git_subcommands() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(read_only_git(&args(&["status"])));
        assert!(read_only_git(&args(&["diff", "HEAD"])));
        assert!(!read_only_git(&args(&["diff", "--output=x"])));
        assert!(!read_only_git(&args(&["commit", "-m", "x"])));
        assert!(!read_only_git(&args(&["-C", "/", "status"])));
    }
}
