//! A pids cgroup per host (one run's commands, which run one at a time): the kernel caps the
//! tasks (processes and threads) a command and everything it starts may have, so a fork bomb
//! fails to fork instead of exhausting the machine's process table; and every process of the
//! command, even one that left its process group with `setsid`, can be found and killed.
//! It is made at the first command and removed with the host (making and removing one per
//! command cost milliseconds each time).
//!
//! The child joins the cgroup itself before exec (`ar_process::ChildLimits::cgroup_procs`).
//! Without a writable pids controller (no cgroup file system, cgroup v2 whose parent does not
//! delegate `pids`) the command runs without it and the supervisor falls back to counting
//! its process group in `/proc`.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A run's pids cgroup, removed on drop (after its processes are killed).
pub(crate) struct PidsCgroup {
    dir: PathBuf,
    procs: File,
}

fn own_cgroup() -> Option<PathBuf> {
    let table = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    // cgroup v1: a hierarchy with the pids controller.
    for line in table.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if controllers.split(',').any(|c| c == "pids") {
            return Some(Path::new("/sys/fs/cgroup/pids").join(path.trim_start_matches('/')));
        }
    }
    // cgroup v2: the unified hierarchy, when it offers pids.
    let path = table.lines().find_map(|l| l.strip_prefix("0::"))?;
    let controllers = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers").ok()?;
    controllers
        .split_whitespace()
        .any(|c| c == "pids")
        .then(|| Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/')))
}

impl PidsCgroup {
    /// A fresh cgroup beside this process's, holding at most `max` tasks; `None` when the
    /// pids controller cannot be used here.
    pub fn create(max: usize) -> Option<Self> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let parent = own_cgroup()?;
        let name = format!(
            "ar-workspace-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let dir = parent.join(name);
        std::fs::create_dir(&dir).ok()?;
        let made = Self::configure(&dir, max);
        if made.is_none() {
            let _ = std::fs::remove_dir(&dir);
        }
        made
    }

    fn configure(dir: &Path, max: usize) -> Option<Self> {
        std::fs::write(dir.join("pids.max"), max.to_string()).ok()?;
        let procs = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .ok()?;
        Some(Self {
            dir: dir.to_path_buf(),
            procs,
        })
    }

    /// `cgroup.procs`, for the child to join.
    pub fn procs_fd(&self) -> BorrowedFd<'_> {
        self.procs.as_fd()
    }

    /// How many forks and clones the limit has refused so far.
    pub fn refused(&self) -> u64 {
        std::fs::read_to_string(self.dir.join("pids.events"))
            .ok()
            .and_then(|events| {
                events
                    .lines()
                    .find_map(|l| l.strip_prefix("max "))
                    .and_then(|n| n.trim().parse::<u64>().ok())
            })
            .unwrap_or(0)
    }

    fn members(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Kills every process in the cgroup (the command's, wherever its process group went).
    pub fn kill_all(&self) {
        for _ in 0..50 {
            let members = self.members();
            if members.is_empty() {
                return;
            }
            for pid in members
                .into_iter()
                .filter_map(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        self.kill_all();
        // A cgroup can be removed once its last task is gone; killed processes whose parent
        // died too linger as zombies until init reaps them, so a slow removal finishes in
        // the background rather than holding up the caller.
        for _ in 0..10 {
            if remove(&self.dir) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let dir = self.dir.clone();
        let spawned = std::thread::Builder::new()
            .name("ar-workspace-cgroup-rmdir".into())
            .spawn(move || {
                for _ in 0..600 {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    if remove(&dir) {
                        return;
                    }
                }
                tracing::warn!(cgroup = %dir.display(), "a run's pids cgroup could not be removed");
            });
        if spawned.is_err() {
            tracing::warn!(cgroup = %self.dir.display(), "a run's pids cgroup was left behind");
        }
    }
}

fn remove(dir: &Path) -> bool {
    std::fs::remove_dir(dir).is_ok() || !dir.exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_caps_its_tasks_and_goes_with_its_owner() {
        let Some(cgroup) = PidsCgroup::create(7) else {
            eprintln!("SKIPPED: no writable pids cgroup here");
            return;
        };
        let dir = cgroup.dir.clone();
        assert_eq!(
            std::fs::read_to_string(dir.join("pids.max"))
                .unwrap()
                .trim(),
            "7"
        );
        assert_eq!(cgroup.refused(), 0);
        assert!(cgroup.members().is_empty());
        drop(cgroup);
        for _ in 0..100 {
            if !dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        panic!("{} was not removed", dir.display());
    }
}
