//! `agent-runtime node`: serves this machine's agent CLIs to other machines (ar-dispatch's node
//! API) on `--addr`, else `AGENT_RUNTIME_NODE_ADDR`, else 127.0.0.1:8091.

use std::path::PathBuf;

use anyhow::Context as _;
use ar_dispatch::node::{node_addr, node_token_from_env};
use ar_dispatch::{serve_node, NodeConfig};

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
    let config = NodeConfig::local(&root, &args.commands, token).context("node configuration")?;
    let addr = node_addr(args.addr.as_deref());
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let local = listener.local_addr()?;
    eprintln!(
        "node listening on http://{local} (agents: {}; workspaces under {})",
        config.agents.join(", "),
        root.display()
    );
    serve_node(config, listener, super::serve::shutdown_signal())
        .await
        .context("node server")
}
