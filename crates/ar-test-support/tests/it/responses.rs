//! OpenAI Responses endpoint shapes: the event sequence the Codex CLI parses, and non-stream.

use ar_test_support::mock_provider::{MockProvider, Reply, ToolCall, Usage};
use serde_json::{json, Value};

use crate::{post, post_sse};

#[tokio::test]
async fn stream_text_and_function_call_event_sequence() {
    let mock = MockProvider::start().await;
    mock.push(
        Reply::text_deltas(["Work", "ing"])
            .with_tool_call(ToolCall::with_id(
                "call_sh",
                "shell",
                r#"{"command":["bash","-lc","echo hi > out.txt"]}"#,
            ))
            .usage(Usage::new(50, 10).cached(20).reasoning(4)),
    );
    let events = post_sse(
        &format!("{}/responses", mock.base_url()),
        json!({"model": "gpt-m", "stream": true, "input": "hi"}),
    )
    .await;
    let kinds: Vec<&str> = events.iter().map(|e| e.event.as_deref().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let data: Vec<Value> = events.iter().map(|e| e.json()).collect();
    for (i, (e, d)) in events.iter().zip(&data).enumerate() {
        assert_eq!(d["type"], e.event.as_deref().unwrap());
        assert_eq!(d["sequence_number"], i as u64);
    }
    assert_eq!(data[0]["response"]["status"], "in_progress");
    assert_eq!(data[0]["response"]["model"], "gpt-m");
    let resp_id = data[0]["response"]["id"].clone();
    assert!(resp_id.as_str().unwrap().starts_with("resp_"));
    assert_eq!(data[2]["item"]["type"], "message");
    assert_eq!(data[2]["item"]["role"], "assistant");
    assert_eq!(data[4]["delta"], "Work");
    assert_eq!(data[4]["item_id"], data[2]["item"]["id"]);
    assert_eq!(data[6]["text"], "Working");
    assert_eq!(
        data[8]["item"]["content"],
        json!([{"type": "output_text", "text": "Working", "annotations": []}])
    );
    assert_eq!(data[9]["item"]["type"], "function_call");
    assert_eq!(data[9]["item"]["arguments"], "");
    assert_eq!(data[9]["output_index"], 1);
    let args: String = data[10..13]
        .iter()
        .map(|d| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(args, r#"{"command":["bash","-lc","echo hi > out.txt"]}"#);
    let fc = &data[14]["item"];
    assert_eq!(fc["type"], "function_call");
    assert_eq!(fc["call_id"], "call_sh");
    assert_eq!(fc["name"], "shell");
    assert_eq!(fc["arguments"], args.as_str());
    let done = &data[15]["response"];
    assert_eq!(done["id"], resp_id);
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"].as_array().unwrap().len(), 2);
    assert_eq!(
        done["usage"],
        json!({
            "input_tokens": 50, "input_tokens_details": {"cached_tokens": 20},
            "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 4},
            "total_tokens": 60,
        })
    );
}

#[tokio::test]
async fn non_stream_response_object() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("Done.").and_tool_call("lookup", r#"{"q":1}"#));
    let r = post(
        &format!("{}/responses", mock.root_url()),
        json!({"model": "m", "input": [{"type": "message", "role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["object"], "response");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["output"][0]["type"], "message");
    assert_eq!(v["output"][0]["content"][0]["text"], "Done.");
    assert_eq!(v["output"][1]["type"], "function_call");
    assert_eq!(v["output"][1]["name"], "lookup");
    assert_eq!(v["output"][1]["arguments"], r#"{"q":1}"#);
    assert!(v["output"][1]["call_id"]
        .as_str()
        .unwrap()
        .starts_with("call_"));
    assert_eq!(v["usage"]["total_tokens"], 0);
}

#[tokio::test]
async fn responses_errors_use_openai_envelope() {
    let mock = MockProvider::start().await;
    mock.push(Reply::error(503, "overloaded").retry_after(2));
    let r = post(
        &format!("{}/responses", mock.base_url()),
        json!({"model": "m", "stream": true, "input": "x"}),
    )
    .await;
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "2");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["message"], "overloaded");
}

#[tokio::test]
async fn stream_reasoning_item_and_failed_event() {
    let mock = MockProvider::start().await;
    mock.push(
        Reply::text("answer")
            .with_reasoning("plan ")
            .with_reasoning("it")
            .then_error(500, "boom"),
    );
    let events = post_sse(
        &format!("{}/responses", mock.base_url()),
        json!({"model": "m", "stream": true, "input": "x"}),
    )
    .await;
    let kinds: Vec<&str> = events.iter().map(|e| e.event.as_deref().unwrap()).collect();
    assert_eq!(
        &kinds[..8],
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
        ]
    );
    let data: Vec<Value> = events.iter().map(|e| e.json()).collect();
    assert_eq!(data[2]["item"]["type"], "reasoning");
    assert_eq!(
        data[8]["item"]["summary"],
        json!([{"type": "summary_text", "text": "plan it"}])
    );
    assert_eq!(data[9]["output_index"], 1);
    assert_eq!(*kinds.last().unwrap(), "response.failed");
    let failed = &data.last().unwrap()["response"];
    assert_eq!(failed["status"], "failed");
    assert_eq!(
        failed["error"],
        json!({"code": "server_error", "message": "boom"})
    );
    assert!(!kinds.contains(&"response.completed"));
}
