//! The CLI loop: runs whose `runtime_kind` is `codex`, `claude_code` or `opencode` execute as
//! turns of that agent CLI, started through the [`AgentCli`] port, with the CLI's stream turned
//! into the service's events and records.
//!
//! How turns, pause and resume work for CLIs (the choice made here):
//! - One turn is one CLI process, started in the run's workspace (the workspace lease's
//!   `root_path` when the run has one, else a per-run directory the adapter picks) with the
//!   run's model route handed to it. The process group dies with the turn. A run whose agent
//!   opts into a workspace gets it as native runs do (`ensure_workspace`: prepared, or the
//!   recorded lease revalidated, before the turn; finalized by the commit that ends or pauses
//!   it; cleaned by policy); `access: read_only` starts the CLI in its own read-only mode.
//! - The first turn's prompt is the agent's system prompt, the target and its context, then
//!   the run's instructions. A later turn (after `pause_after_assistant`, a manual pause or a
//!   crash) is a fresh process whose prompt carries the conversation so far (user and
//!   assistant messages of earlier turns) followed by the new user message(s). No CLI process is
//!   kept alive while a run is paused: a paused run costs no process, and every CLI (with or
//!   without stdin turns) resumes the same way.
//! - Pause requested while a turn runs takes effect at the turn boundary: the CLI finishes its
//!   turn, its answer is recorded, and the run pauses (`manual`). Resume starts the next turn.
//! - Cancel (`POST /cancel`) kills the process group at once; so does engine shutdown past its
//!   grace period, leaving the run `running` at its turn-start checkpoint so the next owner
//!   re-runs that turn.
//! - Events: `assistant_message_started` / live `assistant_message_delta` /
//!   `assistant_message_completed` per CLI message, `tool_call_started` / `tool_call_result` /
//!   `tool_call_finished` per CLI tool call (with a tool-call row and a tool-result message),
//!   `usage.checkpoint` (cumulative) when the turn ends, then `run.completed`, `run.paused` or
//!   `run.failed`.
//! - The run's own tools (host tools, its MCP servers' tools) reach the CLI through its MCP
//!   bridge (`agent-runtime mcp-bridge`, named `agent_runtime` in the CLI's config), which
//!   calls the run tool gateway with a token minted for the turn: the gateway gates, runs and
//!   records those calls (the adapter does not report them again). A call that needs approval
//!   is parked by the gateway and the CLI told to end its turn; when it does, the run pauses
//!   `human_approval`. Approving resumes it with a fresh turn that is told the call was
//!   approved; the CLI makes it again and the gateway runs it, consuming the approval.
//! - Where a turn runs is the adapter's choice within the agent's `execution_config.placement`
//!   (checked at admission). A turn whose machine went away before it ended (a node that died,
//!   became unreachable or shut down) runs again, from the turn-start checkpoint and the
//!   conversation so far, on another machine (the lost one avoided for this turn); when no
//!   machine can take it the run pauses (`manual`) and `output_summary.pause_detail` says why.
//!   Each move is listed in `output_summary.failovers`, and a turn on a node names it in
//!   `output_summary.machine`.
//! - The CLI reaches the model through the turn's egress proxy, never holding the key; what the
//!   proxy saw adds up in `output_summary.model_egress`, its usage stands in for the CLI's when
//!   the CLI reported none, and a model call it cut (an answer over its bound) is the turn's
//!   failure reason.

use std::collections::HashMap;

use ar_core::agent_cli::{
    AgentCliError, CliEgress, CliEvent, CliOutcome, CliPlacement, CliTurn, CliTurnRequest,
    SubscriptionTurn, ToolGatewayAccess,
};
use ar_core::event::{self as ev, RunEvent};
use ar_core::ids::{new_id, prefix};
use ar_core::model::{ChatMessage, ChatRole, ModelRoute};
use ar_core::records::{interaction_kind, message_type};
use ar_core::secret::Secret;
use ar_core::store::RunChange;
use ar_core::workspace::WorkspaceAccess;
use ar_core::{Agent, InteractionStatus, MessageRole, PauseReason, Run, RuntimeKind, Usage};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use futures::StreamExt;
use rand::RngCore as _;
use serde_json::{json, Value};

use crate::control_tools;
use crate::engine::Engine;
use crate::error::EngineResult;
use crate::model_route::{default_model, resolve_route};
use crate::native::tool_result_events;
use crate::native::{Flow, RouteProblem};
use crate::owner::Owner;
use crate::records::{
    clip, mark_failed, mark_paused, mark_turn_done, message, record_tool_output, tool_call_record,
    usage_checkpoint, usage_json,
};
use crate::transcript::LoopState;

/// Longest tool output kept in events and rows.
const MAX_TOOL_OUTPUT: usize = 16 * 1024;

/// `tool_call_started` of a CLI tool call, hung off the last assistant message.
fn tool_started(call_id: &str, name: &str, parent: &str) -> RunEvent {
    RunEvent::ToolCallStarted(ev::ToolCallStarted {
        tool_call_id: call_id.to_string(),
        tool_name: name.to_string(),
        parent_message_id: parent.to_string(),
    })
}

/// Tools that only read (their rows are recorded as non-mutating).
fn reads_only(name: &str) -> bool {
    matches!(
        name.to_ascii_lowercase().as_str(),
        "read"
            | "grep"
            | "glob"
            | "ls"
            | "list"
            | "view"
            | "web_search"
            | "websearch"
            | "webfetch"
            | "todoread"
    )
}

/// The standing instructions of a CLI run: agent prompt, target and its context.
fn preamble(agent: &Agent, run: &Run) -> String {
    let mut text = agent.system_prompt.trim().to_string();
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(&crate::context::target_brief(run));
    text
}

/// The prompt of the next turn: the preamble, earlier turns as context, then the new message(s).
pub(crate) fn turn_prompt(transcript: &[ChatMessage]) -> String {
    let split = transcript
        .iter()
        .rposition(|m| m.role != ChatRole::User)
        .map(|index| index + 1)
        .unwrap_or(0);
    let mut out = String::new();
    for m in transcript.iter().filter(|m| m.role == ChatRole::System) {
        if !m.content.trim().is_empty() {
            out.push_str(m.content.trim());
            out.push_str("\n\n");
        }
    }
    let history: Vec<&ChatMessage> = transcript[..split]
        .iter()
        .filter(|m| matches!(m.role, ChatRole::User | ChatRole::Assistant))
        .collect();
    if !history.is_empty() {
        out.push_str("The conversation so far (earlier turns of this task):\n");
        for m in history {
            let who = if m.role == ChatRole::User {
                "User"
            } else {
                "Assistant"
            };
            out.push_str(&format!("\n{who}: {}\n", m.content.trim()));
        }
        out.push_str("\nContinue from there. The user's new message:\n");
    }
    let new: Vec<&str> = transcript[split..]
        .iter()
        .map(|m| m.content.trim())
        .filter(|c| !c.is_empty())
        .collect();
    out.push_str(&new.join("\n\n"));
    out
}

/// How the CLI process ended: its outcome, exit code and error text.
type CliExit = (CliOutcome, i32, String);

/// What the CLI reported about a tool call it finished.
struct CliToolFinished {
    name: String,
    input: Value,
    output: String,
    is_error: bool,
}

/// Live bookkeeping of one turn.
#[derive(Default)]
struct TurnMarks {
    /// The assistant message being streamed, and whether its start was committed.
    open_message: Option<(String, bool)>,
    /// The last assistant message id (tools hang off it).
    last_message: String,
    /// CLI tool ids → (service tool_call_id, started committed).
    tools: HashMap<String, String>,
    texts: Vec<String>,
    usage: Usage,
    workdir: String,
    /// What the turn's egress proxy saw.
    egress: Option<CliEgress>,
    /// Where the turn ran (`local` or a node's name).
    machine: String,
}

impl Engine {
    /// Whether runs of this kind execute through an agent CLI here.
    pub(crate) fn serves_cli(&self, kind: RuntimeKind) -> bool {
        matches!(
            kind,
            RuntimeKind::Codex | RuntimeKind::ClaudeCode | RuntimeKind::OpenCode
        ) && self
            .deps()
            .agent_cli
            .as_ref()
            .is_some_and(|cli| cli.serves(kind))
    }

    /// Commits `build` while the run is still running; false when it no longer is.
    async fn cli_commit(
        &self,
        run: &mut Run,
        build: impl FnMut(&mut Run, &mut RunChange) -> EngineResult<()>,
    ) -> EngineResult<bool> {
        Ok(matches!(
            self.commit_step(run, build).await?,
            crate::native::Flow::Continue
        ))
    }

    /// The model route handed to the CLI: the run's own, else the agent's provider defaults,
    /// else none (the CLI keeps its own configuration).
    async fn cli_route(
        &self,
        run: &Run,
        agent: &Agent,
    ) -> Result<Option<ModelRoute>, RouteProblem> {
        if run.input.model.is_some() {
            return self.route_for(run).await.map(|(route, _)| Some(route));
        }
        let config = self.config();
        let route = default_model(config, &agent.provider, &agent.model)
            .ok()
            .and_then(|model| resolve_route(config, &model, None).ok());
        Ok(route)
    }

    /// How the turn reaches its model: the run's route, or the subscription lane's sign-in
    /// (no route); why the turn cannot start otherwise.
    async fn turn_access(
        &self,
        run: &Run,
        agent: &Agent,
    ) -> EngineResult<Result<(Option<ModelRoute>, Option<SubscriptionTurn>), String>> {
        match self.subscription_turn(run, agent).await? {
            Err(reason) => return Ok(Err(reason)),
            Ok(Some(turn)) => return Ok(Ok((None, Some(turn)))),
            Ok(None) => {}
        }
        Ok(match self.cli_route(run, agent).await {
            Ok(route) => Ok((route, None)),
            Err(RouteProblem::Authentication(reason)) | Err(RouteProblem::Other(reason)) => {
                Err(reason)
            }
        })
    }

    fn cli_workdir(run: &Run) -> Option<String> {
        let path = run
            .workspace_lease
            .as_ref()
            .and_then(|lease| lease.get("root_path"))
            .and_then(Value::as_str)?;
        std::path::Path::new(path)
            .is_absolute()
            .then(|| path.to_string())
    }

    /// Executes one CLI turn of the run, then completes, pauses or fails it; a turn whose
    /// machine went away runs again elsewhere.
    pub(crate) async fn cli_loop(
        &self,
        mut run: Run,
        agent: Agent,
        owner: &mut Owner,
    ) -> EngineResult<()> {
        let Some(cli) = self.deps().agent_cli.clone() else {
            let reason = format!(
                "runtime kind {} is not available on this runtime",
                run.runtime_kind
            );
            self.fail_run(&run.app_id, &run.id, &reason).await;
            return Ok(());
        };
        let mut state = self.load_state(&run).await?;
        if let Flow::Stop = self.safe_point(&mut run, &state, owner).await? {
            return Ok(());
        }
        // The same workspace a native run gets: prepared (or revalidated) before the turn,
        // finalized by the commit that ends it, cleaned by policy when the owner stops.
        if let Flow::Stop = self
            .ensure_workspace(&mut run, &agent, &state, owner)
            .await?
        {
            return Ok(());
        }
        let mut avoid: Vec<String> = Vec::new();
        let mut lost: Option<String> = None;
        loop {
            let Some(mut request) = self
                .begin_cli_turn(&mut run, &agent, &mut state, owner)
                .await?
            else {
                return Ok(());
            };
            request.avoid_machines.clone_from(&avoid);
            let started = tokio::select! {
                () = owner.inbox.stopped() => return Ok(()),
                started = cli.start_turn(request) => started,
            };
            let turn = match started {
                Ok(turn) => turn,
                Err(AgentCliError::NoPlacement(reason)) => {
                    let reason = match &lost {
                        Some(last) => format!("{reason} (the turn was lost: {last})"),
                        None => reason,
                    };
                    return self.pause_unplaced(run, reason).await;
                }
                Err(error) => {
                    self.fail_step(&mut run, &state, &error.to_string()).await?;
                    return Ok(());
                }
            };
            let machine = turn.machine.clone();
            let mut marks = TurnMarks {
                machine: machine.clone(),
                ..TurnMarks::default()
            };
            let Some(ended) = self
                .follow_cli_turn(&mut run, turn, owner, &mut marks)
                .await?
            else {
                return Ok(());
            };
            if ended.0 != CliOutcome::Lost {
                return self.cli_finish(run, state, marks, ended, owner).await;
            }
            if !self.fail_over(&mut run, owner, &machine, &ended.2).await? {
                return Ok(());
            }
            lost = Some(format!("{machine}: {}", ended.2));
            avoid.push(machine);
        }
    }

    /// Records that the turn's machine went away; false when the run stopped running (or
    /// was paused here, on a pause requested meanwhile).
    async fn fail_over(
        &self,
        run: &mut Run,
        owner: &mut Owner,
        machine: &str,
        reason: &str,
    ) -> EngineResult<bool> {
        tracing::warn!(run_id = %run.id, machine, reason, "the machine running a CLI turn went away; running the turn again elsewhere");
        let entry = json!({"machine": machine, "reason": reason, "at": self.now().to_rfc3339()});
        let pause = owner.inbox.pause_requested() || run.state.pause_requested();
        let running = self
            .cli_commit(run, |run, change| {
                let failovers = run
                    .output_summary
                    .entry("failovers")
                    .or_insert_with(|| json!([]));
                if let Some(list) = failovers.as_array_mut() {
                    list.push(entry.clone());
                }
                if pause {
                    mark_paused(run, change, PauseReason::Manual)?;
                }
                Ok(())
            })
            .await?;
        Ok(running && !pause)
    }

    /// No machine can take the turn now: the run waits (`manual`) with the reason in
    /// `output_summary.pause_detail`; resuming tries again.
    async fn pause_unplaced(&self, mut run: Run, reason: String) -> EngineResult<()> {
        tracing::warn!(run_id = %run.id, %reason, "no machine can take the CLI turn; pausing the run");
        let detail = format!("no machine can run this turn now: {reason}");
        self.cli_commit(&mut run, |run, change| {
            run.output_summary
                .insert("pause_detail".into(), json!(detail.clone()));
            mark_paused(run, change, PauseReason::Manual)
        })
        .await?;
        Ok(())
    }

    /// Checks an agent's `execution_config.placement` when a run is admitted: only CLI runs
    /// take one, and the adapter must be able to honour it (a known machine, labels some
    /// node carries, no workspace sent away from its lease).
    pub(crate) fn check_placement(&self, agent: &Agent, run: &Run) -> EngineResult<()> {
        let placement = CliPlacement::from_execution_config(agent.execution_config.as_ref())
            .map_err(crate::error::EngineError::invalid)?;
        let Some(placement) = placement else {
            return Ok(());
        };
        let Some(cli) = self
            .deps()
            .agent_cli
            .as_ref()
            .filter(|_| self.serves_cli(run.runtime_kind))
        else {
            return Err(crate::error::EngineError::invalid(format!(
                "execution_config.placement applies to agent CLI runs (codex, claude_code, opencode), not {}",
                run.runtime_kind
            )));
        };
        let has_workspace = crate::workspace::requested(agent, run)
            .ok()
            .flatten()
            .is_some();
        cli.check_placement(run.runtime_kind, &placement, has_workspace)
            .map_err(|problem| {
                crate::error::EngineError::invalid(format!("execution_config.placement: {problem}"))
            })
    }

    /// The preamble with the run's skill instructions compiled in; `None` when the skills
    /// can no longer be resolved (the run failed).
    async fn cli_preamble(
        &self,
        run: &mut Run,
        agent: &Agent,
        state: &LoopState,
    ) -> EngineResult<Option<String>> {
        let skills = match self.run_skills(agent, run).await {
            Ok(skills) => skills,
            Err(crate::error::EngineError::Invalid(reason)) => {
                self.fail_step(run, state, &reason).await?;
                return Ok(None);
            }
            Err(other) => return Err(other),
        };
        let mut text = preamble(agent, run);
        let section = skills.resolution.prompt_instructions();
        if !section.is_empty() {
            text.push_str("\n\n# Skills\n\n");
            text.push_str(&section);
        }
        Ok(Some(text))
    }

    /// Prepares the turn: its input in the transcript, the route handed to the CLI, and the
    /// turn-start checkpoint. `None` when the run stopped (no route, or no longer running).
    async fn begin_cli_turn(
        &self,
        run: &mut Run,
        agent: &Agent,
        state: &mut LoopState,
        owner: &mut Owner,
    ) -> EngineResult<Option<CliTurnRequest>> {
        // The turn's input: the first instructions, or what resume queued.
        state.flush_queued_messages();
        if state.transcript.is_empty() {
            let Some(text) = self.cli_preamble(run, agent, state).await? else {
                return Ok(None);
            };
            state.open(text, &run.input.instructions);
        } else if state.transcript.last().map(|m| m.role) != Some(ChatRole::User) {
            state.transcript.push(ChatMessage::user("Continue."));
        }
        state.turn_steps = 0;
        let (route, subscription) = match self.turn_access(run, agent).await? {
            Ok(access) => access,
            Err(reason) => {
                self.fail_step(run, state, &reason).await?;
                return Ok(None);
            }
        };
        // The CLI's key is in its environment: anything it prints is scrubbed of it.
        owner
            .secrets
            .hold(route.as_ref().and_then(|route| route.api_key.as_ref()));
        // So is its bridge's gateway token; the run keeps only its digest (any replica may
        // check it), replaced with every turn.
        let tool_gateway = match subscription {
            // The lane is text-only: no tools reach it.
            Some(_) => None,
            None => self.cli_tool_gateway(run, agent).await,
        };
        owner
            .secrets
            .hold(tool_gateway.as_ref().map(|access| &access.token));
        let token_digest = tool_gateway.as_ref().map(|access| access.token.digest());
        // Turn-start checkpoint: an owner taking over re-runs this turn.
        let checkpoint = self.checkpoint(run, state);
        let committed = self
            .cli_commit(run, |run, change| {
                change.checkpoint = Some(checkpoint.clone());
                run.engine
                    .tool_gateway_token_sha256
                    .clone_from(&token_digest);
                Ok(())
            })
            .await?;
        let placement = CliPlacement::from_execution_config(agent.execution_config.as_ref())
            .ok()
            .flatten()
            .unwrap_or_default();
        Ok(committed.then(|| CliTurnRequest {
            run_id: run.id.clone(),
            kind: run.runtime_kind,
            prompt: turn_prompt(&state.transcript),
            workdir: Self::cli_workdir(run),
            read_only: run
                .engine
                .workspace
                .is_some_and(|ws| ws.spec.access == WorkspaceAccess::ReadOnly),
            route,
            env: vec![
                ("AGENT_RUNTIME_RUN_ID".to_string(), run.id.clone()),
                ("AGENT_RUNTIME_APP_ID".to_string(), run.app_id.clone()),
            ],
            tool_gateway,
            placement,
            avoid_machines: Vec::new(),
            subscription,
        }))
    }

    /// Access to the run tool gateway for this turn's CLI, when the run has tools the gateway
    /// can call (its effective tools, app MCP providers' among them, its MCP servers' tools)
    /// and the CLI can be offered them:
    /// a fresh token, `art_run_` and 32 random bytes (base64url), good for this run's tools
    /// only and only while this turn runs.
    async fn cli_tool_gateway(&self, run: &Run, agent: &Agent) -> Option<ToolGatewayAccess> {
        let cli = self.deps().agent_cli.as_ref()?;
        if !cli.bridges_tools(run.runtime_kind) {
            return None;
        }
        let callable = self
            .current_tools(run, agent)
            .await
            .iter()
            .any(|tool| control_tools::gateway_callable(&tool.name));
        if !callable && run.input.mcp_servers.is_empty() {
            return None;
        }
        let mut bytes = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        let token = format!("art_run_{}", URL_SAFE_NO_PAD.encode(bytes));
        Some(ToolGatewayAccess {
            app_id: run.app_id.clone(),
            token: Secret::new(token),
        })
    }

    /// Whether a call the turn made through the gateway waits for a person's approval.
    async fn awaits_approval(&self, run: &Run) -> EngineResult<bool> {
        let interactions = self
            .deps()
            .store
            .list_interactions(&run.app_id, &run.id)
            .await?;
        Ok(interactions.iter().any(|interaction| {
            interaction.interaction_kind == interaction_kind::APPROVAL_REQUEST
                && interaction.status == InteractionStatus::Pending
        }))
    }

    /// Records the turn's events until the CLI exits; `None` when the turn was stopped (the
    /// run cancelled, or no longer running) and its process killed.
    async fn follow_cli_turn(
        &self,
        run: &mut Run,
        turn: CliTurn,
        owner: &mut Owner,
        marks: &mut TurnMarks,
    ) -> EngineResult<Option<CliExit>> {
        let control = turn.control.clone();
        let mut events = turn.events;
        let mut ended: Option<CliExit> = None;
        let mut killed = false;
        loop {
            let next = tokio::select! {
                () = owner.inbox.stopped(), if !killed => {
                    killed = true;
                    control.cancel();
                    continue;
                }
                next = events.next() => next,
            };
            let Some(cli_event) = next else { break };
            if killed {
                // Drain what the killed process still reported; nothing more is recorded.
                continue;
            }
            if let CliEvent::Exited {
                outcome,
                exit_code,
                error,
            } = cli_event
            {
                ended = Some((outcome, exit_code, error));
                continue;
            }
            if !self.cli_record(run, marks, cli_event).await? {
                // The run stopped running (cancelled through the API, failed elsewhere).
                killed = true;
                control.cancel();
            }
        }
        if killed || owner.inbox.stop_requested() {
            return Ok(None);
        }
        Ok(Some(ended.unwrap_or((
            CliOutcome::Failed,
            -1,
            "the agent CLI ended without an exit status".to_string(),
        ))))
    }

    /// Records one CLI event; false when the run is no longer running.
    async fn cli_record(
        &self,
        run: &mut Run,
        marks: &mut TurnMarks,
        cli_event: CliEvent,
    ) -> EngineResult<bool> {
        match cli_event {
            CliEvent::Started { workdir } => {
                marks.workdir = workdir.clone();
                if run.engine.workdir.as_deref() == Some(workdir.as_str()) {
                    return Ok(true);
                }
                self.cli_commit(run, |run, _| {
                    run.engine.workdir = Some(workdir.clone());
                    Ok(())
                })
                .await
            }
            CliEvent::AssistantDelta { text } => self.cli_assistant_delta(run, marks, text).await,
            CliEvent::AssistantCompleted { text, metadata } => {
                self.cli_assistant_completed(run, marks, text, metadata)
                    .await
            }
            CliEvent::ToolStarted { id, name, input: _ } => {
                let call_id = new_id(prefix::TOOL_CALL);
                marks.tools.insert(id, call_id.clone());
                let opened = tool_started(&call_id, &name, &marks.last_message);
                self.cli_commit(run, |_, change| {
                    change.events.push(opened.clone());
                    Ok(())
                })
                .await
            }
            CliEvent::ToolFinished {
                id,
                name,
                input,
                output,
                is_error,
            } => {
                let finished = CliToolFinished {
                    name,
                    input,
                    output,
                    is_error,
                };
                self.cli_tool_finished(run, marks, &id, finished).await
            }
            CliEvent::Usage(usage) => {
                marks.usage.add(&usage);
                Ok(true)
            }
            CliEvent::Egress(egress) => {
                marks.egress = Some(egress);
                Ok(true)
            }
            CliEvent::Diagnostic { mut text } => {
                if let Some(redactor) = self.redactor_of(&run.id) {
                    redactor.scrub(&mut text);
                }
                tracing::debug!(run_id = %run.id, line = %text, "agent CLI");
                Ok(true)
            }
            CliEvent::Exited { .. } => Ok(true),
        }
    }

    /// A streamed piece of the CLI's answer: its message's start committed once, the delta
    /// published live.
    async fn cli_assistant_delta(
        &self,
        run: &mut Run,
        marks: &mut TurnMarks,
        text: String,
    ) -> EngineResult<bool> {
        if text.is_empty() {
            return Ok(true);
        }
        let (id, started) = marks
            .open_message
            .get_or_insert_with(|| (new_id(prefix::MESSAGE), false))
            .clone();
        if !started {
            let opened = RunEvent::AssistantMessageStarted(ev::MessageStarted {
                message_id: id.clone(),
            });
            let running = self
                .cli_commit(run, |_, change| {
                    change.events.push(opened.clone());
                    Ok(())
                })
                .await?;
            if !running {
                return Ok(false);
            }
            marks.open_message = Some((id.clone(), true));
        }
        let delta = ev::MessageDelta {
            message_id: id,
            text,
        };
        self.publish_transient(run, RunEvent::AssistantMessageDelta(delta));
        Ok(true)
    }

    /// A whole CLI message: its events and its transcript row.
    async fn cli_assistant_completed(
        &self,
        run: &mut Run,
        marks: &mut TurnMarks,
        text: String,
        metadata: Option<Value>,
    ) -> EngineResult<bool> {
        // What the lane validated about the answer goes with the message.
        let blocks = metadata.map(|metadata| {
            json!([{"type": "text", "text": text},
                   {"type": "response_metadata", "response_metadata": metadata}])
        });
        let (id, started) = marks
            .open_message
            .take()
            .unwrap_or_else(|| (new_id(prefix::MESSAGE), false));
        if text.trim().is_empty() {
            return Ok(true);
        }
        marks.last_message = id.clone();
        marks.texts.push(text.clone());
        let now = self.now();
        self.cli_commit(run, |run, change| {
            if !started {
                change
                    .events
                    .push(RunEvent::AssistantMessageStarted(ev::MessageStarted {
                        message_id: id.clone(),
                    }));
            }
            change
                .events
                .push(RunEvent::AssistantMessageCompleted(ev::MessageCompleted {
                    message_id: id.clone(),
                    content: text.clone(),
                    encrypted_value: String::new(),
                }));
            let mut row = message(
                run,
                MessageRole::Assistant,
                &text,
                message_type::MESSAGE,
                now,
            );
            row.id = id.clone();
            row.runtime_message_id = id.clone();
            row.content_blocks.clone_from(&blocks);
            change.messages.push(row);
            Ok(())
        })
        .await
    }

    /// A finished CLI tool call: its row, its result message and events.
    async fn cli_tool_finished(
        &self,
        run: &mut Run,
        marks: &mut TurnMarks,
        cli_id: &str,
        tool: CliToolFinished,
    ) -> EngineResult<bool> {
        let known = marks.tools.remove(cli_id);
        let started = known.is_some();
        let call_id = known.unwrap_or_else(|| new_id(prefix::TOOL_CALL));
        let parent = marks.last_message.clone();
        let clipped = clip(&tool.output, MAX_TOOL_OUTPUT);
        let input_text = tool.input.to_string();
        let now = self.now();
        let CliToolFinished {
            name,
            input,
            output,
            is_error,
        } = tool;
        self.cli_commit(run, |run, change| {
            if !started {
                change.events.push(tool_started(&call_id, &name, &parent));
            }
            let mutating = !reads_only(&name);
            let mut row = tool_call_record(run, &name, input.clone(), mutating, false, now);
            row.id = call_id.clone();
            record_tool_output(&mut row, &clipped, is_error);
            change.tool_calls.push(row);
            let mut result = message(
                run,
                MessageRole::Tool,
                &clipped,
                message_type::TOOL_RESULT,
                now,
            );
            result.runtime_message_id = call_id.clone();
            let result_id = result.id.clone();
            change.messages.push(result);
            change.events.extend(tool_result_events(
                &call_id,
                &name,
                &input_text,
                &output,
                is_error,
                0,
                result_id,
            ));
            Ok(())
        })
        .await
    }

    /// Ends the turn: transcript, usage, and the run's next state.
    async fn cli_finish(
        &self,
        mut run: Run,
        mut state: LoopState,
        marks: TurnMarks,
        (outcome, exit_code, error): CliExit,
        owner: &mut Owner,
    ) -> EngineResult<()> {
        state.step += 1;
        state.turn_steps += 1;
        // A CLI that reports no usage: what its model answers reported through the proxy.
        match &marks.egress {
            Some(egress) if marks.usage.is_zero() => state.usage.add(&egress.usage),
            _ => state.usage.add(&marks.usage),
        }
        let reply = marks.texts.join("\n\n");
        if outcome == CliOutcome::Succeeded {
            state
                .transcript
                .push(ChatMessage::assistant(reply.clone(), Vec::new()));
        }
        let checkpoint = self.checkpoint(&run, &state);
        let usage = state.usage;
        let pause_now = owner.inbox.pause_requested();
        let failure = match outcome {
            CliOutcome::Succeeded => None,
            CliOutcome::Failed if error.is_empty() => {
                Some(format!("the agent CLI failed with exit code {exit_code}"))
            }
            CliOutcome::Failed => Some(error),
            CliOutcome::Cancelled => Some("the agent CLI was stopped".to_string()),
            CliOutcome::Lost => Some(format!(
                "the machine running the agent CLI went away: {error}"
            )),
        };
        // A call parked by the gateway during the turn: the run now waits for the person.
        let awaiting_approval = failure.is_none() && self.awaits_approval(&run).await?;
        let now = self.now();
        self.cli_commit(&mut run, |run, change| {
            change.checkpoint = Some(checkpoint.clone());
            note_turn_place(run, &marks);
            if !usage.is_zero() {
                change.events.push(usage_checkpoint(&usage));
            }
            if let Some(reason) = &failure {
                return mark_failed(run, change, reason, Some(&usage), now);
            }
            if !reply.is_empty() {
                run.output_summary
                    .insert("last_message".into(), json!(clip(&reply, 4096)));
            }
            if awaiting_approval {
                run.output_summary
                    .insert("usage".into(), usage_json(&usage));
                mark_paused(run, change, PauseReason::HumanApproval)
            } else if pause_now || run.state.pause_requested() {
                mark_paused(run, change, PauseReason::Manual)
            } else {
                mark_turn_done(run, change, &usage, now)
            }
        })
        .await?;
        Ok(())
    }
}

/// Where the turn ran (a node) and what its egress proxy saw, added to the run's summary.
fn note_turn_place(run: &mut Run, marks: &TurnMarks) {
    if !marks.machine.is_empty() && marks.machine != "local" {
        run.output_summary
            .insert("machine".into(), json!(marks.machine));
    }
    let Some(egress) = &marks.egress else {
        return;
    };
    let total = run
        .output_summary
        .entry("model_egress")
        .or_insert_with(|| json!({"requests": 0, "refused": 0}));
    for (key, add) in [("requests", egress.requests), ("refused", egress.refused)] {
        let before = total.get(key).and_then(Value::as_u64).unwrap_or(0);
        total[key] = json!(before + add);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_turn_prompt_is_preamble_and_instructions() {
        let transcript = vec![
            ChatMessage::system("Be brief.\n\nTarget: ticket T-1"),
            ChatMessage::user("fix it"),
        ];
        assert_eq!(
            turn_prompt(&transcript),
            "Be brief.\n\nTarget: ticket T-1\n\nfix it"
        );
    }

    #[test]
    fn later_turns_carry_the_conversation() {
        let transcript = vec![
            ChatMessage::system("Target: ticket T-1"),
            ChatMessage::user("first"),
            ChatMessage::assistant("answer one", Vec::new()),
            ChatMessage::user("second"),
            ChatMessage::user("and third"),
        ];
        let prompt = turn_prompt(&transcript);
        assert!(prompt.starts_with("Target: ticket T-1\n\nThe conversation so far"));
        assert!(prompt.contains("\nUser: first\n"));
        assert!(prompt.contains("\nAssistant: answer one\n"));
        assert!(prompt.ends_with("The user's new message:\nsecond\n\nand third"));
    }
}
