//! Servers that misbehave: a call that never ends, garbage, a huge result, an answer over the
//! cap, a refused connection, a redirect, a page that is not MCP. Each is a typed error or a
//! bounded output, never a panic.

use std::time::Duration;

use ar_core::mcp::{McpClient, McpError};
use ar_mcp::output::MAX_OUTPUT_BYTES;
use ar_test_support::mcp_server::{McpTestOptions, McpTestServer, Misbehaviour, TEN_MB};
use serde_json::json;

use crate::support::{client, endpoint, loopback_policy, raw_server};

#[tokio::test]
async fn a_hanging_call_times_out_and_the_session_stays_usable() {
    let server = McpTestServer::start(McpTestOptions::default()).await;
    let mut policy = loopback_policy();
    policy.call_timeout = Duration::from_millis(500);
    let mcp = client(policy);
    let at = endpoint("run-hang", &server.url());
    server.set_misbehaviour(Misbehaviour::Hang);
    let err = mcp
        .call_tool(&at, "lookup", json!({"key": "k"}))
        .await
        .expect_err("hangs");
    assert!(matches!(err, McpError::Timeout(_)), "{err:?}");
    server.set_misbehaviour(Misbehaviour::None);
    let output = mcp
        .call_tool(&at, "lookup", json!({"key": "k"}))
        .await
        .expect("answers again");
    assert_eq!(output.content, "value of k");
    assert_eq!(server.initializations(), 1);
}

#[tokio::test]
async fn garbage_is_a_protocol_error() {
    let server = McpTestServer::start(McpTestOptions::default()).await;
    let mcp = client(loopback_policy());
    let at = endpoint("run-garbage", &server.url());
    server.set_misbehaviour(Misbehaviour::Garbage);
    let err = mcp
        .call_tool(&at, "lookup", json!({"key": "k"}))
        .await
        .expect_err("garbage");
    assert!(
        matches!(&err, McpError::Protocol(message) if message.contains("not a JSON-RPC message")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_ten_megabyte_result_is_cut_with_a_marker() {
    let server = McpTestServer::start(McpTestOptions::default()).await;
    let mcp = client(loopback_policy());
    server.set_misbehaviour(Misbehaviour::HugeText(TEN_MB));
    let output = mcp
        .call_tool(
            &endpoint("run-huge", &server.url()),
            "lookup",
            json!({"key": "k"}),
        )
        .await
        .expect("a bounded output");
    let more = TEN_MB - MAX_OUTPUT_BYTES;
    assert!(
        output
            .content
            .ends_with(&format!("\n[… output cut: {more} bytes more]")),
        "{}",
        &output.content[output.content.len() - 80..]
    );
    assert!(output.content.len() < MAX_OUTPUT_BYTES + 100);
}

#[tokio::test]
async fn an_answer_over_the_cap_is_a_protocol_error() {
    let server = McpTestServer::start(McpTestOptions::default()).await;
    let mut policy = loopback_policy();
    policy.max_response_bytes = 1024 * 1024;
    let mcp = client(policy);
    let at = endpoint("run-cap", &server.url());
    server.set_misbehaviour(Misbehaviour::HugeText(2 * 1024 * 1024));
    let err = mcp
        .call_tool(&at, "lookup", json!({"key": "k"}))
        .await
        .expect_err("over the cap");
    assert!(
        matches!(&err, McpError::Protocol(message) if message.contains("1048576 byte cap")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_closed_port_is_a_transport_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mcp = client(loopback_policy());
    let err = mcp
        .list_tools(&endpoint(
            "run-closed",
            &format!("http://127.0.0.1:{port}/mcp"),
        ))
        .await
        .expect_err("nothing listens");
    assert!(matches!(err, McpError::Transport(_)), "{err:?}");
}

#[tokio::test]
async fn a_redirect_is_refused() {
    let url = raw_server(
        "HTTP/1.1 307 Temporary Redirect\r\nLocation: https://elsewhere.example/mcp\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await;
    let err = client(loopback_policy())
        .list_tools(&endpoint("run-redirect", &url))
        .await
        .expect_err("redirect");
    assert!(
        matches!(&err, McpError::Refused(message) if message.contains("elsewhere.example")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_web_page_is_a_protocol_error() {
    let url = raw_server(
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 13\r\nConnection: close\r\n\r\n<html></html>",
    )
    .await;
    let err = client(loopback_policy())
        .list_tools(&endpoint("run-html", &url))
        .await
        .expect_err("not MCP");
    assert!(
        matches!(&err, McpError::Protocol(message) if message.contains("text/html")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_server_error_is_a_transport_error() {
    let url = raw_server(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbusy",
    )
    .await;
    let err = client(loopback_policy())
        .list_tools(&endpoint("run-503", &url))
        .await
        .expect_err("503");
    assert!(
        matches!(&err, McpError::Transport(message) if message.contains("503") && message.contains("busy")),
        "{err:?}"
    );
}
