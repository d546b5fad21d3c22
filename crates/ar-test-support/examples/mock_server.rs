//! Standalone mock provider for manual poking: prints the base URL, answers in auto mode
//! (`MOCK_STEPS` tool calls of `MOCK_TOOL`, then a final text), and dumps every request on exit.

use std::time::Duration;

use ar_test_support::mock_provider::{AutoScript, MockProvider};

#[tokio::main]
async fn main() {
    let steps: usize = std::env::var("MOCK_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let tool = std::env::var("MOCK_TOOL").unwrap_or_else(|_| "shell".into());
    let secs: u64 = std::env::var("MOCK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let mock = MockProvider::start().await;
    let cmd = std::env::var("MOCK_CMD").unwrap_or_else(|_| "echo hi > out.txt".into());
    let script = if tool == "shell" {
        AutoScript::shell(steps, "hello from mock").commands(move |_| cmd.clone())
    } else {
        AutoScript::new(steps, tool, "hello from mock")
    };
    mock.auto(script);
    println!("{}", mock.base_url());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(300)).await;
        dump(&mock);
    }
}

fn dump(mock: &MockProvider) {
    if let Ok(path) = std::env::var("MOCK_DUMP") {
        let all: Vec<serde_json::Value> = mock
            .requests()
            .iter()
            .map(|r| serde_json::json!({"method": r.method, "path": r.path, "query": r.query, "body": r.body}))
            .collect();
        let _ = std::fs::write(path, serde_json::Value::from(all).to_string());
    }
}
