//! The 5-step agent benchmark: the real server (a child `agent-runtime serve`) driven over HTTP
//! against the in-process mock model provider, so the figures are the server's own.

use std::net::TcpListener as StdListener;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ar_process::{EnvPolicy, ProcessSpec};
use ar_test_support::mock_provider::{AutoScript, MockProvider, Reply};
use futures::StreamExt;
use serde_json::{json, Value};

use super::nats_lag::NatsBench;
use super::proc_stats::{
    context_switches, cpu_ms, peak_rss_mib, pid_named, rss_mib, thread_cpu_ms,
};
use super::{percentile, BenchArgs};

const TOKEN: &str = "bench-token";
pub(super) const APP: &str = "bench_app";

/// A child `agent-runtime serve` and a client for it.
pub(super) struct Server {
    pub(super) process: ar_process::Process,
    base: String,
    client: reqwest::Client,
    /// The server's environment and directory (a durable benchmark's worker shares them).
    pub(super) env: EnvPolicy,
    pub(super) dir: tempfile::TempDir,
    /// `execution_mode` of the runs it starts (`lightweight` unless a benchmark says).
    pub(super) execution_mode: &'static str,
}

/// The server binary chosen with `--server-binary`, if any.
static SERVER_BINARY: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

pub(super) fn use_server_binary(binary: std::path::PathBuf) {
    let _ = SERVER_BINARY.set(binary);
}

fn free_port() -> anyhow::Result<u16> {
    Ok(StdListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

async fn start_server(
    store: &str,
    postgres_url: &str,
    mock: &MockProvider,
    nats: Option<&NatsBench>,
) -> anyhow::Result<Server> {
    start_server_with(store, postgres_url, mock, (nats, json!({})), &[]).await
}

/// [`start_server`] with more keys in the bench app's configuration (`app_extra`).
pub(super) async fn start_server_with(
    store: &str,
    postgres_url: &str,
    mock: &MockProvider,
    (nats, app_extra): (Option<&NatsBench>, Value),
    extra_env: &[(&str, String)],
) -> anyhow::Result<Server> {
    let dir = tempfile::tempdir()?;
    let port = free_port()?;
    let exe = match SERVER_BINARY.get() {
        Some(binary) => binary.clone(),
        None => std::env::current_exe().context("locating the agent-runtime binary")?,
    };
    let mut app = json!({"app_id": APP, "model_endpoints": [
        {"id": "mock", "base_url": mock.base_url(), "auth_mode": "none", "allow_http": true}
    ]});
    if let (Some(app), Some(extra)) = (app.as_object_mut(), app_extra.as_object()) {
        app.extend(extra.clone());
    }
    let app_config = json!({"apps": [app]});
    let mut env = EnvPolicy::standard();
    // Lets a run of the benchmark try the server with another runtime size.
    if let Ok(threads) = std::env::var("AGENT_RUNTIME_WORKER_THREADS") {
        env = env.with("AGENT_RUNTIME_WORKER_THREADS", threads);
    }
    env = env
        .with("AGENT_RUNTIME_ADDR", format!("127.0.0.1:{port}"))
        .with("AGENT_RUNTIME_SERVICE_TOKEN", TOKEN)
        .with("AGENT_RUNTIME_APP_CONFIG", app_config.to_string())
        .with("AGENT_RUNTIME_LOG", "warn")
        .with(
            "AGENT_RUNTIME_MODEL_CREDENTIAL_ENCRYPTION_KEY",
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
        );
    if let Some(nats) = nats {
        env = nats.env(env);
    }
    for (name, value) in extra_env {
        env = env.with(*name, value.clone());
    }
    env = match store {
        "postgres" => {
            // A fresh database per benchmark run, so the figures start from empty tables.
            let database = format!("ar_bench_{}", std::process::id());
            let create = ar_process::run_plain(
                "psql",
                &[
                    postgres_url,
                    "-q",
                    "-c",
                    &format!("DROP DATABASE IF EXISTS {database}"),
                    "-c",
                    &format!("CREATE DATABASE {database}"),
                ],
            )
            .await
            .context("creating the benchmark database with psql")?;
            anyhow::ensure!(create.success(), "psql could not create {database}");
            let base = postgres_url
                .rsplit_once('/')
                .map(|(base, _)| base)
                .unwrap_or(postgres_url);
            env.with("AGENT_RUNTIME_STORE_DRIVER", "postgres")
                .with("DATABASE_URL", format!("{base}/{database}"))
        }
        _ => env.with("AGENT_RUNTIME_STORE_DRIVER", "sqlite").with(
            "AGENT_RUNTIME_SQLITE_DSN",
            dir.path().join("bench.db").display().to_string(),
        ),
    };
    let spec = ProcessSpec::new(exe.display().to_string(), dir.path())
        .args(["serve"])
        .env(env.clone());
    let process = ar_process::spawn(&spec).context("starting the server")?;
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()?;
    for _ in 0..500 {
        if client
            .get(format!("{base}/healthz"))
            .send()
            .await
            .map(|r| r.status().is_success())
            .unwrap_or(false)
        {
            return Ok(Server {
                process,
                base,
                client,
                env,
                dir,
                execution_mode: "lightweight",
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!("server did not become healthy")
}

impl Server {
    pub(super) async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.send_json(reqwest::Method::POST, path, body).await
    }

    /// Sends `body` with the bench token; the answer's JSON, or an error naming its status.
    async fn send_json(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Value,
    ) -> anyhow::Result<Value> {
        let response = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        let value: Value = response.json().await?;
        anyhow::ensure!(status.is_success(), "{path}: {status} {value}");
        Ok(value)
    }

    pub(super) async fn start_run(&self, mock: &MockProvider) -> anyhow::Result<String> {
        let run = self
            .post(
                "/v1/runs",
                json!({
                    "app_id": APP, "agent_id": "bench", "target": {"type": "bench", "id": "1"},
                    "instructions": "Run the five steps.",
                    "execution_mode": self.execution_mode,
                    "model": {"provider": "openai_compatible", "model": "mock",
                              "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "none"}},
                    "model_credential": {"type": "none"}
                }),
            )
            .await?;
        run["id"].as_str().map(str::to_string).context("run id")
    }

    /// Follows the SSE stream to its end; returns (time to first event, whether it completed).
    pub(super) async fn follow(&self, run_id: &str) -> anyhow::Result<(Duration, bool)> {
        let started = Instant::now();
        let response = self
            .client
            .get(format!(
                "{}/v1/runs/{run_id}/events?app_id={APP}",
                self.base
            ))
            .bearer_auth(TOKEN)
            .send()
            .await?;
        let mut stream = response.bytes_stream();
        let mut first: Option<Duration> = None;
        let mut text = String::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            text.push_str(&String::from_utf8_lossy(&chunk));
            if first.is_none() && text.contains("id: ") {
                first = Some(started.elapsed());
            }
        }
        Ok((
            first.unwrap_or_default(),
            text.contains("event: run.completed"),
        ))
    }

    pub(super) fn cpu(&self) -> f64 {
        cpu_ms(self.process.pid()).unwrap_or(0.0)
    }

    pub(super) async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
            .send()
            .await?;
        let status = response.status();
        let value: Value = response.json().await?;
        anyhow::ensure!(status.is_success(), "{path}: {status} {value}");
        Ok(value)
    }

    pub(super) async fn put(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.send_json(reqwest::Method::PUT, path, body).await
    }

    fn switches(&self) -> f64 {
        context_switches(self.process.pid()).unwrap_or(0) as f64
    }
}

/// Measures one store with one sink; returns the concurrent phase, for comparing the sinks.
async fn bench_store(store: &str, sink: &str, args: &BenchArgs) -> anyhow::Result<Concurrent> {
    let mock = MockProvider::start().await;
    mock.set_recording(false);
    mock.auto(AutoScript::five_step("get_context"));
    let nats = match sink {
        "nats" => Some(NatsBench::connect(&args.nats_url).await?),
        _ => None,
    };
    let server = start_server(store, &args.postgres_url, &mock, nats.as_ref()).await?;
    if let Some(nats) = &nats {
        nats.wait_ready().await?;
    }
    let idle_rss = rss_mib(server.process.pid()).unwrap_or(0.0);
    server.put_agent().await?;
    // Warm-up.
    for _ in 0..20 {
        let id = server.start_run(&mock).await?;
        server.follow(&id).await?;
    }
    let sequential = Sequential::measure(&server, &mock, args.sequential.max(1)).await?;
    let lag = match &nats {
        Some(nats) => Some(nats.watch().await?),
        None => None,
    };
    let concurrent = Concurrent::measure(
        &server,
        &mock,
        args.runs,
        args.concurrency.max(1),
        args.rate,
    )
    .await?;
    let lag = match lag {
        Some(watch) => Some(watch.finish().await),
        None => None,
    };
    let paused = Paused::measure(&server, &mock, args.paused).await?;

    println!(
        "store: {store}, event sinks: {}",
        match sink {
            "nats" => "log,nats",
            _ => "log",
        }
    );
    if let Ok(workers) = ar_config::env::worker_threads(|name| std::env::var(name).ok()) {
        println!("  server worker threads: {workers} (AGENT_RUNTIME_WORKER_THREADS)");
    }
    sequential.print();
    concurrent.print();
    if let Some(lag) = lag {
        lag.print();
    }
    paused.print(idle_rss, concurrent.peak_rss);
    server.process.kill_group();
    if let Some(nats) = nats {
        nats.delete().await;
    }
    Ok(concurrent)
}

/// The NATS sink's cost in the concurrent phase: the server's CPU per run against the `log`
/// sink's, the sink thread's share, and the client's CPU per run, which does the same work in
/// both phases (its growth is what sharing the machine's cores costs, not work). Unpaced, each
/// phase runs as fast as it can, so the two compare different loads; `--rate` makes them equal.
fn print_sink_overhead(log: &Concurrent, nats: &Concurrent) {
    let percent = |with: f64, without: f64| (with / without - 1.0) * 100.0;
    println!("NATS sink against log (concurrent phase):");
    println!(
        "  server CPU per run:          {:+.1} % ({:.2} -> {:.2} ms)",
        percent(nats.cpu_per_run, log.cpu_per_run),
        log.cpu_per_run,
        nats.cpu_per_run
    );
    if let Some(sink) = nats.sink_cpu_per_run {
        println!(
            "    of which the sink's thread: {:+.1} % ({sink:.2} ms)",
            sink / log.cpu_per_run * 100.0
        );
    }
    println!(
        "  client + mock model CPU per run (same work): {:+.1} %",
        percent(nats.client_cpu_per_run, log.client_cpu_per_run)
    );
}

impl Server {
    /// Registers the agent every benchmark run starts.
    pub(super) async fn put_agent(&self) -> anyhow::Result<()> {
        let response = self
            .client
            .put(format!("{}/v1/agents/bench?app_id={APP}", self.base))
            .bearer_auth(TOKEN)
            .json(&json!({"app_id": APP, "name": "bench", "allowed_tools": ["get_context", "request_user_input"]}))
            .send()
            .await?;
        anyhow::ensure!(
            response.status().is_success(),
            "agent: {}",
            response.status()
        );
        Ok(())
    }

    /// Waits (up to a minute) until `count` runs are paused.
    async fn wait_paused(&self, count: usize) -> anyhow::Result<()> {
        for _ in 0..600 {
            let page: Value = self
                .client
                .get(format!(
                    "{}/v1/runs/search?app_id={APP}&status=paused&limit=1",
                    self.base
                ))
                .bearer_auth(TOKEN)
                .send()
                .await?
                .json()
                .await?;
            if page["total"].as_u64().unwrap_or(0) >= count as u64 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }
}

/// Runs one at a time: latency, time to first SSE event, per-step overhead, CPU per run.
struct Sequential {
    runs: usize,
    /// Milliseconds, sorted.
    latencies: Vec<f64>,
    /// Milliseconds to the first SSE event, sorted.
    first_events: Vec<f64>,
    cpu_per_run: f64,
    switches_per_run: f64,
}

impl Sequential {
    async fn measure(server: &Server, mock: &MockProvider, runs: usize) -> anyhow::Result<Self> {
        let cpu_before = server.cpu();
        let switches_before = server.switches();
        let mut latencies = Vec::with_capacity(runs);
        let mut first_events = Vec::with_capacity(runs);
        for _ in 0..runs {
            let started = Instant::now();
            let id = server.start_run(mock).await?;
            let (first, completed) = server.follow(&id).await?;
            anyhow::ensure!(completed, "run {id} did not complete");
            latencies.push(started.elapsed().as_secs_f64() * 1000.0);
            first_events.push(first.as_secs_f64() * 1000.0);
        }
        let cpu_per_run = (server.cpu() - cpu_before) / runs as f64;
        let switches_per_run = (server.switches() - switches_before) / runs as f64;
        latencies.sort_by(f64::total_cmp);
        first_events.sort_by(f64::total_cmp);
        Ok(Sequential {
            runs,
            latencies,
            first_events,
            cpu_per_run,
            switches_per_run,
        })
    }

    fn print(&self) {
        println!("  sequential runs: {}", self.runs);
        println!(
            "    p50 per run:               {:.2} ms",
            percentile(&self.latencies, 0.5)
        );
        println!(
            "    p99 per run:               {:.2} ms",
            percentile(&self.latencies, 0.99)
        );
        println!(
            "    p50 time to first SSE event: {:.2} ms",
            percentile(&self.first_events, 0.5)
        );
        println!(
            "    overhead per step (p50/5, mock model ~0 ms): {:.2} ms",
            percentile(&self.latencies, 0.5) / 5.0
        );
        println!("    server CPU per run:        {:.2} ms", self.cpu_per_run);
        println!(
            "    server context switches per run: {:.0}",
            self.switches_per_run
        );
    }
}

/// Many runs at once: throughput, latency under load, CPU per run, peak memory.
struct Concurrent {
    runs: usize,
    concurrency: usize,
    /// Runs started per second, when paced (`--rate`).
    rate: Option<f64>,
    elapsed_secs: f64,
    /// Milliseconds, sorted.
    latencies: Vec<f64>,
    cpu_per_run: f64,
    /// Of `cpu_per_run`, the NATS sink's own thread (`None` without the sink).
    sink_cpu_per_run: Option<f64>,
    /// The machine's NATS server, when one runs here (`None` otherwise).
    nats_cpu_per_run: Option<f64>,
    switches_per_run: f64,
    /// The client and the mock provider share the machine with the server.
    client_cpu_per_run: f64,
    peak_rss: f64,
}

/// `runs` run numbers, each available at once, or `rate` per second when given.
fn run_starts(runs: usize, rate: Option<f64>) -> impl futures::Stream<Item = usize> {
    let pace = rate.map(|per_second| Duration::from_secs_f64(1.0 / per_second));
    futures::stream::unfold(
        (0, tokio::time::Instant::now()),
        move |(run, due)| async move {
            if run == runs {
                return None;
            }
            let Some(pace) = pace else {
                return Some((run, (run + 1, due)));
            };
            tokio::time::sleep_until(due).await;
            Some((run, (run + 1, due + pace)))
        },
    )
}

impl Concurrent {
    async fn measure(
        server: &Server,
        mock: &MockProvider,
        runs: usize,
        concurrency: usize,
        rate: Option<f64>,
    ) -> anyhow::Result<Self> {
        let cpu_before = server.cpu();
        let sink_cpu = || thread_cpu_ms(server.process.pid(), ar_nats::SINK_THREAD_NAME);
        let sink_before = sink_cpu();
        let nats_pid = pid_named("nats-server");
        let nats_cpu = || nats_pid.and_then(cpu_ms);
        let nats_before = nats_cpu();
        let switches_before = server.switches();
        let client_cpu_before = cpu_ms(std::process::id()).unwrap_or(0.0);
        let started = Instant::now();
        let mut latencies: Vec<f64> = run_starts(runs, rate)
            .map(|_| async {
                let begun = Instant::now();
                let id = server.start_run(mock).await?;
                let (_, completed) = server.follow(&id).await?;
                anyhow::ensure!(completed, "run {id} did not complete");
                Ok::<f64, anyhow::Error>(begun.elapsed().as_secs_f64() * 1000.0)
            })
            .buffer_unordered(concurrency)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<anyhow::Result<Vec<_>>>()?;
        let elapsed_secs = started.elapsed().as_secs_f64();
        let cpu_per_run = (server.cpu() - cpu_before) / runs as f64;
        let per_run =
            |before: Option<f64>, after: Option<f64>| Some((after? - before?) / runs as f64);
        let sink_cpu_per_run = per_run(sink_before, sink_cpu());
        let nats_cpu_per_run = per_run(nats_before, nats_cpu());
        let switches_per_run = (server.switches() - switches_before) / runs as f64;
        let client_cpu_per_run =
            (cpu_ms(std::process::id()).unwrap_or(0.0) - client_cpu_before) / runs as f64;
        latencies.sort_by(f64::total_cmp);
        Ok(Concurrent {
            runs,
            concurrency,
            rate,
            elapsed_secs,
            latencies,
            cpu_per_run,
            sink_cpu_per_run,
            nats_cpu_per_run,
            switches_per_run,
            client_cpu_per_run,
            peak_rss: peak_rss_mib(server.process.pid()).unwrap_or(0.0),
        })
    }

    fn print(&self) {
        println!(
            "  concurrent: {} runs, {} at a time{}",
            self.runs,
            self.concurrency,
            match self.rate {
                Some(rate) => format!(", started at {rate:.0} runs/s"),
                None => String::new(),
            }
        );
        println!(
            "    throughput:                {:.0} runs/s",
            self.runs as f64 / self.elapsed_secs
        );
        println!(
            "    p50 per run:               {:.2} ms",
            percentile(&self.latencies, 0.5)
        );
        println!(
            "    p99 per run:               {:.2} ms",
            percentile(&self.latencies, 0.99)
        );
        println!("    server CPU per run:        {:.2} ms", self.cpu_per_run);
        if let Some(sink) = self.sink_cpu_per_run {
            println!("      of which the NATS sink's thread: {sink:.2} ms");
        }
        if let Some(nats) = self.nats_cpu_per_run {
            println!("    NATS server CPU per run (same machine): {nats:.2} ms");
        }
        println!(
            "    server context switches per run: {:.0}",
            self.switches_per_run
        );
        println!(
            "    client + mock model CPU per run: {:.2} ms",
            self.client_cpu_per_run
        );
    }
}

/// Memory of runs parked waiting for an answer.
struct Paused {
    runs: usize,
    rss_before: f64,
    rss: f64,
}

impl Paused {
    async fn measure(server: &Server, mock: &MockProvider, runs: usize) -> anyhow::Result<Self> {
        mock.clear_responder();
        mock.set_fallback(Some(Reply::tool_call(
            "request_user_input",
            r#"{"questions":[{"id":"q","question":"?"}]}"#,
        )));
        let pid = server.process.pid();
        let rss_before = rss_mib(pid).unwrap_or(0.0);
        futures::stream::iter(0..runs)
            .map(|_| server.start_run(mock))
            .buffer_unordered(64)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<anyhow::Result<Vec<_>>>()?;
        server.wait_paused(runs).await?;
        Ok(Paused {
            runs,
            rss_before,
            rss: rss_mib(pid).unwrap_or(0.0),
        })
    }

    /// The memory section, from idle through the throughput peak to the paused runs.
    fn print(&self, idle_rss: f64, peak_rss: f64) {
        println!("  memory");
        println!("    idle RSS:                  {idle_rss:.1} MiB");
        println!("    peak RSS (throughput):     {peak_rss:.1} MiB");
        // The level before the paused runs still holds memory the throughput phase is giving
        // back (it can even come out negative), so the figure the target is stated in, above
        // idle, is printed as well.
        println!(
            "    {} paused runs:         {:.1} MiB above the level before them, {:.1} MiB above idle",
            self.runs,
            self.rss - self.rss_before,
            self.rss - idle_rss
        );
    }
}

pub async fn run(args: &BenchArgs) -> anyhow::Result<()> {
    let stores: Vec<&str> = match args.store.as_str() {
        "both" => vec!["sqlite", "postgres"],
        other => vec![other],
    };
    let sinks: Vec<&str> = match args.sink.as_str() {
        "both" => vec!["log", "nats"],
        "log" | "nats" => vec![args.sink.as_str()],
        other => anyhow::bail!("unknown sink {other:?} (expected log, nats or both)"),
    };
    for store in stores {
        let mut loaded = Vec::new();
        for sink in &sinks {
            loaded.push(bench_store(store, sink, args).await?);
        }
        if let [log, nats] = loaded.as_slice() {
            print_sink_overhead(log, nats);
        }
    }
    Ok(())
}
