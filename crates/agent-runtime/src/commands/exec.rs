//! `agent-runtime exec`: dispatches one run of an agent (locally, or on a named node with
//! `--machine`) and shows its events live. Events go to stdout (human-readable lines, or the raw
//! NDJSON RunEvents with `--json`); the binary's own diagnostics go to stderr. The exit status
//! is 0 when the run succeeded.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use ar_dispatch::node::node_token_from_env;
use ar_dispatch::{
    ClusterRouter, EventType, LocalConfig, LocalRuntime, NamedCommandProvider, RemoteRuntime,
    RunEvent, RunSpec, Runtime, State,
};
use std::io::Write as _;

/// Options of `exec`.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// The agent: codex, claude, opencode, command (PROMPT is the argv) or command:NAME.
    #[arg(long)]
    pub agent: String,
    /// Model passed to the agent CLI.
    #[arg(long)]
    pub model: Option<String>,
    /// Run on this peer (one of `--peer`); empty or `local` runs here.
    #[arg(long)]
    pub machine: Option<String>,
    /// A node: NAME=URL (e.g. `gpu=http://10.0.0.5:8091`); repeatable.
    #[arg(long = "peer", value_name = "NAME=URL")]
    pub peers: Vec<String>,
    /// Bearer token for the nodes (default: AGENT_RUNTIME_NODE_TOKEN).
    #[arg(long, hide_env_values = true)]
    pub token: Option<String>,
    /// Local `command:NAME` agents: NAME=PROGRAM; repeatable.
    #[arg(long = "command", value_name = "NAME=PROGRAM")]
    pub commands: Vec<String>,
    /// Working directory of a local run (default: the current directory).
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// Extra environment for the agent: KEY=VALUE; repeatable.
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Print the raw RunEvents as NDJSON.
    #[arg(long)]
    pub json: bool,
    /// The prompt (for `command`, the argv).
    pub prompt: String,
}

/// One event as a line for people.
fn human_line(event: &RunEvent) -> String {
    let detail = |data: &str, key: &str| -> String {
        serde_json::from_str::<serde_json::Value>(data)
            .ok()
            .and_then(|v| v.get(key).and_then(|s| s.as_str()).map(str::to_string))
            .unwrap_or_default()
    };
    match event.kind {
        EventType::Started => format!("[started] {}", event.data),
        EventType::Message => format!("[message] {}", event.data),
        EventType::Tool => format!(
            "[tool] {}: {}",
            detail(&event.data, "name"),
            detail(&event.data, "summary")
        ),
        EventType::Subagent => format!(
            "[subagent] {}: {}",
            detail(&event.data, "agent"),
            detail(&event.data, "description")
        ),
        EventType::Stdout => format!("[stdout] {}", event.data),
        EventType::Stderr => format!("[stderr] {}", event.data),
        EventType::Error if event.error_code.is_empty() => format!("[error] {}", event.data),
        EventType::Error => format!("[error] {}: {}", event.error_code, event.data),
        EventType::Exited if event.error_code.is_empty() => format!("[exited] code {}", event.code),
        EventType::Exited => format!("[exited] code {} ({})", event.code, event.error_code),
    }
}

fn runtime(args: &ExecArgs) -> anyhow::Result<ClusterRouter> {
    let root = std::env::temp_dir().join("agent-runtime-exec");
    let mut local = LocalRuntime::standard(LocalConfig::new(root));
    for flag in &args.commands {
        local = local.with_named_command(NamedCommandProvider::parse_flag(flag)?);
    }
    let mut router = ClusterRouter::new("local", Arc::new(local));
    let token = args
        .token
        .clone()
        .or_else(node_token_from_env)
        .unwrap_or_default();
    for flag in &args.peers {
        let Some((name, url)) = flag.split_once('=') else {
            anyhow::bail!("--peer {flag:?} must be NAME=URL");
        };
        let (name, url) = (name.trim(), url.trim());
        if name.is_empty() {
            anyhow::bail!("--peer {flag:?} has no name");
        }
        router = router.with_peer(
            name,
            Arc::new(RemoteRuntime::new(name, url, token.clone())?),
        );
    }
    Ok(router)
}

pub async fn run(args: ExecArgs) -> anyhow::Result<()> {
    let router = runtime(&args)?;
    let machine = args.machine.clone().unwrap_or_default();
    let remote = !(machine.is_empty() || machine == "local");
    let workdir = if remote {
        String::new()
    } else {
        let dir = match &args.workdir {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().context("current directory")?,
        };
        let dir = if dir.is_absolute() {
            dir
        } else {
            std::env::current_dir()
                .context("current directory")?
                .join(dir)
        };
        dir.display().to_string()
    };
    let spec = RunSpec {
        agent: args.agent.clone(),
        model: args.model.clone().unwrap_or_default(),
        prompt: args.prompt.clone(),
        workdir,
        env: args.env.clone(),
        machine,
        ..Default::default()
    };
    let run = router
        .dispatch(spec)
        .await
        .map_err(|error| anyhow::anyhow!("dispatch refused ({}): {error}", error.code()))?;
    let mut events = run
        .events()
        .ok_or_else(|| anyhow::anyhow!("the run's event stream was already taken"))?;
    let mut stdout = std::io::stdout();
    let mut interrupted = false;
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            _ = tokio::signal::ctrl_c(), if !interrupted => {
                interrupted = true;
                eprintln!("interrupted: cancelling run {}", run.id());
                run.cancel();
                continue;
            }
        };
        let Some(event) = event else { break };
        let mut line = if args.json {
            serde_json::to_string(&event).context("encoding an event")?
        } else {
            human_line(&event)
        };
        line.push('\n');
        // A closed stdout ends the command (dropping the run cancels it).
        stdout.write_all(line.as_bytes())?;
        stdout.flush()?;
    }
    let status = run.wait().await;
    match status.state {
        State::Succeeded => Ok(()),
        State::Canceled => anyhow::bail!("run {} was cancelled", run.id()),
        _ if status.err.is_empty() => {
            anyhow::bail!("run {} failed (exit code {})", run.id(), status.exit_code)
        }
        _ => anyhow::bail!(
            "run {} failed (exit code {}): {}",
            run.id(),
            status.exit_code,
            status.err
        ),
    }
}
