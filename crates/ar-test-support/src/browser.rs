//! The console's browser tests: Debian's chromium driven by playwright-core from node, with
//! scripts under `tests/browser`. Missing pieces skip a test loudly locally and fail it under
//! `CI=true` (`.ci/steps/install-browser.sh` installs them).

use std::path::PathBuf;
use std::time::Duration;

/// The repository's root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The chromium to drive (`CHROMIUM`, else Debian's).
pub fn chromium() -> String {
    std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_string())
}

/// Where screenshots go.
pub fn artifacts() -> PathBuf {
    repo_root().join("target/browser-artifacts")
}

/// What is missing to run a browser test, if anything.
fn missing_pieces() -> Vec<String> {
    let chromium = chromium();
    let mut missing = Vec::new();
    if !PathBuf::from(&chromium).exists() {
        missing.push(format!("{chromium} (apt-get install chromium)"));
    }
    if !repo_root()
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

/// True when the browser test can run; a loud skip locally, a panic under `CI=true`.
pub fn require_browser() -> bool {
    let missing = missing_pieces();
    if missing.is_empty() {
        return true;
    }
    let message = format!(
        "browser test needs {}; run .ci/steps/install-browser.sh",
        missing.join(", ")
    );
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{message}");
    }
    eprintln!("!!!!!! SKIPPED (not CI): {message} !!!!!!");
    false
}

/// Runs `node <script>` in `tests/browser` with `env` (plus `CHROMIUM` and `ARTIFACTS`),
/// bounded; panics with its output when it fails.
pub async fn run_script(script: &str, env: &[(&str, String)], within: Duration) {
    let mut command = tokio::process::Command::new("node");
    command
        .arg(script)
        .current_dir(repo_root().join("tests/browser"))
        .env("ARTIFACTS", artifacts())
        .env("CHROMIUM", chromium())
        .kill_on_drop(true);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = tokio::time::timeout(within, command.output())
        .await
        .unwrap_or_else(|_| panic!("{script} did not finish within {within:?}"))
        .unwrap_or_else(|error| panic!("node {script}: {error}"));
    assert!(
        output.status.success(),
        "{script} failed (screenshots in {}):\n{}\n{}",
        artifacts().display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
