//! Remote dispatch benchmark (`agent-runtime bench dispatch --remote`): what a run on a node
//! costs over the same run here, what the model egress proxy adds to one model call, and many
//! concurrent remote runs over two nodes with every line delivered.
//!
//! Everything is real and on loopback: two nodes served by [`serve_node`] in this process
//! (their runs are real `command` processes), [`RemoteRuntime`] clients speaking the node
//! protocol over HTTP, and an [`EgressProxy`] in front of a small upstream that answers every
//! call with the same short JSON body (so the figure is the proxy's own cost, not a model's).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ar_core::secret::Secret;
use tokio_util::sync::CancellationToken;

use crate::egress::{upstream_client, EgressLimits, EgressProxy, EgressRoute};
use crate::event::{EventType, State};
use crate::local::{LocalConfig, LocalRuntime};
use crate::node::{serve_node, NodeConfig};
use crate::remote::RemoteRuntime;
use crate::run::{DispatchError, Runtime};
use crate::spec::RunSpec;

/// What to measure.
#[derive(Debug, Clone)]
pub struct RemoteBenchConfig {
    /// Samples of `/bin/true`, here and on a node each.
    pub overhead_iterations: usize,
    /// Model calls, direct and through the proxy each.
    pub proxy_calls: usize,
    /// Concurrent remote runs, spread over the two nodes.
    pub concurrent_runs: usize,
    /// Lines each of them prints.
    pub lines_per_run: usize,
    /// Directory for the runs' workdirs.
    pub workspace: PathBuf,
}

impl RemoteBenchConfig {
    /// The issue's workload: 200 samples, 2000 calls, 100 runs of 10 000 lines.
    pub fn standard(workspace: impl Into<PathBuf>) -> Self {
        RemoteBenchConfig {
            overhead_iterations: 200,
            proxy_calls: 2000,
            concurrent_runs: 100,
            lines_per_run: 10_000,
            workspace: workspace.into(),
        }
    }
}

/// p50 and p99 of a sample.
#[derive(Debug, Clone, Copy, Default)]
pub struct Percentiles {
    pub p50: Duration,
    pub p99: Duration,
}

impl Percentiles {
    fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort();
        let at = |p: f64| {
            let index = ((samples.len().saturating_sub(1)) as f64 * p).round() as usize;
            samples.get(index).copied().unwrap_or_default()
        };
        Percentiles {
            p50: at(0.5),
            p99: at(0.99),
        }
    }
}

/// Results; `Display` prints a short table.
#[derive(Debug, Clone)]
pub struct RemoteBenchReport {
    pub config: RemoteBenchConfig,
    /// A `/bin/true` run here.
    pub local: Percentiles,
    /// The same run on a node.
    pub remote: Percentiles,
    /// A model call straight to the upstream.
    pub direct_call: Percentiles,
    /// The same call through the egress proxy.
    pub proxied_call: Percentiles,
    /// Lines received over all concurrent remote runs.
    pub lines_received: u64,
    /// Concurrent remote runs that did not succeed.
    pub runs_failed: usize,
    /// Wall time of the concurrent phase.
    pub concurrent_elapsed: Duration,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl std::fmt::Display for RemoteBenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.config;
        let row = |name: &str, p: &Percentiles| {
            format!(
                "  {name:<18} p50 {:>8.3} ms   p99 {:>8.3} ms",
                ms(p.p50),
                ms(p.p99)
            )
        };
        writeln!(
            f,
            "remote overhead ({} runs of /bin/true each)",
            c.overhead_iterations
        )?;
        writeln!(f, "{}", row("here", &self.local))?;
        writeln!(f, "{}", row("on a node", &self.remote))?;
        writeln!(
            f,
            "  added             p50 {:>+8.3} ms   p99 {:>+8.3} ms",
            ms(self.remote.p50) - ms(self.local.p50),
            ms(self.remote.p99) - ms(self.local.p99)
        )?;
        writeln!(f, "egress proxy ({} model calls each)", c.proxy_calls)?;
        writeln!(f, "{}", row("direct", &self.direct_call))?;
        writeln!(f, "{}", row("through the proxy", &self.proxied_call))?;
        writeln!(
            f,
            "  added             p50 {:>+8.3} ms   p99 {:>+8.3} ms",
            ms(self.proxied_call.p50) - ms(self.direct_call.p50),
            ms(self.proxied_call.p99) - ms(self.direct_call.p99)
        )?;
        let expected = (c.concurrent_runs * c.lines_per_run) as u64;
        writeln!(
            f,
            "{} concurrent remote runs over two nodes x {} lines",
            c.concurrent_runs, c.lines_per_run
        )?;
        write!(
            f,
            "  received {} of {} lines, failed runs {}, elapsed {:.2} s",
            self.lines_received,
            expected,
            self.runs_failed,
            self.concurrent_elapsed.as_secs_f64()
        )
    }
}

const NODE_TOKEN: &str = "bench-node-token";

/// A node serving `command` runs on loopback until `stop`; its client.
async fn start_node(
    name: &str,
    root: &Path,
    stop: &CancellationToken,
) -> Result<RemoteRuntime, DispatchError> {
    let runtime = Arc::new(LocalRuntime::standard(LocalConfig::new(root)));
    let mut config = NodeConfig::new(runtime, vec!["command".into()], Some(NODE_TOKEN.into()));
    config.name = name.to_string();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| DispatchError::Setup(format!("node listener: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| DispatchError::Setup(format!("node listener: {e}")))?;
    let stop = stop.clone();
    tokio::spawn(async move {
        let _ = serve_node(config, listener, async move { stop.cancelled().await }).await;
    });
    RemoteRuntime::new(name, &format!("http://{addr}"), NODE_TOKEN)
}

/// Runs every measurement.
pub async fn run_remote_bench(
    config: RemoteBenchConfig,
) -> Result<RemoteBenchReport, DispatchError> {
    let ws = &config.workspace;
    std::fs::create_dir_all(ws)
        .map_err(|e| DispatchError::Setup(format!("{}: {e}", ws.display())))?;
    let stop = CancellationToken::new();
    let nodes = [
        Arc::new(start_node("bench-1", &ws.join("node-1"), &stop).await?),
        Arc::new(start_node("bench-2", &ws.join("node-2"), &stop).await?),
    ];
    let local = LocalRuntime::standard(LocalConfig::new(ws.join("local")));
    let spec = RunSpec {
        agent: "command".into(),
        prompt: "/bin/true".into(),
        ..RunSpec::default()
    };
    let local_times = time_runs(&local, &spec, config.overhead_iterations).await?;
    let remote_times = time_runs(nodes[0].as_ref(), &spec, config.overhead_iterations).await?;
    let (direct_call, proxied_call) = measure_proxy(config.proxy_calls).await?;
    let start = Instant::now();
    let (lines_received, runs_failed) =
        stream_remote(&nodes, config.concurrent_runs, config.lines_per_run).await?;
    let concurrent_elapsed = start.elapsed();
    stop.cancel();
    Ok(RemoteBenchReport {
        local: Percentiles::of(local_times),
        remote: Percentiles::of(remote_times),
        direct_call,
        proxied_call,
        lines_received,
        runs_failed,
        concurrent_elapsed,
        config,
    })
}

/// How long each of `n` runs of `spec` takes (dispatch → every event → wait), after a warm-up.
async fn time_runs(
    runtime: &dyn Runtime,
    spec: &RunSpec,
    n: usize,
) -> Result<Vec<Duration>, DispatchError> {
    let mut times = Vec::with_capacity(n);
    for i in 0..n + 5 {
        let t = Instant::now();
        let run = runtime.dispatch(spec.clone()).await?;
        if let Some(events) = run.events() {
            events.collect().await;
        }
        run.wait().await;
        if i >= 5 {
            times.push(t.elapsed());
        }
    }
    Ok(times)
}

/// The same small model call, `n` times straight to an upstream and `n` times through an
/// egress proxy to it.
async fn measure_proxy(n: usize) -> Result<(Percentiles, Percentiles), DispatchError> {
    let setup = |e: String| DispatchError::Setup(format!("proxy benchmark: {e}"));
    let upstream = axum::Router::new().route(
        "/v1/responses",
        axum::routing::post(|| async { r#"{"id":"resp_1","status":"completed","output":[]}"# }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| setup(e.to_string()))?;
    let addr = listener.local_addr().map_err(|e| setup(e.to_string()))?;
    let server = tokio::spawn(async move { axum::serve(listener, upstream).await });
    let route = EgressRoute {
        base_url: format!("http://{addr}/v1"),
        credential: Some(Secret::new("sk-bench-key")),
        headers: Vec::new(),
    };
    let client = upstream_client().map_err(|e| setup(e.to_string()))?;
    let proxy = EgressProxy::start(&route, "/v1", EgressLimits::default(), client)
        .await
        .map_err(|e| setup(e.to_string()))?;
    let caller = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .map_err(|e| setup(e.to_string()))?;
    let body = r#"{"model":"m","input":"hi"}"#;
    let direct_url = format!("http://{addr}/v1/responses");
    let proxied_url = format!("{}/responses", proxy.base_url());
    let placeholder = format!("Bearer {}", proxy.placeholder().expose());
    let mut direct = Vec::with_capacity(n);
    let mut proxied = Vec::with_capacity(n);
    for i in 0..n + 20 {
        for (url, auth, out) in [
            (&direct_url, "Bearer sk-bench-key", &mut direct),
            (&proxied_url, placeholder.as_str(), &mut proxied),
        ] {
            let t = Instant::now();
            let answer = caller
                .post(url.as_str())
                .header("authorization", auth)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .map_err(|e| setup(e.to_string()))?;
            if !answer.status().is_success() {
                return Err(setup(format!("{url} answered {}", answer.status())));
            }
            answer.bytes().await.map_err(|e| setup(e.to_string()))?;
            if i >= 20 {
                out.push(t.elapsed());
            }
        }
    }
    proxy.stop();
    server.abort();
    Ok((Percentiles::of(direct), Percentiles::of(proxied)))
}

/// `runs` chatty runs at once, alternating between the nodes; lines received and failed runs.
async fn stream_remote(
    nodes: &[Arc<RemoteRuntime>; 2],
    runs: usize,
    lines: usize,
) -> Result<(u64, usize), DispatchError> {
    let mut tasks = Vec::with_capacity(runs);
    for i in 0..runs {
        let node = nodes[i % 2].clone();
        let spec = RunSpec {
            agent: "command".into(),
            prompt: format!("sh -c 'yes | head -n {lines}'"),
            ..RunSpec::default()
        };
        tasks.push(tokio::spawn(async move {
            let run = node.dispatch(spec).await?;
            let mut count: u64 = 0;
            if let Some(mut events) = run.events() {
                while let Some(event) = events.next().await {
                    count += u64::from(event.kind == EventType::Message && event.data == "y");
                }
            }
            let status = run.wait().await;
            Ok::<_, DispatchError>((count, status.state == State::Succeeded))
        }));
    }
    let (mut received, mut failed) = (0, 0);
    for task in tasks {
        match task.await {
            Ok(Ok((count, ok))) => {
                received += count;
                failed += usize::from(!ok);
            }
            Ok(Err(error)) => return Err(error),
            Err(_) => failed += 1,
        }
    }
    Ok((received, failed))
}
