//! Shared helpers: CLI presence checks (skip locally, fail under CI=true), event collection, process-group checks.

use std::time::Duration;

use ar_dispatch::{EventType, Run, RunEvent};
pub use ar_test_support::require_cli;

/// Reads every event of a run (bounded by the run ending).
pub async fn collect(run: &Run) -> Vec<RunEvent> {
    match run.events() {
        Some(ev) => ev.collect().await,
        None => Vec::new(),
    }
}

/// Data of events of one kind.
pub fn data_of(events: &[RunEvent], kind: EventType) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.kind == kind)
        .map(|e| e.data.clone())
        .collect()
}

/// Waits (bounded: 500 polls of 10 ms) until no live process is left in the group.
pub async fn group_gone(pgid: i32) -> bool {
    for _ in 0..500 {
        if ar_process::group_members(pgid).is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    ar_process::group_members(pgid).is_empty()
}

/// Pid of the newest process whose command line contains `needle` (bounded wait).
pub async fn find_process(needle: &str) -> Option<i32> {
    for _ in 0..1000 {
        if let Some(p) = scan(needle) {
            return Some(p);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// Matching pids; a process-group leader is preferred (a forked shell shares its parent's
/// command line for a moment), else the newest.
fn scan(needle: &str) -> Option<i32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(needle) && pid != std::process::id() as i32 {
                found.push(pid);
            }
        }
    }
    found
        .iter()
        .copied()
        .find(|p| pgid_of(*p) == Some(*p))
        .or_else(|| found.iter().copied().max())
}

/// The process group of a pid, from /proc.
pub fn pgid_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(2)?.parse().ok()
}
