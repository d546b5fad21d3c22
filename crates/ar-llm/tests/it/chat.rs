//! Chat Completions provider (`openai_compatible`): request shape, deltas, tool-call assembly,
//! usage.

use ar_core::model::{ChatMessage, ModelRequest, ModelToolCall, StreamDelta};
use ar_test_support::mock_provider::{Reply, ToolCall, Usage};
use serde_json::json;

use crate::{bash_tool, call, client, mock, route, simple_request, text_of};

#[tokio::test]
async fn streams_text_and_reports_usage() {
    let mock = mock().await;
    mock.push(
        Reply::text_deltas(["Hel", "lo ", "world"])
            .usage(Usage::new(40, 9).cached(30).reasoning(2)),
    );
    let (res, deltas) = call(
        &client(0),
        &route("openai_compatible", mock.base_url()),
        &simple_request(),
    )
    .await;
    let res = res.unwrap();
    assert_eq!(res.text, "Hello world");
    assert_eq!(text_of(&deltas), "Hello world");
    assert_eq!(deltas.len(), 3);
    assert_eq!(res.finish_reason, "stop");
    assert!(res.tool_calls.is_empty());
    assert_eq!(res.usage.input_tokens, 40);
    assert_eq!(res.usage.cached_input_tokens, 30);
    assert_eq!(res.usage.output_tokens, 9);
    assert_eq!(res.usage.reasoning_output_tokens, 2);
    assert_eq!(res.usage.total_tokens, 49);

    let req = &mock.model_requests()[0];
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(req.body["model"], "mock-model");
    assert_eq!(req.body["stream"], true);
    assert_eq!(req.body["stream_options"]["include_usage"], true);
    assert_eq!(
        req.body["messages"],
        json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    );
    assert_eq!(req.body["tools"][0]["type"], "function");
    assert_eq!(req.body["tools"][0]["function"]["name"], "bash");
    assert_eq!(
        req.body["tools"][0]["function"]["parameters"]["type"],
        "object"
    );
}

#[tokio::test]
async fn assembles_parallel_tool_calls_from_deltas() {
    let mock = mock().await;
    mock.push(
        Reply::text("Running.")
            .with_tool_call(ToolCall::with_id(
                "call_a",
                "bash",
                r#"{"command":"ls -la /tmp"}"#,
            ))
            .with_tool_call(ToolCall::with_id(
                "call_b",
                "read",
                r#"{"path":"/etc/hosts"}"#,
            ))
            .arg_chunks(4),
    );
    let (res, deltas) = call(
        &client(0),
        &route("openai_compatible", mock.base_url()),
        &simple_request(),
    )
    .await;
    let res = res.unwrap();
    assert_eq!(res.finish_reason, "tool_calls");
    assert_eq!(res.text, "Running.");
    assert_eq!(
        res.tool_calls,
        vec![
            ModelToolCall {
                id: "call_a".into(),
                name: "bash".into(),
                arguments: r#"{"command":"ls -la /tmp"}"#.into()
            },
            ModelToolCall {
                id: "call_b".into(),
                name: "read".into(),
                arguments: r#"{"path":"/etc/hosts"}"#.into()
            },
        ]
    );
    let started: Vec<_> = deltas
        .iter()
        .filter(|d| matches!(d, StreamDelta::ToolCallStarted { .. }))
        .collect();
    assert_eq!(
        started[0],
        &StreamDelta::ToolCallStarted {
            index: 0,
            id: "call_a".into(),
            name: "bash".into()
        }
    );
    let args0: String = deltas
        .iter()
        .filter_map(|d| match d {
            StreamDelta::ToolCallArguments { index: 0, delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(args0, r#"{"command":"ls -la /tmp"}"#);
    let pieces0 = deltas
        .iter()
        .filter(|d| matches!(d, StreamDelta::ToolCallArguments { index: 0, .. }))
        .count();
    assert_eq!(pieces0, 4);
}

#[tokio::test]
async fn serialises_tool_history() {
    let mock = mock().await;
    mock.push(Reply::text("ok"));
    let request = ModelRequest {
        messages: vec![
            ChatMessage::user("go"),
            ChatMessage::assistant(
                "",
                vec![ModelToolCall {
                    id: "c1".into(),
                    name: "bash".into(),
                    arguments: "{\"command\":\"ls\"}".into(),
                }],
            ),
            ChatMessage::tool_result("c1", "a.txt"),
        ],
        tools: vec![bash_tool()],
        max_output_tokens: None,
    };
    let (res, _) = call(
        &client(0),
        &route("openai_compatible", mock.base_url()),
        &request,
    )
    .await;
    res.unwrap();
    let body = &mock.model_requests()[0].body;
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}
        ]})
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "tool", "tool_call_id": "c1", "content": "a.txt"})
    );
}

#[tokio::test]
async fn no_api_key_sends_no_authorization() {
    let mock = mock().await;
    mock.push(Reply::text("ok"));
    let mut r = route("openai_compatible", mock.base_url());
    r.api_key = None;
    call(&client(0), &r, &simple_request()).await.0.unwrap();
    assert_eq!(mock.model_requests()[0].header("authorization"), None);
}
