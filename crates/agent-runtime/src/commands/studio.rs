//! `agent-runtime studio`: the standalone studio (runtime link, people API and console) on
//! `--addr`, else `AGENT_RUNTIME_STUDIO_ADDR`, else 127.0.0.1:8092.

use anyhow::Context as _;
use ar_config::env::{process_env, STUDIO_TOKEN};
use ar_studio::{serve_studio, StudioConfig};

/// Options of the standalone studio.
#[derive(Debug, clap::Args)]
pub struct StudioArgs {
    /// Listen address (default: AGENT_RUNTIME_STUDIO_ADDR, else 127.0.0.1:8092).
    #[arg(long)]
    pub addr: Option<String>,
    /// Keep commands and breakpoint sets in this SQLite file (default: memory only).
    #[arg(long)]
    pub store: Option<String>,
    /// Bearer token every request needs (hosted use; default AGENT_RUNTIME_STUDIO_TOKEN).
    /// Without one only loopback is served.
    #[arg(long)]
    pub token: Option<String>,
}

pub async fn run(mut args: StudioArgs) -> anyhow::Result<()> {
    if args.token.is_none() {
        args.token = process_env(STUDIO_TOKEN.name).filter(|t| !t.trim().is_empty());
    }
    let addr = StudioConfig::listen_addr(args.addr.as_deref()).context("studio listen address")?;
    if args.token.is_none() && !addr.ip().is_loopback() {
        anyhow::bail!("refusing to serve the studio on {addr} without --token: loopback only");
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let addr = listener.local_addr()?;
    eprintln!("studio listening on http://{addr} (console: http://{addr}/studio)");
    let config = StudioConfig {
        token: args.token,
        store: args.store,
        ..StudioConfig::default()
    };
    serve_studio(config, listener, super::serve::shutdown_signal())
        .await
        .context("studio server")
}
