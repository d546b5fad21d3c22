//! `CodexAppServerRuntime`: runs codex through `codex app-server` (JSON-RPC over stdio) so a running turn can be steered with `signal`.
//!
//! One process per run. The driver sends `initialize`/`initialized`, `thread/start` (cwd,
//! model, sandbox `workspace-write`, approval `never`) and `turn/start` with the prompt, then
//! maps notifications to events: completed `agentMessage` → `message`, `commandExecution`,
//! `fileChange`, `mcpToolCall`, `webSearch`, `dynamicToolCall` → `tool`,
//! `collabAgentToolCall` → `subagent`, retrying `error` notices → `stderr`.
//! `signal(input)` steers the running turn (`turn/steer`); if the turn just ended it becomes
//! the next turn. The run ends when a turn completes and no input is waiting: stdin is closed
//! and the process group is swept. A turn that ends `failed` fails the run.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

use ar_process::{EnvPolicy, ProcessSpec, StdinMode};
use async_trait::async_trait;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::event::{EventType, RunEvent, State, Status};
use crate::local::LocalConfig;
use crate::providers::Classified;
use crate::run::{run_id_for, DispatchError, Run, RunControl, RunError, RunSink, Runtime};
use crate::spec::{RunSpec, SpecError};

/// Runs the `codex` agent through `codex app-server`.
#[derive(Debug, Clone)]
pub struct CodexAppServerRuntime {
    config: LocalConfig,
    program: String,
    extra_args: Vec<String>,
}

impl CodexAppServerRuntime {
    /// `program` is the codex CLI; `extra_args` go before `app-server` (e.g. `-c` overrides).
    pub fn new(config: LocalConfig, program: impl Into<String>, extra_args: Vec<String>) -> Self {
        Self {
            config,
            program: program.into(),
            extra_args,
        }
    }
}

struct AppControl {
    token: CancellationToken,
    killer: ar_process::GroupKiller,
    inputs: mpsc::UnboundedSender<String>,
}

#[async_trait]
impl RunControl for AppControl {
    fn cancel(&self) {
        self.token.cancel();
        self.killer.kill();
    }
    async fn signal(&self, input: &str) -> Result<(), RunError> {
        self.inputs
            .send(input.to_string())
            .map_err(|_| RunError::Finished)
    }
}

#[async_trait]
impl Runtime for CodexAppServerRuntime {
    fn name(&self) -> &str {
        "codex-app-server"
    }

    async fn dispatch(&self, spec: RunSpec) -> Result<Run, DispatchError> {
        spec.validate_authority()?;
        if !spec.authority.is_empty() {
            return Err(DispatchError::Policy {
                code: crate::consts::ERROR_CHAT_POLICY_UNAVAILABLE,
                message: "codex app-server runs only serve the legacy authority".into(),
            });
        }
        if spec.agent != "codex" {
            return Err(DispatchError::UnknownAgent(spec.agent.clone()));
        }
        let run_id = run_id_for(&spec)?;
        let workdir = if spec.workdir.is_empty() {
            self.config.workspace_root.join(&run_id)
        } else {
            PathBuf::from(&spec.workdir)
        };
        if !workdir.is_absolute() {
            return Err(DispatchError::Spec(SpecError::Decode(format!(
                "Workdir {:?} must be absolute",
                spec.workdir
            ))));
        }
        let mut env = EnvPolicy {
            inherit: self.config.env_allow.clone(),
            set: self.config.base_env.clone(),
        };
        env.set.extend(spec.env_pairs()?);
        let mut args = self.extra_args.clone();
        args.push("app-server".into());
        let pspec = ProcessSpec {
            program: self.program.clone(),
            args,
            workdir: workdir.clone(),
            create_workdir: true,
            workdir_mode: 0o755,
            env,
            stdin: StdinMode::Piped,
        };
        let mut process = ar_process::spawn(&pspec)?;
        let Some(stdin) = process.take_stdin() else {
            return Err(DispatchError::Process(
                ar_process::ProcessError::InvalidSpec("app-server stdin unavailable".into()),
            ));
        };
        let token = CancellationToken::new();
        let (sink, parts) = RunSink::channel(run_id, token.clone());
        let (tx, rx) = mpsc::unbounded_channel();
        let control = Arc::new(AppControl {
            token,
            killer: process.killer(),
            inputs: tx,
        });
        let setup = Setup {
            cwd: workdir.to_string_lossy().to_string(),
            model: spec.model.clone(),
            prompt: spec.prompt.clone(),
        };
        tokio::spawn(drive(process, stdin, sink, rx, setup));
        Ok(Run::new(parts, control))
    }
}

struct Setup {
    cwd: String,
    model: String,
    prompt: String,
}

struct Rpc {
    stdin: Option<ChildStdin>,
    next_id: i64,
}

impl Rpc {
    async fn send(&mut self, msg: Value) -> bool {
        let Some(stdin) = self.stdin.as_mut() else {
            return false;
        };
        let mut line = msg.to_string().into_bytes();
        line.push(b'\n');
        stdin.write_all(&line).await.is_ok() && stdin.flush().await.is_ok()
    }
    async fn request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"id": id, "method": method, "params": params}))
            .await;
        id
    }
}

fn text_input(text: &str) -> Value {
    json!([{ "type": "text", "text": text, "text_elements": [] }])
}

/// Classifies a completed app-server thread item.
pub fn classify_item(item: &Value) -> Option<Classified> {
    let s = |k: &str| {
        item.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let tool = |name: &str, summary: String| Classified {
        kind: EventType::Tool,
        data: json!({"name": name, "summary": summary}).to_string(),
    };
    match item.get("type").and_then(Value::as_str)? {
        "agentMessage" => Some(Classified {
            kind: EventType::Message,
            data: s("text"),
        }),
        "commandExecution" => {
            let cmd = match item.get("command") {
                Some(Value::String(c)) => c.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            Some(tool("shell", cmd))
        }
        "fileChange" => {
            let paths: Vec<String> = item
                .get("changes")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|c| c.get("path").and_then(Value::as_str).map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            Some(tool("apply_patch", paths.join(", ")))
        }
        "mcpToolCall" => Some(tool(
            &format!("{}.{}", s("server"), s("tool")),
            item.get("arguments")
                .map(|a| a.to_string())
                .unwrap_or_default(),
        )),
        "dynamicToolCall" => Some(tool(
            &s("tool"),
            item.get("arguments")
                .map(|a| a.to_string())
                .unwrap_or_default(),
        )),
        "webSearch" => Some(tool("web_search", s("query"))),
        "collabAgentToolCall" => Some(Classified {
            kind: EventType::Subagent,
            data: json!({"description": s("prompt"), "agent": s("tool")}).to_string(),
        }),
        _ => None,
    }
}

enum TurnState {
    Starting,
    Running(String),
    Idle,
}

async fn drive(
    mut process: ar_process::Process,
    stdin: ChildStdin,
    sink: RunSink,
    mut inputs: mpsc::UnboundedReceiver<String>,
    setup: Setup,
) {
    let run_id = sink.id().to_string();
    let token = sink.cancel_token().clone();
    let killer = process.killer();
    sink.emit(RunEvent::new(&run_id, EventType::Started, "codex"))
        .await;
    let mut rpc = Rpc {
        stdin: Some(stdin),
        next_id: 0,
    };
    let mut stdout = process.take_stdout();
    let mut stderr = process.take_stderr_lines();
    let init_id = rpc
        .request(
            "initialize",
            json!({"clientInfo": {"name": "agent-runtime", "version": env!("CARGO_PKG_VERSION")}}),
        )
        .await;
    let mut thread_id: Option<String> = None;
    let mut thread_req: Option<i64> = None;
    let mut turn_req: Option<i64> = None;
    let mut turn = TurnState::Starting;
    let mut queued: VecDeque<String> = VecDeque::new();
    let mut steer_reqs: Vec<(i64, String)> = Vec::new();
    let mut failure: Option<String> = None;
    let mut done = false;
    let mut canceled = false;
    let mut inputs_open = true;

    while !done {
        tokio::select! {
            _ = token.cancelled(), if !canceled => {
                canceled = true;
                killer.kill();
            }
            input = inputs.recv(), if inputs_open => match input {
                Some(text) => match (&turn, &thread_id) {
                    (TurnState::Running(turn_id), Some(tid)) => {
                        let id = rpc.request("turn/steer", json!({
                            "threadId": tid, "expectedTurnId": turn_id, "input": text_input(&text)
                        })).await;
                        steer_reqs.push((id, text));
                    }
                    _ => queued.push_back(text),
                },
                None => inputs_open = false,
            },
            line = async {
                match stdout.as_mut() {
                    Some(r) => r.next_line().await,
                    None => Ok(None),
                }
            }, if stdout.is_some() => {
                let Ok(Some(line)) = line else {
                    stdout = None;
                    if !canceled && failure.is_none() && !matches!(turn, TurnState::Idle) {
                        failure = Some("codex app-server closed its output before the turn completed".into());
                    }
                    done = true;
                    continue;
                };
                let Ok(msg) = serde_json::from_str::<Value>(&line.text) else {
                    sink.emit(RunEvent::new(&run_id, EventType::Stdout, line.text)).await;
                    continue;
                };
                let id = msg.get("id").and_then(Value::as_i64);
                let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
                if let (Some(id), false) = (id, method.is_empty()) {
                    // A server request (approval, user input): we never grant anything.
                    rpc.send(json!({"id": id, "error": {"code": -32601, "message": "not supported by agent-runtime"}})).await;
                    continue;
                }
                if let Some(id) = id {
                    if let Some(err) = msg.get("error") {
                        if let Some(pos) = steer_reqs.iter().position(|(i, _)| *i == id) {
                            // The turn ended before the steer landed: run it as the next turn.
                            let (_, text) = steer_reqs.remove(pos);
                            queued.push_back(text);
                            continue;
                        }
                        failure = Some(format!("codex app-server error: {err}"));
                        done = true;
                        continue;
                    }
                    steer_reqs.retain(|(i, _)| *i != id);
                    if id == init_id {
                        rpc.send(json!({"method": "initialized"})).await;
                        let mut params = json!({
                            "cwd": setup.cwd, "approvalPolicy": "never", "sandbox": "workspace-write",
                        });
                        if !setup.model.is_empty() {
                            params["model"] = json!(setup.model);
                        }
                        thread_req = Some(rpc.request("thread/start", params).await);
                    } else if Some(id) == thread_req {
                        let tid = msg.pointer("/result/thread/id").and_then(Value::as_str).map(String::from);
                        match tid {
                            Some(tid) => {
                                turn_req = Some(rpc.request("turn/start", json!({"threadId": tid, "input": text_input(&setup.prompt)})).await);
                                thread_id = Some(tid);
                            }
                            None => {
                                failure = Some("thread/start answered without a thread id".into());
                                done = true;
                            }
                        }
                    } else if Some(id) == turn_req {
                        if let Some(t) = msg.pointer("/result/turn/id").and_then(Value::as_str) {
                            turn = TurnState::Running(t.to_string());
                        }
                    }
                    continue;
                }
                let params = msg.get("params").cloned().unwrap_or(Value::Null);
                match method {
                    "turn/started" => {
                        if let Some(t) = params.pointer("/turn/id").and_then(Value::as_str) {
                            turn = TurnState::Running(t.to_string());
                        }
                    }
                    "item/completed" => {
                        if let Some(c) = params.get("item").and_then(classify_item) {
                            sink.emit(RunEvent::new(&run_id, c.kind, c.data)).await;
                        }
                    }
                    "error" => {
                        let m = params.pointer("/error/message").and_then(Value::as_str).unwrap_or("");
                        sink.emit(RunEvent::new(&run_id, EventType::Stderr, m)).await;
                    }
                    "turn/completed" => {
                        let status = params.pointer("/turn/status").and_then(Value::as_str).unwrap_or("");
                        if status == "failed" {
                            let m = params.pointer("/turn/error/message").and_then(Value::as_str).unwrap_or("turn failed");
                            sink.emit(RunEvent::error(&run_id, m, "")).await;
                            failure = Some(m.to_string());
                        }
                        turn = TurnState::Idle;
                        match (queued.pop_front(), &thread_id) {
                            (Some(next), Some(tid)) if failure.is_none() && steer_reqs.is_empty() => {
                                turn = TurnState::Starting;
                                turn_req = Some(rpc.request("turn/start", json!({"threadId": tid, "input": text_input(&next)})).await);
                            }
                            (Some(next), _) => queued.push_front(next),
                            (None, _) if steer_reqs.is_empty() => done = true,
                            (None, _) => {}
                        }
                    }
                    _ => {}
                }
            }
            l = async {
                match stderr.as_mut() {
                    Some(r) => r.recv().await,
                    None => None,
                }
            }, if stderr.is_some() => match l {
                Some(l) => sink.emit(RunEvent::new(&run_id, EventType::Stderr, l.text)).await,
                None => stderr = None,
            },
        }
    }
    // End of the run: no more input; let the server exit on EOF, then sweep the group.
    inputs.close();
    rpc.stdin = None;
    let exit = tokio::select! {
        r = process.wait() => r.ok(),
        _ = tokio::time::sleep(std::time::Duration::from_secs(5)) => {
            killer.kill();
            process.wait().await.ok()
        }
    };
    let code = exit.map(|e| e.code_or_minus_one()).unwrap_or(-1);
    let canceled = canceled || token.is_cancelled();
    let (status, last) = if canceled {
        (
            Status::ended(State::Canceled, code, "canceled"),
            RunEvent::exited_canceled(&run_id, code),
        )
    } else if let Some(f) = failure {
        let code = if code == 0 { 1 } else { code };
        (
            Status::ended(State::Failed, code, f),
            RunEvent::exited(&run_id, code),
        )
    } else {
        // A completed conversation is a success even if the server exits by signal on EOF.
        (
            Status::ended(State::Succeeded, 0, ""),
            RunEvent::exited(&run_id, 0),
        )
    };
    sink.finish(status, vec![last]).await;
}
