//! Against ar-test-support's authenticating rmcp server: bearer checks, rotation on an open
//! session, pagination, a forgotten session (404), the read and write tools.

use ar_core::mcp::{McpClient, McpError};
use ar_test_support::mcp_server::{McpTestOptions, McpTestServer};
use serde_json::json;

use crate::support::{client, endpoint, loopback_policy, with_bearer};

#[tokio::test]
async fn a_missing_or_wrong_token_is_unauthorized_and_a_rotated_one_works() {
    let server = McpTestServer::start(McpTestOptions::with_token("tok-1")).await;
    let mcp = client(loopback_policy());
    let bare = endpoint("run-auth", &server.url());
    let err = mcp.list_tools(&bare).await.expect_err("no token");
    assert!(
        matches!(&err, McpError::Unauthorized(reason) if reason.contains("401")),
        "{err:?}"
    );

    let good = with_bearer(bare.clone(), "tok-1");
    let looked_up = mcp
        .call_tool(&good, "lookup", json!({"key": "k1"}))
        .await
        .expect("lookup");
    assert_eq!(looked_up.content, "value of k1");
    assert_eq!(
        looked_up.structured,
        Some(json!({"key": "k1", "value": "value of k1"}))
    );
    assert_eq!(server.initializations(), 1);

    // The server now wants another token: the old one is refused on the open session, and
    // the rotated credential works on that same session.
    server.set_token(Some("tok-2"));
    let err = mcp
        .call_tool(&good, "record", json!({"entry": "a"}))
        .await
        .expect_err("stale token");
    assert!(matches!(err, McpError::Unauthorized(_)), "{err:?}");
    let rotated = with_bearer(bare, "tok-2");
    let recorded = mcp
        .call_tool(&rotated, "record", json!({"entry": "b"}))
        .await
        .expect("record");
    assert_eq!(recorded.content, "recorded entry 1");
    assert_eq!(server.recorded(), vec![json!({"entry": "b"})]);
    assert_eq!(server.initializations(), 1);
    assert_eq!(server.calls(), ["lookup", "record"]);

    let shown = format!("{mcp:?} {rotated:?}");
    assert!(!shown.contains("tok-"), "{shown}");
    mcp.close_run("run-auth").await;
}

#[tokio::test]
async fn the_tool_list_is_followed_across_pages() {
    let server = McpTestServer::start(McpTestOptions {
        tools_page_size: Some(1),
        ..McpTestOptions::default()
    })
    .await;
    let mcp = client(loopback_policy());
    let tools = mcp
        .list_tools(&endpoint("run-pages", &server.url()))
        .await
        .expect("tools");
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    assert_eq!(names, ["lookup", "record"]);
    assert_eq!(tools[0].input_schema["required"], json!(["key"]));
}

#[tokio::test]
async fn a_forgotten_session_is_opened_anew_and_the_call_sent_once_more() {
    let server = McpTestServer::start(McpTestOptions::default()).await;
    let mcp = client(loopback_policy());
    let at = endpoint("run-forget", &server.url());
    mcp.call_tool(&at, "lookup", json!({"key": "a"}))
        .await
        .expect("first");
    server.forget_sessions().await;
    let second = mcp
        .call_tool(&at, "record", json!({"entry": "once"}))
        .await
        .expect("after the server forgot the session");
    assert_eq!(second.content, "recorded entry 1");
    assert_eq!(server.initializations(), 2);
    assert_eq!(server.recorded().len(), 1);
}

#[tokio::test]
async fn runs_and_servers_get_sessions_of_their_own() {
    let server = McpTestServer::start(McpTestOptions::default()).await;
    let mcp = client(loopback_policy());
    let a = endpoint("run-a", &server.url());
    let mut a2 = endpoint("run-a", &server.url());
    a2.server_id = "other".into();
    let b = endpoint("run-b", &server.url());
    for at in [&a, &a2, &b, &a] {
        mcp.call_tool(at, "lookup", json!({"key": "x"}))
            .await
            .expect("lookup");
    }
    assert_eq!(server.initializations(), 3);
    mcp.close_run("run-a").await;
    mcp.call_tool(&b, "lookup", json!({"key": "x"}))
        .await
        .expect("run-b's session is still open");
    assert_eq!(server.initializations(), 3);
}

#[tokio::test]
async fn a_stateless_server_answering_json_works() {
    let server = McpTestServer::start(McpTestOptions {
        stateless_json: true,
        ..McpTestOptions::with_token("tok")
    })
    .await;
    let mcp = client(loopback_policy());
    let at = with_bearer(endpoint("run-json", &server.url()), "tok");
    assert_eq!(mcp.list_tools(&at).await.expect("tools").len(), 2);
    let output = mcp
        .call_tool(&at, "record", json!({"entry": "j"}))
        .await
        .expect("record");
    assert_eq!(output.content, "recorded entry 1");
    mcp.close_run("run-json").await;
}
