//! The studio benchmark: enqueue-to-frame latency, 1,000 open streams' memory, 10,000 commands through ack and finish.

mod latency;
mod report;
mod rig;
mod streams;
mod throughput;

pub use report::{BenchReport, LatencyFigures, StreamFigures, ThroughputFigures};

/// Runs the three measurements on loopback and reports the figures.
pub async fn run_bench() -> BenchReport {
    // Memory first, while the process is still small.
    let streams = streams::measure(1_000).await;
    let latency = latency::measure(2_000).await;
    let throughput = throughput::measure(10, 1_000).await;
    BenchReport {
        latency,
        streams,
        throughput,
    }
}

/// The resident set size of this process in KiB, from `/proc/self/status` (0 when unknown).
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}
