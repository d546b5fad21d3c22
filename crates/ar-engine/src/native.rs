//! The native agent loop (`runtime_kind: native_sdk`): model rounds, tool rounds, the approval
//! gate, runtime-control tools, explicit completion, checkpoints after every step.

use std::sync::Arc;
use std::time::Instant;

use ar_core::event::{kind, EventDraft};
use ar_core::ids::{new_id, prefix};
use ar_core::model::{
    ChatMessage, ModelError, ModelRequest, ModelResponse, ModelRoute, ModelToolCall, StreamDelta,
    ToolSpec,
};
use ar_core::records::{interaction_kind, message_type, Interaction, ToolCallRecord};
use ar_core::store::{Checkpoint, RunChange};
use ar_core::tool::{canonical_tool_name, ToolDefinition, ToolOutput};
use ar_core::{Agent, ApprovalState, JsonMap, PauseReason, Run, RunStatus, RuntimeKind};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::admission::MODEL_CREDENTIAL_SECRET;
use crate::control_tools;
use crate::engine::{Decide, Engine};
use crate::error::EngineResult;
use crate::gate::{approval_payload, consume_approval, needs_approval};
use crate::model_route::{resolve_route, RunCredential};
use crate::owner::OwnerHandle;
use crate::records::{
    event, interaction, mark_completed, mark_failed, mark_paused, message, object,
    tool_call_record, usage_json,
};
use crate::transcript::{Decision, LoopState, PendingCall};

/// How long the first streamed deltas of a model call are held back to see whether the whole
/// answer arrives at once (saving a commit per step); later deltas stream without delay.
const DELTA_COALESCE_WINDOW: std::time::Duration = std::time::Duration::from_millis(10);

/// How a step's commit ended for the loop.
enum Flow {
    Continue,
    /// The run paused, ended, or is no longer ours: the owner stops.
    Stop,
}

/// What to do with one tool call of a model response.
enum Plan {
    /// Answer immediately with an error the model sees.
    Reject(String),
    /// Run through the tool host.
    Run { tool: ToolDefinition, input: Value },
    /// Update the plan (artifact + event), answered at once.
    Replan { input: Value },
    /// Answered with a recorded result (studio replay); the handler does not run.
    Substitute(String),
    /// Park for a person.
    Park {
        kind: &'static str,
        title: String,
        reason: PauseReason,
        payload: Value,
        record: bool,
    },
}

/// A call answered in this round: the call, its output, the tool and input if it ran, and
/// how long it took.
type Answered = (
    ModelToolCall,
    ToolOutput,
    Option<(ToolDefinition, Value)>,
    u64,
);

/// Why a route could not be built.
pub(crate) enum RouteProblem {
    Authentication(String),
    Other(String),
}

/// Live-event bookkeeping for one model call.
struct StreamMarks {
    message_id: String,
    reasoning_id: String,
    text_started: bool,
    reasoning_started: bool,
    /// Tool calls (by index) whose `tool_call_started` was committed, with their ids.
    tools_started: Vec<(usize, String)>,
}

fn truncate(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

impl Engine {
    /// Executes a run's current turn until it pauses, ends, or this process stops.
    pub(crate) async fn execute(
        &self,
        app_id: &str,
        run_id: &str,
        handle: &Arc<OwnerHandle>,
        start: Option<crate::owner::OwnerStart>,
    ) -> EngineResult<()> {
        // The creating request's copy saves reading the run back (not for a run waiting for
        // approval: that branch decides on the copy without a version check).
        let (run, known) = match start {
            Some(start) if start.run.approval_state != ApprovalState::Pending => {
                let known = (start.agent, start.seeded, start.run.version);
                (start.run, Some(known))
            }
            _ => (self.load_run(app_id, run_id).await?, None),
        };
        if run.is_terminal() || run.status == RunStatus::Paused {
            return Ok(());
        }
        let now = self.now();
        if run.approval_state == ApprovalState::Pending {
            self.transact(app_id, run_id, Some(run), |run, change| {
                if run.is_terminal() || run.status == RunStatus::Paused {
                    return Ok(Decide::Skip(()));
                }
                mark_paused(run, change, PauseReason::HumanApproval, JsonMap::new());
                Ok(Decide::Commit(()))
            })
            .await?;
            return Ok(());
        }
        // No checkpoint to load when this owner started the run it was handed, with nothing
        // committed in between (the version moved by exactly this commit) and none seeded.
        let mut fresh = false;
        let run = if run.status == RunStatus::Queued {
            let (run, _, started) = self
                .transact(app_id, run_id, Some(run), |run, change| {
                    if run.status != RunStatus::Queued {
                        return Ok(Decide::Skip(run.status == RunStatus::Running));
                    }
                    if run.approval_state == ApprovalState::Pending {
                        // Became pending after the copy was taken: the owner looks again.
                        return Ok(Decide::Skip(false));
                    }
                    run.status = RunStatus::Running;
                    run.started_at.get_or_insert(now);
                    run.set_metadata("turn_started_at", json!(now.to_rfc3339()));
                    change.events.push(event(kind::RUN_STARTED, json!({})));
                    Ok(Decide::Commit(true))
                })
                .await?;
            if !started {
                return Ok(());
            }
            fresh = matches!(&known, Some((_, false, version)) if run.version == version + 1);
            run
        } else {
            run
        };
        let agent = match known {
            Some((agent, _, _)) => agent,
            None => match self.deps().store.get_agent(app_id, &run.agent_id).await? {
                Some(agent) => agent,
                None => {
                    self.fail_run(app_id, run_id, "agent not found").await;
                    return Ok(());
                }
            },
        };
        let agent = Self::studio_agent(agent, &run);
        let Some(run) = self.refresh_context(run).await? else {
            return Ok(());
        };
        match run.runtime_kind {
            RuntimeKind::NativeSdk => self.native_loop(run, agent, handle, fresh).await,
            kind if self.serves_cli(kind) => self.cli_loop(run, agent, handle).await,
            other => {
                self.fail_run(
                    app_id,
                    run_id,
                    &format!("runtime kind {other} is not available on this runtime"),
                )
                .await;
                Ok(())
            }
        }
    }

    async fn load_state(&self, run: &Run) -> EngineResult<LoopState> {
        match self.deps().store.latest_checkpoint(&run.id).await? {
            Some(checkpoint) => Ok(LoopState::from_json(&checkpoint.state).unwrap_or_else(|error| {
                tracing::error!(run_id = %run.id, %error, "checkpoint unreadable; starting the transcript afresh");
                LoopState::default()
            })),
            None => Ok(LoopState::default()),
        }
    }

    fn checkpoint(&self, run: &Run, state: &LoopState) -> Checkpoint {
        Checkpoint {
            run_id: run.id.clone(),
            step: state.step,
            state: state.to_json(),
            created_at: self.now(),
        }
    }

    fn system_prompt(agent: &Agent, run: &Run, tools: &[ToolDefinition]) -> String {
        let mut prompt = agent.system_prompt.trim().to_string();
        if prompt.is_empty() {
            prompt = "You are an agent working for a host application.".to_string();
        }
        prompt.push_str(&format!(
            "\n\nTarget: {} {}",
            run.target.target_type, run.target.id
        ));
        if let Some(display) = &run.target.display {
            if !display.title.is_empty() {
                prompt.push_str(&format!(" ({})", display.title));
            }
        }
        if !run.input.context_summary.is_empty() {
            prompt.push_str("\n\nContext:\n");
            prompt.push_str(&run.input.context_summary);
        }
        if run.input.turn_policy.is_explicit_completion()
            && tools.iter().any(|t| t.name == control_tools::FINISH_TURN)
        {
            prompt.push_str("\n\nWhen your work for this turn is done, call finish_turn as the only tool call of your response.");
        }
        prompt
    }

    /// Commits `build`'s change on the cached run; `Stop` when the run is no longer executing.
    async fn commit_step(
        &self,
        run: &mut Run,
        mut build: impl FnMut(&mut Run, &mut RunChange),
    ) -> EngineResult<Flow> {
        let app_id = run.app_id.clone();
        let run_id = run.id.clone();
        let (fresh, _, proceed) = self
            .transact(&app_id, &run_id, Some(run.clone()), |current, change| {
                if current.status != RunStatus::Running {
                    return Ok(Decide::Skip(false));
                }
                build(current, change);
                Ok(Decide::Commit(true))
            })
            .await?;
        *run = fresh;
        if !proceed {
            return Ok(Flow::Stop);
        }
        Ok(if run.status == RunStatus::Running {
            Flow::Continue
        } else {
            Flow::Stop
        })
    }

    async fn native_loop(
        &self,
        mut run: Run,
        agent: Agent,
        handle: &Arc<OwnerHandle>,
        fresh: bool,
    ) -> EngineResult<()> {
        let mut state = if fresh {
            LoopState::default()
        } else {
            self.load_state(&run).await?
        };
        let tools = self.effective_tools(&run, &agent);
        let specs: Vec<ToolSpec> = tools
            .iter()
            .map(|tool| ToolSpec {
                name: tool.name.clone(),
                description: tool.description.clone(),
                parameters: tool.input_schema.clone(),
            })
            .collect();
        loop {
            // Safe point: cancel, shutdown, pause.
            if handle.cancel.is_cancelled() || self.inner.shutdown.is_cancelled() {
                return Ok(());
            }
            if handle.pause_requested() || run.pause_requested {
                let checkpoint = self.checkpoint(&run, &state);
                self.commit_step(&mut run, |run, change| {
                    mark_paused(run, change, PauseReason::Manual, JsonMap::new());
                    change.checkpoint = Some(checkpoint.clone());
                })
                .await?;
                return Ok(());
            }
            if state.transcript.is_empty() {
                state
                    .transcript
                    .push(ChatMessage::system(Self::system_prompt(
                        &agent, &run, &tools,
                    )));
                let instructions = if run.input.instructions.is_empty() {
                    "Begin.".to_string()
                } else {
                    run.input.instructions.clone()
                };
                state.transcript.push(ChatMessage::user(instructions));
            }
            if !state.pending.is_empty() {
                if let Flow::Stop = self
                    .settle_pending(&mut run, &agent, &tools, &mut state)
                    .await?
                {
                    return Ok(());
                }
                continue;
            }
            state.queued_user_messages.extend(handle.take_steers());
            state.flush_queued_messages();
            let limit = self.step_limit(&run);
            if state.turn_steps >= limit {
                let usage = state.usage;
                self.commit_step(&mut run, |run, change| {
                    mark_failed(
                        run,
                        change,
                        &format!("tool step limit of {limit} reached"),
                        Some(&usage),
                        self.now(),
                    );
                })
                .await?;
                return Ok(());
            }
            let route = match self.route_for(&run).await {
                Ok(route) => route,
                Err(RouteProblem::Authentication(reason)) => {
                    self.pause_for_authentication(&mut run, &state, &reason)
                        .await?;
                    return Ok(());
                }
                Err(RouteProblem::Other(reason)) => {
                    let usage = state.usage;
                    self.commit_step(&mut run, |run, change| {
                        mark_failed(run, change, &reason, Some(&usage), self.now())
                    })
                    .await?;
                    return Ok(());
                }
            };
            let request = ModelRequest {
                messages: state.transcript.clone(),
                tools: specs.clone(),
            };
            let mut marks = StreamMarks {
                message_id: new_id(prefix::MESSAGE),
                reasoning_id: new_id(prefix::MESSAGE),
                text_started: false,
                reasoning_started: false,
                tools_started: Vec::new(),
            };
            let response = match self
                .call_model(&mut run, &route, &request, handle, &mut marks)
                .await?
            {
                Some(Ok(response)) => response,
                Some(Err(ModelError::Authentication(reason))) => {
                    self.pause_for_authentication(&mut run, &state, &reason)
                        .await?;
                    return Ok(());
                }
                Some(Err(error)) => {
                    let usage = state.usage;
                    let message = error.to_string();
                    self.commit_step(&mut run, |run, change| {
                        mark_failed(run, change, &message, Some(&usage), self.now())
                    })
                    .await?;
                    return Ok(());
                }
                None => return Ok(()),
            };
            state.step += 1;
            state.turn_steps += 1;
            state.usage.add(&response.usage);
            if let Flow::Stop = self
                .handle_response(&mut run, &agent, &tools, &mut state, response, marks)
                .await?
            {
                return Ok(());
            }
        }
    }

    pub(crate) async fn route_for(&self, run: &Run) -> Result<ModelRoute, RouteProblem> {
        if crate::studio_replay::is_scripted(run) {
            return Ok(crate::studio_replay::scripted_route(run));
        }
        let Some(model) = run.input.model.as_ref() else {
            return Err(RouteProblem::Other("run has no model route".to_string()));
        };
        let credential = if run.input.credential_source == "app" {
            let sealed = self
                .deps()
                .store
                .get_secret(&run.id, MODEL_CREDENTIAL_SECRET)
                .await
                .map_err(|error| RouteProblem::Other(error.to_string()))?;
            let Some(sealed) = sealed else {
                return Err(RouteProblem::Authentication(
                    "the run's model credential was revoked".to_string(),
                ));
            };
            let Some(sealer) = self.deps().sealer.as_ref() else {
                return Err(RouteProblem::Other(
                    "run credentials cannot be opened: no encryption key".to_string(),
                ));
            };
            let plaintext = sealer
                .open(&run.app_id, &run.id, MODEL_CREDENTIAL_SECRET, &sealed)
                .map_err(|error| RouteProblem::Authentication(error.to_string()))?;
            let credential: RunCredential = serde_json::from_slice(&plaintext).map_err(|_| {
                RouteProblem::Authentication("stored model credential is unreadable".to_string())
            })?;
            if matches!(credential.expires_at, Some(expiry) if expiry <= self.now()) {
                return Err(RouteProblem::Authentication(
                    "the run's model credential expired".to_string(),
                ));
            }
            Some(credential)
        } else {
            None
        };
        resolve_route(&self.inner.config, model, credential.as_ref()).map_err(RouteProblem::Other)
    }

    async fn pause_for_authentication(
        &self,
        run: &mut Run,
        state: &LoopState,
        reason: &str,
    ) -> EngineResult<()> {
        let provider = run
            .input
            .model
            .as_ref()
            .map(|model| model.provider.clone())
            .unwrap_or_default();
        let now = self.now();
        let checkpoint = self.checkpoint(run, state);
        self.commit_step(run, |run, change| {
            let payload = json!({"provider": provider, "reason": reason});
            change.interactions.push(interaction(
                run,
                interaction_kind::AUTHENTICATION,
                "Model authentication required",
                reason,
                payload,
                now,
            ));
            let extra = object(json!({"provider": provider}));
            mark_paused(run, change, PauseReason::Authentication, extra);
            change.checkpoint = Some(checkpoint.clone());
        })
        .await?;
        Ok(())
    }

    /// Streams one model call, publishing deltas live and committing `*_started` events as the
    /// stream opens them. `None` when the run was cancelled or stopped meanwhile.
    async fn call_model(
        &self,
        run: &mut Run,
        route: &ModelRoute,
        request: &ModelRequest,
        handle: &Arc<OwnerHandle>,
        marks: &mut StreamMarks,
    ) -> EngineResult<Option<Result<ModelResponse, ModelError>>> {
        if let Some(answer) = self.scripted_answer(run, request).await? {
            return Ok(Some(answer));
        }
        let (sender, mut receiver) = mpsc::unbounded_channel::<StreamDelta>();
        let models = self.deps().models.clone();
        let call = async move {
            let mut sink = move |delta: StreamDelta| {
                let _ = sender.send(delta);
            };
            models.complete(route, request, &mut sink).await
        };
        let cancel = handle.cancel.clone();
        let guarded = async move {
            tokio::select! {
                result = call => Some(result),
                _ = cancel.cancelled() => None,
            }
        };
        let consume = async {
            let mut stopped = false;
            let mut first_batch = true;
            while let Some(first) = receiver.recv().await {
                let mut batch = vec![first];
                if first_batch {
                    // A short answer often arrives whole within a few milliseconds; then the
                    // step's one commit carries its `*_started` events and no delta is needed.
                    first_batch = false;
                    let window = tokio::time::sleep(DELTA_COALESCE_WINDOW);
                    tokio::pin!(window);
                    loop {
                        tokio::select! {
                            next = receiver.recv() => match next {
                                Some(delta) => batch.push(delta),
                                None => return Ok(false),
                            },
                            _ = &mut window => break,
                        }
                    }
                }
                while let Ok(next) = receiver.try_recv() {
                    batch.push(next);
                }
                if stopped {
                    continue;
                }
                match self.publish_deltas(run, marks, batch).await {
                    Ok(true) => {}
                    Ok(false) => stopped = true,
                    Err(error) => return Err(error),
                }
            }
            Ok(stopped)
        };
        let (result, stopped) = tokio::join!(guarded, consume);
        if stopped? {
            return Ok(None);
        }
        Ok(result)
    }

    /// Commits the `*_started` events a batch of deltas opens, then publishes the deltas.
    async fn publish_deltas(
        &self,
        run: &mut Run,
        marks: &mut StreamMarks,
        batch: Vec<StreamDelta>,
    ) -> EngineResult<bool> {
        let mut opened: Vec<EventDraft> = Vec::new();
        for delta in &batch {
            match delta {
                StreamDelta::Text(_) if !marks.text_started => {
                    marks.text_started = true;
                    opened.push(event(
                        kind::ASSISTANT_MESSAGE_STARTED,
                        json!({"message_id": marks.message_id}),
                    ));
                }
                StreamDelta::Reasoning(_) if !marks.reasoning_started => {
                    marks.reasoning_started = true;
                    opened.push(event(
                        kind::REASONING_MESSAGE_STARTED,
                        json!({"message_id": marks.reasoning_id}),
                    ));
                }
                StreamDelta::ToolCallStarted { index, id, name }
                    if !marks.tools_started.iter().any(|(seen, _)| seen == index) =>
                {
                    marks.tools_started.push((*index, id.clone()));
                    opened.push(event(
                        kind::TOOL_CALL_STARTED,
                        json!({"tool_call_id": id, "tool_name": canonical_tool_name(name), "parent_message_id": marks.message_id}),
                    ));
                }
                _ => {}
            }
        }
        if !opened.is_empty() {
            if let Flow::Stop = self
                .commit_step(run, |_, change| {
                    change.events.extend(opened.iter().cloned())
                })
                .await?
            {
                return Ok(false);
            }
        }
        for delta in batch {
            match delta {
                StreamDelta::Text(text) => self.publish_transient(
                    run,
                    kind::ASSISTANT_MESSAGE_DELTA,
                    object(json!({"message_id": marks.message_id, "text": text})),
                ),
                StreamDelta::Reasoning(text) => self.publish_transient(
                    run,
                    kind::REASONING_MESSAGE_DELTA,
                    object(json!({"message_id": marks.reasoning_id, "text": text})),
                ),
                StreamDelta::ToolCallArguments { index, delta } => {
                    if let Some((_, id)) =
                        marks.tools_started.iter().find(|(seen, _)| *seen == index)
                    {
                        self.publish_transient(
                            run,
                            kind::TOOL_CALL_ARGS_DELTA,
                            object(json!({"tool_call_id": id, "args_delta": delta})),
                        );
                    }
                }
                StreamDelta::ToolCallStarted { .. } => {}
            }
        }
        Ok(true)
    }

    /// Plans what to do with each tool call of a response.
    fn plan_calls(
        &self,
        run: &Run,
        agent: &Agent,
        tools: &[ToolDefinition],
        calls: &[ModelToolCall],
        studio: Option<(&crate::studio_replay::StudioGate, &[ChatMessage])>,
    ) -> Vec<Plan> {
        calls
            .iter()
            .map(|call| {
                let name = canonical_tool_name(&call.name);
                let input: Value = if call.arguments.trim().is_empty() {
                    json!({})
                } else {
                    match serde_json::from_str(&call.arguments) {
                        Ok(value) => value,
                        Err(error) => {
                            return Plan::Reject(format!(
                                "invalid tool arguments (not JSON): {error}"
                            ))
                        }
                    }
                };
                let Some(tool) = tools.iter().find(|tool| tool.name == name) else {
                    return Plan::Reject(format!("tool {name} is not available to this run"));
                };
                match name.as_str() {
                    control_tools::FINISH_TURN => {
                        Plan::Reject("finish_turn must be the only tool call in a response".into())
                    }
                    control_tools::UPDATE_PLAN => Plan::Replan { input },
                    control_tools::REQUEST_USER_INPUT => Plan::Park {
                        kind: interaction_kind::REQUEST_USER_INPUT,
                        title: "Input requested".into(),
                        reason: PauseReason::HumanInput,
                        payload: json!({"schema": "request_user_input_v1", "input": input}),
                        record: false,
                    },
                    control_tools::REQUEST_APPROVAL | control_tools::REQUEST_REVIEW_CHECKPOINT => {
                        let title = input
                            .get("title")
                            .and_then(Value::as_str)
                            .unwrap_or("Approval requested")
                            .to_string();
                        let (kind, schema) = if name == control_tools::REQUEST_APPROVAL {
                            (interaction_kind::APPROVAL_REQUEST, "approval_request_v1")
                        } else {
                            (interaction_kind::REVIEW_CHECKPOINT, "review_checkpoint_v1")
                        };
                        Plan::Park {
                            kind,
                            title,
                            reason: PauseReason::HumanApproval,
                            payload: json!({"schema": schema, "input": input}),
                            record: false,
                        }
                    }
                    _ => match studio.and_then(|(gate, seen)| gate.intercept(tool, call, seen)) {
                        Some(crate::studio_replay::Intercept::Substitute(content)) => {
                            Plan::Substitute(content)
                        }
                        Some(crate::studio_replay::Intercept::Park { why }) => {
                            let mut payload = approval_payload(tool, &input);
                            payload["studio"] = json!(why);
                            payload["tool_call_id"] = json!(call.id);
                            Plan::Park {
                                kind: interaction_kind::APPROVAL_REQUEST,
                                title: format!("Approve {name} ({why})"),
                                reason: PauseReason::HumanApproval,
                                payload,
                                record: true,
                            }
                        }
                        None if needs_approval(agent.approval_mode, run, tool) => Plan::Park {
                            kind: interaction_kind::APPROVAL_REQUEST,
                            title: "Approve tool call".into(),
                            reason: PauseReason::HumanApproval,
                            payload: approval_payload(tool, &input),
                            record: true,
                        },
                        None => Plan::Run {
                            tool: tool.clone(),
                            input,
                        },
                    },
                }
            })
            .collect()
    }

    /// Validates a `finish_turn` call; the error text is what the model is told.
    fn check_finish(call: &ModelToolCall) -> Result<Value, String> {
        let input: Value = serde_json::from_str(&call.arguments)
            .map_err(|_| "finish_turn arguments must be a JSON object".to_string())?;
        let outcome = input
            .get("outcome")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let summary = input
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !matches!(outcome, "completed" | "blocked") {
            return Err("finish_turn.outcome must be completed or blocked".into());
        }
        if summary.trim().is_empty() {
            return Err("finish_turn.summary is required".into());
        }
        if outcome == "blocked"
            && input
                .get("blocker")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim()
                .is_empty()
        {
            return Err("finish_turn.blocker is required when outcome is blocked".into());
        }
        Ok(input)
    }

    /// Events and rows common to every response: started events the stream did not open,
    /// the completed assistant message, and its transcript row.
    fn response_records(
        &self,
        run: &Run,
        response: &ModelResponse,
        marks: &StreamMarks,
        change: &mut RunChange,
    ) {
        if !response.reasoning.is_empty() {
            if !marks.reasoning_started {
                change.events.push(event(
                    kind::REASONING_MESSAGE_STARTED,
                    json!({"message_id": marks.reasoning_id}),
                ));
            }
            change.events.push(event(
                kind::REASONING_MESSAGE_COMPLETED,
                json!({"message_id": marks.reasoning_id, "content": response.reasoning}),
            ));
        }
        if !response.text.is_empty() {
            if !marks.text_started {
                change.events.push(event(
                    kind::ASSISTANT_MESSAGE_STARTED,
                    json!({"message_id": marks.message_id}),
                ));
            }
            change.events.push(event(
                kind::ASSISTANT_MESSAGE_COMPLETED,
                json!({"message_id": marks.message_id, "content": response.text}),
            ));
        }
        for (index, call) in response.tool_calls.iter().enumerate() {
            if !marks.tools_started.iter().any(|(_, id)| id == &call.id)
                && !marks.tools_started.iter().any(|(seen, _)| *seen == index)
            {
                change.events.push(event(
                    kind::TOOL_CALL_STARTED,
                    json!({"tool_call_id": call.id, "tool_name": canonical_tool_name(&call.name), "parent_message_id": marks.message_id}),
                ));
            }
        }
        let message_kind = if response.tool_calls.is_empty() {
            message_type::MESSAGE
        } else {
            message_type::ASSISTANT_TURN
        };
        let mut row = message(run, "assistant", &response.text, message_kind, self.now());
        row.id = marks.message_id.clone();
        row.runtime_message_id = marks.message_id.clone();
        if !response.tool_calls.is_empty() {
            row.tool_invocations = Some(json!(response
                .tool_calls
                .iter()
                .map(|call| json!({"id": call.id, "name": canonical_tool_name(&call.name), "arguments": call.arguments}))
                .collect::<Vec<_>>()));
        }
        change.messages.push(row);
    }

    /// Finishes a turn: pause for the next user message (chat) or complete the run.
    fn finish_turn(
        &self,
        run: &mut Run,
        change: &mut RunChange,
        state: &LoopState,
        summary: Option<&Value>,
    ) {
        if let Some(summary) = summary {
            run.output_summary
                .insert("finish_turn".into(), summary.clone());
        }
        if !state.usage.is_zero() {
            change.events.push(event(
                kind::USAGE_CHECKPOINT,
                json!({"usage": usage_json(&state.usage), "usage_semantic": "cumulative"}),
            ));
        }
        if run.input.turn_policy.pauses_after_assistant() {
            run.output_summary
                .insert("usage".into(), usage_json(&state.usage));
            mark_paused(
                run,
                change,
                PauseReason::AwaitingUserMessage,
                JsonMap::new(),
            );
        } else {
            mark_completed(run, change, Some(&state.usage), None, self.now());
        }
    }

    async fn handle_response(
        &self,
        run: &mut Run,
        agent: &Agent,
        tools: &[ToolDefinition],
        state: &mut LoopState,
        response: ModelResponse,
        marks: StreamMarks,
    ) -> EngineResult<Flow> {
        state.transcript.push(ChatMessage::assistant(
            response.text.clone(),
            response.tool_calls.clone(),
        ));
        let explicit = run.input.turn_policy.is_explicit_completion();
        let max_corrections = run.input.turn_policy.max_completion_corrections;

        // A lone finish_turn ends the turn (valid) or earns a correction (invalid).
        let finish = match response.tool_calls.as_slice() {
            [only] if canonical_tool_name(&only.name) == control_tools::FINISH_TURN => {
                Some((only.clone(), Self::check_finish(only)))
            }
            _ => None,
        };
        if let Some((call, Ok(summary))) = &finish {
            state
                .transcript
                .push(ChatMessage::tool_result(call.id.clone(), "turn finished"));
            state.pending.clear();
            let checkpoint = self.checkpoint(run, state);
            let frozen = state.clone();
            return self
                .commit_step(run, |run, change| {
                    self.response_records(run, &response, &marks, change);
                    self.tool_result_records(run, change, call, "turn finished", false, 0);
                    change.checkpoint = Some(checkpoint.clone());
                    self.finish_turn(run, change, &frozen, Some(summary));
                })
                .await;
        }
        if response.tool_calls.is_empty() || matches!(finish, Some((_, Err(_)))) {
            if explicit {
                state.corrections += 1;
                let problem = match &finish {
                    Some((call, Err(problem))) => {
                        state.transcript.push(ChatMessage::tool_result(
                            call.id.clone(),
                            format!("error: {problem}"),
                        ));
                        problem.clone()
                    }
                    _ => "the turn ended without calling finish_turn".to_string(),
                };
                if state.corrections > max_corrections {
                    let usage = state.usage;
                    let checkpoint = self.checkpoint(run, state);
                    return self
                        .commit_step(run, |run, change| {
                            self.response_records(run, &response, &marks, change);
                            change.checkpoint = Some(checkpoint.clone());
                            mark_failed(
                                run,
                                change,
                                &format!("turn_completion_guard_exhausted: {problem}"),
                                Some(&usage),
                                self.now(),
                            );
                        })
                        .await;
                }
                let correction = format!(
                    "Runtime completion correction {}/{}: {problem}. Call finish_turn as the only tool call with outcome, summary (and blocker when blocked).",
                    state.corrections, max_corrections
                );
                state.transcript.push(ChatMessage::user(correction.clone()));
                let checkpoint = self.checkpoint(run, state);
                let usage = state.usage;
                return self
                    .commit_step(run, |run, change| {
                        self.response_records(run, &response, &marks, change);
                        if let Some((call, Err(problem))) = &finish {
                            self.tool_result_records(
                                run,
                                change,
                                call,
                                &format!("error: {problem}"),
                                true,
                                0,
                            );
                        }
                        change.messages.push(message(
                            run,
                            "user",
                            &correction,
                            message_type::SYSTEM_NOTIFICATION,
                            self.now(),
                        ));
                        change.events.push(event(
                            kind::USAGE_CHECKPOINT,
                            json!({"usage": usage_json(&usage), "usage_semantic": "cumulative"}),
                        ));
                        change.checkpoint = Some(checkpoint.clone());
                    })
                    .await;
            }
            let checkpoint = self.checkpoint(run, state);
            let frozen = state.clone();
            return self
                .commit_step(run, |run, change| {
                    self.response_records(run, &response, &marks, change);
                    change.checkpoint = Some(checkpoint.clone());
                    self.finish_turn(run, change, &frozen, None);
                })
                .await;
        }

        // A tool round.
        let gate = self.studio_gate(run).await?;
        let studio = gate.as_ref().map(|g| (g, state.transcript.as_slice()));
        let plans = self.plan_calls(run, agent, tools, &response.tool_calls, studio);
        let now = self.now();
        let mut interactions: Vec<Interaction> = Vec::new();
        let mut gated_records: Vec<ToolCallRecord> = Vec::new();
        let mut pause_reason: Option<PauseReason> = None;
        let mut answered: Vec<Answered> = Vec::new();
        let mut to_run: Vec<(ModelToolCall, ToolDefinition, Value)> = Vec::new();
        let mut plan_events: Vec<(String, Value)> = Vec::new();
        for (call, plan) in response.tool_calls.iter().zip(plans) {
            match plan {
                Plan::Reject(reason) => {
                    answered.push((call.clone(), ToolOutput::error(reason), None, 0))
                }
                Plan::Substitute(content) => {
                    answered.push((call.clone(), ToolOutput::text(content), None, 0))
                }
                Plan::Replan { input } => {
                    plan_events.push((call.id.clone(), input.clone()));
                    answered.push((call.clone(), ToolOutput::text("plan updated"), None, 0));
                }
                Plan::Park {
                    kind,
                    title,
                    reason,
                    payload,
                    record,
                } => {
                    let pending = interaction(run, kind, &title, "", payload, now);
                    let record_id = if record {
                        let tool = tools
                            .iter()
                            .find(|tool| tool.name == canonical_tool_name(&call.name));
                        let input = serde_json::from_str(&call.arguments).unwrap_or(json!({}));
                        let row = tool_call_record(
                            run,
                            &canonical_tool_name(&call.name),
                            input,
                            tool.map(|t| t.mutating).unwrap_or(true),
                            true,
                            now,
                        );
                        let id = row.id.clone();
                        gated_records.push(row);
                        Some(id)
                    } else {
                        None
                    };
                    state.pending.push(PendingCall {
                        call: call.clone(),
                        interaction_id: Some(pending.id.clone()),
                        record_id,
                        decision: None,
                        started: false,
                    });
                    interactions.push(pending);
                    pause_reason = match (pause_reason, reason) {
                        (Some(PauseReason::HumanInput), _) | (_, PauseReason::HumanInput) => {
                            Some(PauseReason::HumanInput)
                        }
                        (_, other) => Some(other),
                    };
                }
                Plan::Run { tool, input } => to_run.push((call.clone(), tool, input)),
            }
        }
        // Non-mutating calls run in parallel; mutating ones one by one after a started marker.
        let (mutating, reading): (Vec<_>, Vec<_>) =
            to_run.into_iter().partition(|(_, tool, _)| tool.mutating);
        let context = self.tool_context(run);
        let results = futures::future::join_all(reading.into_iter().map(|(call, tool, input)| {
            let context = &context;
            async move {
                let started = Instant::now();
                let output = self
                    .deps()
                    .tools
                    .call(context, &tool.name, input.clone())
                    .await;
                (
                    call,
                    output,
                    Some((tool, input)),
                    started.elapsed().as_millis() as u64,
                )
            }
        }))
        .await;
        answered.extend(results);
        // The first commit of the round records the response and everything answered so far.
        let mut transcript_results: Vec<(String, String)> = Vec::new();
        for (call, output, _, _) in &answered {
            transcript_results.push((call.id.clone(), output.content.clone()));
        }
        for (id, content) in &transcript_results {
            state
                .transcript
                .push(ChatMessage::tool_result(id.clone(), content.clone()));
        }
        for (call, tool, _) in &mutating {
            state.pending.push(PendingCall {
                call: call.clone(),
                interaction_id: None,
                record_id: None,
                decision: Some(Decision::Approved),
                started: false,
            });
            let _ = tool;
        }
        // Order pending so the transcript keeps the model's call order for mutating calls.
        let pause = pause_reason;
        let only_parked = mutating.is_empty();
        let checkpoint = self.checkpoint(run, state);
        let usage = state.usage;
        let flow = self
            .commit_step(run, |run, change| {
                self.response_records(run, &response, &marks, change);
                for (call_id, input) in &plan_events {
                    self.plan_records(run, change, call_id, input);
                }
                for (call, output, ran, duration) in &answered {
                    let record = ran
                        .as_ref()
                        .map(|(tool, input)| (tool.mutating, input.clone()));
                    if let Some((mutating, input)) = record {
                        let mut row = tool_call_record(
                            run,
                            &canonical_tool_name(&call.name),
                            input,
                            mutating,
                            false,
                            now,
                        );
                        row.output = Some(json!({"content": output.content}));
                        if output.is_error {
                            row.error = output.content.clone();
                        }
                        change.tool_calls.push(row);
                    }
                    self.tool_result_records(
                        run,
                        change,
                        call,
                        &output.content,
                        output.is_error,
                        *duration,
                    );
                }
                change.interactions.extend(interactions.iter().cloned());
                change.tool_calls.extend(gated_records.iter().cloned());
                if !usage.is_zero() {
                    change.events.push(event(
                        kind::USAGE_CHECKPOINT,
                        json!({"usage": usage_json(&usage), "usage_semantic": "cumulative"}),
                    ));
                }
                change.checkpoint = Some(checkpoint.clone());
                if let (Some(reason), true) = (pause, only_parked) {
                    mark_paused(run, change, reason, JsonMap::new());
                }
            })
            .await?;
        if let Flow::Stop = flow {
            return Ok(Flow::Stop);
        }
        if !mutating.is_empty() {
            // Mutating calls (already approved or not gated) settle through the pending path,
            // which writes the started marker before each one.
            return self.settle_pending(run, agent, tools, state).await;
        }
        Ok(Flow::Continue)
    }

    fn plan_records(&self, run: &Run, change: &mut RunChange, call_id: &str, input: &Value) {
        let plan = input.get("plan").cloned().unwrap_or(json!([]));
        let note = input
            .get("explanation")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let content = serde_json::to_string(input).unwrap_or_default();
        change.artifacts.push(crate::records::artifact(
            run,
            "run_plan",
            "json",
            &content,
            self.now(),
        ));
        change.events.push(event(
            kind::PLAN_UPDATED,
            json!({"content": content, "plan": plan, "note": note, "data": {"tool_call_id": call_id}}),
        ));
    }

    /// Result rows and events of one answered call.
    fn tool_result_records(
        &self,
        run: &Run,
        change: &mut RunChange,
        call: &ModelToolCall,
        content: &str,
        is_error: bool,
        duration_ms: u64,
    ) {
        let mut row = message(run, "tool", content, message_type::TOOL_RESULT, self.now());
        row.runtime_message_id = call.id.clone();
        let result_id = row.id.clone();
        change.messages.push(row);
        let name = canonical_tool_name(&call.name);
        change.events.push(event(
            kind::TOOL_CALL_RESULT,
            json!({"tool_call_id": call.id, "tool_name": name, "content": truncate(content, 16 * 1024), "result_message_id": result_id}),
        ));
        let mut finished = json!({
            "tool_call_id": call.id,
            "tool_name": name,
            "tool_input": truncate(&call.arguments, 16 * 1024),
            "output_summary": truncate(content, 512),
            "duration_ms": duration_ms,
        });
        if is_error {
            finished["error"] = json!(truncate(content, 2048));
        }
        change
            .events
            .push(event(kind::TOOL_CALL_FINISHED, finished));
    }

    /// Gives every pending call a result: executes approved ones (with a started marker first
    /// for mutations), answers rejected/answered ones, and reports unknown outcomes after a
    /// crash. Stops (parks) if a call still waits for a person.
    async fn settle_pending(
        &self,
        run: &mut Run,
        agent: &Agent,
        tools: &[ToolDefinition],
        state: &mut LoopState,
    ) -> EngineResult<Flow> {
        if state
            .pending
            .iter()
            .any(|pending| pending.decision.is_none() && !pending.started)
        {
            // Still waiting: make sure the run is parked.
            let reason = if state
                .pending
                .iter()
                .any(|p| canonical_tool_name(&p.call.name) == control_tools::REQUEST_USER_INPUT)
            {
                PauseReason::HumanInput
            } else {
                PauseReason::HumanApproval
            };
            let checkpoint = self.checkpoint(run, state);
            self.commit_step(run, |run, change| {
                change.checkpoint = Some(checkpoint.clone());
                mark_paused(run, change, reason, JsonMap::new());
            })
            .await?;
            return Ok(Flow::Stop);
        }
        let context = self.tool_context(run);
        while !state.pending.is_empty() {
            let pending = state.pending[0].clone();
            let name = canonical_tool_name(&pending.call.name);
            let tool = tools.iter().find(|tool| tool.name == name).cloned();
            let input: Value = serde_json::from_str(&pending.call.arguments).unwrap_or(json!({}));
            let (output, ran, duration) = match (&pending.decision, pending.started) {
                (_, true) => (
                    ToolOutput::error(format!(
                        "outcome unknown: the runtime stopped while {name} was running; check its effect before repeating it"
                    )),
                    None,
                    0,
                ),
                (Some(Decision::Rejected { reason }), _) => {
                    let text = if reason.is_empty() { "the reviewer rejected this tool call".to_string() } else { format!("the reviewer rejected this tool call: {reason}") };
                    (ToolOutput::error(text), None, 0)
                }
                (Some(Decision::Answered { content }), _) => (ToolOutput::text(content.clone()), None, 0),
                (Some(Decision::Approved), _) => match tool {
                    Some(tool) if control_tools::pauses(&tool.name) => (ToolOutput::text("approved"), None, 0),
                    Some(tool) => {
                        // Marker first: a crash during the call must not repeat a mutation.
                        state.pending[0].started = true;
                        let checkpoint = self.checkpoint(run, state);
                        let mode = agent.approval_mode;
                        if let Flow::Stop = self
                            .commit_step(run, |run, change| {
                                change.checkpoint = Some(checkpoint.clone());
                                consume_approval(mode, run);
                            })
                            .await?
                        {
                            return Ok(Flow::Stop);
                        }
                        let started = Instant::now();
                        let output = self.deps().tools.call(&context, &tool.name, input.clone()).await;
                        (output, Some(tool), started.elapsed().as_millis() as u64)
                    }
                    None => (ToolOutput::error(format!("tool {name} is not available to this run")), None, 0),
                },
                (None, false) => unreachable_pending(),
            };
            state.pending.remove(0);
            state.transcript.push(ChatMessage::tool_result(
                pending.call.id.clone(),
                output.content.clone(),
            ));
            state.flush_queued_messages();
            let checkpoint = self.checkpoint(run, state);
            let now = self.now();
            let flow = self
                .commit_step(run, |run, change| {
                    if let Some(tool) = &ran {
                        let mut row = tool_call_record(
                            run,
                            &tool.name,
                            input.clone(),
                            tool.mutating,
                            pending.record_id.is_some(),
                            now,
                        );
                        if let Some(id) = &pending.record_id {
                            row.id = id.clone();
                        }
                        row.output = Some(json!({"content": output.content}));
                        if output.is_error {
                            row.error = output.content.clone();
                        }
                        change.tool_calls.push(row);
                    }
                    self.tool_result_records(
                        run,
                        change,
                        &pending.call,
                        &output.content,
                        output.is_error,
                        duration,
                    );
                    change.checkpoint = Some(checkpoint.clone());
                })
                .await?;
            if let Flow::Stop = flow {
                return Ok(Flow::Stop);
            }
        }
        Ok(Flow::Continue)
    }
}

/// Calls without a decision were filtered out above; answer defensively instead of panicking.
fn unreachable_pending() -> (ToolOutput, Option<ToolDefinition>, u64) {
    (
        ToolOutput::error("tool call is still waiting for a decision"),
        None,
        0,
    )
}
