//! Real agent CLIs (codex, Claude Code, opencode) run against the mock: proof that each wire
//! format is accepted by the client it imitates. Skipped loudly when a CLI is missing locally;
//! mandatory under `CI=true`.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use ar_test_support::mock_provider::{AutoScript, MockProvider, Reply, WireFormat};
use tokio::process::Command;

fn find_cli(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The CLI's path, or `None` after a loud skip message (panics under `CI=true`).
fn require_cli(name: &str) -> Option<std::path::PathBuf> {
    let found = find_cli(name);
    if found.is_none() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("CLI `{name}` is required under CI=true but is not on PATH");
        }
        eprintln!("\n!!!!! SKIPPING: `{name}` CLI not found on PATH (install it with npm) !!!!!\n");
    }
    found
}

/// Isolated HOME/XDG dirs so runs never touch the developer's config; runs in `work`.
/// `PWD` must follow the cwd: opencode takes its project directory from `PWD`.
fn isolate(cmd: &mut Command, home: &Path, work: &Path) {
    cmd.current_dir(work)
        .env("PWD", work)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
}

async fn run(mut cmd: Command, what: &str) -> String {
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{what} timed out"))
        .unwrap_or_else(|e| panic!("{what} failed to start: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what} exited with {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    stdout
}

/// Like [`run`], but on failure also prints the CLI's own log files found under `home`.
async fn run_logged(cmd: Command, what: &str, home: &Path) -> String {
    let home = home.to_path_buf();
    let what_owned = what.to_string();
    let handle = tokio::spawn(async move { run(cmd, &what_owned).await });
    match handle.await {
        Ok(out) => out,
        Err(e) => {
            for entry in walk(&home) {
                if entry.extension().is_some_and(|x| x == "log") {
                    let text = std::fs::read_to_string(&entry).unwrap_or_default();
                    eprintln!("==== {}\n{text}", entry.display());
                }
            }
            panic!("{what} failed: {e}");
        }
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn codex_cmd(bin: &Path, mock: &MockProvider, home: &Path, work: &Path, prompt: &str) -> Command {
    let codex_home = home.join("codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let mut cmd = Command::new(bin);
    isolate(&mut cmd, home, work);
    cmd.env("CODEX_HOME", &codex_home)
        .env("OPENAI_API_KEY", "sk-mock")
        .args([
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "-m",
            "mock-model",
            "-c",
            "model_provider=mock",
            "-c",
            "model_providers.mock.name=mock",
            "-c",
        ])
        .arg(format!("model_providers.mock.base_url={}", mock.base_url()))
        .args(["-c", r#"model_providers.mock.wire_api="responses""#, prompt]);
    cmd
}

#[tokio::test]
async fn codex_exec_accepts_the_responses_stream() {
    let Some(bin) = require_cli("codex") else {
        return;
    };
    let mock = MockProvider::start().await;
    mock.set_fallback(Some(
        Reply::text_deltas(["hi from ", "the mock"]).with_reasoning("greeting the user"),
    ));
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let out = run(
        codex_cmd(&bin, &mock, home.path(), work.path(), "say hi"),
        "codex exec",
    )
    .await;
    assert!(out.contains("hi from the mock"), "codex output:\n{out}");
    let reqs = mock.model_requests();
    assert!(!reqs.is_empty());
    assert!(reqs.iter().all(|r| r.wire == Some(WireFormat::Responses)));
    assert!(reqs[0].is_stream());
}

#[tokio::test]
async fn codex_runs_a_scripted_shell_tool_call() {
    let Some(bin) = require_cli("codex") else {
        return;
    };
    let mock = MockProvider::start().await;
    mock.auto(AutoScript::shell(1, "file written").commands(|_| "echo hi > out.txt".into()));
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let out = run(
        codex_cmd(&bin, &mock, home.path(), work.path(), "write the file"),
        "codex exec",
    )
    .await;
    assert!(out.contains("file written"), "codex output:\n{out}");
    let written = std::fs::read_to_string(work.path().join("out.txt")).unwrap_or_default();
    assert_eq!(written.trim(), "hi", "codex output:\n{out}");
    let last = mock.model_requests().pop().unwrap();
    let outputs = last.body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .count();
    assert_eq!(outputs, 1);
}

#[tokio::test]
async fn claude_code_accepts_the_messages_stream() {
    let Some(bin) = require_cli("claude") else {
        return;
    };
    let mock = MockProvider::start().await;
    mock.auto(AutoScript::shell(1, "claude via mock").commands(|_| "echo hi > out.txt".into()));
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(bin);
    isolate(&mut cmd, home.path(), work.path());
    cmd.env("ANTHROPIC_BASE_URL", mock.root_url())
        .env("ANTHROPIC_API_KEY", "sk-ant-mock")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        // Lets --dangerously-skip-permissions run as root (CI containers).
        .env("IS_SANDBOX", "1")
        .args([
            "-p",
            "write the file",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            "claude-sonnet-4-5",
            "--dangerously-skip-permissions",
        ]);
    let out = run(cmd, "claude -p").await;
    assert!(
        out.contains("\"result\":\"claude via mock\""),
        "claude output:\n{out}"
    );
    let written = std::fs::read_to_string(work.path().join("out.txt")).unwrap_or_default();
    assert_eq!(written.trim(), "hi", "claude output:\n{out}");
    let reqs = mock.model_requests();
    assert!(reqs
        .iter()
        .all(|r| r.wire == Some(WireFormat::AnthropicMessages)));
    assert!(reqs.iter().any(|r| r.query.as_deref() == Some("beta=true")));
}

#[tokio::test]
async fn opencode_accepts_the_chat_completions_stream() {
    let Some(bin) = require_cli("opencode") else {
        return;
    };
    let mock = MockProvider::start().await;
    mock.auto(AutoScript::shell(1, "opencode via mock").commands(|_| "echo hi > out.txt".into()));
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let config = serde_json::json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": { "mock": {
            "npm": "@ai-sdk/openai-compatible",
            "options": { "baseURL": mock.base_url(), "apiKey": "x" },
            "models": { "m": {} },
        }},
    });
    std::fs::write(work.path().join("opencode.json"), config.to_string()).unwrap();
    let mut cmd = Command::new(bin);
    isolate(&mut cmd, home.path(), work.path());
    cmd.args(["run", "--format", "json", "-m", "mock/m", "write the file"]);
    let out = run_logged(cmd, "opencode run", home.path()).await;
    assert!(out.contains("opencode via mock"), "opencode output:\n{out}");
    let written = std::fs::read_to_string(work.path().join("out.txt")).unwrap_or_default();
    assert_eq!(written.trim(), "hi", "opencode output:\n{out}");
    let reqs = mock.model_requests();
    assert!(reqs
        .iter()
        .all(|r| r.wire == Some(WireFormat::ChatCompletions)));
}
