//! The MCP tool-call benchmark: the runtime's MCP client (ar-mcp) calling the in-process test
//! MCP server over loopback, one session reused. The server times its own handling of each call
//! (request in to the end of its answer), so the client's overhead is measured per call as the
//! latency the client sees minus that time.

use std::fmt;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ar_core::mcp::{McpClient, McpEndpoint};
use ar_core::secret::Secret;
use ar_mcp::{McpHttpClient, McpPolicy};
use ar_test_support::mcp_server::{McpTestOptions, McpTestServer};
use serde_json::json;

use super::percentile;
use super::proc_stats::cpu_ms;

const TOKEN: &str = "bench-token";
/// Sessions opened one at a time for the "new session" figure.
const COLD_SESSIONS: usize = 20;
/// How long the server's last timing may trail the client's answer.
const TIMING_WAIT: Duration = Duration::from_secs(2);

/// How many calls to make.
#[derive(Debug, Clone, Copy)]
pub struct McpBenchConfig {
    /// Calls made first and not measured (connections, allocator, caches).
    pub warmup: usize,
    /// Calls measured, one after another on one session.
    pub calls: usize,
}

/// The figures of one benchmark, in milliseconds (per-call lists sorted).
#[derive(Debug)]
pub struct McpBenchReport {
    pub calls: usize,
    /// A new session's `initialize` and `tools/list` (what a run pays once per server).
    pub session_open: f64,
    /// Per new session: `initialize` and the first `tools/call`.
    pub cold_calls: Vec<f64>,
    /// Per call on the reused session, as the client sees it.
    pub latencies: Vec<f64>,
    /// Per call, the server's own time.
    pub server: Vec<f64>,
    /// Per call, latency minus the server's time.
    pub overheads: Vec<f64>,
    pub elapsed: Duration,
    /// CPU of this process (client and server together) over the measured calls.
    pub process_cpu_ms: Option<f64>,
}

fn endpoint(run_id: &str, url: &str) -> McpEndpoint {
    McpEndpoint {
        run_id: run_id.to_string(),
        server_id: "bench".to_string(),
        url: url.to_string(),
        headers: vec![(
            "Authorization".to_string(),
            Secret::new(format!("Bearer {TOKEN}")),
        )],
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values
}

/// One `lookup` call; an error answer fails the benchmark (it would not measure a call).
async fn lookup(client: &McpHttpClient, endpoint: &McpEndpoint, n: usize) -> anyhow::Result<()> {
    let output = client
        .call_tool(endpoint, "lookup", json!({ "key": format!("k{n}") }))
        .await
        .context("calling the MCP test server's lookup tool")?;
    anyhow::ensure!(!output.is_error, "lookup failed: {}", output.content);
    Ok(())
}

/// The server's timings of the next `expected` calls; the last may be recorded just after the
/// client has its answer (the server notes the end of the stream after sending it).
async fn server_timings(server: &McpTestServer, expected: usize) -> anyhow::Result<Vec<Duration>> {
    let deadline = Instant::now() + TIMING_WAIT;
    let mut timings = server.take_call_timings();
    while timings.len() < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
        timings.extend(server.take_call_timings());
    }
    anyhow::ensure!(
        timings.len() == expected,
        "the MCP test server timed {} calls, expected {expected}",
        timings.len()
    );
    Ok(timings)
}

/// Per new session, `initialize` and one call (the session is closed after each).
async fn cold_calls(client: &McpHttpClient, url: &str) -> anyhow::Result<Vec<f64>> {
    let mut cold = Vec::with_capacity(COLD_SESSIONS);
    for n in 0..COLD_SESSIONS {
        let run_id = format!("bench-cold-{n}");
        let endpoint = endpoint(&run_id, url);
        let started = Instant::now();
        lookup(client, &endpoint, n).await?;
        cold.push(ms(started.elapsed()));
        client.close_run(&run_id).await;
    }
    Ok(cold)
}

/// Runs the benchmark against a fresh test server on `127.0.0.1`.
pub async fn measure(config: McpBenchConfig) -> anyhow::Result<McpBenchReport> {
    let server = McpTestServer::start(McpTestOptions::with_token(TOKEN)).await;
    let client = McpHttpClient::new(McpPolicy::new(true, true, Vec::new()))?;
    let url = server.url();
    let warm = endpoint("bench-run", &url);

    let started = Instant::now();
    let tools = client.list_tools(&warm).await?;
    let session_open = ms(started.elapsed());
    anyhow::ensure!(
        tools.iter().any(|tool| tool.name == "lookup"),
        "the MCP test server does not list lookup"
    );
    for n in 0..config.warmup {
        lookup(&client, &warm, n).await?;
    }
    server_timings(&server, config.warmup).await?;

    let pid = std::process::id();
    let cpu_before = cpu_ms(pid);
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(config.calls);
    for n in 0..config.calls {
        let call_started = Instant::now();
        lookup(&client, &warm, n).await?;
        latencies.push(ms(call_started.elapsed()));
    }
    let elapsed = started.elapsed();
    let process_cpu_ms = cpu_ms(pid)
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    let server_ms: Vec<f64> = server_timings(&server, config.calls)
        .await?
        .into_iter()
        .map(ms)
        .collect();
    let overheads = latencies
        .iter()
        .zip(&server_ms)
        .map(|(latency, own)| latency - own)
        .collect();
    client.close_run("bench-run").await;

    let cold = cold_calls(&client, &url).await?;
    server_timings(&server, COLD_SESSIONS).await?;
    Ok(McpBenchReport {
        calls: config.calls,
        session_open,
        cold_calls: sorted(cold),
        latencies: sorted(latencies),
        server: sorted(server_ms),
        overheads: sorted(overheads),
        elapsed,
        process_cpu_ms,
    })
}

impl fmt::Display for McpBenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pair = |values: &[f64]| {
            format!(
                "{:.3} / {:.3} ms",
                percentile(values, 0.5),
                percentile(values, 0.99)
            )
        };
        let calls = self.calls.max(1) as f64;
        writeln!(
            f,
            "MCP tool call, streamable HTTP on loopback, one session reused ({} calls)",
            self.calls
        )?;
        writeln!(
            f,
            "  client overhead per call, p50 / p99:       {}",
            pair(&self.overheads)
        )?;
        writeln!(
            f,
            "  latency per call, p50 / p99:               {}",
            pair(&self.latencies)
        )?;
        writeln!(
            f,
            "  server's own time per call, p50 / p99:     {}",
            pair(&self.server)
        )?;
        writeln!(
            f,
            "  calls/s, one at a time:                    {:.0}",
            calls / self.elapsed.as_secs_f64().max(f64::EPSILON)
        )?;
        if let Some(cpu) = self.process_cpu_ms {
            writeln!(
                f,
                "  CPU per call, client + server (1 process): {:.3} ms",
                cpu / calls
            )?;
        }
        writeln!(
            f,
            "  session open (initialize + tools/list):    {:.3} ms",
            self.session_open
        )?;
        write!(
            f,
            "  new session's first call, p50 / p99:       {} (initialize + call, {COLD_SESSIONS} sessions)",
            pair(&self.cold_calls)
        )
    }
}

pub async fn run(calls: usize) -> anyhow::Result<()> {
    let report = measure(McpBenchConfig {
        warmup: 200,
        calls: calls.max(1),
    })
    .await?;
    println!("{report}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Figures are not asserted (they depend on the machine); that every call is measured and
    // reported is.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_short_benchmark_measures_every_call() {
        let report = measure(McpBenchConfig {
            warmup: 3,
            calls: 20,
        })
        .await
        .expect("the benchmark runs");
        assert_eq!(report.latencies.len(), 20);
        assert_eq!(report.server.len(), 20);
        assert_eq!(report.overheads.len(), 20);
        assert_eq!(report.cold_calls.len(), COLD_SESSIONS);
        assert!(report.latencies.iter().all(|latency| *latency > 0.0));
        assert!(report.session_open > 0.0);
        let text = report.to_string();
        assert!(
            text.contains("client overhead per call, p50 / p99:"),
            "{text}"
        );
        assert!(
            text.contains("session open (initialize + tools/list):"),
            "{text}"
        );
    }
}
