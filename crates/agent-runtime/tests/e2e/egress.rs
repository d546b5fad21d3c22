//! Keys never reach the CLI: the real codex, Claude Code and opencode, run by the real binary
//! against the mock model (the stand-in for the vendors) through the turn's model egress proxy.
//! The model has the CLI run a command inside its sandbox that dumps its environment and
//! searches its home and workdir for the run's key; while the CLI runs, the test reads every
//! process of the run (`/proc/<pid>/environ`, `cmdline`) and every file of its home and workdir.
//! The key is found nowhere — not in what the command printed, not in any process, not in any
//! file — while the model did receive it (the proxy swapped the placeholder for it), and the
//! run's summary counts the proxy's model calls.
//!
//! A missing CLI skips its test loudly; under `CI=true` it fails instead.

use std::path::Path;
use std::time::Duration;

use ar_test_support::mock_provider::{shell_call, Conversation, MockProvider, Reply};
use ar_test_support::require_cli;
use ar_test_support::service::*;
use serde_json::{json, Value};

use crate::cli_bridge::run_processes;
use crate::BIN;

/// What the command inside the agent's sandbox runs: its environment, then a search of its
/// home and workdir for the key (a pattern that matches the key without spelling it, so the
/// command itself never carries it to the model).
const DUMP: &str = "env | sort; echo ===; grep -rn 'sk-test-run-secr[e]t' \"$HOME\" \"$PWD\" /proc/self/environ 2>/dev/null; echo search-exit=$?";

fn model_for(kind: &str) -> &'static str {
    match kind {
        "claude_code" => "claude-sonnet-4-5",
        _ => "mock-model",
    }
}

/// The model's script: run the dump, then answer after a few seconds (the test looks at the
/// running CLI meanwhile).
fn dump_then_answer(conv: &Conversation<'_>) -> Option<Reply> {
    if !conv.declares_tools() {
        return Some(Reply::text("ok"));
    }
    Some(match conv.tool_results_in_turn() {
        0 => Reply::default().with_tool_call(shell_call(conv, DUMP)),
        _ => Reply::text("inspected").delay(Duration::from_secs(4)),
    })
}

/// Every file below `dir` whose bytes contain `needle`.
fn files_holding(dir: &Path, needle: &[u8], found: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            files_holding(&path, needle, found);
        } else if kind.is_file() {
            let bytes = std::fs::read(&path).unwrap_or_default();
            if bytes.windows(needle.len()).any(|w| w == needle) {
                found.push(path.display().to_string());
            }
        }
    }
}

async fn key_stays_out_of(program: &str, kind: &str) {
    if !require_cli(program) {
        return;
    }
    let mock = MockProvider::start().await;
    mock.respond_with(dump_then_answer);
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(BIN, &sqlite_env(dir.path(), &mock)).await;
    let agent = server
        .agent(&format!("{kind}-egress"), json!({"runtime_kind": kind}))
        .await;
    let run = server
        .start_run(
            &mock,
            &agent,
            json!({"model": {"provider": "openai_compatible", "model": model_for(kind),
                   "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}}}),
        )
        .await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    // The dump went to the model; the CLI now waits for the delayed answer.
    wait_for(
        "the dump's output at the model",
        Duration::from_secs(180),
        || async {
            let status = server.run(&run_id).await["status"].clone();
            assert_eq!(
                status,
                "running",
                "the run stopped early: {:?}",
                server.events(&run_id).await
            );
            mock.model_requests()
                .iter()
                .any(|r| r.body.to_string().contains("search-exit="))
                .then_some(())
        },
    )
    .await;
    let processes = run_processes(&run_id);
    assert!(!processes.is_empty(), "no process of the run was found");
    for (pid, (cmdline, environ)) in &processes {
        assert!(
            !cmdline.contains(RUN_API_KEY) && !environ.contains(RUN_API_KEY),
            "process {pid} ({cmdline}) holds the run's key"
        );
    }
    let placeholders: Vec<&String> = processes
        .values()
        .map(|(_, environ)| environ)
        .filter(|environ| environ.contains("=arp_"))
        .collect();
    assert!(!placeholders.is_empty(), "no process holds the placeholder");
    let mut holding = Vec::new();
    files_holding(
        &dir.path().join("data"),
        RUN_API_KEY.as_bytes(),
        &mut holding,
    );
    let homes = dir.path().join("data/cli-runs/.homes").join(&run_id);
    assert!(
        homes.exists(),
        "the turn's private home was not made under {}",
        homes.display()
    );
    assert!(holding.is_empty(), "files holding the key: {holding:?}");

    let done = server.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(
        done["status"],
        "completed",
        "{done} {:?}",
        server.events(&run_id).await
    );
    check_what_the_model_saw(&mock, kind);
    let egress = &done["output_summary"]["model_egress"];
    assert!(egress["requests"].as_u64().unwrap_or(0) >= 2, "{done}");
    assert!(!homes.exists(), "the private home outlived the turn");
}

/// The model got the key on every call (swapped in by the proxy) and never the placeholder in
/// a header; the command's output reached it and shows the placeholder, never the key.
fn check_what_the_model_saw(mock: &MockProvider, kind: &str) {
    let requests = mock.model_requests();
    let dump: Vec<&Value> = requests
        .iter()
        .map(|r| &r.body)
        .filter(|body| body.to_string().contains("search-exit="))
        .collect();
    assert!(!dump.is_empty());
    for body in &dump {
        let text = body.to_string();
        assert!(
            !text.contains(RUN_API_KEY),
            "the command saw the key: {text}"
        );
        assert!(
            text.contains("search-exit=1"),
            "the search found something: {text}"
        );
    }
    if kind != "codex" {
        // codex hides variables named like keys from its shell tool anyway; the others show
        // their placeholder to their commands.
        assert!(
            dump.iter().any(|b| b.to_string().contains("arp_")),
            "{dump:?}"
        );
    }
    for request in &requests {
        let sent = request
            .header("authorization")
            .map(|v| v.trim_start_matches("Bearer ").to_string())
            .or_else(|| request.header("x-api-key").map(str::to_string));
        assert_eq!(
            sent.as_deref(),
            Some(RUN_API_KEY),
            "{} {:?}",
            request.path,
            request.headers
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn codex_never_holds_the_runs_key() {
    key_stays_out_of("codex", "codex").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claude_code_never_holds_the_runs_key() {
    key_stays_out_of("claude", "claude_code").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn opencode_never_holds_the_runs_key() {
    key_stays_out_of("opencode", "opencode").await;
}

/// A 20 MB model answer through the turn's proxy: the proxy cuts it at its 16 MiB bound and
/// the run fails saying so — never stuck, the key nowhere in what it says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_20_mb_model_answer_fails_the_run_clearly() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.set_fallback(Some(Reply::text("x".repeat(20 * 1024 * 1024))));
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(BIN, &sqlite_env(dir.path(), &mock)).await;
    let agent = server
        .agent("codex-huge", json!({"runtime_kind": "codex"}))
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    // codex tries the call again a few times; every try is cut the same way.
    let ended = wait_for("the run to end", Duration::from_secs(300), || async {
        let run = server.run(&run_id).await;
        (run["status"] != "running" && run["status"] != "queued").then_some(run)
    })
    .await;
    assert_eq!(ended["status"], "failed", "{ended}");
    let error = ended["error_message"].as_str().unwrap_or_default();
    assert!(
        error.contains("16 MiB"),
        "the failure names the proxy's bound: {error}"
    );
    assert!(!ended.to_string().contains(RUN_API_KEY));
    assert!(!format!("{:?}", server.events(&run_id).await).contains(RUN_API_KEY));
}
