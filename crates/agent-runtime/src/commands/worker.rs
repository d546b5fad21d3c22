//! `agent-runtime worker`: executes durable runs' turns from Temporal's task queues, with the
//! same settings and store as `serve`, until SIGTERM/SIGINT.

use anyhow::Context as _;
use ar_config::env::process_env;
use ar_config::ServiceSettings;
use ar_server::WorkerRole;

/// Options of the worker.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// Poll only the coding queue (`agent-native-coding`).
    #[arg(long, conflicts_with = "all_queues")]
    pub coding: bool,
    /// Poll every queue (single-tenant deployments).
    #[arg(long)]
    pub all_queues: bool,
    /// Where `/readyz` and `/healthz` are served (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:8092")]
    pub addr: String,
}

pub async fn run(args: WorkerArgs) -> anyhow::Result<()> {
    let settings = ServiceSettings::from_env(process_env).map_err(|diagnostics| {
        let lines: Vec<String> = diagnostics.iter().map(|d| format!("  {d}")).collect();
        anyhow::anyhow!("invalid configuration:\n{}", lines.join("\n"))
    })?;
    if settings.durable.is_none() {
        anyhow::bail!("agent-runtime worker needs TEMPORAL_ADDRESS (durable execution is off)");
    }
    let role = match (args.coding, args.all_queues) {
        (true, _) => WorkerRole::Coding,
        (_, true) => WorkerRole::All,
        _ => WorkerRole::Shared,
    };
    let listener = tokio::net::TcpListener::bind(&args.addr)
        .await
        .with_context(|| format!("binding {}", args.addr))?;
    let addr = listener.local_addr()?;
    let options = ar_server::ServiceOptions {
        mcp_bridge_program: std::env::current_exe().ok(),
        worker: true,
        demo: false,
    };
    let service = ar_server::Service::build_with(settings, addr, options).await?;
    eprintln!("agent runtime worker ({role:?}) ready on http://{addr}/readyz");
    service
        .work(listener, role, super::serve::shutdown_signal())
        .await
}
