//! `agent-runtime node`: serves this machine's agent CLIs to other machines (ar-dispatch's node
//! API) on `--addr`, else `AGENT_RUNTIME_NODE_ADDR`, else 127.0.0.1:8091. CLI turns run here
//! with their egress proxy on this machine and this executable as their MCP bridge.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use ar_dispatch::node::{node_addr, node_token_from_env};
use ar_dispatch::{serve_node, NodeConfig, NodeOptions};

/// Options of the node.
#[derive(Debug, clap::Args)]
pub struct NodeArgs {
    /// Listen address (default: AGENT_RUNTIME_NODE_ADDR, else 127.0.0.1:8091).
    #[arg(long)]
    pub addr: Option<String>,
    /// Offer `command:NAME` running PROGRAM (prompt as its first stdin line); repeatable.
    #[arg(long = "command", value_name = "NAME=PROGRAM")]
    pub commands: Vec<String>,
    /// Directory holding the per-run workspaces (default: a directory under the system temp dir).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// The node's name in its inventory and capabilities (default: the host name).
    #[arg(long)]
    pub name: Option<String>,
    /// Most runs at once; more are refused with 503 (0: no limit).
    #[arg(long, default_value_t = 8)]
    pub max_runs: usize,
    /// Seconds a finished run's workdir is kept before it is removed.
    #[arg(long, default_value_t = 3600)]
    pub workdir_ttl_seconds: u64,
    /// Seconds running runs get to finish at shutdown before they are cancelled.
    #[arg(long, default_value_t = 30)]
    pub shutdown_grace_seconds: u64,
}

/// This machine's host name, else `node`.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "node".to_string())
}

pub async fn run(args: NodeArgs) -> anyhow::Result<()> {
    let root = args
        .root
        .unwrap_or_else(|| std::env::temp_dir().join("agent-runtime-node"));
    std::fs::create_dir_all(&root).with_context(|| format!("creating {}", root.display()))?;
    let token = node_token_from_env();
    if token.is_none() {
        eprintln!(
            "warning: AGENT_RUNTIME_NODE_TOKEN is not set; every request will be refused (403)"
        );
    }
    let options = NodeOptions {
        commands: args.commands,
        // CLI turns start this very executable as their MCP bridge to the run's tools.
        bridge_program: std::env::current_exe().ok(),
        name: args.name.unwrap_or_else(host_name),
        max_concurrent_runs: args.max_runs,
        workdir_ttl: Duration::from_secs(args.workdir_ttl_seconds),
        shutdown_grace: Duration::from_secs(args.shutdown_grace_seconds),
    };
    let config = NodeConfig::local(&root, &options, token).context("node configuration")?;
    let addr = node_addr(args.addr.as_deref());
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let local = listener.local_addr()?;
    eprintln!(
        "node {} listening on http://{local} (agents: {}; at most {} runs; workspaces under {})",
        options.name,
        config.agent_names().join(", "),
        options.max_concurrent_runs,
        root.display()
    );
    serve_node(config, listener, super::serve::shutdown_signal())
        .await
        .context("node server")?;
    eprintln!("node {} stopped", options.name);
    Ok(())
}
