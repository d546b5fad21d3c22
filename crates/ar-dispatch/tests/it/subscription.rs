//! The codex-subscription lane: strict JSONL state machine against scripted executables, and against the real codex CLI with the mock provider.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use ar_dispatch::consts::*;
use ar_dispatch::subscription::{sha256_hex, subscription_argv, TurnMachine, Verdict};
use ar_dispatch::{
    CodexExecutable, EventType, RunSpec, Runtime, State, SubscriptionConfig, SubscriptionRuntime,
    TextOnlyPolicy,
};
use ar_test_support::mock_provider::{MockProvider, Reply, Usage};

use crate::support::{collect, require_cli};
use crate::wire::{policy, sub_spec};

const MODEL: &str = "gpt-5.5";

fn pinned_policy(rt: &SubscriptionRuntime) -> TextOnlyPolicy {
    let exe = rt.executable();
    let mut p = policy(MODEL);
    p.selected_adapter_revision = rt.adapter_revision().to_string();
    p.selected_codex_version = exe.version.clone();
    p.selected_codex_executable_revision = exe.executable_revision.clone();
    p.selected_codex_schema_revision = exe.schema_revision.clone();
    p.developer_instruction_revision = rt.developer_instruction_revision();
    p
}

fn spec_for(rt: &SubscriptionRuntime, prompt: &str) -> RunSpec {
    let mut s = sub_spec(MODEL, pinned_policy(rt));
    s.prompt = prompt.into();
    s
}

/// A fake codex: a shell script printing `body` (and recording argv, cwd and cwd mode).
fn script_runtime(dir: &Path, body: &str) -> SubscriptionRuntime {
    let path = dir.join("fake-codex");
    let record = dir.join("record");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > {rec}.argv\npwd > {rec}.cwd\nstat -c %a . > {rec}.mode\n{body}\n",
            rec = record.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = CodexExecutable {
        program: path.clone(),
        version: "fake-codex 1.0".into(),
        executable_revision: sha256_hex(&std::fs::read(&path).unwrap()),
        schema_revision: sha256_hex(b"schema"),
        env: vec![("PATH".into(), std::env::var("PATH").unwrap())],
    };
    let mut cfg = SubscriptionConfig::new(exe);
    cfg.temp_root = dir.to_path_buf();
    SubscriptionRuntime::new(cfg)
}

const CLEAN: &str = r#"
echo '{"type":"thread.started","thread_id":"th_1"}'
echo '{"type":"turn.started"}'
echo '{"type":"item.completed","item":{"id":"r","type":"reasoning","text":"thinking"}}'
echo '{"type":"item.completed","item":{"id":"m","type":"agent_message","text":"Hello there"}}'
echo '{"type":"turn.completed","usage":{"input_tokens":20,"cached_input_tokens":4,"output_tokens":7,"reasoning_output_tokens":2}}'
"#;

#[tokio::test]
async fn scripted_clean_turn_yields_one_validated_message() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = script_runtime(tmp.path(), CLEAN);
    let run = rt
        .dispatch(spec_for(&rt, "-- tricky prompt"))
        .await
        .unwrap();
    let events = collect(&run).await;
    let st = run.wait().await;
    assert_eq!(st.state, State::Succeeded, "{st:?} {events:?}");
    let msgs: Vec<_> = events
        .iter()
        .filter(|e| e.kind == EventType::Message)
        .collect();
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].data, "Hello there");
    let meta = msgs[0].response.clone().unwrap();
    meta.validate().unwrap();
    assert_eq!(meta.provider_thread_id, "th_1");
    assert_eq!(meta.usage.reasoning_tokens, 2);
    assert_eq!(meta.usage_source, USAGE_SOURCE_CODEX_EXEC_JSONL);
    assert_eq!(events.last().unwrap().kind, EventType::Exited);

    let argv: Vec<String> = std::fs::read_to_string(tmp.path().join("record.argv"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let cwd = std::fs::read_to_string(tmp.path().join("record.cwd"))
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("record.mode"))
            .unwrap()
            .trim(),
        "700"
    );
    let want = subscription_argv(
        " -- tricky prompt",
        Path::new(&cwd),
        MODEL,
        ar_dispatch::subscription::DEFAULT_DEVELOPER_INSTRUCTIONS,
        &[],
    );
    assert_eq!(argv, want);
    assert_eq!(&argv[..3], &["exec", " -- tricky prompt", "--json"]);
    for f in ["resume", "fork", "review"] {
        assert!(!argv.iter().any(|a| a == f));
    }
    assert!(argv.windows(2).any(|w| w == ["--disable", "shell_tool"]));
    assert!(
        !Path::new(&cwd).exists(),
        "per-target dir removed afterwards"
    );
}

#[tokio::test]
async fn scripted_command_attempt_is_a_violation_and_kills_the_group() {
    let tmp = tempfile::tempdir().unwrap();
    let marker = format!("ar-sub-violation-{}", std::process::id());
    let child_file = tmp.path().join("child.pid");
    let child = child_file.display();
    let body = format!(
        r#"
echo '{{"type":"thread.started","thread_id":"th"}}'
echo '{{"type":"turn.started"}}'
sh -c 'sleep 300' {marker} &
echo $! > {child}
echo '{{"type":"item.started","item":{{"id":"c","type":"command_execution","command":"rm -rf /","status":"in_progress"}}}}'
wait
"#
    );
    let rt = script_runtime(tmp.path(), &body);
    let run = rt.dispatch(spec_for(&rt, "hi")).await.unwrap();
    let events = collect(&run).await;
    let st = run.wait().await;
    assert_eq!(st.state, State::Failed);
    let child: i32 = std::fs::read_to_string(&child_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let alive = |pid: i32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.rfind(')')
            .map(|i| !stat[i + 1..].trim_start().starts_with('Z'))
            .unwrap_or(false)
    };
    for _ in 0..500 {
        if !alive(child) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(!alive(child), "grandchild {child} survived the violation");
    let err = events.iter().find(|e| e.kind == EventType::Error).unwrap();
    assert_eq!(err.error_code, ERROR_CHAT_AUTHORITY_VIOLATION);
    assert!(!events.iter().any(|e| e.kind == EventType::Message));
    // bounded wait for the kernel to finish tearing the group down
    for _ in 0..500 {
        if find_process_now(&marker).is_none() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        find_process_now(&marker).is_none(),
        "the grandchild was killed with the group"
    );
    let cwd = std::fs::read_to_string(tmp.path().join("record.cwd")).unwrap();
    assert!(!Path::new(cwd.trim()).exists());
}

fn find_process_now(needle: &str) -> Option<i32> {
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let pid = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok());
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rfind(')')
            .map(|i| stat[i + 1..].trim_start().starts_with('Z'))
            .unwrap_or(true);
        if let (Some(pid), Ok(cmd)) = (pid, std::fs::read(e.path().join("cmdline"))) {
            if !zombie
                && String::from_utf8_lossy(&cmd)
                    .replace('\0', " ")
                    .contains(needle)
            {
                return Some(pid);
            }
        }
    }
    None
}

#[tokio::test]
async fn scripted_protocol_failures() {
    let cases: &[(&str, &str)] = &[
        ("echo not-json", ERROR_PROVIDER_FAILED),
        (
            r#"echo '{"type":"thread.started","thread_id":"a"}'; echo '{"type":"thread.started","thread_id":"b"}'"#,
            ERROR_PROVIDER_FAILED,
        ),
        (
            r#"echo '{"type":"thread.started","thread_id":"a"}'; echo '{"type":"turn.started"}'; echo '{"type":"turn.failed","error":{"message":"boom"}}'"#,
            ERROR_PROVIDER_FAILED,
        ),
        (
            r#"echo '{"type":"thread.started","thread_id":"a"}'; echo '{"type":"turn.started"}'; echo '{"type":"item.completed","item":{"type":"agent_message","text":"  "}}'"#,
            ERROR_PROVIDER_FAILED,
        ),
        (
            r#"echo '{"type":"thread.started","thread_id":"a"}'; echo '{"type":"turn.started"}'"#,
            ERROR_PROVIDER_RESULT_UNKNOWN,
        ),
        (&format!("{CLEAN}\nexit 2"), ERROR_PROVIDER_FAILED),
        (
            r#"echo '{"type":"thread.started","thread_id":"a"}'; echo '{"type":"turn.started"}'; echo '{"type":"item.completed","item":{"type":"file_read","path":"/etc/passwd"}}'"#,
            ERROR_CHAT_AUTHORITY_VIOLATION,
        ),
    ];
    for (body, code) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let rt = script_runtime(tmp.path(), body);
        let run = rt.dispatch(spec_for(&rt, "hi")).await.unwrap();
        let events = collect(&run).await;
        assert_eq!(run.wait().await.state, State::Failed, "{body}");
        let err = events
            .iter()
            .find(|e| e.kind == EventType::Error)
            .unwrap_or_else(|| panic!("{body}: {events:?}"));
        assert_eq!(&err.error_code, code, "{body}");
    }
}

#[test]
fn turn_machine_tolerates_reasoning_and_pinned_code_mode_error() {
    let mut m = TurnMachine::default();
    for l in [
        r#"{"type":"thread.started","thread_id":"t"}"#,
        r#"{"type":"turn.started"}"#,
        r#"{"type":"item.completed","item":{"type":"error","message":"Code Mode is unavailable; tools fail closed"}}"#,
        r#"{"type":"item.completed","item":{"type":"agent_message","text":"ok"}}"#,
        r#"{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}"#,
    ] {
        assert_eq!(m.feed(l), Verdict::Continue, "{l}");
    }
    assert!(m.result().is_some());
    assert!(matches!(
        m.feed(r#"{"type":"turn.started"}"#),
        Verdict::Failed(_)
    ));
    let mut m = TurnMachine::default();
    m.feed(r#"{"type":"thread.started","thread_id":"t"}"#);
    m.feed(r#"{"type":"turn.started"}"#);
    for kind in [
        "command_execution",
        "file_change",
        "mcp_tool_call",
        "web_search",
    ] {
        let mut mm = m.clone();
        let line = format!(r#"{{"type":"item.started","item":{{"type":"{kind}"}}}}"#);
        assert!(matches!(mm.feed(&line), Verdict::Violation(_)), "{kind}");
    }
}

#[tokio::test]
async fn pins_and_policy_are_checked_before_spawning() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = script_runtime(tmp.path(), CLEAN);
    let mut s = spec_for(&rt, "hi");
    s.text_only_policy.as_mut().unwrap().selected_codex_version = "other".into();
    assert_eq!(
        rt.dispatch(s).await.unwrap_err().code(),
        ERROR_CHAT_POLICY_UNAVAILABLE
    );
    let mut s = spec_for(&rt, "hi");
    s.env = vec!["A=b".into()];
    assert_eq!(
        rt.dispatch(s).await.unwrap_err().code(),
        ERROR_CHAT_POLICY_UNAVAILABLE
    );
    let mut s = spec_for(&rt, "hi");
    s.workdir = "/tmp".into();
    assert_eq!(
        rt.dispatch(s).await.unwrap_err().code(),
        ERROR_CHAT_POLICY_UNAVAILABLE
    );
    let mut s = spec_for(&rt, "hi");
    s.text_only_policy.as_mut().unwrap().isolation_revision = "ABC".into();
    assert_eq!(
        rt.dispatch(s).await.unwrap_err().code(),
        ERROR_CHAT_POLICY_UNAVAILABLE
    );
    assert!(
        !tmp.path().join("record.argv").exists(),
        "no process was started"
    );
}

async fn real_runtime(mock: &MockProvider, home: &Path) -> SubscriptionRuntime {
    let env = vec![
        ("PATH".to_string(), std::env::var("PATH").unwrap()),
        ("HOME".to_string(), home.display().to_string()),
        ("CODEX_HOME".to_string(), home.display().to_string()),
    ];
    let exe = CodexExecutable::resolve("codex", env, home).await.unwrap();
    let mut cfg = SubscriptionConfig::new(exe);
    cfg.provider_overrides = vec![
        "model_provider=\"mock\"".into(),
        format!("model_providers.mock.base_url=\"{}\"", mock.base_url()),
        "model_providers.mock.wire_api=\"responses\"".into(),
        "model_providers.mock.name=\"mock\"".into(),
    ];
    let dir = home.join("targets");
    std::fs::create_dir_all(&dir).unwrap();
    cfg.temp_root = dir;
    SubscriptionRuntime::new(cfg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_codex_clean_run_is_accepted() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.push(Reply::text("Hello from the mock").usage(Usage::new(30, 9)));
    let home = tempfile::tempdir().unwrap();
    let rt = real_runtime(&mock, home.path()).await;
    let run = rt.dispatch(spec_for(&rt, "Say hello")).await.unwrap();
    let events = collect(&run).await;
    let st = run.wait().await;
    assert_eq!(st.state, State::Succeeded, "{st:?} {events:?}");
    let msg = events
        .iter()
        .find(|e| e.kind == EventType::Message)
        .unwrap();
    assert_eq!(msg.data, "Hello from the mock");
    let meta = msg.response.clone().unwrap();
    meta.validate().unwrap();
    assert_eq!(meta.usage.output_tokens, 9);
    assert_eq!(meta.requested_model, MODEL);
    let req = &mock.model_requests()[0];
    let tools: Vec<String> = req.body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        !tools.iter().any(|t| t == "shell" || t == "exec_command"),
        "shell tools offered: {tools:?}"
    );
    assert_eq!(
        std::fs::read_dir(home.path().join("targets"))
            .unwrap()
            .count(),
        0,
        "target dirs removed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_codex_command_attempt_never_runs() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.push(Reply::codex_shell("touch /tmp/ar-sub-pwned-$PPID"));
    mock.push(Reply::tool_call("exec_command", r#"{"cmd":"touch pwned"}"#));
    mock.set_fallback(Some(
        Reply::text("I will not run commands").usage(Usage::new(5, 3)),
    ));
    let home = tempfile::tempdir().unwrap();
    let rt = real_runtime(&mock, home.path()).await;
    let run = rt.dispatch(spec_for(&rt, "run a command")).await.unwrap();
    let events = collect(&run).await;
    let st = run.wait().await;
    // The lane either never lets the command happen (codex refuses the disabled tool) or
    // sees the active item and fails the run as an authority violation; never an executed command.
    let violation = events
        .iter()
        .any(|e| e.error_code == ERROR_CHAT_AUTHORITY_VIOLATION);
    assert!(!events.iter().any(|e| e.data.contains("command_execution")));
    if violation {
        assert_eq!(st.state, State::Failed);
    }
    assert_eq!(
        std::fs::read_dir(home.path().join("targets"))
            .unwrap()
            .count(),
        0
    );
    eprintln!(
        "real codex command attempt: state={:?} violation={violation}",
        st.state
    );
}
