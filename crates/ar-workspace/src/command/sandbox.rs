//! Landlock for `run_command`: the ruleset a command runs under, applied on the thread that
//! spawns it (see `ar_process::spawn_confined`), and the report of how fully it applied.
//!
//! Handled: every file-system right of Landlock ABI 6 and its scopes (no signals to, and no
//! abstract UNIX sockets of, processes outside the sandbox, such as the service itself).
//! Granted:
//! - the root: everything when the workspace is read-write; read and execute when read-only;
//! - the run's private scratch directory (`HOME`, `TMPDIR`, tool caches): everything;
//! - system directories (`/usr`, `/bin`, `/sbin`, `/lib*`, `/etc`, `/opt`) and the program's
//!   own toolchain directory when it lives elsewhere (`~/.cargo`, `~/.pyenv`, an nvm
//!   version): read and execute;
//! - `/dev/null` read and write; `/dev/zero`, `/dev/random`, `/dev/urandom` read.
//!
//! Nothing else: not `/proc` (other processes' environments hold the service's secrets),
//! not `/sys`, not the rest of `/dev`, not `/tmp`, not `/home`. The network is not
//! restricted (package managers need it).

use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};

use landlock::{
    path_beneath_rules, Access, AccessFs, BitFlags, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

/// How fully the kernel confined a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxState {
    /// Every restriction asked for is enforced.
    Full,
    /// The kernel enforced only part of them (an older Landlock ABI).
    Partial,
    /// Landlock is not available: the command ran unconfined (only when the policy allows).
    None,
}

/// What the sandbox of one command was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SandboxReport {
    /// How fully it applied.
    pub state: SandboxState,
    /// The Landlock ABI the kernel offered, when it has Landlock.
    pub abi: Option<i32>,
}

impl SandboxReport {
    /// One line for the command's output.
    pub fn describe(&self) -> String {
        let abi = self.abi.map(|v| format!(" (ABI {v})")).unwrap_or_default();
        match self.state {
            SandboxState::Full => format!("Landlock fully enforced{abi}"),
            SandboxState::Partial => format!(
                "Landlock only partly enforced{abi}: this kernel lacks some restrictions"
            ),
            SandboxState::None => "Landlock is NOT enforced: this kernel does not offer it, the command ran without file-system confinement".to_string(),
        }
    }
}

/// The message when a required sandbox is missing.
pub(crate) const SANDBOX_MISSING: &str = "run_command needs Landlock (Linux 5.13 or later, enabled at boot) to confine commands to the workspace, and this kernel does not enforce it; the command was not run";

/// The rules of one command.
pub(crate) struct Rules<'a> {
    pub root: BorrowedFd<'a>,
    pub writable: bool,
    pub scratch: &'a Path,
    pub read: Vec<PathBuf>,
    pub require: bool,
}

const ABI_USED: ABI = ABI::V6;
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];
const READ_DEVICES: &[&str] = &["/dev/zero", "/dev/random", "/dev/urandom"];

fn other(error: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("landlock: {error}"))
}

impl Rules<'_> {
    /// Restricts the calling thread; refuses (nothing spawned) when a required sandbox is
    /// not enforced.
    pub fn restrict(self) -> std::io::Result<SandboxReport> {
        let all = AccessFs::from_all(ABI_USED);
        let read = AccessFs::from_read(ABI_USED);
        let file_all = AccessFs::from_file(ABI_USED);
        let file_read: BitFlags<AccessFs> = AccessFs::ReadFile.into();
        let root_access = if self.writable { all } else { read };
        let created = Ruleset::default()
            .handle_access(all)
            .and_then(|r| r.scope(Scope::from_all(ABI_USED)))
            .and_then(|r| r.create())
            .map_err(other)?;
        let scratch = landlock::PathFd::new(self.scratch).map_err(other)?;
        let status = created
            .add_rule(PathBeneath::new(self.root, root_access))
            .and_then(|r| r.add_rule(PathBeneath::new(scratch, all)))
            .and_then(|r| r.add_rules(path_beneath_rules(SYSTEM_DIRS, read)))
            .and_then(|r| r.add_rules(path_beneath_rules(&self.read, read)))
            .and_then(|r| r.add_rules(path_beneath_rules(["/dev/null"], file_all)))
            .and_then(|r| r.add_rules(path_beneath_rules(READ_DEVICES, file_read)))
            .and_then(|r| r.restrict_self())
            .map_err(other)?;
        let report = SandboxReport {
            state: match status.ruleset {
                RulesetStatus::FullyEnforced => SandboxState::Full,
                RulesetStatus::PartiallyEnforced => SandboxState::Partial,
                RulesetStatus::NotEnforced => SandboxState::None,
            },
            abi: match status.landlock {
                landlock::LandlockStatus::Available {
                    effective_abi,
                    kernel_abi,
                } => Some(kernel_abi.unwrap_or(effective_abi as i32)),
                _ => None,
            },
        };
        if self.require && report.state == SandboxState::None {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                SANDBOX_MISSING,
            ));
        }
        Ok(report)
    }
}

fn is_system(path: &Path) -> bool {
    SYSTEM_DIRS.iter().any(|dir| path.starts_with(dir))
}

/// Directories a program needs to read beyond the system ones: its own directory, the one
/// above it when that is a tool's private tree (a path through a dot-directory: `~/.cargo`,
/// `~/.pyenv`, an nvm version; never a plain home directory), for the name and for where
/// its symlink leads; and rustup's home for `cargo` and `rustc`.
pub(crate) fn toolchain_dirs(
    resolved: &Path,
    program: &str,
    rustup_home: Option<&Path>,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let canonical = std::fs::canonicalize(resolved).ok();
    for path in [Some(resolved.to_path_buf()), canonical]
        .into_iter()
        .flatten()
    {
        if is_system(&path) {
            continue;
        }
        let bin = path.parent().map(Path::to_path_buf);
        let top = bin.as_deref().and_then(Path::parent).map(Path::to_path_buf);
        let top = top.filter(|t| {
            t.components().any(|c| {
                c.as_os_str()
                    .to_str()
                    .is_some_and(|s| s.starts_with('.') && s.len() > 1)
            })
        });
        for dir in [bin, top].into_iter().flatten() {
            if dir.parent().is_some() && !out.contains(&dir) {
                out.push(dir);
            }
        }
    }
    if matches!(program, "cargo" | "rustc") {
        if let Some(home) = rustup_home.filter(|h| h.is_dir()) {
            out.push(home.to_path_buf());
        }
    }
    out
}
