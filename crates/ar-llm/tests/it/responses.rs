//! Responses provider (`openai`): request shape (instructions, input items, tools, controls),
//! event parsing, usage.

use ar_core::model::{ChatMessage, ModelRequest, ModelToolCall, StreamDelta};
use ar_test_support::mock_provider::{Reply, ToolCall, Usage};
use serde_json::json;

use crate::{bash_tool, call, client, mock, route, simple_request, text_of};

#[tokio::test]
async fn streams_text_tool_call_and_usage() {
    let mock = mock().await;
    mock.push(
        Reply::text_deltas(["Let me ", "look."])
            .with_tool_call(ToolCall::with_id("call_x", "bash", r#"{"command":"pwd"}"#))
            .usage(Usage::new(100, 12).cached(64).reasoning(5)),
    );
    let mut r = route("openai", mock.base_url());
    r.controls = Some(json!({"reasoning_effort": "low", "service_tier": "flex"}));
    let (res, deltas) = call(&client(0), &r, &simple_request()).await;
    let res = res.unwrap();
    assert_eq!(res.text, "Let me look.");
    assert_eq!(text_of(&deltas), "Let me look.");
    assert_eq!(res.finish_reason, "tool_calls");
    assert_eq!(
        res.tool_calls,
        vec![ModelToolCall {
            id: "call_x".into(),
            name: "bash".into(),
            arguments: r#"{"command":"pwd"}"#.into()
        }]
    );
    assert!(deltas.contains(&StreamDelta::ToolCallStarted {
        index: 0,
        id: "call_x".into(),
        name: "bash".into()
    }));
    assert_eq!(res.usage.input_tokens, 100);
    assert_eq!(res.usage.cached_input_tokens, 64);
    assert_eq!(res.usage.output_tokens, 12);
    assert_eq!(res.usage.reasoning_output_tokens, 5);
    assert_eq!(res.usage.total_tokens, 112);

    let req = &mock.model_requests()[0];
    assert_eq!(req.path, "/v1/responses");
    assert_eq!(req.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(req.body["instructions"], "be brief");
    assert_eq!(req.body["stream"], true);
    assert_eq!(req.body["store"], false);
    assert_eq!(req.body["reasoning"], json!({"effort": "low"}));
    assert_eq!(req.body["service_tier"], "flex");
    assert_eq!(req.body["max_output_tokens"], 16384);
    assert_eq!(
        req.body["input"],
        json!([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}])
    );
    assert_eq!(req.body["tools"][0]["type"], "function");
    assert_eq!(req.body["tools"][0]["name"], "bash");
}

#[tokio::test]
async fn serialises_function_call_history() {
    let mock = mock().await;
    mock.push(Reply::text("done"));
    let request = ModelRequest {
        messages: vec![
            ChatMessage::user("go"),
            ChatMessage::assistant(
                "checking",
                vec![ModelToolCall {
                    id: "c1".into(),
                    name: "bash".into(),
                    arguments: "{}".into(),
                }],
            ),
            ChatMessage::tool_result("c1", "out"),
        ],
        tools: vec![bash_tool()],
        max_output_tokens: None,
    };
    let (res, _) = call(&client(0), &route("openai", mock.base_url()), &request).await;
    assert_eq!(res.unwrap().finish_reason, "stop");
    let input = &mock.model_requests()[0].body["input"];
    assert_eq!(
        input[1],
        json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "checking"}]})
    );
    assert_eq!(
        input[2],
        json!({"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{}"})
    );
    assert_eq!(
        input[3],
        json!({"type": "function_call_output", "call_id": "c1", "output": "out"})
    );
}
