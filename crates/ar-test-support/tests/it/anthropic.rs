//! Anthropic Messages endpoint shapes, streaming and not, plus Claude Code's side endpoints.

use ar_test_support::mock_provider::{MockProvider, Reply, ToolCall, Usage};
use serde_json::{json, Value};

use crate::{post, post_sse};

#[tokio::test]
async fn stream_event_sequence_with_text_and_tool_use() {
    let mock = MockProvider::start().await;
    mock.push(
        Reply::text_deltas(["I'll ", "check."])
            .with_tool_call(ToolCall::with_id("toolu_1", "Bash", r#"{"command":"ls"}"#))
            .usage(Usage::new(30, 8).cached(10)),
    );
    // Claude Code appends ?beta=true.
    let events = post_sse(
        &format!("{}/messages?beta=true", mock.base_url()),
        json!({"model": "claude-x", "stream": true, "max_tokens": 100,
               "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    let kinds: Vec<&str> = events.iter().map(|e| e.event.as_deref().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    let d: Vec<Value> = events.iter().map(|e| e.json()).collect();
    for (e, v) in events.iter().zip(&d) {
        assert_eq!(v["type"], e.event.as_deref().unwrap());
    }
    let msg = &d[0]["message"];
    assert_eq!(msg["role"], "assistant");
    assert_eq!(msg["model"], "claude-x");
    assert_eq!(msg["content"], json!([]));
    assert_eq!(msg["usage"]["input_tokens"], 20);
    assert_eq!(msg["usage"]["cache_read_input_tokens"], 10);
    assert_eq!(d[2]["index"], 0);
    assert_eq!(d[2]["content_block"], json!({"type": "text", "text": ""}));
    assert_eq!(
        d[3]["delta"],
        json!({"type": "text_delta", "text": "I'll "})
    );
    assert_eq!(d[5], json!({"type": "content_block_stop", "index": 0}));
    assert_eq!(d[6]["index"], 1);
    assert_eq!(
        d[6]["content_block"],
        json!({"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}})
    );
    let partial: String = d[7..10]
        .iter()
        .map(|v| {
            assert_eq!(v["delta"]["type"], "input_json_delta");
            v["delta"]["partial_json"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(partial, r#"{"command":"ls"}"#);
    assert_eq!(d[11]["delta"]["stop_reason"], "tool_use");
    assert_eq!(d[11]["usage"]["output_tokens"], 8);
    assert_eq!(d[12], json!({"type": "message_stop"}));
}

#[tokio::test]
async fn non_stream_message_object() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("Hi!").usage(Usage::new(5, 2)));
    let r = post(
        &format!("{}/v1/messages", mock.root_url()),
        json!({"model": "c", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["type"], "message");
    assert_eq!(v["role"], "assistant");
    assert_eq!(v["content"], json!([{"type": "text", "text": "Hi!"}]));
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(v["usage"]["input_tokens"], 5);
    assert_eq!(v["usage"]["output_tokens"], 2);

    mock.push(Reply::tool_call("Read", r#"{"file_path":"/x"}"#));
    let v: Value = post(
        &format!("{}/v1/messages", mock.root_url()),
        json!({"model": "c", "max_tokens": 10, "messages": []}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(v["stop_reason"], "tool_use");
    assert_eq!(v["content"][0]["type"], "tool_use");
    assert_eq!(v["content"][0]["input"], json!({"file_path": "/x"}));
    assert!(v["content"][0]["id"]
        .as_str()
        .unwrap()
        .starts_with("toolu_"));
}

#[tokio::test]
async fn anthropic_error_shape() {
    let mock = MockProvider::start().await;
    mock.push(Reply::error(529, "Overloaded"));
    mock.push(Reply::rate_limited(3));
    let url = format!("{}/messages", mock.base_url());
    let body = json!({"model": "c", "stream": true, "max_tokens": 1, "messages": []});
    let r = post(&url, body.clone()).await;
    assert_eq!(r.status(), 529);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
    let r = post(&url, body).await;
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], "3");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "rate_limit_error");
}

#[tokio::test]
async fn count_tokens_models_and_root_probe() {
    let mock = MockProvider::start().await;
    let v: Value = post(
        &format!("{}/messages/count_tokens?beta=true", mock.base_url()),
        json!({"model": "c", "messages": [{"role": "user", "content": "hello"}]}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert!(v["input_tokens"].as_u64().unwrap() > 0);

    let client = reqwest::Client::new();
    let v: Value = client
        .get(format!("{}/models", mock.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["object"], "list");
    assert_eq!(v["has_more"], false);
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"mock-model"));
    assert_eq!(v["data"][0]["object"], "model");
    assert_eq!(v["data"][0]["type"], "model");

    mock.set_models(["a", "b"]);
    let v: Value = client
        .get(format!("{}/models", mock.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["first_id"], "a");
    let v: Value = client
        .get(format!("{}/models/zzz", mock.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["id"], "zzz");

    let r = client.head(mock.root_url()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = client
        .get(format!("{}/nope", mock.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let paths: Vec<String> = mock.requests().into_iter().map(|r| r.path).collect();
    assert!(paths.contains(&"/v1/nope".to_string()));
    assert!(mock.model_requests().is_empty());
}

#[tokio::test]
async fn stream_thinking_block_and_error_event() {
    let mock = MockProvider::start().await;
    mock.push(
        Reply::text("a")
            .with_reasoning("hmm")
            .then_error(529, "Overloaded"),
    );
    let events = post_sse(
        &format!("{}/messages", mock.base_url()),
        json!({"model": "c", "stream": true, "max_tokens": 5, "messages": []}),
    )
    .await;
    let d: Vec<Value> = events.iter().map(|e| e.json()).collect();
    assert_eq!(
        d[2]["content_block"],
        json!({"type": "thinking", "thinking": ""})
    );
    assert_eq!(
        d[3]["delta"],
        json!({"type": "thinking_delta", "thinking": "hmm"})
    );
    assert_eq!(d[4]["delta"]["type"], "signature_delta");
    assert_eq!(d[5]["type"], "content_block_stop");
    assert_eq!(d[6]["index"], 1);
    assert_eq!(events.last().unwrap().event.as_deref(), Some("error"));
    assert_eq!(
        *d.last().unwrap(),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );

    mock.push(Reply::text("b").with_reasoning("deep"));
    let v: Value = post(
        &format!("{}/messages", mock.base_url()),
        json!({"model": "c", "max_tokens": 5, "messages": []}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(v["content"][0]["type"], "thinking");
    assert_eq!(v["content"][0]["thinking"], "deep");
    assert_eq!(v["content"][1], json!({"type": "text", "text": "b"}));
}
