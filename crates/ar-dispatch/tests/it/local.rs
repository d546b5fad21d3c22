//! The local process runtime with the `command` and `command:NAME` agents: streaming, exit codes, signal, cancel, drop, env, bad input.

use std::sync::Arc;

use ar_dispatch::{
    DispatchError, EventType, LocalConfig, LocalRuntime, NamedCommandProvider, RunError, RunSpec,
    Runtime, State,
};

use crate::support::{collect, data_of, find_process, group_gone, pgid_of};

pub fn runtime(root: &std::path::Path) -> LocalRuntime {
    LocalRuntime::standard(LocalConfig::new(root))
}

fn cmd(prompt: &str) -> RunSpec {
    RunSpec {
        agent: "command".into(),
        prompt: prompt.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn command_lines_become_messages_and_exit_code_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let mut spec = cmd(r#"sh -c 'echo one; echo two; echo oops >&2; exit 3'"#);
    spec.run_id = "run-1".into();
    let run = rt.dispatch(spec).await.unwrap();
    assert_eq!(run.id(), "run-1");
    let events = collect(&run).await;
    let status = run.wait().await;
    assert_eq!(events.first().unwrap().kind, EventType::Started);
    let last = events.last().unwrap();
    assert_eq!((last.kind, last.code), (EventType::Exited, 3));
    assert_eq!(data_of(&events, EventType::Message), vec!["one", "two"]);
    assert_eq!(data_of(&events, EventType::Stderr), vec!["oops"]);
    assert!(events.iter().all(|e| e.run_id == "run-1"));
    assert_eq!(status.state, State::Failed);
    assert_eq!(status.exit_code, 3);
    assert!(status.err.contains("oops"), "{}", status.err);
    // the per-run workdir was created under the workspace root
    assert!(tmp.path().join("run-1").is_dir());
}

#[tokio::test]
async fn success_and_explicit_workdir_created() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let dir = tmp.path().join("deep/work");
    let mut spec = cmd(r#"["sh","-c","pwd; echo $FOO"]"#);
    spec.workdir = dir.to_string_lossy().into();
    spec.env = vec!["FOO=bar".into()];
    let run = rt.dispatch(spec).await.unwrap();
    let events = collect(&run).await;
    assert_eq!(run.wait().await.state, State::Succeeded);
    assert_eq!(
        data_of(&events, EventType::Message),
        vec![dir.to_string_lossy().to_string(), "bar".into()]
    );
}

#[tokio::test]
async fn environment_is_an_allow_list() {
    let tmp = tempfile::tempdir().unwrap();
    std::env::set_var("AR_DISPATCH_TEST_SECRET", "s3cret");
    let run = runtime(tmp.path()).dispatch(cmd("env")).await.unwrap();
    let events = collect(&run).await;
    let env = data_of(&events, EventType::Message);
    assert!(env.iter().any(|l| l.starts_with("PATH=")));
    assert!(!env.iter().any(|l| l.contains("s3cret")));
}

#[tokio::test]
async fn signal_writes_stdin_and_run_ends_on_eof_logic() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let run = rt
        .dispatch(cmd(
            r#"sh -c 'while read l; do echo "got:$l"; [ "$l" = stop ] && exit 0; done'"#,
        ))
        .await
        .unwrap();
    let mut ev = run.events().unwrap();
    assert_eq!(ev.next().await.unwrap().kind, EventType::Started);
    run.signal("hello").await.unwrap();
    assert_eq!(ev.next().await.unwrap().data, "got:hello");
    run.signal("stop").await.unwrap();
    assert_eq!(ev.next().await.unwrap().data, "got:stop");
    assert_eq!(ev.next().await.unwrap().kind, EventType::Exited);
    assert!(ev.next().await.is_none());
    assert_eq!(run.wait().await.state, State::Succeeded);
    assert_eq!(run.signal("late").await, Err(RunError::Finished));
    let big = "x".repeat(2 * 1024 * 1024);
    assert!(matches!(run.signal(&big).await, Err(RunError::TooLarge(_))));
}

#[tokio::test]
async fn named_command_gets_prompt_as_first_stdin_line() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = LocalRuntime::empty(LocalConfig::new(tmp.path())).with_named_command(
        NamedCommandProvider::parse_flag("echoer=sh -c 'while read l; do echo \"echo:$l\"; done'")
            .unwrap(),
    );
    let run = rt
        .dispatch(RunSpec {
            agent: "command:echoer".into(),
            prompt: "first".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut ev = run.events().unwrap();
    ev.next().await.unwrap();
    assert_eq!(ev.next().await.unwrap().data, "echo:first");
    run.signal("second").await.unwrap();
    assert_eq!(ev.next().await.unwrap().data, "echo:second");
    run.cancel();
    let rest = ev.collect().await;
    assert_eq!(rest.last().unwrap().kind, EventType::Exited);
    assert_eq!(run.wait().await.state, State::Canceled);
}

#[tokio::test]
async fn cancel_kills_the_group_and_keeps_the_exit_code() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let marker = format!("ar-cancel-{}", std::process::id());
    let run = rt
        .dispatch(cmd(&format!(
            r#"sh -c 'sleep 300 & sleep 301 & echo ready; wait' {marker}"#
        )))
        .await
        .unwrap();
    let mut ev = run.events().unwrap();
    ev.next().await.unwrap();
    assert_eq!(ev.next().await.unwrap().data, "ready");
    let pid = find_process(&marker).await.expect("process running");
    let pgid = pgid_of(pid).unwrap();
    assert_eq!(pgid, pid, "the run leads its own process group");
    assert!(ar_process::group_members(pgid).len() >= 3);
    run.cancel();
    let rest = ev.collect().await;
    let last = rest.last().unwrap();
    assert_eq!(last.kind, EventType::Exited);
    assert_eq!(last.code, -1);
    let status = run.wait().await;
    assert_eq!(status.state, State::Canceled);
    assert_eq!(status.exit_code, -1);
    assert!(group_gone(pgid).await, "no process of the group survives");
}

#[tokio::test]
async fn dropping_a_running_run_kills_it() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let marker = format!("ar-drop-{}", std::process::id());
    let run = rt
        .dispatch(cmd(&format!("sh -c 'sleep 300' {marker}")))
        .await
        .unwrap();
    let pid = find_process(&marker).await.expect("running");
    drop(run);
    assert!(group_gone(pid).await);
}

#[tokio::test]
async fn wait_without_reading_events_does_not_block() {
    let tmp = tempfile::tempdir().unwrap();
    let run = runtime(tmp.path())
        .dispatch(cmd("sh -c 'yes | head -n 5000'"))
        .await
        .unwrap();
    assert_eq!(run.wait().await.state, State::Succeeded);
}

#[tokio::test]
async fn bad_input_starts_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime(tmp.path());
    let e = rt
        .dispatch(RunSpec {
            agent: "nope".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(e, DispatchError::UnknownAgent(_)));
    let e = rt.dispatch(cmd("'unterminated")).await.unwrap_err();
    assert!(e.to_string().contains("unterminated"));
    let mut s = cmd("/bin/true");
    s.run_id = "../escape".into();
    assert!(rt.dispatch(s).await.is_err());
    let mut s = cmd("/bin/true");
    s.workdir = "relative".into();
    assert!(rt.dispatch(s).await.is_err());
    let mut s = cmd("/bin/true");
    s.env = vec!["NOEQUALS".into()];
    assert!(rt.dispatch(s).await.is_err());
    let e = rt.dispatch(cmd("/definitely/not/here")).await.unwrap_err();
    assert!(matches!(e, DispatchError::Process(_)), "{e}");
    let sub = crate::wire::sub_spec("gpt-5.5", crate::wire::policy("gpt-5.5"));
    let e = rt.dispatch(sub).await.unwrap_err();
    assert_eq!(e.code(), "chat_policy_unavailable");
    // nothing was created for the refused runs
    assert!(!tmp.path().join("escape").exists());
}

#[tokio::test]
async fn concurrent_dispatch_is_safe() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = Arc::new(runtime(tmp.path()));
    let mut tasks = Vec::new();
    for i in 0..20 {
        let rt = rt.clone();
        tasks.push(tokio::spawn(async move {
            let run = rt
                .dispatch(cmd(&format!("sh -c 'yes {i} | head -n 500'")))
                .await
                .unwrap();
            let events = collect(&run).await;
            (i, data_of(&events, EventType::Message))
        }));
    }
    for t in tasks {
        let (i, lines) = t.await.unwrap();
        assert_eq!(lines.len(), 500);
        assert!(lines.iter().all(|l| l == &i.to_string()));
    }
}

#[tokio::test]
async fn bench_small_run_reports_no_loss() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = ar_dispatch::bench::BenchConfig {
        overhead_iterations: 5,
        concurrent_runs: 4,
        lines_per_run: 2000,
        workspace: tmp.path().to_path_buf(),
    };
    let report = ar_dispatch::bench::run_bench(cfg).await.unwrap();
    assert_eq!(report.lines_received, 8000);
    assert_eq!(report.lines_lost, 0);
    assert_eq!(report.runs_failed, 0);
    assert!(report.to_string().contains("added p50"));
}

/// The full benchmark of the issue; run with
/// `cargo test --release -p ar-dispatch --test it bench_full -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn bench_full() {
    let tmp = tempfile::tempdir().unwrap();
    let report =
        ar_dispatch::bench::run_bench(ar_dispatch::bench::BenchConfig::standard(tmp.path()))
            .await
            .unwrap();
    println!("{report}");
    assert_eq!(report.lines_lost, 0);
}

#[tokio::test]
async fn a_large_prompt_does_not_block_dispatch() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = LocalRuntime::empty(LocalConfig::new(tmp.path())).with_named_command(
        NamedCommandProvider::parse_flag("deaf=sh -c 'echo not reading'").unwrap(),
    );
    let run = rt
        .dispatch(RunSpec {
            agent: "command:deaf".into(),
            prompt: "p".repeat(512 * 1024),
            ..Default::default()
        })
        .await
        .unwrap();
    let events = collect(&run).await;
    assert_eq!(data_of(&events, EventType::Message), vec!["not reading"]);
    assert_eq!(run.wait().await.state, State::Succeeded);
}
