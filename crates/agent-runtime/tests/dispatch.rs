//! The binary's dispatch subcommands: `exec` of local command agents (human and NDJSON output),
//! and `node` serving a run to `exec --machine` over loopback.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use ar_test_support::require_cli;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_agent-runtime");

fn exec(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(BIN);
    command
        .arg("exec")
        .args(args)
        .env_remove("AGENT_RUNTIME_NODE_TOKEN")
        .env("AGENT_RUNTIME_LOG", "warn")
        .stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("agent-runtime exec runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).to_string()
}

#[test]
fn exec_shows_a_local_command_run_for_people() {
    let out = exec(
        &[
            "--agent",
            "command",
            "sh -c 'echo hello; echo oops >&2; echo world'",
        ],
        &[],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout} {}", text(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.first(), Some(&"[started] command"), "{stdout}");
    assert!(lines.contains(&"[message] hello"), "{stdout}");
    assert!(lines.contains(&"[message] world"), "{stdout}");
    assert!(lines.contains(&"[stderr] oops"), "{stdout}");
    assert_eq!(lines.last(), Some(&"[exited] code 0"), "{stdout}");
    let hello = lines.iter().position(|l| *l == "[message] hello");
    let world = lines.iter().position(|l| *l == "[message] world");
    assert!(hello < world, "{stdout}");
}

#[test]
fn exec_json_prints_only_ndjson_events_on_stdout() {
    let out = exec(
        &[
            "--json",
            "--agent",
            "command",
            "sh -c 'echo one; echo two; exit 3'",
        ],
        &[],
    );
    assert!(!out.status.success(), "a failed run fails the command");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("exit code 3"), "{stderr}");
    let stdout = text(&out.stdout);
    let events: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect();
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        types,
        ["started", "message", "message", "exited"],
        "{stdout}"
    );
    assert_eq!(events[1]["data"], "one");
    assert_eq!(events[2]["data"], "two");
    assert_eq!(events[3]["code"], 3);
    let run_id = events[0]["run_id"].as_str().unwrap_or_default();
    assert!(!run_id.is_empty());
    assert!(events
        .iter()
        .all(|e| e["run_id"] == run_id && e["time"].is_string()));
}

#[test]
fn exec_named_command_runs_in_the_workdir_with_the_prompt_on_stdin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let workdir = dir.path().canonicalize().expect("canonical dir");
    let workdir = workdir.display().to_string();
    let out = exec(
        &[
            "--json",
            "--command",
            "where=sh -c 'pwd; head -n 1'",
            "--workdir",
            &workdir,
            "--agent",
            "command:where",
            "the prompt line",
        ],
        &[],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout} {}", text(&out.stderr));
    let messages: Vec<String> = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["type"] == "message")
        .map(|e| e["data"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(messages, [workdir.as_str(), "the prompt line"], "{stdout}");
}

#[test]
fn exec_refuses_bad_input_without_output() {
    let unknown = exec(&["--agent", "nosuch", "hi"], &[]);
    assert!(!unknown.status.success());
    assert!(unknown.stdout.is_empty());
    assert!(
        text(&unknown.stderr).contains("unknown agent"),
        "{}",
        text(&unknown.stderr)
    );
    let machine = exec(
        &["--machine", "elsewhere", "--agent", "command", "true"],
        &[],
    );
    assert!(!machine.status.success());
    assert!(machine.stdout.is_empty());
    assert!(
        text(&machine.stderr).contains("unknown machine"),
        "{}",
        text(&machine.stderr)
    );
    let peer = exec(&["--peer", "noequals", "--agent", "command", "true"], &[]);
    assert!(!peer.status.success());
    assert!(
        text(&peer.stderr).contains("NAME=URL"),
        "{}",
        text(&peer.stderr)
    );
}

/// `exec --agent claude` reads the real CLI's stream with the parser the service uses: the
/// model's tool call is one `tool` event, its text a `message`, the tool result and the usage
/// line (no wire form) raw `stdout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_shows_a_real_claude_run() {
    use ar_test_support::mock_provider::{MockProvider, Reply, Usage};
    if !require_cli("claude") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.push(
        Reply::tool_call(
            "Bash",
            r#"{"command":"echo hi > c.txt","description":"write"}"#,
        )
        .usage(Usage::new(10, 3)),
    );
    mock.set_fallback(Some(Reply::text("All done").usage(Usage::new(10, 3))));
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    let env = [
        format!("HOME={}", home.display()),
        format!("XDG_CONFIG_HOME={}/.config", home.display()),
        format!("ANTHROPIC_BASE_URL={}", mock.root_url()),
        "ANTHROPIC_API_KEY=sk-ant-mock".to_string(),
        "DISABLE_TELEMETRY=1".to_string(),
        "DISABLE_AUTOUPDATER=1".to_string(),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1".to_string(),
    ];
    std::fs::create_dir_all(&home).expect("home");
    let mut args = vec![
        "--json".to_string(),
        "--agent".into(),
        "claude".into(),
        "--model".into(),
        "claude-sonnet-4-5".into(),
        "--workdir".into(),
        work.display().to_string(),
    ];
    for pair in &env {
        args.extend(["--env".to_string(), pair.clone()]);
    }
    args.push("write a file".into());
    let out = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        exec(&args, &[])
    })
    .await
    .expect("exec ran");
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout} {}", text(&out.stderr));
    let events: Vec<Value> = stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let of = |kind: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["type"] == kind)
            .map(|e| e["data"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(
        of("tool"),
        [r#"{"name":"Bash","summary":"echo hi > c.txt"}"#],
        "{stdout}"
    );
    assert!(of("message").contains(&"All done".to_string()), "{stdout}");
    assert!(
        of("stdout").iter().any(|line| line.contains("tool_result")),
        "{stdout}"
    );
    assert_eq!(
        events.last().map(|e| e["type"].clone()),
        Some("exited".into())
    );
}

/// A node process, killed when dropped.
struct Node {
    child: Child,
    url: String,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `agent-runtime node` on a free loopback port (through `AGENT_RUNTIME_NODE_ADDR`).
fn start_node(token: &str, commands: &[&str], root: &std::path::Path) -> Node {
    let mut command = Command::new(BIN);
    command
        .arg("node")
        .arg("--root")
        .arg(root)
        .env("AGENT_RUNTIME_NODE_ADDR", "127.0.0.1:0")
        .env("AGENT_RUNTIME_NODE_TOKEN", token)
        .env("AGENT_RUNTIME_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for flag in commands {
        command.arg("--command").arg(flag);
    }
    let mut child = command.spawn().expect("node starts");
    let stderr = child.stderr.take().expect("stderr");
    let (found, listening) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some((_, rest)) = line.split_once(" listening on ") {
                let url = rest
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string();
                let _ = found.send(url);
            }
        }
    });
    let url = listening
        .recv_timeout(Duration::from_secs(30))
        .expect("node reports its address");
    Node { child, url }
}

#[test]
fn node_serves_a_run_to_exec_machine_over_loopback() {
    let root = tempfile::tempdir().expect("tempdir");
    let node = start_node("node-secret", &["greet=head -n 1"], root.path());
    let peer = format!("gpu={}", node.url);
    let out = exec(
        &[
            "--json",
            "--machine",
            "gpu",
            "--peer",
            &peer,
            "--agent",
            "command:greet",
            "hello over the wire",
        ],
        &[("AGENT_RUNTIME_NODE_TOKEN", "node-secret")],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout} {}", text(&out.stderr));
    let events: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect();
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(types.first(), Some(&"started"), "{stdout}");
    assert_eq!(types.last(), Some(&"exited"), "{stdout}");
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "message" && e["data"] == "hello over the wire"),
        "{stdout}"
    );

    // Human output over the wire too.
    let human = exec(
        &[
            "--machine",
            "gpu",
            "--peer",
            &peer,
            "--agent",
            "command:greet",
            "hi",
        ],
        &[("AGENT_RUNTIME_NODE_TOKEN", "node-secret")],
    );
    let human_out = text(&human.stdout);
    assert!(
        human.status.success(),
        "{human_out} {}",
        text(&human.stderr)
    );
    assert!(
        human_out.lines().any(|l| l == "[message] hi"),
        "{human_out}"
    );

    // A wrong token is refused by the node: no events, an error on stderr.
    let refused = exec(
        &[
            "--machine",
            "gpu",
            "--peer",
            &peer,
            "--agent",
            "command:greet",
            "hi",
        ],
        &[("AGENT_RUNTIME_NODE_TOKEN", "wrong")],
    );
    assert!(!refused.status.success());
    assert!(refused.stdout.is_empty(), "{}", text(&refused.stdout));
    assert!(
        text(&refused.stderr).contains("401"),
        "{}",
        text(&refused.stderr)
    );

    // The node never runs a caller-chosen argv.
    let raw = exec(
        &[
            "--machine",
            "gpu",
            "--peer",
            &peer,
            "--agent",
            "command",
            "echo hi",
        ],
        &[("AGENT_RUNTIME_NODE_TOKEN", "node-secret")],
    );
    assert!(!raw.status.success());
    assert!(raw.stdout.is_empty(), "{}", text(&raw.stdout));
}
