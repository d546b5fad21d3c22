//! CPU time and memory of a process, read from `/proc` (Linux).

/// CPU time (user + system) of `pid` in milliseconds.
pub fn cpu_ms(pid: u32) -> Option<f64> {
    stat_cpu_ms(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// CPU time of `pid`'s live threads named `name` (the kernel's 15-byte `comm`), in milliseconds.
pub fn thread_cpu_ms(pid: u32, name: &str) -> Option<f64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = None;
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).ok();
        if let Some(ms) = stat.as_deref().and_then(stat_cpu_ms) {
            total = Some(total.unwrap_or(0.0) + ms);
        }
    }
    total
}

/// The first process whose `comm` is `name` (e.g. the machine's `nats-server`).
pub fn pid_named(name: &str) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
            (comm.trim_end() == name).then_some(pid)
        })
}

/// User + system time of a `/proc/.../stat` line, in milliseconds.
fn stat_cpu_ms(stat: &str) -> Option<f64> {
    // Fields after the command name, which is parenthesized and may contain spaces.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    let ticks = 100.0; // USER_HZ on Linux.
    Some((utime + stime) * 1000.0 / ticks)
}

fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|line| line.starts_with(key))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|value| value.parse().ok())
}

/// Resident set size in MiB.
pub fn rss_mib(pid: u32) -> Option<f64> {
    status_kib(pid, "VmRSS:").map(|kib| kib as f64 / 1024.0)
}

/// Peak resident set size in MiB.
pub fn peak_rss_mib(pid: u32) -> Option<f64> {
    status_kib(pid, "VmHWM:").map(|kib| kib as f64 / 1024.0)
}

/// Context switches (voluntary and involuntary) of all of `pid`'s live threads. Threads that
/// exited are not counted; the server's runtime and SQLite worker threads live as long as it.
pub fn context_switches(pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0;
    for task in tasks.flatten() {
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        total += status
            .lines()
            .filter(|line| {
                line.starts_with("voluntary_ctxt_switches:")
                    || line.starts_with("nonvoluntary_ctxt_switches:")
            })
            .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>();
    }
    Some(total)
}
