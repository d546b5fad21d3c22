//! The destination rules, end to end against a loopback server: plain HTTP, private
//! addresses (as a literal and through DNS), allowed hosts, URL shape.

use ar_core::mcp::{McpClient, McpError};
use ar_mcp::McpPolicy;
use ar_test_support::mcp_server::{McpTestOptions, McpTestServer};

use crate::support::{client, endpoint};

async fn refusal(policy: McpPolicy, url: &str) -> String {
    match client(policy)
        .list_tools(&endpoint("run-policy", url))
        .await
    {
        Err(McpError::Refused(reason)) => reason,
        other => panic!("expected a refusal for {url}, got {other:?}"),
    }
}

#[tokio::test]
async fn plain_http_needs_allow_http() {
    let server = McpTestServer::start(McpTestOptions::default()).await;
    let reason = refusal(McpPolicy::new(false, true, Vec::new()), &server.url()).await;
    assert!(reason.contains("AGENT_RUNTIME_MCP_ALLOW_HTTP"), "{reason}");
    assert_eq!(server.initializations(), 0);
}

#[tokio::test]
async fn loopback_needs_allow_private_networks() {
    let server = McpTestServer::start(McpTestOptions::default()).await;
    let reason = refusal(McpPolicy::new(true, false, Vec::new()), &server.url()).await;
    assert!(
        reason.contains("127.0.0.1 is a loopback address"),
        "{reason}"
    );
    // Through DNS: the name resolves to loopback, refused when connecting.
    let by_name = server.url().replace("127.0.0.1", "localhost");
    let reason = refusal(McpPolicy::new(true, false, Vec::new()), &by_name).await;
    assert!(reason.contains("localhost resolves to"), "{reason}");
    assert_eq!(server.initializations(), 0);

    let allowed = client(McpPolicy::new(true, true, Vec::new()));
    let tools = allowed
        .list_tools(&endpoint("run-policy", &by_name))
        .await
        .expect("allowed");
    assert_eq!(tools.len(), 2);
}

#[tokio::test]
async fn allowed_hosts_are_enforced() {
    let server = McpTestServer::start(McpTestOptions::default()).await;
    let url = server.url();
    let only = |hosts: &str| McpPolicy::new(true, true, McpPolicy::parse_allowed_hosts(hosts));
    let reason = refusal(only("*.example.com"), &url).await;
    assert!(
        reason.contains("AGENT_RUNTIME_MCP_ALLOWED_HOSTS"),
        "{reason}"
    );
    // `*.localhost` is any name under localhost, not localhost itself.
    let by_name = url.replace("127.0.0.1", "localhost");
    refusal(only("*.localhost"), &by_name).await;
    for (hosts, at) in [
        ("127.0.0.1", &url),
        ("mcp.example.com, LOCALHOST", &by_name),
    ] {
        client(only(hosts))
            .list_tools(&endpoint("run-policy", at))
            .await
            .unwrap_or_else(|err| panic!("{hosts} allows {at}: {err:?}"));
    }
}

#[tokio::test]
async fn userinfo_query_and_fragment_are_refused() {
    let server = McpTestServer::start(McpTestOptions::default()).await;
    let url = server.url();
    let policy = McpPolicy::new(true, true, Vec::new());
    let with_user = url.replace("http://", "http://user:pw@");
    for (bad, rule) in [
        (with_user, "user info"),
        (format!("{url}?a=1"), "query"),
        (format!("{url}#top"), "fragment"),
    ] {
        let reason = refusal(policy.clone(), &bad).await;
        assert!(reason.contains(rule), "{bad}: {reason}");
    }
    assert_eq!(server.initializations(), 0);
}
