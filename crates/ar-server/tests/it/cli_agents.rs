//! Runs of agents with `runtime_kind` codex, claude_code and opencode through the HTTP API: the
//! real CLIs, pointed by the service at the mock model provider (the run's model route).
//!
//! A missing CLI skips the test loudly; under `CI=true` it fails instead.

use std::time::Duration;

use ar_test_support::mock_provider::{AutoScript, MockProvider, Reply, Usage};
use serde_json::{json, Value};

use ar_test_support::require_cli;
use ar_test_support::service::*;

/// Polls until the run reaches one of `statuses` (bounded: 120 s; CLIs start slowly).
async fn wait_for(server: &TestServer, run_id: &str, statuses: &[&str]) -> Value {
    for _ in 0..1200 {
        let run = server.run(run_id).await;
        if statuses.contains(&run["status"].as_str().unwrap_or_default()) {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "run {run_id} never reached {statuses:?}: {}",
        server.run(run_id).await
    );
}

async fn cli_agent(server: &TestServer, id: &str, kind: &str) -> String {
    server
        .agent(
            id,
            json!({"runtime_kind": kind, "system_prompt": "You are terse."}),
        )
        .await
}

/// Starts a run on the mock endpoint with the given model name.
async fn start(
    server: &TestServer,
    mock: &MockProvider,
    agent: &str,
    model: &str,
    instructions: &str,
) -> String {
    let run = server
        .start_run(
            mock,
            agent,
            json!({
                "instructions": instructions,
                "model": {"provider": "openai_compatible", "model": model,
                          "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}},
            }),
        )
        .await;
    run["id"].as_str().expect("run id").to_string()
}

fn contents(events: &[Value], kind: &str) -> Vec<String> {
    events
        .iter()
        .filter(|event| event["type"] == kind)
        .map(|event| {
            event["data"]["content"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The run's workdir (the engine's own state, shown by the studio's run view).
async fn workdir_of(server: &TestServer, run_id: &str) -> String {
    let (_, view) = server.get(&format!("/studio/api/runs/{run_id}")).await;
    view["engine"]["workdir"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The run's workdir and the trimmed text of `file` in it ("" if absent).
async fn workdir_file(server: &TestServer, run_id: &str, file: &str) -> (String, String) {
    let workdir = workdir_of(server, run_id).await;
    let text = std::fs::read_to_string(std::path::Path::new(&workdir).join(file))
        .unwrap_or_default()
        .trim()
        .to_string();
    (workdir, text)
}

/// Whether a recorded tool call of `tool` ran a command mentioning `needle`.
fn ran_command(calls: &[Value], tool: &str, needle: &str) -> bool {
    calls.iter().any(|c| {
        c["tool_name"] == tool
            && c["input"]["command"]
                .as_str()
                .unwrap_or_default()
                .contains(needle)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn capabilities_list_installed_cli_kinds() {
    let mock = MockProvider::start().await;
    let server = TestServer::start(&mock).await;
    let (status, caps) = server.get("/v1/capabilities").await;
    assert_eq!(status, 200, "{caps}");
    let kinds: Vec<String> = caps["runtime_kinds"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|k| k.as_str().unwrap_or_default().to_string())
        .collect();
    assert!(kinds.contains(&"native_sdk".to_string()), "{caps}");
    for (program, kind) in [
        ("codex", "codex"),
        ("claude", "claude_code"),
        ("opencode", "opencode"),
    ] {
        let found = ar_process::find_program(program, None).is_some();
        assert_eq!(
            kinds.contains(&kind.to_string()),
            found,
            "{kind}: {kinds:?}"
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn codex_run_answers_and_lands_in_the_store() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.set_fallback(Some(
        Reply::text("Hello from codex").usage(Usage::new(11, 4)),
    ));
    let server = TestServer::start(&mock).await;
    let agent = cli_agent(&server, "coder", "codex").await;
    let run_id = start(&server, &mock, &agent, "mock-model", "say hello").await;
    let done = wait_for(&server, &run_id, &["completed", "failed"]).await;
    let events = server.events(&run_id).await;
    assert_eq!(done["status"], "completed", "{done} {events:?}");
    assert_contiguous(&events);
    let types = event_types(&events);
    assert_eq!(types.first().map(String::as_str), Some("run.queued"));
    assert_eq!(types.get(1).map(String::as_str), Some("run.started"));
    assert_eq!(types.last().map(String::as_str), Some("run.completed"));
    assert!(
        types.contains(&"assistant_message_started".to_string()),
        "{types:?}"
    );
    assert!(types.contains(&"usage.checkpoint".to_string()), "{types:?}");
    assert_eq!(
        contents(&events, "assistant_message_completed"),
        vec!["Hello from codex"]
    );
    assert!(
        done["output_summary"]["usage"]["input_tokens"]
            .as_i64()
            .unwrap_or(0)
            >= 11,
        "{done}"
    );
    assert!(
        done["output_summary"]["usage"]["output_tokens"]
            .as_i64()
            .unwrap_or(0)
            >= 4,
        "{done}"
    );
    let messages = server.list(&run_id, "messages").await;
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "assistant" && m["content"] == "Hello from codex"),
        "{messages:?}"
    );
    // The run's route reached codex: the model, the key, the Responses API, the prompt.
    let requests = mock.model_requests();
    assert!(!requests.is_empty());
    let first = &requests[0];
    assert_eq!(first.path, "/v1/responses");
    assert_eq!(
        first.header("authorization"),
        Some(format!("Bearer {RUN_API_KEY}").as_str())
    );
    assert_eq!(first.body["model"], "mock-model");
    assert!(first.body.to_string().contains("say hello"));
    // The per-run workspace under the runtime's data dir.
    let workdir = workdir_of(&server, &run_id).await;
    assert!(workdir.ends_with(&run_id), "{done}");
    // The turn's private CLI home is gone once the turn ended.
    let root = std::path::Path::new(&workdir).parent().expect("root");
    assert!(!root.join(".homes").join(&run_id).exists());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn codex_runs_the_models_shell_command_in_the_run_workdir() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.respond_with(|conv| {
        if conv.tool_results_in_turn() > 0 {
            return Some(Reply::text("created the file").usage(Usage::new(20, 5)));
        }
        if conv.tool_names().iter().any(|n| n == "exec_command") {
            Some(Reply::tool_call(
                "exec_command",
                r#"{"cmd":"echo made-by-codex > made.txt"}"#,
            ))
        } else {
            Some(Reply::codex_shell("echo made-by-codex > made.txt"))
        }
    });
    let server = TestServer::start(&mock).await;
    let agent = cli_agent(&server, "shell-coder", "codex").await;
    let run_id = start(&server, &mock, &agent, "mock-model", "make a file").await;
    let done = wait_for(&server, &run_id, &["completed", "failed"]).await;
    let events = server.events(&run_id).await;
    assert_eq!(done["status"], "completed", "{done} {events:?}");
    let (workdir, made) = workdir_file(&server, &run_id, "made.txt").await;
    assert_eq!(made, "made-by-codex", "workdir {workdir}: {events:?}");
    let types = event_types(&events);
    for kind in [
        "tool_call_started",
        "tool_call_result",
        "tool_call_finished",
    ] {
        assert!(
            types.contains(&kind.to_string()),
            "{kind} missing: {types:?}"
        );
    }
    let calls = server.list(&run_id, "tool-calls").await;
    assert!(
        calls
            .iter()
            .any(|c| c["input"].to_string().contains("made.txt") && c["mutating"] == true),
        "{calls:?}"
    );
    assert_eq!(
        contents(&events, "assistant_message_completed")
            .last()
            .map(String::as_str),
        Some("created the file")
    );
    server.stop().await;
}

/// Pid of a process-group leader whose command line contains `needle` (bounded wait).
async fn find_leader(needle: &str) -> Option<i32> {
    for _ in 0..1000 {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").ok()?.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
                let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
                if cmd.contains(needle) && pid != std::process::id() as i32 {
                    found.push(pid);
                }
            }
        }
        if let Some(leader) = found.iter().copied().find(|p| pgid_of(*p) == Some(*p)) {
            return Some(leader);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

fn pgid_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(2)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_kills_the_cli_process_group() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.set_fallback(Some(Reply::hang()));
    let server = TestServer::start(&mock).await;
    let agent = cli_agent(&server, "hanger", "codex").await;
    let marker = format!("service-cancel-marker-{}", std::process::id());
    let run_id = start(&server, &mock, &agent, "mock-model", &marker).await;
    let pgid = find_leader(&marker).await.expect("codex process running");
    for _ in 0..1000 {
        if mock.active_streams() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(mock.active_streams() > 0, "codex never reached the model");
    assert!(!ar_process::group_members(pgid).is_empty());
    let (status, body) = server
        .post(
            &format!("/v1/runs/{run_id}/cancel?app_id={APP}"),
            json!({"app_id": APP}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let done = wait_for(&server, &run_id, &["cancelled"]).await;
    assert_eq!(done["status"], "cancelled");
    let mut gone = false;
    for _ in 0..500 {
        if ar_process::group_members(pgid).is_empty() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        gone,
        "processes survived: {:?}",
        ar_process::group_members(pgid)
    );
    let types = event_types(&server.events(&run_id).await);
    assert_eq!(
        types.last().map(String::as_str),
        Some("run.cancelled"),
        "{types:?}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claude_code_run_answers() {
    if !require_cli("claude") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.set_fallback(Some(
        Reply::text("Hello from claude").usage(Usage::new(9, 3)),
    ));
    let server = TestServer::start(&mock).await;
    let agent = cli_agent(&server, "claude", "claude_code").await;
    let run_id = start(&server, &mock, &agent, "claude-sonnet-4-5", "say hello").await;
    let done = wait_for(&server, &run_id, &["completed", "failed"]).await;
    let events = server.events(&run_id).await;
    assert_eq!(done["status"], "completed", "{done} {events:?}");
    assert!(
        contents(&events, "assistant_message_completed").contains(&"Hello from claude".to_string()),
        "{events:?}"
    );
    assert!(event_types(&events).contains(&"usage.checkpoint".to_string()));
    let requests = mock.model_requests();
    let messages: Vec<_> = requests
        .iter()
        .filter(|r| r.path == "/v1/messages")
        .collect();
    assert!(!messages.is_empty(), "claude never called the route");
    assert_eq!(messages[0].header("x-api-key"), Some(RUN_API_KEY));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn opencode_run_answers() {
    if !require_cli("opencode") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.set_fallback(Some(
        Reply::text("Hello from opencode").usage(Usage::new(8, 3)),
    ));
    let server = TestServer::start(&mock).await;
    let agent = cli_agent(&server, "opencoder", "opencode").await;
    let run_id = start(&server, &mock, &agent, "mock-model", "say hello").await;
    let done = wait_for(&server, &run_id, &["completed", "failed"]).await;
    let events = server.events(&run_id).await;
    assert_eq!(done["status"], "completed", "{done} {events:?}");
    assert!(
        contents(&events, "assistant_message_completed")
            .iter()
            .any(|c| c.contains("Hello from opencode")),
        "{events:?}"
    );
    let requests = mock.model_requests();
    assert!(
        requests.iter().any(|r| r.path == "/v1/chat/completions"
            && r.header("authorization") == Some(format!("Bearer {RUN_API_KEY}").as_str())),
        "opencode never used the route"
    );
    server.stop().await;
}

/// Text of every user input the model was sent, per request (Responses `input`).
fn request_texts(mock: &MockProvider) -> Vec<String> {
    mock.model_requests()
        .iter()
        .filter(|r| r.path == "/v1/responses")
        .map(|r| r.body["input"].to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn codex_chat_turns_pause_after_the_answer_and_resume_with_the_conversation() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.respond_with(|conv| {
        let body = conv.body.to_string();
        if body.contains("second question") {
            Some(Reply::text("second answer").usage(Usage::new(20, 3)))
        } else {
            Some(Reply::text("first answer").usage(Usage::new(10, 2)))
        }
    });
    let server = TestServer::start(&mock).await;
    let agent = cli_agent(&server, "chatter", "codex").await;
    let run = server
        .start_run(
            &mock,
            &agent,
            json!({
                "instructions": "first question",
                "turn_policy": {"mode": "pause_after_assistant"},
            }),
        )
        .await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    let paused = wait_for(&server, &run_id, &["paused", "failed", "completed"]).await;
    assert_eq!(paused["status"], "paused", "{paused}");
    assert_eq!(paused["pause_reason"], "awaiting_user_message");
    let (status, resumed) = server
        .post(
            &format!("/v1/runs/{run_id}/resume?app_id={APP}"),
            json!({"intent": "reply", "content": "second question"}),
        )
        .await;
    assert_eq!(status, 200, "{resumed}");
    let again = wait_for(&server, &run_id, &["paused", "failed", "completed"]).await;
    let events = server.events(&run_id).await;
    assert_eq!(again["status"], "paused", "{again} {events:?}");
    assert_eq!(
        contents(&events, "assistant_message_completed"),
        vec!["first answer", "second answer"]
    );
    // The second turn is a fresh process that was given the conversation so far.
    let texts = request_texts(&mock);
    let second = texts
        .iter()
        .find(|t| t.contains("second question"))
        .expect("second turn reached the model");
    assert!(
        second.contains("first question") && second.contains("first answer"),
        "{second}"
    );
    assert_eq!(
        again["output_summary"]["usage"]["input_tokens"], 30,
        "{again}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pause_takes_effect_at_the_turn_boundary_and_resume_runs_the_next_turn() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.respond_with(|conv| {
        let body = conv.body.to_string();
        if body.contains("carry on please") {
            Some(Reply::text("finished the rest").usage(Usage::new(5, 2)))
        } else {
            Some(
                Reply::text("first part done")
                    .usage(Usage::new(5, 2))
                    .delay(Duration::from_millis(1500)),
            )
        }
    });
    let server = TestServer::start(&mock).await;
    let agent = cli_agent(&server, "pausable", "codex").await;
    let run_id = start(&server, &mock, &agent, "mock-model", "do the first part").await;
    // Pause while the model call of the first turn is in flight (its reply is delayed).
    for _ in 0..1000 {
        if !mock.model_requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(server.run(&run_id).await["status"], "running");
    let (status, body) = server
        .post(&format!("/v1/runs/{run_id}/pause?app_id={APP}"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let paused = wait_for(&server, &run_id, &["paused", "failed", "completed"]).await;
    let events = server.events(&run_id).await;
    assert_eq!(paused["status"], "paused", "{paused} {events:?}");
    assert_eq!(paused["pause_reason"], "manual");
    // The turn in flight was not cut short: its answer is recorded.
    assert_eq!(
        contents(&events, "assistant_message_completed"),
        vec!["first part done"]
    );
    let (status, body) = server
        .post(
            &format!("/v1/runs/{run_id}/resume?app_id={APP}"),
            json!({"intent": "continue", "content": "carry on please"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let done = wait_for(&server, &run_id, &["completed", "failed"]).await;
    let events = server.events(&run_id).await;
    assert_eq!(done["status"], "completed", "{done} {events:?}");
    assert_eq!(
        contents(&events, "assistant_message_completed"),
        vec!["first part done", "finished the rest"]
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_cli_turn_fails_the_run_with_its_error() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    let server = TestServer::start(&mock).await;
    let agent = cli_agent(&server, "doomed", "codex").await;
    // The model endpoint refuses every request (a 400 is not retried).
    mock.set_fallback(Some(Reply::error(400, "bad request from the mock")));
    let run_id = start(&server, &mock, &agent, "mock-model", "anything").await;
    let done = wait_for(&server, &run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert!(
        !done["error_message"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "{done}"
    );
    let types = event_types(&server.events(&run_id).await);
    assert_eq!(
        types.last().map(String::as_str),
        Some("run.failed"),
        "{types:?}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claude_code_tool_call_is_recorded_and_runs_in_the_workdir() {
    if !require_cli("claude") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.push(
        Reply::tool_call(
            "Bash",
            r#"{"command":"echo from-claude > c.txt","description":"write a file"}"#,
        )
        .usage(Usage::new(10, 3)),
    );
    mock.set_fallback(Some(
        Reply::text_deltas(["All ", "done"]).usage(Usage::new(10, 3)),
    ));
    let server = TestServer::start(&mock).await;
    let agent = cli_agent(&server, "claude-tools", "claude_code").await;
    let run_id = start(&server, &mock, &agent, "claude-sonnet-4-5", "write a file").await;
    let done = wait_for(&server, &run_id, &["completed", "failed"]).await;
    let events = server.events(&run_id).await;
    assert_eq!(done["status"], "completed", "{done} {events:?}");
    let (_, written) = workdir_file(&server, &run_id, "c.txt").await;
    assert_eq!(written, "from-claude", "{events:?}");
    let calls = server.list(&run_id, "tool-calls").await;
    assert!(ran_command(&calls, "Bash", "c.txt"), "{calls:?}");
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_call_finished")
        .collect();
    assert_eq!(finished.len(), 1, "{events:?}");
    assert_eq!(finished[0]["data"]["tool_name"], "Bash");
    assert!(
        contents(&events, "assistant_message_completed").contains(&"All done".to_string()),
        "{events:?}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn opencode_shell_tool_is_recorded_and_runs_in_the_workdir() {
    if !require_cli("opencode") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.auto(
        AutoScript::shell(1, "wrote it")
            .commands(|_| "echo from-opencode > o.txt".to_string())
            .usage(Usage::new(7, 2)),
    );
    let server = TestServer::start(&mock).await;
    let agent = cli_agent(&server, "opencode-tools", "opencode").await;
    let run_id = start(&server, &mock, &agent, "mock-model", "write a file").await;
    let done = wait_for(&server, &run_id, &["completed", "failed"]).await;
    let events = server.events(&run_id).await;
    assert_eq!(done["status"], "completed", "{done} {events:?}");
    let (_, written) = workdir_file(&server, &run_id, "o.txt").await;
    assert_eq!(written, "from-opencode", "{events:?}");
    let calls = server.list(&run_id, "tool-calls").await;
    assert!(ran_command(&calls, "bash", "o.txt"), "{calls:?}");
    assert!(
        event_types(&events).contains(&"tool_call_finished".to_string()),
        "{events:?}"
    );
    assert!(
        contents(&events, "assistant_message_completed")
            .iter()
            .any(|c| c.contains("wrote it")),
        "{events:?}"
    );
    assert!(
        done["output_summary"]["usage"]["output_tokens"]
            .as_i64()
            .unwrap_or(0)
            >= 2,
        "{done}"
    );
    server.stop().await;
}

/// A codex run whose model makes it print its environment: the key is not there (the CLI
/// holds the turn's egress placeholder instead), and is found in no record or event of the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cli_printing_its_environment_never_leaks_the_model_key() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.respond_with(|conv| {
        if conv.tool_results_in_turn() > 0 {
            return Some(Reply::text("printed the environment").usage(Usage::new(20, 5)));
        }
        if conv.tool_names().iter().any(|n| n == "exec_command") {
            Some(Reply::tool_call("exec_command", r#"{"cmd":"env"}"#))
        } else {
            Some(Reply::codex_shell("env"))
        }
    });
    let server = TestServer::start(&mock).await;
    let agent = cli_agent(&server, "env-printer", "codex").await;
    let run_id = start(
        &server,
        &mock,
        &agent,
        "mock-model",
        "print your environment",
    )
    .await;
    let done = wait_for(&server, &run_id, &["completed", "failed"]).await;
    let events = server.events(&run_id).await;
    assert_eq!(done["status"], "completed", "{done} {events:?}");
    let calls = server.list(&run_id, "tool-calls").await;
    let recorded = serde_json::to_string(&json!({
        "run": done,
        "events": events,
        "tool_calls": calls,
        "messages": server.list(&run_id, "messages").await,
        "artifacts": server.list(&run_id, "artifacts").await,
        "interactions": server.list(&run_id, "interactions").await,
    }))
    .unwrap();
    assert!(
        !recorded.contains("sk-test-secret"),
        "the key reached the records: {recorded}"
    );
    assert!(
        json!(calls).to_string().contains("AR_MODEL_API_KEY=arp_"),
        "the environment was printed with the placeholder in the key's place: {calls:?}"
    );
    server.stop().await;
}
