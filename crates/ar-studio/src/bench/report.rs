//! The benchmark's figures and their printed form, with the targets they are held to.

use std::fmt;
use std::time::Duration;

/// Enqueue-to-frame latency on one connected runtime.
#[derive(Debug, Clone, Default)]
pub struct LatencyFigures {
    pub samples: usize,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
    pub error: Option<String>,
}

/// Memory with many runtimes holding open streams.
#[derive(Debug, Clone, Default)]
pub struct StreamFigures {
    pub runtimes: usize,
    pub connected: usize,
    pub rss_before_kib: u64,
    pub rss_after_kib: u64,
    pub error: Option<String>,
}

/// Commands through ack and finish with link clients.
#[derive(Debug, Clone, Default)]
pub struct ThroughputFigures {
    pub runtimes: usize,
    pub commands: usize,
    pub finished: usize,
    pub lost: usize,
    pub rejected: usize,
    pub executed_twice: usize,
    pub never_executed: usize,
    pub duplicate_frames: u64,
    pub elapsed: Duration,
    pub error: Option<String>,
}

/// Everything `run_bench` measured.
#[derive(Debug, Clone, Default)]
pub struct BenchReport {
    pub latency: LatencyFigures,
    pub streams: StreamFigures,
    pub throughput: ThroughputFigures,
}

impl BenchReport {
    /// Whether every figure meets its target.
    pub fn meets_targets(&self) -> bool {
        let t = &self.throughput;
        self.latency.error.is_none()
            && self.latency.p50 <= Duration::from_millis(1)
            && self.streams.error.is_none()
            && self.streams.connected == self.streams.runtimes
            && self.streams.rss_after_kib <= 100 * 1024
            && t.error.is_none()
            && t.finished == t.commands
            && t.lost == 0
            && t.executed_twice == 0
            && t.duplicate_frames == 0
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

impl fmt::Display for BenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.latency;
        writeln!(f, "studio bench")?;
        writeln!(
            f,
            "  enqueue→frame latency ({} samples): p50 {} (target ≤ 1 ms), p99 {}, max {}",
            l.samples,
            ms(l.p50),
            ms(l.p99),
            ms(l.max)
        )?;
        if let Some(e) = &l.error {
            writeln!(f, "    error: {e}")?;
        }
        let s = &self.streams;
        writeln!(
            f,
            "  open streams: {}/{} runtimes connected; VmRSS {:.1} MB after (target ≤ 100 MB), {:.1} MB before, +{:.1} MB",
            s.connected,
            s.runtimes,
            s.rss_after_kib as f64 / 1024.0,
            s.rss_before_kib as f64 / 1024.0,
            s.rss_after_kib.saturating_sub(s.rss_before_kib) as f64 / 1024.0
        )?;
        if let Some(e) = &s.error {
            writeln!(f, "    error: {e}")?;
        }
        let t = &self.throughput;
        let rate = t.commands as f64 / t.elapsed.as_secs_f64().max(1e-9);
        writeln!(
            f,
            "  commands: {} over {} runtimes in {:.2} s ({:.0}/s): finished {}, lost {}, rejected {}, ran twice {}, never ran {}, duplicate frames {}",
            t.commands,
            t.runtimes,
            t.elapsed.as_secs_f64(),
            rate,
            t.finished,
            t.lost,
            t.rejected,
            t.executed_twice,
            t.never_executed,
            t.duplicate_frames
        )?;
        if let Some(e) = &t.error {
            writeln!(f, "    error: {e}")?;
        }
        write!(
            f,
            "  targets: {}",
            if self.meets_targets() {
                "met"
            } else {
                "NOT met"
            }
        )
    }
}
