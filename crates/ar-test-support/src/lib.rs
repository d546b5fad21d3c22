//! Test support: the mock model provider server, the MCP test servers (an authenticating rmcp
//! server and the reference server-everything), a host's `http` MCP provider, a host's
//! workspace provider, the HTTP harness of the service suites and the browser tests' runner.
//! Dev and bench only.

pub mod browser;
pub mod mcp_everything;
#[cfg(feature = "mcp-server")]
pub mod mcp_server;
pub mod mock_provider;
pub mod provider_host;
pub mod refresh_host;
#[cfg(feature = "service")]
pub mod service;
pub mod skill_host;
pub mod temporal_dev;
pub mod workspace_host;

/// True when the agent CLI `program` is on `PATH`. Missing: a loud skip message locally, a
/// panic under `CI=true` (a missing peer fails the suite there).
pub fn require_cli(program: &str) -> bool {
    if ar_process::find_program(program, None).is_some() {
        return true;
    }
    if std::env::var("CI").is_ok_and(|value| value == "true") {
        panic!("the {program} CLI is required under CI=true (install with .ci/steps/install-agent-clis.sh)");
    }
    eprintln!("!!!!!! SKIPPING: the {program} CLI is not installed (run .ci/steps/install-agent-clis.sh) !!!!!!");
    false
}

/// Serves `router` on `listener` in the background until `shutdown` is cancelled, with
/// TCP_NODELAY on every connection: a test peer's small answers (SSE pieces, zero-latency
/// replies) must not wait for Nagle's algorithm and the client's delayed ACK (~40 ms).
fn spawn_peer(
    name: &'static str,
    listener: tokio::net::TcpListener,
    router: axum::Router,
    shutdown: tokio_util::sync::CancellationToken,
) {
    tokio::spawn(async move {
        let listener =
            axum::serve::ListenerExt::tap_io(listener, |stream: &mut tokio::net::TcpStream| {
                let _ = stream.set_nodelay(true);
            });
        let serve = axum::serve(listener, router)
            .with_graceful_shutdown(async move { shutdown.cancelled().await });
        if let Err(error) = serve.await {
            tracing::debug!("{name} ended: {error}");
        }
    });
}

/// Whether a test host accepts the request's `Authorization`: any request when it expects no
/// token, else `Bearer <token>` (scheme case-insensitive) or the bare token, as the SDKs'
/// routers accept it.
pub fn bearer_accepted(expected: Option<&str>, headers: &axum::http::HeaderMap) -> bool {
    let Some(expected) = expected else {
        return true;
    };
    let value = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .trim();
    let presented = match value.get(..7) {
        Some(scheme) if scheme.eq_ignore_ascii_case("bearer ") => value[7..].trim(),
        _ => value,
    };
    presented == expected
}
