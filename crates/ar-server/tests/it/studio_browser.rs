//! The console in a real browser: runs `tests/browser/console.mjs` (playwright-core driving
//! Debian's chromium) against a service with its embedded studio, and a standalone studio the
//! service links to. Screenshots are kept under
//! `target/browser-artifacts/`. Under `CI=true` a missing browser fails; locally it skips
//! loudly (`.ci/steps/install-browser.sh` installs chromium and the npm package).

use std::time::Duration;

use ar_test_support::browser;
use ar_test_support::mock_provider::{MockProvider, Reply, Usage};
use serde_json::json;

use ar_test_support::service::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn console_approves_a_parked_tool_and_replays_from_a_step_in_chromium() {
    if !browser::require_browser() {
        return;
    }
    // A standalone studio the service links to as well (AGENT_RUNTIME_STUDIO_URL).
    let standalone = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let standalone_url = format!("http://{}", standalone.local_addr().expect("addr"));
    let (stop_standalone, standalone_stopped) = tokio::sync::oneshot::channel::<()>();
    let standalone_task = tokio::spawn(ar_studio::serve_studio(
        ar_studio::StudioConfig::default(),
        standalone,
        async move {
            let _ = standalone_stopped.await;
        },
    ));
    let mock = MockProvider::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let dsn = dir.path().join("runtime.db").display().to_string();
    let mut env = env_for(&mock, &dsn);
    env.insert("OPENAI_API_KEY".into(), "sk-browser-test".into());
    env.insert("OPENAI_BASE_URL".into(), mock.base_url());
    env.insert("AGENT_RUNTIME_NATIVE_PROVIDER".into(), "openai".into());
    env.insert("AGENT_RUNTIME_STUDIO_URL".into(), standalone_url.clone());
    let server = TestServer::start_with(env).await;
    server
        .agent("helper", json!({"allowed_tools": ["get_context"]}))
        .await;
    mock.push(Reply::tool_call("get_context", "{}").usage(Usage::new(12, 4)));
    mock.push(Reply::text("all done").usage(Usage::new(20, 5)));
    mock.push(Reply::text("forked answer").usage(Usage::new(9, 3)));

    browser::run_script(
        "console.mjs",
        &[
            ("STUDIO_URL", format!("http://{}", server.addr)),
            ("STUDIO_TOKEN", TOKEN.to_string()),
            ("STANDALONE_URL", standalone_url.clone()),
            ("AGENT", "host_app/helper".to_string()),
            ("TOOL", "get_context".to_string()),
        ],
        Duration::from_secs(120),
    )
    .await;
    let artifacts = browser::artifacts();
    for shot in [
        "1-parked.png",
        "2-approved.png",
        "3-replayed.png",
        "4-standalone.png",
    ] {
        assert!(artifacts.join(shot).exists(), "screenshot {shot}");
    }
    // The fork's model request carried the edit made in the browser.
    let last = mock
        .model_requests()
        .last()
        .expect("requests")
        .body
        .to_string();
    assert!(last.contains("EDITED IN THE BROWSER"), "{last}");
    server.stop().await;
    let _ = stop_standalone.send(());
    let _ = tokio::time::timeout(Duration::from_secs(10), standalone_task).await;
}
