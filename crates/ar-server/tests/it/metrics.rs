//! `GET /metrics`: the Prometheus metrics of a real run, read back from the scrape text.

use ar_test_support::mock_provider::{AutoScript, MockProvider, Reply};
use reqwest::Method;
use serde_json::json;

use ar_test_support::service::*;

/// The value of the sample `name{labels}` (labels as written, in order), if scraped.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.split(' ').next()?.parse().ok())
}

async fn scrape(server: &TestServer) -> String {
    let response = server
        .client
        .get(server.url("/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("scrape");
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let text = response.text().await.expect("metrics text");
    assert!(text.ends_with("# EOF\n"), "{text}");
    text
}

#[tokio::test]
async fn a_run_shows_in_every_metric() {
    let mock = MockProvider::start().await;
    mock.auto(AutoScript::five_step("get_context"));
    let server = TestServer::start(&mock).await;
    let (status, _) = server.send_as(None, Method::GET, "/metrics", None).await;
    assert_eq!(status, 401, "metrics need the service token");

    let agent = server
        .agent("five", json!({"allowed_tools": ["get_context"]}))
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap().to_string();
    let stream = server.open_stream(&run_id, None).await;
    server.wait_status(&run_id, &["completed"]).await;

    let text = scrape(&server).await;
    let provider = "provider=\"openai_compatible\"";
    let expect = |series: &str, value: f64| {
        assert_eq!(sample(&text, series), Some(value), "{series} in:\n{text}");
    };
    expect("agent_runtime_runs{status=\"completed\"}", 1.0);
    expect("agent_runtime_runs{status=\"running\"}", 0.0);
    expect("agent_runtime_queue_depth", 0.0);
    expect(
        "agent_runtime_run_transitions_total{status=\"queued\"}",
        1.0,
    );
    expect(
        "agent_runtime_run_transitions_total{status=\"running\"}",
        1.0,
    );
    expect(
        "agent_runtime_run_transitions_total{status=\"completed\"}",
        1.0,
    );
    expect(
        "agent_runtime_run_duration_seconds_count{status=\"completed\"}",
        1.0,
    );
    expect(
        &format!("agent_runtime_model_calls_total{{{provider},outcome=\"ok\"}}"),
        5.0,
    );
    expect(
        &format!("agent_runtime_model_call_duration_seconds_count{{{provider}}}"),
        5.0,
    );
    expect(
        &format!("agent_runtime_model_tokens_total{{{provider},kind=\"input\"}}"),
        500.0,
    );
    expect(
        &format!("agent_runtime_model_tokens_total{{{provider},kind=\"output\"}}"),
        100.0,
    );
    expect(
        "agent_runtime_tool_calls_total{tool=\"get_context\",outcome=\"ok\"}",
        4.0,
    );
    expect(
        "agent_runtime_tool_call_duration_seconds_count{tool=\"get_context\",outcome=\"ok\"}",
        4.0,
    );
    // Five steps (four tool rounds and the answer), each checkpointed.
    expect("agent_runtime_step_duration_seconds_count", 5.0);
    let commits = sample(&text, "agent_runtime_store_commit_duration_seconds_count").unwrap();
    assert!(commits >= 6.0, "{commits} commits");

    // The stream ended after the terminal event: none open once it is read and dropped.
    let frames = read_frames(stream).await;
    assert!(frames.iter().any(|frame| frame.event == "run.completed"));
    let text = scrape(&server).await;
    assert_eq!(
        sample(&text, "agent_runtime_sse_streams_open"),
        Some(0.0),
        "{text}"
    );
    server.stop().await;
}

#[tokio::test]
async fn an_open_stream_is_counted_until_it_closes() {
    let mock = MockProvider::start().await;
    let server = TestServer::start(&mock).await;
    let agent = server
        .agent("waits", json!({"allowed_tools": ["request_approval"]}))
        .await;
    mock.push(Reply::tool_call(
        "request_approval",
        json!({"title": "Ship it?"}).to_string(),
    ));
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap().to_string();
    server.wait_status(&run_id, &["paused"]).await;
    let stream = server.open_stream(&run_id, None).await;
    let text = scrape(&server).await;
    assert_eq!(
        sample(&text, "agent_runtime_sse_streams_open"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "agent_runtime_runs{status=\"paused\"}"),
        Some(1.0),
        "{text}"
    );
    drop(stream);
    wait_for("the stream to close", WAIT, || async {
        let text = scrape(&server).await;
        (sample(&text, "agent_runtime_sse_streams_open") == Some(0.0)).then_some(())
    })
    .await;
    server.stop().await;
}
