//! Anthropic Messages provider: endpoint/auth headers, body shape (system, tool_result merging),
//! content-block parsing, usage with cache reads.

use ar_core::model::{ChatMessage, ModelRequest, ModelToolCall};
use ar_test_support::mock_provider::{Reply, ToolCall, Usage};
use serde_json::json;

use crate::{bash_tool, call, client, mock, route, simple_request, text_of};

#[tokio::test]
async fn streams_text_and_tool_use_with_usage() {
    let mock = mock().await;
    mock.push(
        Reply::text_deltas(["On ", "it."])
            .with_tool_call(ToolCall::with_id("toolu_1", "bash", r#"{"command":"ls"}"#))
            .usage(Usage::new(50, 7).cached(20)),
    );
    // ANTHROPIC_BASE_URL style: no /v1.
    let (res, deltas) = call(
        &client(0),
        &route("anthropic", mock.root_url()),
        &simple_request(),
    )
    .await;
    let res = res.unwrap();
    assert_eq!(res.text, "On it.");
    assert_eq!(text_of(&deltas), "On it.");
    assert_eq!(res.finish_reason, "tool_calls");
    assert_eq!(
        res.tool_calls,
        vec![ModelToolCall {
            id: "toolu_1".into(),
            name: "bash".into(),
            arguments: r#"{"command":"ls"}"#.into()
        }]
    );
    assert_eq!(res.usage.input_tokens, 50);
    assert_eq!(res.usage.cached_input_tokens, 20);
    assert_eq!(res.usage.output_tokens, 7);
    assert_eq!(res.usage.total_tokens, 57);

    let req = &mock.model_requests()[0];
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.header("x-api-key"), Some("sk-test"));
    assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(req.header("authorization"), None);
    assert_eq!(req.body["system"], "be brief");
    assert_eq!(req.body["max_tokens"], 8192);
    assert_eq!(req.body["stream"], true);
    assert_eq!(
        req.body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    );
    assert_eq!(
        req.body["tools"][0],
        json!({"name": "bash", "description": "Run a command",
               "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}})
    );
}

#[tokio::test]
async fn base_url_with_v1_and_tool_result_merging() {
    let mock = mock().await;
    mock.push(Reply::text("fine"));
    let call_of = |id: &str| ModelToolCall {
        id: id.into(),
        name: "bash".into(),
        arguments: "{\"command\":\"x\"}".into(),
    };
    let request = ModelRequest {
        messages: vec![
            ChatMessage::user("go"),
            ChatMessage::assistant("two calls", vec![call_of("t1"), call_of("t2")]),
            ChatMessage::tool_result("t1", "r1"),
            ChatMessage::tool_result("t2", "r2"),
            ChatMessage::user("and now?"),
        ],
        tools: vec![bash_tool()],
        max_output_tokens: None,
    };
    let mut r = route("anthropic", mock.base_url());
    r.controls = Some(json!({"max_tokens": 256}));
    let (res, _) = call(&client(0), &r, &request).await;
    assert_eq!(res.unwrap().finish_reason, "stop");
    let req = &mock.model_requests()[0];
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.body["max_tokens"], 256);
    let msgs = req.body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[1]["role"], "assistant");
    assert_eq!(msgs[1]["content"][1]["type"], "tool_use");
    assert_eq!(msgs[1]["content"][1]["input"], json!({"command": "x"}));
    assert_eq!(msgs[2]["role"], "user");
    assert_eq!(
        msgs[2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "t1", "content": "r1"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "r2"},
            {"type": "text", "text": "and now?"},
        ])
    );
}
