//! Workspaces of CLI runs end to end: the real binary runs the real codex CLI against the mock
//! model in a `host_prepared` workspace of ar-test-support's `WorkspaceHost`. A `read_write`
//! run's shell command writes into the lease root, the host finalizes (its summary merged) and
//! cleans it, with the same events as a native run; a `read_only` run starts codex with its
//! own read-only sandbox, a `read_only` Claude Code run its plan mode, and nothing lands in the
//! root.
//!
//! A missing CLI skips its test loudly; under `CI=true` it fails instead.

use std::time::Duration;

use ar_test_support::mock_provider::{MockProvider, Reply};
use ar_test_support::require_cli;
use ar_test_support::service::*;
use ar_test_support::workspace_host::WorkspaceHost;
use serde_json::{json, Value};

use crate::workspaces::{env_with, WS_TOKEN};
use crate::BIN;

/// The model's script: one shell command writing `made.txt`, then an answer that takes a
/// moment (the test reads the CLI's command line meanwhile).
fn write_a_file(conv: &ar_test_support::mock_provider::Conversation<'_>) -> Option<Reply> {
    if !conv.declares_tools() {
        return Some(Reply::text("ok"));
    }
    if conv.tool_results_in_turn() > 0 {
        return Some(Reply::text("made the file").delay(Duration::from_secs(3)));
    }
    let script = "echo made-by-codex > made.txt";
    let names = conv.tool_names();
    Some(if names.iter().any(|n| n == "exec_command") {
        Reply::tool_call("exec_command", json!({ "cmd": script }).to_string())
    } else if names.iter().any(|n| n == "Bash") {
        // Claude Code's shell tool.
        Reply::tool_call("Bash", json!({ "command": script }).to_string())
    } else {
        Reply::codex_shell(script)
    })
}

/// The command line of the run's CLI process (the one whose arguments hold `marker`), read
/// while it runs.
async fn cli_command_line(server: &Server, run_id: &str, marker: &str) -> String {
    wait_for(
        "the run's CLI process",
        Duration::from_secs(120),
        || async {
            let status = server.run(run_id).await["status"].clone();
            assert_eq!(status, "running", "the run ended before its CLI was seen");
            crate::cli_bridge::run_processes(run_id)
                .into_values()
                .map(|(cmdline, _)| cmdline)
                .find(|cmdline| cmdline.contains(marker))
        },
    )
    .await
}

/// A CLI run (`kind`, its program `program`) in a `host_prepared` workspace of `access`: the
/// finished run, its events, the host and the CLI's command line.
async fn cli_workspace_run(
    (program, kind, marker): (&str, &str, &str),
    access: &str,
) -> Option<(Value, Vec<Value>, WorkspaceHost, String)> {
    if !require_cli(program) {
        return None;
    }
    let mock = MockProvider::start().await;
    mock.respond_with(write_a_file);
    let roots = tempfile::tempdir().expect("tempdir");
    let host = WorkspaceHost::start(Some(WS_TOKEN), roots.path()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(BIN, &env_with(dir.path(), &mock, &host)).await;
    let agent = server
        .agent(
            &format!("{program}-{access}"),
            json!({"runtime_kind": kind,
                   "execution_config": {"workspace": {"mode": "host_prepared", "access": access}}}),
        )
        .await;
    let model = if kind == "claude_code" {
        "claude-sonnet-4-5"
    } else {
        "mock-model"
    };
    let extra = json!({"model": {"provider": "openai_compatible", "model": model,
        "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}}});
    let run = server.start_run(&mock, &agent, extra).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    let cmdline = cli_command_line(&server, &run_id, marker).await;
    // CLIs start slowly on a busy machine: longer than the harness's 30 s.
    let done = wait_for("the CLI run to end", Duration::from_secs(180), || async {
        let run = server.run(&run_id).await;
        matches!(run["status"].as_str(), Some("completed" | "failed")).then_some(run)
    })
    .await;
    let events = wait_for("workspace.cleaned", Duration::from_secs(30), || async {
        let events = server.events(&run_id).await;
        events
            .iter()
            .any(|e| e["type"] == "workspace.cleaned")
            .then_some(events)
    })
    .await;
    // The CLI worked in the lease root: each CLI tells its model its working directory.
    let root = host.workspace_of(&run_id).display().to_string();
    assert!(
        mock.model_requests()
            .iter()
            .any(|r| r.body.to_string().contains(&root)),
        "{program} did not run in the lease root {root}"
    );
    Some((done, events, host, cmdline))
}

/// codex: its program, runtime kind and a piece of its command line.
const CODEX: (&str, &str, &str) = ("codex", "codex", " exec --json ");
const CLAUDE: (&str, &str, &str) = ("claude", "claude_code", "--output-format stream-json");

fn position(events: &[Value], kind: &str) -> usize {
    events
        .iter()
        .position(|e| e["type"] == kind)
        .unwrap_or_else(|| panic!("{kind} among {events:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_codex_run_works_in_its_prepared_workspace_which_is_finalized_and_cleaned() {
    let Some((done, events, host, cmdline)) = cli_workspace_run(CODEX, "read_write").await else {
        return;
    };
    assert_eq!(done["status"], "completed", "{done} {events:?}");
    assert!(cmdline.contains("--sandbox workspace-write"), "{cmdline}");
    let run_id = done["id"].as_str().unwrap();
    // The command's file was in the root when the host finalized; its summary is the run's.
    let summary = &done["output_summary"];
    assert_eq!(summary["files"]["made.txt"], "made-by-codex\n", "{done}");
    assert_eq!(summary["finalized_outcome"], "completed");
    assert_eq!(summary["last_message"], "made the file");
    assert_eq!(done["workspace_lease"]["id"], format!("lease-{run_id}"));
    assert!(position(&events, "run.started") < position(&events, "workspace.prepared"));
    assert!(position(&events, "workspace.prepared") < position(&events, "tool_call_started"));
    assert!(position(&events, "workspace.finalized") < position(&events, "run.completed"));
    assert!(position(&events, "run.completed") < position(&events, "workspace.cleaned"));
    let steps: Vec<String> = host.calls().into_iter().map(|(step, _)| step).collect();
    assert_eq!(steps, ["prepare", "finalize", "cleanup"]);
    assert_eq!(host.calls_of("prepare")[0]["runtime_kind"], "codex");
    assert_eq!(host.calls_of("cleanup")[0]["reason"], "completed");
    assert!(!host.workspace_of(run_id).exists(), "cleanup removed it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_read_only_codex_run_gets_codexs_read_only_sandbox_and_writes_nothing() {
    let Some((done, events, host, cmdline)) = cli_workspace_run(CODEX, "read_only").await else {
        return;
    };
    assert!(cmdline.contains("--sandbox read-only"), "{cmdline}");
    assert!(!cmdline.contains("dangerously"), "{cmdline}");
    assert_eq!(done["status"], "completed", "{done} {events:?}");
    let files = &done["output_summary"]["files"];
    assert!(
        files.get("made.txt").is_none(),
        "a read-only run wrote: {done}"
    );
    assert_eq!(host.calls_of("finalize")[0]["outcome"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_read_only_claude_code_run_plans_and_writes_nothing() {
    let Some((done, events, host, cmdline)) = cli_workspace_run(CLAUDE, "read_only").await else {
        return;
    };
    assert!(cmdline.contains("--permission-mode plan"), "{cmdline}");
    assert!(!cmdline.contains("dangerously"), "{cmdline}");
    assert_eq!(done["status"], "completed", "{done} {events:?}");
    let files = &done["output_summary"]["files"];
    assert!(
        files.get("made.txt").is_none(),
        "a read-only run wrote: {done}"
    );
    assert_eq!(host.calls_of("cleanup")[0]["reason"], "completed");
}
