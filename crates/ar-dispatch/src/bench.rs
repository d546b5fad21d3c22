//! Dispatch benchmark: overhead of a `command` run of `/bin/true` against a direct spawn, and many concurrent chatty runs streamed without loss.
//!
//! Exposed to the binary as `agent-runtime bench dispatch`: call [`run_bench`] and print the
//! returned [`BenchReport`] (it implements `Display`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::event::{EventType, State};
use crate::local::{LocalConfig, LocalRuntime};
use crate::run::{DispatchError, Runtime, EVENT_BUFFER};
use crate::spec::RunSpec;

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Samples of `/bin/true` (direct and dispatched each).
    pub overhead_iterations: usize,
    /// Concurrent chatty runs.
    pub concurrent_runs: usize,
    /// Lines each chatty run prints (`yes | head -n N`).
    pub lines_per_run: usize,
    /// Directory for run workdirs.
    pub workspace: PathBuf,
}

impl BenchConfig {
    /// The workload: 300 overhead samples, 200 runs of 100 000 lines.
    pub fn standard(workspace: impl Into<PathBuf>) -> Self {
        Self {
            overhead_iterations: 300,
            concurrent_runs: 200,
            lines_per_run: 100_000,
            workspace: workspace.into(),
        }
    }
}

/// Results; `Display` prints a short table.
#[derive(Debug, Clone)]
pub struct BenchReport {
    /// Samples per side.
    pub overhead_iterations: usize,
    /// Direct spawn p50.
    pub direct_p50: Duration,
    /// Direct spawn p99.
    pub direct_p99: Duration,
    /// Dispatched run (dispatch → exited event → wait) p50.
    pub dispatch_p50: Duration,
    /// Dispatched run p99.
    pub dispatch_p99: Duration,
    /// `dispatch_p50 - direct_p50`, floored at zero (the printed figure is signed).
    pub added_p50: Duration,
    /// Concurrent runs.
    pub concurrent_runs: usize,
    /// Lines expected per run.
    pub lines_per_run: usize,
    /// Message events received over all runs.
    pub lines_received: u64,
    /// Lines expected minus received.
    pub lines_lost: u64,
    /// Runs that did not succeed.
    pub runs_failed: usize,
    /// Wall time of the concurrent phase.
    pub concurrent_elapsed: Duration,
    /// Lines per second in the concurrent phase.
    pub lines_per_sec: f64,
    /// Resident memory before the concurrent phase (KiB, from /proc).
    pub rss_before_kib: u64,
    /// Peak resident memory after it (KiB).
    pub rss_peak_kib: u64,
    /// Events buffered per run (the backpressure bound).
    pub event_buffer: usize,
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "dispatch overhead ({} samples of /bin/true)",
            self.overhead_iterations
        )?;
        writeln!(
            f,
            "  direct spawn      p50 {:>9.3} ms   p99 {:>9.3} ms",
            ms(self.direct_p50),
            ms(self.direct_p99)
        )?;
        writeln!(
            f,
            "  command dispatch  p50 {:>9.3} ms   p99 {:>9.3} ms",
            ms(self.dispatch_p50),
            ms(self.dispatch_p99)
        )?;
        writeln!(
            f,
            "  added p50         {:>+9.3} ms (dispatch p50 - direct p50)",
            ms(self.dispatch_p50) - ms(self.direct_p50)
        )?;
        writeln!(
            f,
            "streaming ({} concurrent runs x {} lines)",
            self.concurrent_runs, self.lines_per_run
        )?;
        writeln!(
            f,
            "  received {} lines, lost {}, failed runs {}",
            self.lines_received, self.lines_lost, self.runs_failed
        )?;
        writeln!(
            f,
            "  elapsed {:.2} s, {:.0} lines/s",
            self.concurrent_elapsed.as_secs_f64(),
            self.lines_per_sec
        )?;
        write!(
            f,
            "  RSS before {} KiB, peak {} KiB (event buffer {} per run)",
            self.rss_before_kib, self.rss_peak_kib, self.event_buffer
        )
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Runs both measurements.
pub async fn run_bench(config: BenchConfig) -> Result<BenchReport, DispatchError> {
    std::fs::create_dir_all(&config.workspace).map_err(|source| {
        DispatchError::Process(ar_process::ProcessError::Workdir {
            path: config.workspace.clone(),
            source,
        })
    })?;
    let rt = Arc::new(LocalRuntime::standard(LocalConfig::new(&config.workspace)));
    let (direct, dispatched) = measure_overhead(&rt, &config).await?;
    let direct_p50 = percentile(&direct, 0.5);
    let dispatch_p50 = percentile(&dispatched, 0.5);
    let rss_before = proc_status_kib("VmRSS:");
    let streamed = stream_concurrently(&rt, &config).await?;
    let expected = (config.concurrent_runs * config.lines_per_run) as u64;
    Ok(BenchReport {
        overhead_iterations: config.overhead_iterations,
        direct_p50,
        direct_p99: percentile(&direct, 0.99),
        dispatch_p50,
        dispatch_p99: percentile(&dispatched, 0.99),
        added_p50: dispatch_p50.saturating_sub(direct_p50),
        concurrent_runs: config.concurrent_runs,
        lines_per_run: config.lines_per_run,
        lines_received: streamed.received,
        lines_lost: expected.saturating_sub(streamed.received),
        runs_failed: streamed.failed,
        concurrent_elapsed: streamed.elapsed,
        lines_per_sec: streamed.received as f64 / streamed.elapsed.as_secs_f64().max(1e-9),
        rss_before_kib: rss_before,
        rss_peak_kib: proc_status_kib("VmHWM:"),
        event_buffer: EVENT_BUFFER,
    })
}

/// Sorted durations of `/bin/true` spawned directly and dispatched as a `command` run
/// (dispatch → every event read → wait), after a warm-up of both.
async fn measure_overhead(
    rt: &LocalRuntime,
    config: &BenchConfig,
) -> Result<(Vec<Duration>, Vec<Duration>), DispatchError> {
    let workdir = config.workspace.join("overhead");
    let true_spec = RunSpec {
        agent: "command".into(),
        prompt: "/bin/true".into(),
        workdir: workdir.to_string_lossy().to_string(),
        ..Default::default()
    };
    for _ in 0..5 {
        ar_process::run_plain("/bin/true", &[]).await?;
        rt.dispatch(true_spec.clone()).await?.wait().await;
    }
    let mut direct = Vec::with_capacity(config.overhead_iterations);
    let mut dispatched = Vec::with_capacity(config.overhead_iterations);
    for _ in 0..config.overhead_iterations {
        let t = Instant::now();
        ar_process::run_plain("/bin/true", &[]).await?;
        direct.push(t.elapsed());

        let t = Instant::now();
        let run = rt.dispatch(true_spec.clone()).await?;
        if let Some(ev) = run.events() {
            ev.collect().await;
        }
        run.wait().await;
        dispatched.push(t.elapsed());
    }
    direct.sort();
    dispatched.sort();
    Ok((direct, dispatched))
}

/// What the concurrent phase saw.
struct Streamed {
    received: u64,
    failed: usize,
    elapsed: Duration,
}

/// Runs the chatty `yes | head` runs at once and counts the lines that arrive.
async fn stream_concurrently(
    rt: &Arc<LocalRuntime>,
    config: &BenchConfig,
) -> Result<Streamed, DispatchError> {
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(config.concurrent_runs);
    for i in 0..config.concurrent_runs {
        let rt = rt.clone();
        let spec = RunSpec {
            agent: "command".into(),
            prompt: format!("sh -c 'yes | head -n {}'", config.lines_per_run),
            workdir: config
                .workspace
                .join(format!("chatty-{i}"))
                .to_string_lossy()
                .to_string(),
            ..Default::default()
        };
        tasks.push(tokio::spawn(async move {
            let run = rt.dispatch(spec).await?;
            let mut count: u64 = 0;
            if let Some(mut ev) = run.events() {
                while let Some(e) = ev.next().await {
                    if e.kind == EventType::Message && e.data == "y" {
                        count += 1;
                    }
                }
            }
            let status = run.wait().await;
            Ok::<(u64, bool), DispatchError>((count, status.state == State::Succeeded))
        }));
    }
    let mut streamed = Streamed {
        received: 0,
        failed: 0,
        elapsed: Duration::ZERO,
    };
    for t in tasks {
        match t.await {
            Ok(Ok((n, ok))) => {
                streamed.received += n;
                streamed.failed += usize::from(!ok);
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => streamed.failed += 1,
        }
    }
    streamed.elapsed = start.elapsed();
    Ok(streamed)
}
