//! Scripting features: queue/fallback order, request log, pacing, hang/disconnect, auto mode.

use std::time::{Duration, Instant};

use ar_test_support::mock_provider::{AutoScript, MockProvider, Reply, WireFormat};
use futures::StreamExt;
use serde_json::{json, Value};

use crate::{parse_sse, post, post_sse};

fn chat_text(v: &Value) -> String {
    v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn queue_then_fallback_then_500() {
    let mock = MockProvider::start().await;
    let url = format!("{}/chat/completions", mock.base_url());
    let body = json!({"model": "m", "messages": []});
    mock.push_all([Reply::text("one"), Reply::text("two")]);
    assert_eq!(mock.pending(), 2);
    let a: Value = post(&url, body.clone()).await.json().await.unwrap();
    let b: Value = post(&url, body.clone()).await.json().await.unwrap();
    assert_eq!((chat_text(&a), chat_text(&b)), ("one".into(), "two".into()));

    let r = post(&url, body.clone()).await;
    assert_eq!(r.status(), 500);
    let v: Value = r.json().await.unwrap();
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no scripted reply"));

    mock.set_fallback(Some(Reply::text("default")));
    mock.push(Reply::text("queued"));
    let a: Value = post(&url, body.clone()).await.json().await.unwrap();
    let b: Value = post(&url, body.clone()).await.json().await.unwrap();
    let c: Value = post(&url, body).await.json().await.unwrap();
    assert_eq!(chat_text(&a), "queued");
    assert_eq!(chat_text(&b), "default");
    assert_eq!(chat_text(&c), "default");
    assert_eq!(mock.request_count(), 6);
}

#[tokio::test]
async fn request_log_records_path_query_headers_body() {
    let mock = MockProvider::start().await;
    mock.set_fallback(Some(Reply::text("ok")));
    reqwest::Client::new()
        .post(format!("{}/messages?beta=true", mock.base_url()))
        .header("x-api-key", "sk-test")
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "hey"}]}))
        .send()
        .await
        .unwrap();
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.query.as_deref(), Some("beta=true"));
    assert_eq!(r.header("x-api-key"), Some("sk-test"));
    assert_eq!(r.wire, Some(WireFormat::AnthropicMessages));
    assert_eq!(r.body["messages"][0]["content"], "hey");
    assert!(!r.is_stream());
    mock.clear_requests();
    assert!(mock.requests().is_empty());

    mock.set_recording(false);
    post(
        &format!("{}/chat/completions", mock.base_url()),
        json!({"model": "m", "messages": []}),
    )
    .await;
    assert!(mock.requests().is_empty());
    assert_eq!(mock.request_count(), 2);
}

#[tokio::test]
async fn delay_and_chunk_delay_are_honoured() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("x").delay(Duration::from_millis(150)));
    mock.push(Reply::text_deltas(["a", "b", "c"]).chunk_delay(Duration::from_millis(40)));
    let url = format!("{}/chat/completions", mock.base_url());
    let t = Instant::now();
    post(&url, json!({"model": "m", "messages": []})).await;
    assert!(t.elapsed() >= Duration::from_millis(150));
    let t = Instant::now();
    // 1 role chunk + 3 deltas + finish + [DONE] = 6 events, 5 gaps.
    let events = post_sse(&url, json!({"model": "m", "stream": true, "messages": []})).await;
    assert_eq!(events.len(), 6);
    assert!(t.elapsed() >= Duration::from_millis(200));
}

#[tokio::test]
async fn hang_stalls_until_client_leaves() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("partial").then_hang());
    let resp = post(
        &format!("{}/responses", mock.base_url()),
        json!({"model": "m", "stream": true, "input": "x"}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let mut stream = resp.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("response.output_item.done") {
        let chunk = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .expect("content before the stall")
            .unwrap()
            .unwrap();
        seen.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert!(!seen.contains("response.completed"));
    let stalled = tokio::time::timeout(Duration::from_millis(200), stream.next()).await;
    assert!(stalled.is_err(), "stream should stall");
    assert_eq!(mock.active_streams(), 1);
    drop(stream);
    // The server notices the closed connection and drops the body.
    let deadline = Instant::now() + Duration::from_secs(5);
    while mock.active_streams() != 0 {
        assert!(Instant::now() < deadline, "server kept the stream open");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn hang_before_headers_times_out_client() {
    let mock = MockProvider::start().await;
    mock.push(Reply::hang_before_headers());
    let r = reqwest::Client::new()
        .post(format!("{}/messages", mock.base_url()))
        .timeout(Duration::from_millis(200))
        .json(&json!({"model": "c", "stream": true, "messages": []}))
        .send()
        .await;
    assert!(r.unwrap_err().is_timeout());
}

#[tokio::test]
async fn disconnect_breaks_the_body_mid_stream() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text_deltas(["a", "b"]).then_disconnect());
    let resp = post(
        &format!("{}/chat/completions", mock.base_url()),
        json!({"model": "m", "stream": true, "messages": []}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let mut stream = resp.bytes_stream();
    let mut text = String::new();
    let mut failed = false;
    while let Some(item) = stream.next().await {
        match item {
            Ok(b) => text.push_str(std::str::from_utf8(&b).unwrap()),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "body must end with an error");
    assert!(text.contains("\"content\":\"b\""));
    assert!(!text.contains("[DONE]"));
}

#[tokio::test]
async fn dropping_the_mock_ends_hanging_streams() {
    let mock = MockProvider::start().await;
    mock.push(Reply::hang());
    let resp = post(
        &format!("{}/messages", mock.base_url()),
        json!({"model": "c", "stream": true, "messages": []}),
    )
    .await;
    let mut stream = resp.bytes_stream();
    let first = stream.next().await.unwrap().unwrap();
    assert!(std::str::from_utf8(&first)
        .unwrap()
        .starts_with("event: message_start"));
    drop(mock);
    let end = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(_)) = stream.next().await {}
    })
    .await;
    assert!(end.is_ok(), "stream must end once the mock is dropped");
}

/// Drives one conversation against the auto script in the given wire format, acting as the
/// client: append a tool result for every tool call until a final text arrives.
async fn run_auto_conversation(base: &str, wire: WireFormat) -> (usize, String) {
    let mut tool_calls = 0;
    match wire {
        WireFormat::ChatCompletions => {
            let mut messages = vec![json!({"role": "user", "content": "go"})];
            loop {
                let v: Value = post(
                    &format!("{base}/chat/completions"),
                    json!({"model": "m", "messages": messages, "tools": [{"type": "function", "function": {"name": "bash"}}]}),
                )
                .await
                .json()
                .await
                .unwrap();
                let msg = v["choices"][0]["message"].clone();
                let Some(calls) = msg["tool_calls"].as_array().cloned() else {
                    return (tool_calls, chat_text(&v));
                };
                messages.push(msg);
                for c in calls {
                    tool_calls += 1;
                    messages
                        .push(json!({"role": "tool", "tool_call_id": c["id"], "content": "ok"}));
                }
            }
        }
        WireFormat::Responses => {
            let mut input = vec![json!({"type": "message", "role": "user", "content": "go"})];
            loop {
                let events = post_sse(
                    &format!("{base}/responses"),
                    json!({"model": "m", "stream": true, "input": input, "tools": [{"type": "function", "name": "exec_command"}]}),
                )
                .await;
                let done = events.last().unwrap().json();
                let output = done["response"]["output"].as_array().unwrap().clone();
                let mut called = false;
                for item in output {
                    if item["type"] == "function_call" {
                        assert_eq!(item["name"], "exec_command");
                        let args: Value =
                            serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
                        assert!(args["cmd"].as_str().unwrap().starts_with("echo step"));
                        called = true;
                        tool_calls += 1;
                        input.push(item.clone());
                        input.push(json!({"type": "function_call_output", "call_id": item["call_id"], "output": "ok"}));
                    } else if !called {
                        return (
                            tool_calls,
                            item["content"][0]["text"].as_str().unwrap().into(),
                        );
                    }
                }
            }
        }
        WireFormat::AnthropicMessages => {
            let mut messages = vec![json!({"role": "user", "content": "go"})];
            loop {
                let r = reqwest::Client::new()
                    .post(format!("{base}/messages"))
                    .json(&json!({"model": "c", "stream": true, "max_tokens": 5, "messages": messages, "tools": [{"name": "Bash"}]}))
                    .send()
                    .await
                    .unwrap();
                let events = parse_sse(&r.text().await.unwrap());
                let mut blocks: Vec<Value> = Vec::new();
                for e in &events {
                    let d = e.json();
                    if d["type"] == "content_block_start" {
                        blocks.push(d["content_block"].clone());
                    }
                    if d["type"] == "content_block_delta" && d["delta"]["type"] == "text_delta" {
                        let t = blocks.last().unwrap()["text"].as_str().unwrap().to_string();
                        blocks.last_mut().unwrap()["text"] =
                            Value::from(t + d["delta"]["text"].as_str().unwrap());
                    }
                }
                let uses: Vec<Value> = blocks
                    .iter()
                    .filter(|b| b["type"] == "tool_use")
                    .cloned()
                    .collect();
                if uses.is_empty() {
                    return (tool_calls, blocks[0]["text"].as_str().unwrap().into());
                }
                assert_eq!(uses[0]["name"], "Bash");
                messages.push(json!({"role": "assistant", "content": blocks}));
                let results: Vec<Value> = uses
                    .iter()
                    .map(
                        |u| json!({"type": "tool_result", "tool_use_id": u["id"], "content": "ok"}),
                    )
                    .collect();
                tool_calls += results.len();
                messages.push(json!({"role": "user", "content": results}));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_mode_serves_concurrent_conversations_in_all_wire_formats() {
    let mock = MockProvider::start().await;
    mock.auto(AutoScript::shell(4, "All steps done."));
    let base = mock.base_url();
    let mut tasks = Vec::new();
    for i in 0..12 {
        let wire = [
            WireFormat::ChatCompletions,
            WireFormat::Responses,
            WireFormat::AnthropicMessages,
        ][i % 3];
        let base = base.clone();
        tasks.push(tokio::spawn(async move {
            run_auto_conversation(&base, wire).await
        }));
    }
    for t in tasks {
        let (calls, text) = t.await.unwrap();
        assert_eq!(calls, 4);
        assert_eq!(text, "All steps done.");
    }
    // 12 conversations x 5 model requests.
    assert_eq!(mock.request_count(), 60);
}

#[tokio::test]
async fn auto_mode_counts_only_the_current_turn_and_skips_toolless_requests() {
    let mock = MockProvider::start().await;
    mock.auto(AutoScript::five_step("bash"));
    let url = format!("{}/chat/completions", mock.base_url());
    let tools = json!([{"type": "function", "function": {"name": "bash"}}]);
    // Previous turn had 4 tool results; the new user message starts a fresh count.
    let mut messages = vec![json!({"role": "user", "content": "first"})];
    for _ in 0..4 {
        messages.push(json!({"role": "tool", "tool_call_id": "x", "content": "ok"}));
    }
    messages.push(json!({"role": "assistant", "content": "done"}));
    messages.push(json!({"role": "user", "content": "second"}));
    let v: Value = post(
        &url,
        json!({"model": "m", "messages": messages, "tools": tools}),
    )
    .await
    .json()
    .await
    .unwrap();
    let call = &v["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "bash");
    assert_eq!(call["arguments"], r#"{"command":"echo step 1"}"#);

    let v: Value = post(
        &url,
        json!({"model": "m", "messages": [{"role": "user", "content": "title?"}]}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(chat_text(&v), "All steps done.");
}

#[tokio::test]
async fn five_step_agent_queue_helper() {
    let replies = Reply::five_step_agent("bash", "fin");
    assert_eq!(replies.len(), 5);
    assert!(replies[..4].iter().all(|r| r.tool_calls.len() == 1));
    assert_eq!(replies[4].full_text(), "fin");
    let mock = MockProvider::start().await;
    mock.push_all(replies);
    mock.respond_with(|conv| {
        conv.last_user_text()
            .filter(|t| t == "custom")
            .map(|_| Reply::text("from responder"))
    });
    let url = format!("{}/chat/completions", mock.base_url());
    for _ in 0..5 {
        post(&url, json!({"model": "m", "messages": []})).await;
    }
    let v: Value = post(
        &url,
        json!({"model": "m", "messages": [{"role": "user", "content": "custom"}]}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(chat_text(&v), "from responder");
    let r = post(
        &url,
        json!({"model": "m", "messages": [{"role": "user", "content": "other"}]}),
    )
    .await;
    assert_eq!(r.status(), 500);
}

#[tokio::test]
async fn non_stream_requests_honour_error_and_disconnect_ends() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("x").then_error(429, "later"));
    mock.push(Reply::text("y").then_disconnect());
    let url = format!("{}/chat/completions", mock.base_url());
    let r = post(&url, json!({"model": "m", "messages": []})).await;
    assert_eq!(r.status(), 429);
    let r = reqwest::Client::new()
        .post(&url)
        .json(&json!({"model": "m", "messages": []}))
        .send()
        .await;
    // Either the send fails or the body does; never a successful answer.
    if let Ok(resp) = r {
        assert!(resp.bytes().await.is_err());
    }
}
