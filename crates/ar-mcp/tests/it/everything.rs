//! Against the reference server-everything (node): tools, calls, one session reused, closed
//! with the run, opened anew when a restarted server has forgotten it.

use ar_core::mcp::McpClient;
use ar_test_support::mcp_everything::ServerEverything;
use serde_json::json;

use crate::support::{client, endpoint, loopback_policy};

#[tokio::test]
async fn tools_are_listed_and_called_on_one_session_closed_with_the_run() {
    let Some(server) = ServerEverything::start().await else {
        return;
    };
    let mcp = client(loopback_policy());
    let at = endpoint("run-1", &server.url());

    let tools = mcp.list_tools(&at).await.expect("tools");
    let echo = tools.iter().find(|tool| tool.name == "echo").expect("echo");
    assert_eq!(echo.input_schema["properties"]["message"]["type"], "string");
    assert!(!echo.description.is_empty());
    assert!(tools.iter().any(|tool| tool.name == "get-sum"), "{tools:?}");

    let echoed = mcp
        .call_tool(&at, "echo", json!({"message": "hello"}))
        .await
        .expect("echo");
    assert_eq!(echoed.content, "Echo: hello");
    assert!(!echoed.is_error);
    let sum = mcp
        .call_tool(&at, "get-sum", json!({"a": 2, "b": 3}))
        .await
        .expect("get-sum");
    assert_eq!(sum.content, "The sum of 2 and 3 is 5.");
    assert_eq!(server.sessions_opened(), 1, "{:?}", server.log());

    // A tool the server does not have: its error answer is a tool error the model reads.
    let unknown = mcp
        .call_tool(&at, "no-such-tool", json!({}))
        .await
        .expect("an output");
    assert!(unknown.is_error, "{unknown:?}");
    assert!(unknown.content.contains("no-such-tool"), "{unknown:?}");

    mcp.close_run("run-1").await;
    assert_eq!(server.sessions_ended(), 1, "{:?}", server.log());
    let again = mcp
        .call_tool(&at, "echo", json!({"message": "again"}))
        .await
        .expect("a new session");
    assert_eq!(again.content, "Echo: again");
    assert_eq!(server.sessions_opened(), 2);
}

#[tokio::test]
async fn a_restarted_server_gets_a_new_session_transparently() {
    let Some(mut server) = ServerEverything::start().await else {
        return;
    };
    let mcp = client(loopback_policy());
    let at = endpoint("run-restart", &server.url());
    let first = mcp
        .call_tool(&at, "echo", json!({"message": "one"}))
        .await
        .expect("first call");
    assert_eq!(first.content, "Echo: one");

    server.restart().await;
    let second = mcp
        .call_tool(&at, "echo", json!({"message": "two"}))
        .await
        .expect("the call after the restart");
    assert_eq!(second.content, "Echo: two");
    assert_eq!(server.sessions_opened(), 1, "{:?}", server.log());
    mcp.close_run("run-restart").await;
}
