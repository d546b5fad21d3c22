//! `agent-runtime serve`: read settings, bind, serve until SIGTERM/SIGINT. With `--demo`, the
//! built-in demo model, its agent and a first run (see `ar_server::demo`).

use anyhow::Context as _;
use ar_config::env::process_env;
use ar_config::ServiceSettings;

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
    tracing::info!("shutdown requested: stopping intake and checkpointing runs");
}

/// `serve`'s options (everything else comes from the environment).
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Demo mode: a first run without a vendor key. Runs use the built-in deterministic demo
    /// model (not a real model); the app `demo` with the agent `demo` is added and, on a
    /// fresh store, one demo run is started. Refused when a provider key is configured.
    #[arg(long)]
    pub demo: bool,
}

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let settings = ServiceSettings::from_env(process_env).map_err(|diagnostics| {
        let lines: Vec<String> = diagnostics.iter().map(|d| format!("  {d}")).collect();
        anyhow::anyhow!("invalid configuration:\n{}", lines.join("\n"))
    })?;
    // Refuse before binding, so a refused configuration never opens a non-loopback socket.
    // (`Service::build` checks again for callers that bind their own listener.)
    if settings.service_token.is_none()
        && settings.allow_anonymous
        && !settings.addr.ip().is_loopback()
    {
        anyhow::bail!(
            "refusing to serve anonymously on non-loopback address {}: set AGENT_RUNTIME_SERVICE_TOKEN",
            settings.addr
        );
    }
    let listener = tokio::net::TcpListener::bind(settings.addr)
        .await
        .with_context(|| format!("binding {}", settings.addr))?;
    let addr = listener.local_addr()?;
    // Agent CLIs start this very executable as their MCP bridge to the run's tools.
    let options = ar_server::ServiceOptions {
        mcp_bridge_program: std::env::current_exe().ok(),
        worker: false,
        demo: args.demo,
    };
    let service = ar_server::Service::build_with(settings, addr, options).await?;
    if let (Some(token), Some(path)) = (&service.service_token, &service.generated_token_path) {
        // The one place a token is shown: the operator's own terminal, at start.
        eprintln!(
            "development service token (saved to {}):\n  {}",
            path.display(),
            token.expose()
        );
    }
    eprintln!("agent runtime listening on http://{addr} (studio console: http://{addr}/studio)");
    if args.demo {
        let run = ar_server::demo::seed(&service.engine, service.state.store.as_ref()).await?;
        // A configured token is the operator's own: named, never printed.
        let token = match (&service.service_token, &service.generated_token_path) {
            (Some(token), Some(_)) => Some(token.expose().to_string()),
            (Some(_), None) => Some("$AGENT_RUNTIME_SERVICE_TOKEN".to_string()),
            (None, _) => None,
        };
        eprintln!("{}", demo_guide(addr, token.as_deref(), run.as_deref()));
    }
    service.serve(listener, shutdown_signal()).await
}

/// What a newcomer reads after `serve --demo`: where to look and what to type next.
fn demo_guide(addr: std::net::SocketAddr, token: Option<&str>, run: Option<&str>) -> String {
    let header = token
        .map(|t| format!("-H 'Authorization: Bearer {t}' "))
        .unwrap_or_default();
    let console = match token {
        Some(t) => format!("http://{addr}/studio#token={t}"),
        None => format!("http://{addr}/studio"),
    };
    let start = format!(
        "curl -s {header}http://{addr}/v1/runs -d '{{\"app_id\":\"demo\",\"agent_id\":\"demo\",\"target\":{{\"type\":\"ticket\",\"id\":\"DEMO-2\"}},\"instructions\":\"Show me.\"}}'"
    );
    let mut lines = vec![
        "DEMO MODE: runs use the built-in demo model (provider \"demo\": deterministic, no vendor key, not a real AI).".to_string(),
        format!("  open the console:  {console}"),
    ];
    match run {
        Some(run) => lines.extend([
            format!("  demo run {run} started; it pauses for your approval. Approve it in the console, or:"),
            format!("  curl -s {header}-X POST 'http://{addr}/v1/runs/{run}/approve?app_id=demo'"),
            format!("  watch it:  agent-runtime runs watch {run} --app demo --url http://{addr}"),
            format!("  or its events:  curl -N {header}'http://{addr}/v1/runs/{run}/events?app_id=demo'"),
        ]),
        None => lines.push("  the demo app has runs already; start another in the console, or:".to_string()),
    }
    lines.push(format!("  start a demo run:  {start}"));
    lines.join("\n")
}
