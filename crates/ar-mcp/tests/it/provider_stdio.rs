//! The `stdio` provider transport against the reference server-everything run as
//! `node …/dist/index.js stdio` (its own process group, gone after close, started again after
//! it was killed, the provider's env and no other), and against shell commands that fail
//! (their errors name the command and quote its stderr, never the env).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use ar_core::mcp::McpError;
use ar_core::secret::Secret;
use ar_mcp::provider::{connect, ProviderConnection, ProviderSpec, StdioProvider};
use ar_process::{group_members, ProcessSpec};
use ar_test_support::mcp_everything::ServerEverything;
use serde_json::{json, Value};

fn everything(entry: &Path, env: BTreeMap<String, Secret>, timeout: Duration) -> StdioProvider {
    StdioProvider::new(
        "node".into(),
        vec![entry.display().to_string(), "stdio".into()],
        env,
        std::env::temp_dir(),
        timeout,
    )
}

fn sh(script: &str, env: BTreeMap<String, Secret>) -> StdioProvider {
    StdioProvider::new(
        "sh".into(),
        vec!["-c".into(), script.into()],
        env,
        std::env::temp_dir(),
        Duration::from_secs(5),
    )
}

/// The live members of the group, once the kernel has torn the killed ones down.
async fn members_after_kill(pgid: u32) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = group_members(pgid as i32);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until every thread of the killed process `pid` is gone. The leader shows as a
/// zombie while its other threads are still exiting (node has several): only once they are
/// gone are its pipes closed and its exit waitable, which is what the provider checks.
async fn threads_gone(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let task_dir = format!("/proc/{pid}/task");
    while Instant::now() < deadline {
        let threads = std::fs::read_dir(&task_dir)
            .map(Iterator::count)
            .unwrap_or(0);
        if threads <= 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the threads of {pid} did not exit within 5 s");
}

/// `kill -KILL pid`, through ar-process like every spawn.
async fn kill_hard(pid: u32) {
    let spec = ProcessSpec::new("kill", std::env::temp_dir()).args(["-KILL", &pid.to_string()]);
    let (_, exit) = ar_process::capture_output(&spec, 1024)
        .await
        .expect("kill runs");
    assert!(exit.success(), "kill {pid}: {exit}");
}

#[tokio::test]
async fn server_everything_over_stdio_lists_and_calls_in_its_own_group_gone_after_close() {
    let Some(entry) = ServerEverything::required_entry_point() else {
        return;
    };
    let mcp = everything(&entry, BTreeMap::new(), Duration::from_secs(20));
    assert_eq!(
        mcp.pid().await,
        None,
        "nothing is started before the first request"
    );

    let tools = mcp.list_tools().await.expect("tools");
    let echo = tools.iter().find(|tool| tool.name == "echo").expect("echo");
    assert!(tools.iter().any(|tool| tool.name == "get-sum"), "{tools:?}");
    assert_eq!(echo.input_schema["properties"]["message"]["type"], "string");
    assert!(!echo.mutating);
    assert_eq!(echo.risk_level.as_deref(), Some("read"));
    assert_eq!(echo.category, "mcp");

    let context = json!({"app": "app-1", "run": "run-1"});
    let echoed = mcp
        .call_tool("echo", json!({"message": "hello"}), &context)
        .await
        .expect("echo");
    assert_eq!(echoed.content, "Echo: hello");
    assert!(!echoed.is_error);
    let sum = mcp
        .call_tool("get-sum", json!({"a": 2, "b": 3}), &context)
        .await
        .expect("get-sum");
    assert_eq!(sum.content, "The sum of 2 and 3 is 5.");
    let unknown = mcp
        .call_tool("no-such-tool", json!({}), &context)
        .await
        .expect("an output");
    assert!(unknown.is_error, "{unknown:?}");

    // One process for all of it, leading a group of its own.
    let pid = mcp.pid().await.expect("started");
    assert!(
        group_members(pid as i32).contains(&pid),
        "pid {pid} leads its group"
    );
    mcp.close().await;
    assert_eq!(mcp.pid().await, None);
    assert_eq!(members_after_kill(pid).await, Vec::<u32>::new());
}

#[tokio::test]
async fn a_killed_process_is_started_again_by_the_next_call() {
    let Some(entry) = ServerEverything::required_entry_point() else {
        return;
    };
    let mcp = everything(&entry, BTreeMap::new(), Duration::from_secs(20));
    let first = mcp
        .call_tool("echo", json!({"message": "one"}), &Value::Null)
        .await
        .expect("first call");
    assert_eq!(first.content, "Echo: one");
    let pid = mcp.pid().await.expect("started");
    kill_hard(pid).await;
    assert_eq!(members_after_kill(pid).await, Vec::<u32>::new());
    threads_gone(pid).await;

    let second = mcp
        .call_tool("echo", json!({"message": "two"}), &Value::Null)
        .await
        .expect("the call after the kill");
    assert_eq!(second.content, "Echo: two");
    let restarted = mcp.pid().await.expect("started again");
    assert_ne!(restarted, pid);
    mcp.close().await;
    assert_eq!(members_after_kill(restarted).await, Vec::<u32>::new());
}

#[tokio::test]
async fn a_slow_call_times_out_and_the_process_is_kept() {
    let Some(entry) = ServerEverything::required_entry_point() else {
        return;
    };
    let mcp = everything(&entry, BTreeMap::new(), Duration::from_millis(500));
    mcp.list_tools().await.expect("tools");
    let pid = mcp.pid().await;
    let started = Instant::now();
    let err = mcp
        .call_tool(
            "trigger-long-running-operation",
            json!({"duration": 5, "steps": 5}),
            &Value::Null,
        )
        .await
        .expect_err("too slow");
    assert!(
        matches!(&err, McpError::Timeout(reason) if reason.contains("node")),
        "{err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let echoed = mcp
        .call_tool("echo", json!({"message": "still"}), &Value::Null)
        .await
        .expect("the same process answers");
    assert_eq!(echoed.content, "Echo: still");
    assert_eq!(mcp.pid().await, pid);
    mcp.close().await;
}

#[tokio::test]
async fn the_process_gets_the_provider_env_and_only_the_standard_rest() {
    let Some(entry) = ServerEverything::required_entry_point() else {
        return;
    };
    let env = BTreeMap::from([("PROVIDER_API_KEY".to_string(), Secret::new("k-123"))]);
    let spec = ProviderSpec::Stdio {
        command: "node".into(),
        args: vec![entry.display().to_string(), "stdio".into()],
        env,
        workdir: std::env::temp_dir(),
    };
    let mcp = connect(spec, Duration::from_secs(20)).expect("a connection");
    let shown = format!("{mcp:?}");
    assert!(
        shown.contains("PROVIDER_API_KEY") && !shown.contains("k-123"),
        "{shown}"
    );
    let printed = mcp
        .call_tool("get-env", json!({}), &Value::Null)
        .await
        .expect("get-env");
    let env: Value = serde_json::from_str(&printed.content).expect("the env as JSON");
    assert_eq!(env["PROVIDER_API_KEY"], "k-123");
    assert!(env.get("PATH").is_some(), "{env}");
    // Cargo gives the test process its manifest dir; the provider is not given it.
    assert!(std::env::var("CARGO_MANIFEST_DIR").is_ok());
    assert!(env.get("CARGO_MANIFEST_DIR").is_none(), "{env}");
    mcp.close().await;
}

#[tokio::test]
async fn a_failing_command_is_named_with_its_stderr_never_its_env() {
    let env = BTreeMap::from([("TOKEN".to_string(), Secret::new("s3cr3t-value"))]);
    let mcp = sh("echo \"cannot load config\" >&2; exit 3", env.clone());
    let err = mcp.list_tools().await.expect_err("exits at once");
    let message = err.to_string();
    assert!(matches!(err, McpError::Transport(_)), "{err:?}");
    assert!(message.contains("MCP provider process sh"), "{message}");
    assert!(message.contains("exit status 3"), "{message}");
    assert!(message.contains("cannot load config"), "{message}");
    assert!(!message.contains("s3cr3t-value"), "{message}");

    let missing = StdioProvider::new(
        "no-such-mcp-provider".into(),
        Vec::new(),
        env,
        std::env::temp_dir(),
        Duration::from_secs(5),
    );
    let err = missing
        .call_tool("t", json!({}), &Value::Null)
        .await
        .expect_err("not found");
    let message = err.to_string();
    assert!(message.contains("no-such-mcp-provider"), "{message}");
    assert!(!message.contains("s3cr3t-value"), "{message}");
}

#[tokio::test]
async fn a_process_that_never_answers_the_handshake_times_out_and_is_not_kept() {
    let mcp = sh("echo waiting >&2; exec sleep 300", BTreeMap::new())
        .with_connect_timeout(Duration::from_millis(300));
    let started = Instant::now();
    let err = mcp.list_tools().await.expect_err("no handshake");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(&err, McpError::Timeout(reason)
            if reason.contains("MCP provider process sh") && reason.contains("waiting")),
        "{err:?}"
    );
    assert_eq!(mcp.pid().await, None, "the failed process is not kept");
}
