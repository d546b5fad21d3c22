//! The console in a real browser: runs `tests/browser/console.mjs` (playwright-core driving
//! Debian's chromium) against a service with its embedded studio, and a standalone studio the
//! service links to. Screenshots are kept under
//! `target/browser-artifacts/`. Under `CI=true` a missing browser fails; locally it skips
//! loudly (`.ci/steps/install-browser.sh` installs chromium and the npm package).

use std::path::PathBuf;
use std::time::Duration;

use ar_test_support::mock_provider::{MockProvider, Reply, Usage};
use serde_json::json;

use ar_test_support::service::*;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What is missing to run the browser test, if anything.
fn missing_pieces(chromium: &str) -> Vec<String> {
    let root = repo_root();
    let mut missing = Vec::new();
    if !PathBuf::from(chromium).exists() {
        missing.push(format!("{chromium} (apt-get install chromium)"));
    }
    if !root
        .join("tests/browser/node_modules/playwright-core/package.json")
        .exists()
    {
        missing.push("tests/browser/node_modules (npm ci in tests/browser)".to_string());
    }
    let node = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join("node").exists()))
        .unwrap_or(false);
    if !node {
        missing.push("node".to_string());
    }
    missing
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn console_approves_a_parked_tool_and_replays_from_a_step_in_chromium() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_string());
    let missing = missing_pieces(&chromium);
    if !missing.is_empty() {
        let message = format!(
            "browser test needs {}; run .ci/steps/install-browser.sh",
            missing.join(", ")
        );
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{message}");
        }
        eprintln!("SKIPPED (not CI): {message}");
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

    let root = repo_root();
    let artifacts = root.join("target/browser-artifacts");
    let run = tokio::process::Command::new("node")
        .arg("console.mjs")
        .current_dir(root.join("tests/browser"))
        .env("STUDIO_URL", format!("http://{}", server.addr))
        .env("STUDIO_TOKEN", TOKEN)
        .env("STANDALONE_URL", &standalone_url)
        .env("AGENT", "host_app/helper")
        .env("TOOL", "get_context")
        .env("ARTIFACTS", &artifacts)
        .env("CHROMIUM", &chromium)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the browser test finished within 2 minutes")
        .expect("node ran");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "browser test failed (screenshots in {}):\n{stdout}\n{stderr}",
        artifacts.display()
    );
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
