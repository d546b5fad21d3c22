//! `agent-runtime bench`: the benchmarks whose figures README.md reports.

mod compaction;
mod durable;
mod mcp;
mod nats_lag;
mod proc_stats;
mod service;
mod tools;

use clap::Args;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Which benchmark: `service` (the 5-step agent over HTTP), `dispatch` (process dispatch
    /// overhead and streaming under load), `studio` (command stream latency and throughput) or
    /// `mcp` (the MCP client's overhead per tool call on a reused session), `tools` (the
    /// workspace tools: `read_file`, `ripgrep`, `run_command` overhead, a 1,000-commit clone)
    /// or `compaction` (a 300-step run within a small context window, and one compaction's
    /// cost).
    #[arg(default_value = "service")]
    pub which: String,
    /// Store backends to measure (`sqlite`, `postgres`, or `both`).
    #[arg(long, default_value = "sqlite")]
    pub store: String,
    /// Runs measured one at a time (latency, time to first event, CPU of a lone run).
    #[arg(long, default_value_t = 200)]
    pub sequential: usize,
    /// Runs per throughput measurement.
    #[arg(long, default_value_t = 2000)]
    pub runs: usize,
    /// Concurrent runs in the throughput measurement.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Start the throughput measurement's runs at this many per second (still at most
    /// `--concurrency` at a time) instead of as fast as they finish: the CPU per run of a
    /// server that is not starved of cores by the client and NATS on the same machine.
    #[arg(long)]
    pub rate: Option<f64>,
    /// `dispatch`: measure remote runs instead (two nodes on loopback): a node's overhead
    /// over a local run, the model egress proxy's per call, 100 concurrent remote runs.
    #[arg(long)]
    pub remote: bool,
    /// MCP tool calls measured (`mcp`), after a warm-up of 200.
    #[arg(long, default_value_t = 2000)]
    pub calls: usize,
    /// Paused runs held for the memory measurement.
    #[arg(long, default_value_t = 10_000)]
    pub paused: usize,
    /// Global event sinks of the server (`service`): `log` (the default), `nats` (`log,nats`:
    /// every event also published to JetStream, with the publish lag measured), or `both`
    /// (one after the other, to compare the server's CPU).
    #[arg(long, default_value = "log")]
    pub sink: String,
    /// NATS server for `--sink nats`.
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    pub nats_url: String,
    /// PostgreSQL URL for `--store postgres`.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/test"
    )]
    pub postgres_url: String,
    /// Execution mode of `service`'s runs: `lightweight` (the default), or `durable` (each run
    /// a Temporal workflow executed by a child worker, measured beside lightweight runs; needs
    /// TEMPORAL_ADDRESS or the `temporal` CLI for a dev server).
    #[arg(long, default_value = "lightweight")]
    pub mode: String,
    /// The `agent-runtime` binary the benchmarks start as the server (default: this one), to
    /// compare two builds under one benchmark client.
    #[arg(long)]
    pub server_binary: Option<std::path::PathBuf>,
}

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    if let Some(rate) = args.rate {
        anyhow::ensure!(
            args.which == "service" && args.mode == "lightweight",
            "--rate paces only `bench service` in the lightweight mode"
        );
        anyhow::ensure!(
            rate.is_finite() && rate > 0.0,
            "--rate must be a positive number of runs per second (got {rate})"
        );
    }
    if let Some(binary) = &args.server_binary {
        service::use_server_binary(binary.clone());
    }
    match args.which.as_str() {
        "service" if args.mode == "durable" => durable::run(&args).await,
        "service" if args.mode == "lightweight" => service::run(&args).await,
        "service" => anyhow::bail!(
            "unknown mode {:?} (expected lightweight or durable)",
            args.mode
        ),
        "dispatch" if args.remote => {
            let dir = tempfile::tempdir()?;
            let config = ar_dispatch::bench_remote::RemoteBenchConfig::standard(dir.path());
            println!(
                "{}",
                ar_dispatch::bench_remote::run_remote_bench(config).await?
            );
            Ok(())
        }
        "dispatch" => {
            let dir = tempfile::tempdir()?;
            let report = ar_dispatch::bench::run_bench(ar_dispatch::bench::BenchConfig::standard(
                dir.path(),
            ))
            .await?;
            println!("{report}");
            Ok(())
        }
        "studio" => {
            let report = ar_studio::bench::run_bench().await;
            println!("{report}");
            Ok(())
        }
        "mcp" => mcp::run(args.calls).await,
        "tools" => tools::run().await,
        "compaction" => compaction::run().await,
        other => {
            anyhow::bail!(
                "unknown benchmark {other:?} (expected: service, dispatch, studio, mcp, tools or compaction)"
            )
        }
    }
}

/// The value at fraction `p` (0 to 1) of `sorted`, nearest rank; 0 when empty.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}
