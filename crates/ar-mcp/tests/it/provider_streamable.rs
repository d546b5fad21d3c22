//! The `streamable_http` provider transport against ar-test-support's authenticating rmcp
//! server: annotations read as mutating and risk level, the bearer token, the context sent as
//! `_meta`, the pages of the tool list, one session for every request, and the misbehaviours
//! (wrong token, a hanging call, a huge result).

use std::time::{Duration, Instant};

use ar_core::mcp::McpError;
use ar_core::secret::Secret;
use ar_mcp::output::MAX_OUTPUT_BYTES;
use ar_mcp::provider::{connect, ProviderConnection, ProviderSpec, StreamableHttpProvider};
use ar_test_support::mcp_server::{McpTestOptions, McpTestServer, Misbehaviour, TEN_MB};
use serde_json::json;
use url::Url;

fn provider(
    server: &McpTestServer,
    token: Option<&str>,
    timeout: Duration,
) -> Box<dyn ProviderConnection> {
    let spec = ProviderSpec::StreamableHttp {
        url: Url::parse(&server.url()).expect("url"),
        token: token.map(Secret::new),
    };
    connect(spec, timeout).expect("connects lazily")
}

#[tokio::test]
async fn tools_map_their_annotations_and_calls_reuse_one_session_with_the_token() {
    let server = McpTestServer::start(McpTestOptions {
        tools_page_size: Some(1),
        ..McpTestOptions::with_token("tok-p")
    })
    .await;
    let mcp = provider(&server, Some("tok-p"), Duration::from_secs(10));
    assert_eq!(
        server.initializations(),
        0,
        "nothing before the first request"
    );

    let tools = mcp.list_tools().await.expect("tools");
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    assert_eq!(names, ["lookup", "record"], "both pages");
    let (lookup, record) = (&tools[0], &tools[1]);
    assert!(!lookup.mutating);
    assert_eq!(lookup.risk_level.as_deref(), Some("read"));
    assert!(record.mutating);
    assert_eq!(record.risk_level.as_deref(), Some("routine_mutation"));
    assert_eq!(lookup.category, "mcp");
    assert_eq!(lookup.description, "Looks a key up (read-only).");
    assert_eq!(lookup.input_schema["required"], json!(["key"]));

    let context = json!({"app": "app-1", "run": "run-1", "actor": {"id": "u-1"}});
    let looked_up = mcp
        .call_tool("lookup", json!({"key": "k1"}), &context)
        .await
        .expect("lookup");
    assert_eq!(looked_up.content, "value of k1");
    assert!(!looked_up.is_error);
    let recorded = mcp
        .call_tool("record", json!({"entry": "e"}), &context)
        .await
        .expect("record");
    assert_eq!(recorded.content, "recorded entry 1");
    assert_eq!(server.calls(), ["lookup", "record"]);
    for meta in server.call_meta() {
        assert_eq!(meta["agent-runtime/context"], context, "{meta}");
    }
    assert_eq!(
        server.initializations(),
        1,
        "one session for both pages and both calls"
    );
    assert_eq!(
        server.refused(),
        0,
        "the bearer token went with every request"
    );

    // Not an object: the tool's failure, nothing sent. An unknown tool: the server's answer.
    let bad = mcp
        .call_tool("lookup", json!([1]), &context)
        .await
        .expect("an output");
    assert!(
        bad.is_error && bad.content.contains("JSON object"),
        "{bad:?}"
    );
    let unknown = mcp
        .call_tool("nope", json!({}), &context)
        .await
        .expect("an output");
    assert!(
        unknown.is_error && unknown.content.contains("nope"),
        "{unknown:?}"
    );
    assert_eq!(server.calls(), ["lookup", "record", "nope"]);

    let shown = format!("{mcp:?}");
    assert!(!shown.contains("tok-p"), "{shown}");
    mcp.close().await;
    mcp.call_tool("lookup", json!({"key": "k2"}), &context)
        .await
        .expect("a new session after close");
    assert_eq!(server.initializations(), 2);
}

#[tokio::test]
async fn a_missing_or_wrong_token_is_unauthorized() {
    let server = McpTestServer::start(McpTestOptions::with_token("right")).await;
    for token in [None, Some("wrong")] {
        let mcp = provider(&server, token, Duration::from_secs(10));
        let err = mcp.list_tools().await.expect_err("refused");
        assert!(
            matches!(&err, McpError::Unauthorized(reason) if reason.contains("401")),
            "{token:?}: {err:?}"
        );
    }
    assert_eq!(server.initializations(), 0);
    assert_eq!(server.refused(), 2);

    // The server rotates: the open session's next request is refused as well.
    let mcp = provider(&server, Some("right"), Duration::from_secs(10));
    mcp.list_tools().await.expect("the right token");
    server.set_token(Some("rotated"));
    let err = mcp
        .call_tool("lookup", json!({"key": "k"}), &json!({}))
        .await
        .expect_err("a stale token");
    assert!(matches!(err, McpError::Unauthorized(_)), "{err:?}");
}

#[tokio::test]
async fn a_hanging_call_times_out_within_the_provider_timeout() {
    let server = McpTestServer::start(McpTestOptions::default()).await;
    let mcp = provider(&server, None, Duration::from_millis(400));
    mcp.list_tools().await.expect("tools");
    server.set_misbehaviour(Misbehaviour::Hang);
    let started = Instant::now();
    let err = mcp
        .call_tool("lookup", json!({"key": "k"}), &json!({}))
        .await
        .expect_err("hangs");
    assert!(matches!(err, McpError::Timeout(_)), "{err:?}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(3),
        "{took:?}"
    );
    server.set_misbehaviour(Misbehaviour::None);
    let output = mcp
        .call_tool("lookup", json!({"key": "k"}), &json!({}))
        .await
        .expect("answers again");
    assert_eq!(output.content, "value of k");
    assert_eq!(
        server.initializations(),
        1,
        "the session outlived the timeout"
    );
}

#[tokio::test]
async fn a_huge_result_is_cut_with_the_marker() {
    let server = McpTestServer::start(McpTestOptions::default()).await;
    let mcp = provider(&server, None, Duration::from_secs(30));
    server.set_misbehaviour(Misbehaviour::HugeText(TEN_MB));
    let output = mcp
        .call_tool("lookup", json!({"key": "k"}), &json!({}))
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
async fn a_bad_url_or_token_is_refused_when_built() {
    let url = Url::parse("http://user:pw@127.0.0.1:1/mcp").expect("url");
    let err = StreamableHttpProvider::new(url, None, Duration::from_secs(1)).expect_err("userinfo");
    assert!(matches!(err, McpError::Refused(_)), "{err:?}");
    let url = Url::parse("http://127.0.0.1:1/mcp").expect("url");
    let err =
        StreamableHttpProvider::new(url, Some(Secret::new("a\nsecret")), Duration::from_secs(1))
            .expect_err("not a header value");
    assert!(
        matches!(&err, McpError::Refused(reason) if !reason.contains("secret")),
        "{err:?}"
    );
}
