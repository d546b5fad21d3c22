//! OpenAI Chat Completions endpoint shapes, streaming and not.

use ar_test_support::mock_provider::{MockProvider, Reply, ToolCall, Usage};
use serde_json::{json, Value};

use crate::{post, post_sse};

#[tokio::test]
async fn non_stream_text_completion() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("Hello there").usage(Usage::new(12, 3).cached(4).reasoning(1)));
    let resp = post(
        &format!("{}/chat/completions", mock.base_url()),
        json!({"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "gpt-x");
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(v["choices"][0]["message"]["content"], "Hello there");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        v["usage"],
        json!({
            "prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15,
            "prompt_tokens_details": {"cached_tokens": 4},
            "completion_tokens_details": {"reasoning_tokens": 1},
        })
    );
}

#[tokio::test]
async fn non_stream_tool_calls_and_no_v1_prefix() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_calls([
        ToolCall::with_id("call_a", "read", r#"{"path":"a"}"#),
        ToolCall::new("write", r#"{"path":"b"}"#),
    ]));
    let url = format!("{}/chat/completions", mock.root_url());
    let v: Value = post(&url, json!({"model": "m", "messages": []}))
        .await
        .json()
        .await
        .unwrap();
    let msg = &v["choices"][0]["message"];
    assert_eq!(msg["content"], Value::Null);
    assert_eq!(
        msg["tool_calls"][0],
        json!({"id": "call_a", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}})
    );
    assert_eq!(msg["tool_calls"][1]["function"]["name"], "write");
    assert!(msg["tool_calls"][1]["id"]
        .as_str()
        .unwrap()
        .starts_with("call_"));
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
}

#[tokio::test]
async fn stream_text_deltas_usage_and_done() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text_deltas(["Hel", "lo"]).usage(Usage::new(7, 2).cached(1).reasoning(0)));
    let events = post_sse(
        &format!("{}/chat/completions", mock.base_url()),
        json!({"model": "m", "stream": true, "stream_options": {"include_usage": true}, "messages": []}),
    )
    .await;
    assert!(events.iter().all(|e| e.event.is_none()));
    assert_eq!(events.last().unwrap().data, "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| e.json())
        .collect();
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["id"], chunks[0]["id"]);
    }
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Hello");
    assert_eq!(chunks[1]["choices"][0]["delta"]["content"], "Hel");
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], 7);
    assert_eq!(usage["usage"]["completion_tokens"], 2);
    assert_eq!(usage["usage"]["total_tokens"], 9);
    assert_eq!(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
    assert_eq!(
        usage["usage"]["completion_tokens_details"]["reasoning_tokens"],
        0
    );
}

#[tokio::test]
async fn stream_without_include_usage_has_no_usage_chunk() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("x"));
    let events = post_sse(
        &format!("{}/chat/completions", mock.base_url()),
        json!({"model": "m", "stream": true, "messages": []}),
    )
    .await;
    assert_eq!(events.last().unwrap().data, "[DONE]");
    for e in &events[..events.len() - 1] {
        assert!(e.json().get("usage").is_none());
    }
}

#[tokio::test]
async fn stream_tool_call_arguments_split_across_chunks() {
    let mock = MockProvider::start().await;
    let args = r#"{"command":"echo hello world"}"#;
    mock.push(
        Reply::text("Let me run it.")
            .with_tool_call(ToolCall::with_id("call_1", "bash", args))
            .and_tool_call("read", r#"{"path":"x"}"#)
            .arg_chunks(3),
    );
    let events = post_sse(
        &format!("{}/chat/completions", mock.base_url()),
        json!({"model": "m", "stream": true, "messages": []}),
    )
    .await;
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| e.json())
        .collect();
    let mut assembled: Vec<(String, String, String)> = Vec::new();
    let mut arg_chunks_of_first = 0;
    for c in &chunks {
        let Some(calls) = c["choices"][0]["delta"]["tool_calls"].as_array() else {
            continue;
        };
        for tc in calls {
            let idx = tc["index"].as_u64().unwrap() as usize;
            if idx == assembled.len() {
                assert_eq!(tc["type"], "function");
                assembled.push((
                    tc["id"].as_str().unwrap().into(),
                    tc["function"]["name"].as_str().unwrap().into(),
                    String::new(),
                ));
            } else {
                assert!(tc.get("id").is_none());
            }
            if let Some(a) = tc["function"]["arguments"].as_str() {
                if idx == 0 && !a.is_empty() {
                    arg_chunks_of_first += 1;
                }
                assembled[idx].2.push_str(a);
            }
        }
    }
    assert_eq!(arg_chunks_of_first, 3);
    assert_eq!(assembled[0], ("call_1".into(), "bash".into(), args.into()));
    assert_eq!(assembled[1].1, "read");
    assert_eq!(assembled[1].2, r#"{"path":"x"}"#);
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "tool_calls"
    );
}

#[tokio::test]
async fn errors_have_openai_shape_and_retry_after() {
    let mock = MockProvider::start().await;
    mock.push(Reply::rate_limited(7));
    mock.push(Reply::unauthorized());
    mock.push(Reply::server_error());
    let url = format!("{}/chat/completions", mock.base_url());
    let body = json!({"model": "m", "stream": true, "messages": []});

    let r = post(&url, body.clone()).await;
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], "7");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "rate_limit_error");
    assert_eq!(v["error"]["code"], "rate_limit_exceeded");

    let r = post(&url, body.clone()).await;
    assert_eq!(r.status(), 401);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "invalid_api_key");

    let r = post(&url, body).await;
    assert_eq!(r.status(), 500);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "server_error");
    assert!(v["error"]["message"].is_string());
}

#[tokio::test]
async fn stream_reasoning_and_in_stream_error() {
    let mock = MockProvider::start().await;
    mock.push(
        Reply::text("x")
            .with_reasoning("think")
            .then_error(429, "slow down"),
    );
    let events = post_sse(
        &format!("{}/chat/completions", mock.base_url()),
        json!({"model": "m", "stream": true, "messages": []}),
    )
    .await;
    let chunks: Vec<Value> = events.iter().map(|e| e.json()).collect();
    assert_eq!(
        chunks[1]["choices"][0]["delta"]["reasoning_content"],
        "think"
    );
    assert_eq!(chunks[2]["choices"][0]["delta"]["content"], "x");
    let last = chunks.last().unwrap();
    assert_eq!(last["error"]["type"], "rate_limit_error");
    assert_eq!(last["error"]["message"], "slow down");
    assert!(!events.iter().any(|e| e.data == "[DONE]"));
}
