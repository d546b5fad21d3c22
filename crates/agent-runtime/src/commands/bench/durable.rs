//! `bench service --mode durable`: the 5-step agent run as a durable run (a Temporal workflow
//! executed by a child `agent-runtime worker`) beside the same run in lightweight mode, on one
//! server and one SQLite file, against the in-process mock model provider. Temporal is
//! `TEMPORAL_ADDRESS`, else a dev server this benchmark starts (`temporal server start-dev`).

use std::time::{Duration, Instant};

use anyhow::Context as _;
use ar_process::{EnvPolicy, ProcessSpec};
use ar_test_support::mock_provider::{AutoScript, MockProvider};

use super::service::{start_server_with, Server};
use super::{percentile, BenchArgs};

/// A dev server of the benchmark's own, stopped with it.
struct DevServer {
    process: ar_process::Process,
    _dir: tempfile::TempDir,
}

async fn dev_server() -> anyhow::Result<(String, Option<DevServer>)> {
    if let Ok(address) = std::env::var("TEMPORAL_ADDRESS") {
        if !address.trim().is_empty() {
            return Ok((address, None));
        }
    }
    let dir = tempfile::tempdir()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let cli = ar_test_support::temporal_dev::cli()
        .context("the Temporal CLI is missing (install .ci/steps/install-temporal.sh or set TEMPORAL_ADDRESS)")?;
    let args = ar_test_support::temporal_dev::start_dev_args(
        port,
        &dir.path().join("temporal.db"),
        "error",
    );
    let spec = ProcessSpec::new(cli.display().to_string(), dir.path())
        .args(args)
        .env(EnvPolicy::standard());
    let process = ar_process::spawn(&spec)
        .context("starting `temporal server start-dev` (install .ci/steps/install-temporal.sh or set TEMPORAL_ADDRESS)")?;
    let address = format!("127.0.0.1:{port}");
    for _ in 0..300 {
        if tokio::net::TcpStream::connect(&address).await.is_ok() {
            return Ok((address, Some(DevServer { process, _dir: dir })));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("the Temporal dev server did not come up on {address}")
}

/// `agent-runtime worker` with the server's environment and directory.
fn start_worker(server: &Server) -> anyhow::Result<ar_process::Process> {
    let exe = std::env::current_exe().context("locating the agent-runtime binary")?;
    let spec = ProcessSpec::new(exe.display().to_string(), server.dir.path())
        .args(["worker", "--addr", "127.0.0.1:0"])
        .env(server.env.clone());
    ar_process::spawn(&spec).context("starting the worker")
}

/// Sequential runs of `server`'s mode: sorted milliseconds per run.
async fn sequential(server: &Server, mock: &MockProvider, runs: usize) -> anyhow::Result<Vec<f64>> {
    let mut latencies = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let id = server.start_run(mock).await?;
        let (_, completed) = server.follow(&id).await?;
        anyhow::ensure!(completed, "run {id} did not complete");
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    latencies.sort_by(f64::total_cmp);
    Ok(latencies)
}

pub async fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let (address, dev) = dev_server().await?;
    let mock = MockProvider::start().await;
    mock.set_recording(false);
    mock.auto(AutoScript::five_step("get_context"));
    // Events the worker commits reach the server's SSE readers through a replica link (NATS
    // when AGENT_RUNTIME_NATS_URL is set), else through its one-second poll of the store.
    let mut extra = vec![("TEMPORAL_ADDRESS", address.clone())];
    if let Ok(url) = std::env::var("AGENT_RUNTIME_NATS_URL") {
        extra.push(("AGENT_RUNTIME_EVENT_SINK", "log,nats".to_string()));
        extra.push(("AGENT_RUNTIME_NATS_URL", url));
    }
    let mut server =
        start_server_with("sqlite", "", &mock, (None, serde_json::json!({})), &extra).await?;
    let worker = start_worker(&server)?;
    server.put_agent().await?;
    let runs = args.sequential.max(1);
    let mut figures = Vec::new();
    for mode in ["lightweight", "durable"] {
        server.execution_mode = mode;
        // Warm-up (the first durable runs also wait for the worker's first polls).
        sequential(&server, &mock, 10).await?;
        figures.push((mode, sequential(&server, &mock, runs).await?));
    }
    println!("durable execution: Temporal at {address}, store sqlite, {runs} sequential 5-step runs per mode");
    for (mode, latencies) in &figures {
        println!(
            "  {mode:<11} p50 per run {:>8.2} ms, p99 {:>8.2} ms, overhead per step (p50/5) {:>6.2} ms",
            percentile(latencies, 0.5),
            percentile(latencies, 0.99),
            percentile(latencies, 0.5) / 5.0
        );
    }
    if let [(_, light), (_, durable)] = &figures[..] {
        println!(
            "  durable orchestration per step (p50 difference / 5): {:.2} ms",
            (percentile(durable, 0.5) - percentile(light, 0.5)) / 5.0
        );
    }
    worker.kill_group();
    server.process.kill_group();
    if let Some(dev) = dev {
        dev.process.kill_group();
    }
    Ok(())
}
