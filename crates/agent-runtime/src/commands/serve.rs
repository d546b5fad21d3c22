//! `agent-runtime serve`: read settings, bind, serve until SIGTERM/SIGINT.

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

pub async fn run() -> anyhow::Result<()> {
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
    service.serve(listener, shutdown_signal()).await
}
