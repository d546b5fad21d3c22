//! Real agent CLIs (codex, claude, opencode) through the local runtime, pointed at the mock model provider.

use std::path::Path;
use std::sync::Arc;

use ar_dispatch::{
    ClaudeProvider, CodexProvider, EventType, LocalConfig, LocalRuntime, OpenCodeProvider, RunSpec,
    Runtime, State,
};
use ar_test_support::mock_provider::{MockProvider, Reply, ToolCall, Usage};

use crate::support::{collect, data_of, find_process, group_gone, pgid_of, require_cli};

fn isolated_env(home: &Path) -> Vec<String> {
    std::fs::create_dir_all(home).unwrap();
    let h = home.display();
    vec![
        format!("HOME={h}"),
        format!("CODEX_HOME={h}"),
        format!("XDG_CONFIG_HOME={h}/.config"),
        format!("XDG_DATA_HOME={h}/.local/share"),
        format!("XDG_CACHE_HOME={h}/.cache"),
        format!("XDG_STATE_HOME={h}/.local/state"),
    ]
}

fn codex_runtime(mock: &MockProvider, root: &Path) -> LocalRuntime {
    let provider = CodexProvider {
        program: "codex".into(),
        extra_args: vec![
            "-c".into(),
            "model_provider=\"mock\"".into(),
            "-c".into(),
            format!("model_providers.mock.base_url=\"{}\"", mock.base_url()),
            "-c".into(),
            "model_providers.mock.wire_api=\"responses\"".into(),
            "-c".into(),
            "model_providers.mock.name=\"mock\"".into(),
        ],
        ..CodexProvider::default()
    };
    LocalRuntime::empty(LocalConfig::new(root)).with_provider(Arc::new(provider))
}

fn codex_spec(prompt: &str, home: &Path, workdir: &Path) -> RunSpec {
    RunSpec {
        agent: "codex".into(),
        model: "gpt-5.5".into(),
        prompt: prompt.into(),
        workdir: workdir.display().to_string(),
        env: isolated_env(home),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_run_answers() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.push(Reply::text("Hello from codex via mock").usage(Usage::new(11, 4)));
    let tmp = tempfile::tempdir().unwrap();
    let rt = codex_runtime(&mock, tmp.path());
    let run = rt
        .dispatch(codex_spec(
            "say hello",
            &tmp.path().join("home"),
            &tmp.path().join("work"),
        ))
        .await
        .unwrap();
    let events = collect(&run).await;
    let st = run.wait().await;
    assert_eq!(st.state, State::Succeeded, "{st:?} {events:?}");
    assert_eq!(
        data_of(&events, EventType::Message),
        vec!["Hello from codex via mock"]
    );
    assert!(!mock.model_requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_executes_the_models_shell_command_in_the_workdir() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.respond_with(|conv| {
        if conv.tool_results_in_turn() > 0 {
            return Some(Reply::text("created the file").usage(Usage::new(20, 5)));
        }
        let names = conv.tool_names();
        if names.iter().any(|n| n == "exec_command") {
            Some(Reply::tool_call(
                "exec_command",
                r#"{"cmd":"echo made-by-codex > made.txt"}"#,
            ))
        } else {
            Some(Reply::codex_shell("echo made-by-codex > made.txt"))
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    let rt = codex_runtime(&mock, tmp.path());
    let run = rt
        .dispatch(codex_spec("make a file", &tmp.path().join("home"), &work))
        .await
        .unwrap();
    let events = collect(&run).await;
    let st = run.wait().await;
    assert_eq!(st.state, State::Succeeded, "{st:?} {events:?}");
    let made = std::fs::read_to_string(work.join("made.txt")).unwrap_or_default();
    assert_eq!(made.trim(), "made-by-codex", "events: {events:?}");
    let tools = data_of(&events, EventType::Tool);
    assert!(tools.iter().any(|t| t.contains("made.txt")), "{tools:?}");
    assert_eq!(
        data_of(&events, EventType::Message).last().unwrap(),
        "created the file"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_cancel_mid_run_leaves_no_process() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.set_fallback(Some(Reply::hang()));
    let tmp = tempfile::tempdir().unwrap();
    let rt = codex_runtime(&mock, tmp.path());
    let marker = format!("cancel-marker-{}", std::process::id());
    let run = rt
        .dispatch(codex_spec(
            &marker,
            &tmp.path().join("home"),
            &tmp.path().join("work"),
        ))
        .await
        .unwrap();
    let pid = find_process(&marker).await.expect("codex running");
    let pgid = pgid_of(pid).unwrap();
    // bounded wait until the model request is in flight (mid-run)
    for _ in 0..1000 {
        if mock.active_streams() > 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(mock.active_streams() > 0, "codex never reached the model");
    let members = ar_process::group_members(pgid);
    assert!(!members.is_empty());
    run.cancel();
    let st = run.wait().await;
    assert_eq!(st.state, State::Canceled);
    assert!(
        group_gone(pgid).await,
        "processes of the group survived: {:?}",
        ar_process::group_members(pgid)
    );
    for p in members {
        assert!(
            !Path::new(&format!("/proc/{p}/cmdline")).exists()
                || ar_process::group_members(pgid).is_empty()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_stream_is_classified() {
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
    mock.push(
        Reply::empty()
            .with_tool_call(ToolCall::new("Task", r#"{"description":"look around","prompt":"list files","subagent_type":"general-purpose"}"#))
            .usage(Usage::new(10, 3)),
    );
    mock.set_fallback(Some(Reply::text("All done").usage(Usage::new(10, 3))));
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let provider = ClaudeProvider {
        program: "claude".into(),
        extra_args: vec!["--allowedTools".into(), "Bash,Task,Agent".into()],
    };
    let rt = LocalRuntime::empty(LocalConfig::new(tmp.path())).with_provider(Arc::new(provider));
    let env = claude_env(&mock, &home);
    let spec = RunSpec {
        agent: "claude".into(),
        model: "claude-sonnet-4-5".into(),
        prompt: "write a file then explore".into(),
        workdir: tmp.path().join("work").display().to_string(),
        env,
        ..Default::default()
    };
    let run = rt.dispatch(spec).await.unwrap();
    let events = collect(&run).await;
    let st = run.wait().await;
    assert_eq!(st.state, State::Succeeded, "{st:?} {events:?}");
    let tools = data_of(&events, EventType::Tool);
    assert!(
        tools
            .iter()
            .any(|t| t.contains(r#""name":"Bash""#) && t.contains("from-claude")),
        "{tools:?}"
    );
    let subs = data_of(&events, EventType::Subagent);
    assert_eq!(
        subs,
        vec![r#"{"agent":"general-purpose","description":"look around"}"#.to_string()]
    );
    assert!(data_of(&events, EventType::Message)
        .iter()
        .any(|m| m == "All done"));
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("work/c.txt"))
            .unwrap_or_default()
            .trim(),
        "from-claude"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_run_answers() {
    if !require_cli("opencode") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.set_fallback(Some(
        Reply::text("Hello from opencode").usage(Usage::new(8, 3)),
    ));
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let config = serde_json::json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "mock": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Mock",
                "options": { "baseURL": mock.base_url(), "apiKey": "x" },
                "models": { "m": { "name": "m" } }
            }
        }
    });
    std::fs::write(work.join("opencode.json"), config.to_string()).unwrap();
    let rt = LocalRuntime::empty(LocalConfig::new(tmp.path()))
        .with_provider(Arc::new(OpenCodeProvider::default()));
    let spec = RunSpec {
        agent: "opencode".into(),
        model: "mock/m".into(),
        prompt: "say hello".into(),
        workdir: work.display().to_string(),
        env: isolated_env(&tmp.path().join("home")),
        ..Default::default()
    };
    let run = rt.dispatch(spec).await.unwrap();
    let events = collect(&run).await;
    let st = run.wait().await;
    assert_eq!(st.state, State::Succeeded, "{st:?} {events:?}");
    assert!(
        data_of(&events, EventType::Message)
            .iter()
            .any(|m| m.contains("Hello from opencode")),
        "{events:?}"
    );
}

fn claude_env(mock: &MockProvider, home: &Path) -> Vec<String> {
    let mut env = isolated_env(home);
    env.extend([
        format!("ANTHROPIC_BASE_URL={}", mock.root_url()),
        "ANTHROPIC_API_KEY=sk-ant-mock".to_string(),
        "DISABLE_TELEMETRY=1".to_string(),
        "DISABLE_AUTOUPDATER=1".to_string(),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1".to_string(),
    ]);
    env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_signal_adds_a_user_turn() {
    if !require_cli("claude") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.respond_with(|conv| {
        let body = conv.body.to_string();
        if body.contains("second question") {
            Some(Reply::text("second answer").usage(Usage::new(10, 3)))
        } else {
            Some(
                Reply::text("first answer")
                    .usage(Usage::new(10, 3))
                    .delay(std::time::Duration::from_millis(1500)),
            )
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    let rt = LocalRuntime::empty(LocalConfig::new(tmp.path()))
        .with_provider(Arc::new(ClaudeProvider::default()));
    let spec = RunSpec {
        agent: "claude".into(),
        model: "claude-sonnet-4-5".into(),
        prompt: "first question".into(),
        workdir: tmp.path().join("work").display().to_string(),
        env: claude_env(&mock, &tmp.path().join("home")),
        ..Default::default()
    };
    let run = rt.dispatch(spec).await.unwrap();
    let mut ev = run.events().unwrap();
    assert_eq!(ev.next().await.unwrap().kind, EventType::Started);
    run.signal("second question").await.unwrap();
    let events = ev.collect().await;
    let st = run.wait().await;
    assert_eq!(st.state, State::Succeeded, "{st:?} {events:?}");
    let msgs = data_of(&events, EventType::Message);
    assert!(msgs.contains(&"first answer".to_string()), "{msgs:?}");
    assert!(msgs.contains(&"second answer".to_string()), "{msgs:?}");
}
