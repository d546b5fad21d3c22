//! A provider that refuses a request for its context window: with the agent's
//! `native_context` the context is compacted at once and the request asked again (the model's
//! real window may be smaller than the agent said); without it the run fails saying what would
//! have kept it within the window.

use ar_test_support::mock_provider::{LongRun, MockProvider};
use ar_test_support::provider_host::{tool, ProviderHost};
use ar_test_support::service::*;
use serde_json::{json, Value};

async fn reader_service(
    mock: &MockProvider,
    host: &ProviderHost,
    dir: &tempfile::TempDir,
) -> TestServer {
    let mut env = env_for(mock, &dir.path().join("window.db").display().to_string());
    let apps = app_config(
        mock,
        json!({"mcp_providers": [{"name": "docs", "url": host.url()}]}),
    );
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), apps.to_string());
    TestServer::start_with(env).await
}

async fn run_reader(server: &TestServer, mock: &MockProvider, execution_config: Value) -> Value {
    let agent = server
        .agent(
            "reader",
            json!({"allowed_tools": ["docs__bulk_read"], "execution_config": execution_config}),
        )
        .await;
    let run = server.start_run(mock, &agent, json!({})).await;
    server
        .wait_status(
            run["id"].as_str().unwrap(),
            &["completed", "failed", "paused"],
        )
        .await
}

#[tokio::test]
async fn a_request_the_provider_refuses_for_its_window_is_compacted_and_asked_again() {
    let mock = MockProvider::start().await;
    // The agent believes in 16k tokens; the model has 5000.
    mock.set_context_window(Some(5000));
    let script = LongRun::new(12, "docs__bulk_read", 40);
    mock.long_run(script.clone());
    let host = ProviderHost::start(None, vec![tool("bulk_read", "Read a chunk", false)]).await;
    let dir = tempfile::tempdir().unwrap();
    let server = reader_service(&mock, &host, &dir).await;
    let config = json!({"native_context": {"enabled": true, "context_window": 16384,
                                            "max_output_tokens": 1000}});
    let run = run_reader(&server, &mock, config).await;
    assert_eq!(run["status"], "completed", "{run}");
    let requests = mock.model_requests();
    let refused: Vec<usize> = requests
        .iter()
        .enumerate()
        .filter(|(_, r)| r.tokens + 1000 > 5000)
        .map(|(n, _)| n)
        .collect();
    assert!(!refused.is_empty(), "the window was exceeded at least once");
    let declares_tools = |n: usize| {
        requests[n].body["tools"]
            .as_array()
            .is_some_and(|tools| !tools.is_empty())
    };
    for n in refused {
        // A summary turn, then the same step asked again, now within the window.
        assert!(
            !declares_tools(n + 1),
            "request {} is the summary turn",
            n + 1
        );
        let again = (n + 1..requests.len())
            .find(|&m| declares_tools(m))
            .expect("asked again");
        assert!(
            requests[again].tokens + 1000 <= 5000,
            "request {again} fits"
        );
    }
    assert!(script.summaries() >= 1);
    server.stop().await;
}

#[tokio::test]
async fn without_a_context_policy_an_overflow_fails_the_run_saying_what_would_help() {
    let mock = MockProvider::start().await;
    mock.set_context_window(Some(4000));
    mock.long_run(LongRun::new(30, "docs__bulk_read", 40));
    let host = ProviderHost::start(None, vec![tool("bulk_read", "Read a chunk", false)]).await;
    let dir = tempfile::tempdir().unwrap();
    let server = reader_service(&mock, &host, &dir).await;
    let run = run_reader(&server, &mock, json!({"max_tool_steps": 100})).await;
    assert_eq!(run["status"], "failed", "{run}");
    let error = run["error_message"].as_str().unwrap_or_default();
    assert!(error.contains("context window exceeded"), "{error}");
    assert!(error.contains("execution_config.native_context"), "{error}");
    server.stop().await;
}
