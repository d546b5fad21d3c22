//! Long runs fit the window: a 300-step run against the mock with a small context window
//! (8192 tokens, refused in the vendor's words when a request does not fit) completes; every
//! request it sent fits the window, as the mock counted it; old tool outputs were cut and old
//! turns summarized (`context.compaction_*` events), and the checkpointed transcript stays
//! bounded. The tool is a host's `http` MCP provider (`ProviderHost`'s `bulk_read`, about
//! 1.7 KB per output).

use std::time::Duration;

use ar_core::store::Store;
use ar_test_support::mock_provider::{LongRun, MockProvider};
use ar_test_support::provider_host::{tool, ProviderHost};
use ar_test_support::service::*;
use serde_json::json;

use crate::BIN;

const WINDOW: u64 = 8192;
const STEPS: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_300_step_run_completes_within_a_small_window_with_every_request_under_it() {
    let mock = MockProvider::start().await;
    mock.set_context_window(Some(WINDOW));
    let script = LongRun::new(STEPS, "docs__bulk_read", 40);
    mock.long_run(script.clone());
    let host = ProviderHost::start(None, vec![tool("bulk_read", "Read a chunk", false)]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut env = sqlite_env(dir.path(), &mock);
    let apps = app_config(
        &mock,
        json!({"mcp_providers": [{"name": "docs", "url": host.url()}]}),
    );
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), apps.to_string());
    let server = Server::start(BIN, &env).await;
    let agent = server
        .agent(
            "reader",
            json!({"allowed_tools": ["docs__bulk_read"], "execution_config": {
                "max_tool_steps": 400,
                "native_context": {"enabled": true, "context_window": WINDOW}}}),
        )
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap().to_string();
    let ended = wait_for("the long run to end", Duration::from_secs(600), || async {
        let run = server.run(&run_id).await;
        (run["status"] != "running" && run["status"] != "queued").then_some(run)
    })
    .await;
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(script.calls(), STEPS);
    assert_eq!(host.calls().len(), STEPS, "every step's tool ran once");

    // Every request fit the window (input as the mock counts it, plus the room asked for the
    // answer): none was refused.
    let requests = mock.model_requests();
    assert_eq!(requests.len(), STEPS + 1 + script.summaries());
    for (n, request) in requests.iter().enumerate() {
        let output = request.body["max_tokens"].as_u64().unwrap_or(0);
        assert!(output > 0, "request {n} asks for its output room");
        assert!(
            request.tokens + output <= WINDOW,
            "request {n}: {} + {output} tokens",
            request.tokens
        );
    }
    assert!(script.summaries() >= 5, "summaries: {}", script.summaries());

    let events = server.events(&run_id).await;
    let completed: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "context.compaction_completed")
        .collect();
    assert!(
        completed
            .iter()
            .any(|e| e["data"]["summarized_messages"].as_u64() > Some(0)),
        "a summary replaced old turns"
    );
    assert!(
        completed
            .iter()
            .any(|e| e["data"]["trimmed_tool_outputs"].as_u64() > Some(0)),
        "old tool outputs were cut"
    );
    for event in &completed {
        let (before, after) = (
            &event["data"]["estimated_before"],
            &event["data"]["estimated_after"],
        );
        assert!(after.as_u64() < before.as_u64(), "{event}");
    }

    // The checkpointed transcript is bounded: a summary, the request and a few recent turns.
    let store = ar_store::SqliteStore::connect(
        dir.path().join("data").join("runtime.db").to_str().unwrap(),
    )
    .await
    .expect("open the store");
    let checkpoint = store
        .latest_checkpoint(&run_id)
        .await
        .expect("read")
        .expect("a checkpoint");
    store.close().await;
    let transcript = checkpoint.state["transcript"].as_array().unwrap();
    let bytes = checkpoint.state["transcript"].to_string().len();
    assert!(transcript.len() < 40, "{} messages", transcript.len());
    assert!(bytes < 40_000, "{bytes} bytes");
    assert!(transcript[1]["content"]
        .as_str()
        .unwrap()
        .starts_with("Summary of earlier work"));
    assert_eq!(transcript[2]["content"], "Look at the ticket.");
}
