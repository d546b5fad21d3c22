//! Shared pieces of the suites: endpoints, a loopback policy, and raw HTTP peers.

use std::time::Duration;

use ar_core::mcp::McpEndpoint;
use ar_core::secret::Secret;
use ar_mcp::{McpHttpClient, McpPolicy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What a loopback test server needs: plain HTTP and private addresses allowed.
pub fn loopback_policy() -> McpPolicy {
    McpPolicy::new(true, true, Vec::new())
}

pub fn client(policy: McpPolicy) -> McpHttpClient {
    McpHttpClient::new(policy).expect("client builds")
}

pub fn endpoint(run_id: &str, url: &str) -> McpEndpoint {
    McpEndpoint {
        run_id: run_id.to_string(),
        server_id: "srv".to_string(),
        url: url.to_string(),
        headers: Vec::new(),
    }
}

pub fn with_bearer(mut endpoint: McpEndpoint, token: &str) -> McpEndpoint {
    endpoint.headers = vec![(
        "Authorization".to_string(),
        Secret::new(format!("Bearer {token}")),
    )];
    endpoint
}

/// A loopback server that answers every connection with `response` (raw HTTP bytes); its
/// URL.
pub async fn raw_server(response: &'static str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let _ = tokio::time::timeout(Duration::from_secs(2), socket.read(&mut buf)).await;
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    format!("http://{addr}/mcp")
}
