//! The `agents` and `runs` commands in a real terminal: tmux runs a shell, the test types
//! command lines into it (`send-keys`) and reads the screen (`capture-pane`). The service is the
//! real binary without a configured token, so the commands find the token `serve` saved beside
//! its database; the model is the mock provider (a stand-in for a vendor).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ar_test_support::mock_provider::{MockProvider, Reply, Usage};
use ar_test_support::service::*;
use serde_json::json;

use crate::BIN;

/// A tmux server of the test's own (its own socket), killed when dropped. Every tmux command
/// runs with the terminal's environment, which new panes inherit.
struct Terminal {
    socket: PathBuf,
    env: Env,
}

impl Terminal {
    /// A detached session running `bash` with exactly `env`, 160 columns wide.
    fn start(dir: &Path, env: &Env) -> Terminal {
        let terminal = Terminal {
            socket: dir.join("tmux.sock"),
            env: env.clone(),
        };
        let mut command = Command::new("tmux");
        command
            .arg("-S")
            .arg(&terminal.socket)
            .args(["-f", "/dev/null", "new-session", "-d", "-s", "cli"])
            .args(["-x", "160", "-y", "50", "bash --norc --noprofile"])
            .current_dir(dir)
            .env_clear()
            .envs(env);
        let status = command.status().expect("start tmux");
        assert!(status.success(), "tmux new-session: {status}");
        terminal
    }

    fn tmux(&self, args: &[&str]) -> String {
        let output = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .env_clear()
            .envs(&self.env)
            .output()
            .expect("run tmux");
        assert!(output.status.success(), "tmux {args:?}: {output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Types `line` into `pane` and presses Enter.
    fn type_line(&self, pane: &str, line: &str) {
        self.tmux(&["send-keys", "-t", pane, "-l", line]);
        self.tmux(&["send-keys", "-t", pane, "Enter"]);
    }

    /// What `pane` shows, its scrollback included, wrapped lines joined.
    fn screen(&self, pane: &str) -> String {
        self.tmux(&["capture-pane", "-p", "-J", "-t", pane, "-S", "-500"])
    }

    /// Waits (bounded) until `pane` shows `needle`; returns the screen.
    async fn wait_for(&self, pane: &str, needle: &str) -> String {
        self.wait_until(pane, needle, |screen| screen.contains(needle))
            .await
    }

    /// Waits (bounded) until a line of `pane` starts with `prefix` (what a command prints, not
    /// the command line typed); returns the screen.
    async fn wait_line(&self, pane: &str, prefix: &str) -> String {
        self.wait_until(pane, prefix, |screen| {
            screen.lines().any(|line| line.starts_with(prefix))
        })
        .await
    }

    async fn wait_until(&self, pane: &str, needle: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let screen = self.screen(pane);
            if done(&screen) {
                return screen;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!("pane {pane} never showed {needle:?}; it shows:\n{screen}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Types a command, waits for its `exit=N` line, returns N and the screen.
    async fn run(&self, pane: &str, command: &str, marker: &str) -> (i32, String) {
        self.type_line(pane, &format!("{command}; echo \"{marker}=$?\""));
        let screen = self.wait_line(pane, &format!("{marker}=")).await;
        let code = screen
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{marker}=")))
            .and_then(|code| code.trim().parse().ok())
            .unwrap_or_else(|| panic!("no exit code for {command:?} in:\n{screen}"));
        (code, screen)
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for pane in ["cli:0.0", "cli:0.1"] {
                if let Ok(output) = Command::new("tmux")
                    .arg("-S")
                    .arg(&self.socket)
                    .args(["capture-pane", "-p", "-J", "-t", pane, "-S", "-500"])
                    .output()
                {
                    eprintln!(
                        "----- pane {pane} -----\n{}",
                        String::from_utf8_lossy(&output.stdout)
                    );
                }
            }
        }
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .status();
    }
}

/// True when tmux is installed; missing, a loud skip locally and a failure under `CI=true`.
fn require_tmux() -> bool {
    if Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return true;
    }
    if std::env::var("CI").is_ok_and(|value| value == "true") {
        panic!("tmux is required under CI=true (.ci/steps/install-tmux.sh)");
    }
    eprintln!("!!!!!! SKIPPING: tmux is not installed (run .ci/steps/install-tmux.sh) !!!!!!");
    false
}

/// The service's environment without a token (it generates one), and the terminal's: the
/// same data directory, the binary's directory on `PATH`, the app, the run's key.
fn environments(dir: &Path, mock: &MockProvider) -> (Env, Env) {
    let mut service = sqlite_env(dir, mock);
    service.remove("AGENT_RUNTIME_SERVICE_TOKEN");
    let mut shell = base_env(dir);
    let bin_dir = Path::new(BIN).parent().expect("binary directory");
    let path = format!("{}:{}", bin_dir.display(), shell["PATH"]);
    shell.insert("PATH".into(), path);
    shell.insert(
        "AGENT_RUNTIME_SQLITE_DSN".into(),
        service["AGENT_RUNTIME_SQLITE_DSN"].clone(),
    );
    shell.insert("AGENT_RUNTIME_APP_ID".into(), APP.into());
    shell.insert("RUN_KEY".into(), RUN_API_KEY.into());
    shell.insert("LANG".into(), "C.UTF-8".into());
    shell.insert("PS1".into(), "$ ".into());
    (service, shell)
}

fn script(mock: &MockProvider) {
    mock.push(Reply::tool_call("get_context", "{}").usage(Usage::new(100, 10)));
    mock.push(
        Reply::tool_call(
            "request_approval",
            json!({"title": "Close T-7?", "summary": "The fix is deployed."}).to_string(),
        )
        .usage(Usage::new(120, 12)),
    );
    mock.push(
        Reply::text_deltas(["All ", "done", "."])
            .chunk_delay(Duration::from_millis(400))
            .usage(Usage::new(140, 14)),
    );
}

/// The position of each needle in `screen`, in order; panics on one missing or out of order.
fn in_order(screen: &str, needles: &[&str]) {
    let mut from = 0;
    for needle in needles {
        match screen[from..].find(needle) {
            Some(at) => from += at + needle.len(),
            None => panic!("{needle:?} missing or out of order in:\n{screen}"),
        }
    }
}

#[tokio::test]
async fn watch_shows_the_run_live_and_the_commands_drive_it_from_a_terminal() {
    if !require_tmux() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockProvider::start().await;
    let (service_env, shell_env) = environments(dir.path(), &mock);
    let server = Server::start(BIN, &service_env).await;
    let url = format!("http://{}", server.addr);
    let term = Terminal::start(dir.path(), &shell_env);
    let shell = "cli:0.0";
    term.type_line(shell, &format!("export AGENT_RUNTIME_URL={url}"));
    std::fs::write(
        dir.path().join("agent.yaml"),
        "id: closer\nname: Closer\nsystem_prompt: Close tickets.\nallowed_tools: [get_context, request_approval]\n",
    )
    .expect("agent file");

    let (code, screen) = term
        .run(shell, "agent-runtime agents apply -f agent.yaml", "e1")
        .await;
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("applied agent closer (Closer)"), "{screen}");

    script(&mock);
    term.type_line(
        shell,
        "agent-runtime runs start --agent closer --target ticket:T-7 -i 'Close it.' \
         --model openai_compatible:mock-model --endpoint mock --api-key-env RUN_KEY --watch; echo \"e2=$?\"",
    );
    let screen = term
        .wait_for(shell, "approve: agent-runtime runs approve")
        .await;
    let run_id = screen
        .lines()
        .find_map(|line| line.strip_prefix("started run "))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the run id")
        .to_string();
    in_order(
        &screen,
        &[
            "started",
            "tool get_context",
            "tool get_context done in ",
            "usage: 100 in · 10 out · 110 tokens so far",
            "tool request_approval",
            "usage: 220 in · 22 out · 242 tokens so far",
            "PAUSED: human_approval",
            "asks (approval_request): Close T-7? - The fix is deployed.",
            &format!("approve: agent-runtime runs approve {run_id}"),
        ],
    );
    // The progress line under the timeline is redrawn while the run waits.
    let progress = |screen: &str| {
        screen
            .lines()
            .rev()
            .find(|line| line.contains("paused ·") && line.contains("tool calls"))
            .map(str::to_string)
    };
    let first = progress(&term.screen(shell)).expect("a progress line");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let second = progress(&term.screen(shell)).expect("a progress line");
    assert_ne!(first, second, "the progress line is redrawn");
    assert!(second.contains("2 tool calls · 242 tokens"), "{second}");

    // Someone approves from another terminal; the watch streams the rest and exits 0.
    let cwd = dir.path().display().to_string();
    term.tmux(&[
        "split-window",
        "-t",
        "cli:0",
        "-v",
        "-c",
        &cwd,
        "bash --norc --noprofile",
    ]);
    let other = "cli:0.1";
    term.type_line(other, &format!("export AGENT_RUNTIME_URL={url}"));
    let (code, screen) = term
        .run(
            other,
            &format!("agent-runtime runs approve {run_id} --actor ops"),
            "e3",
        )
        .await;
    assert_eq!(code, 0, "{screen}");
    // The answer appears as it streams: its first words before the rest.
    let partial = term
        .wait_until(shell, "a partly streamed answer", |screen| {
            screen.contains("assistant: All") && !screen.contains("All done.")
        })
        .await;
    assert!(!partial.contains("COMPLETED"), "{partial}");
    let screen = term.wait_line(shell, "e2=").await;
    assert!(screen.contains("e2=0"), "{screen}");
    in_order(
        &screen,
        &[
            "PAUSED: human_approval",
            "resumed",
            "assistant: All done.",
            "usage: 360 in · 36 out · 396 tokens so far",
            "COMPLETED after",
            "· 2 tool calls · 396 tokens",
        ],
    );
    cli_commands(&term, other, &run_id).await;
    drop(server);
}

/// list, get, events, and the exit codes of a refusal and an unknown run.
async fn cli_commands(term: &Terminal, pane: &str, run_id: &str) {
    let (code, screen) = term
        .run(pane, "agent-runtime runs list --status completed", "e4")
        .await;
    assert_eq!(code, 0);
    assert!(
        screen
            .lines()
            .any(|l| l.starts_with(run_id) && l.contains("completed")),
        "{screen}"
    );
    let (code, screen) = term
        .run(
            pane,
            &format!("agent-runtime runs events {run_id} --json | tail -n 1"),
            "e5",
        )
        .await;
    assert_eq!(code, 0);
    assert!(screen.contains("\"type\":\"run.completed\""), "{screen}");
    let (code, screen) = term
        .run(pane, "agent-runtime runs get run_nope", "e6")
        .await;
    assert_eq!(code, 3, "{screen}");
    assert!(screen.contains("error: GET /v1/runs/run_nope answered 404: run not found"));
    let (code, _) = term
        .run(pane, &format!("agent-runtime runs pause {run_id}"), "e7")
        .await;
    assert_eq!(code, 4, "pausing a completed run is refused");
    let (code, _) = term
        .run(
            pane,
            "agent-runtime runs list --token-file data/service-token",
            "e8",
        )
        .await;
    assert_eq!(code, 0, "the token file given");
    let (code, screen) = term
        .run(pane, "agent-runtime runs list --token-file /dev/null", "e9")
        .await;
    assert_eq!(code, 2, "{screen}");
    assert!(
        screen.contains("error: token file /dev/null is empty"),
        "{screen}"
    );
}

#[tokio::test]
async fn exit_codes_follow_the_runs_outcome() {
    if !require_tmux() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockProvider::start().await;
    let (service_env, shell_env) = environments(dir.path(), &mock);
    let server = Server::start(BIN, &service_env).await;
    let term = Terminal::start(dir.path(), &shell_env);
    let shell = "cli:0.0";
    term.type_line(
        shell,
        &format!("export AGENT_RUNTIME_URL=http://{}", server.addr),
    );
    let ask = json!({"title": "Ship it?"}).to_string();
    mock.push(Reply::tool_call("request_approval", ask.clone()));
    mock.push(Reply::tool_call("request_approval", ask));
    std::fs::write(
        dir.path().join("agents.json"),
        r#"{"agents": [{"id": "shipper", "name": "Shipper", "allowed_tools": ["request_approval"]}]}"#,
    )
    .expect("agents file");
    let (code, _) = term
        .run(
            shell,
            "agent-runtime agents apply -f agents.json --json",
            "a1",
        )
        .await;
    assert_eq!(code, 0);
    let (code, screen) = term
        .run(
            shell,
            "RUN=$(agent-runtime runs start --agent shipper --model openai_compatible:m \
             --endpoint mock --api-key-env RUN_KEY --json | sed 's/^{\"id\":\"\\([^\"]*\\)\".*/\\1/')",
            "a2",
        )
        .await;
    assert_eq!(code, 0, "{screen}");
    let (code, screen) = term
        .run(shell, "agent-runtime runs watch $RUN --exit-on-pause", "a3")
        .await;
    assert_eq!(code, 9, "paused: {screen}");
    let (code, screen) = term
        .run(shell, "agent-runtime runs reply $RUN 'Add notes.'", "a4")
        .await;
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("status:"), "{screen}");
    let (code, _) = term
        .run(
            shell,
            "agent-runtime runs watch $RUN --exit-on-pause --json > w.jsonl",
            "a5",
        )
        .await;
    assert_eq!(code, 9, "paused again after the changes were asked for");
    let lines = std::fs::read_to_string(dir.path().join("w.jsonl")).expect("watch output");
    let types: Vec<String> = lines
        .lines()
        .map(|line| {
            serde_json::from_str::<serde_json::Value>(line).expect("a JSON line")["type"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(
        types.iter().filter(|t| *t == "run.paused").count(),
        2,
        "{types:?}"
    );
    let (code, _) = term
        .run(shell, "agent-runtime runs cancel $RUN", "a6")
        .await;
    assert_eq!(code, 0);
    let (code, screen) = term.run(shell, "agent-runtime runs watch $RUN", "a7").await;
    assert_eq!(code, 8, "cancelled: {screen}");
    assert!(screen.contains("CANCELLED after"), "{screen}");
    let (code, _) = term
        .run(
            shell,
            "AGENT_RUNTIME_SERVICE_TOKEN=wrong agent-runtime runs list",
            "a8",
        )
        .await;
    assert_eq!(code, 5, "a wrong token");
    let (code, _) = term
        .run(
            shell,
            "agent-runtime runs list --url http://127.0.0.1:9",
            "a9",
        )
        .await;
    assert_eq!(code, 6, "nothing listens there");
    drop(server);
}
