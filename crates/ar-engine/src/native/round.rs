//! One model response handled: finish or correct a turn, or plan and run a tool round
//! through the approval gate, and the records and events each writes.

use ar_core::event::{self as ev, RunEvent};
use ar_core::model::{ChatMessage, ModelResponse, ModelToolCall};
use ar_core::records::{interaction_kind, message_type, Interaction, ToolCallRecord};
use ar_core::store::RunChange;
use ar_core::tool::{canonical_tool_name, ToolDefinition, ToolOutput};
use ar_core::{Agent, MessageRole, PauseReason, Run};
use serde_json::{json, Value};

use crate::control_tools;
use crate::engine::Engine;
use crate::error::EngineResult;
use crate::gate::{approval_payload, needs_approval};
use crate::records::{
    clip, interaction, mark_failed, mark_paused, mark_turn_done, message, record_tool_output,
    tool_call_record, usage_checkpoint,
};
use crate::skills::{Completion, RunSkills};
use crate::transcript::{Decision, LoopState, PendingCall};

use super::*;

impl Engine {
    /// Plans what to do with each tool call of a response.
    pub(super) fn plan_calls(
        &self,
        run: &Run,
        agent: &Agent,
        (tools, skills): (&[ToolDefinition], &ar_skills::SkillTools),
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
                    skill if ar_skills::tools::is_skill_tool(skill) => {
                        skill_plan(skills, tool, input)
                    }
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
    pub(super) fn check_finish(call: &ModelToolCall) -> Result<Value, String> {
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
    pub(super) fn response_records(
        &self,
        run: &Run,
        response: &ModelResponse,
        marks: &StreamMarks,
        change: &mut RunChange,
    ) {
        // Reasoning, then text: each the `*_started` the stream did not open, and its `*_completed`.
        type Wrap = fn(ev::MessageStarted) -> RunEvent;
        type WrapDone = fn(ev::MessageCompleted) -> RunEvent;
        let parts: [(&str, &str, bool, Wrap, WrapDone); 2] = [
            (
                &response.reasoning,
                &marks.reasoning_id,
                marks.reasoning_started,
                RunEvent::ReasoningMessageStarted,
                RunEvent::ReasoningMessageCompleted,
            ),
            (
                &response.text,
                &marks.message_id,
                marks.text_started,
                RunEvent::AssistantMessageStarted,
                RunEvent::AssistantMessageCompleted,
            ),
        ];
        for (content, message_id, opened, start, done) in parts {
            if content.is_empty() {
                continue;
            }
            if !opened {
                change.events.push(start(ev::MessageStarted {
                    message_id: message_id.to_string(),
                }));
            }
            change.events.push(done(ev::MessageCompleted {
                message_id: message_id.to_string(),
                content: content.to_string(),
                encrypted_value: String::new(),
            }));
        }
        for (index, call) in response.tool_calls.iter().enumerate() {
            if !marks.tools_started.iter().any(|(_, id)| id == &call.id)
                && !marks.tools_started.iter().any(|(seen, _)| *seen == index)
            {
                change
                    .events
                    .push(RunEvent::ToolCallStarted(ev::ToolCallStarted {
                        tool_call_id: call.id.clone(),
                        tool_name: canonical_tool_name(&call.name),
                        parent_message_id: marks.message_id.clone(),
                    }));
            }
        }
        let message_kind = if response.tool_calls.is_empty() {
            message_type::MESSAGE
        } else {
            message_type::ASSISTANT_TURN
        };
        let mut row = message(
            run,
            MessageRole::Assistant,
            &response.text,
            message_kind,
            self.now(),
        );
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
    pub(super) fn finish_turn(
        &self,
        run: &mut Run,
        change: &mut RunChange,
        state: &LoopState,
        summary: Option<&Value>,
    ) -> EngineResult<()> {
        if let Some(summary) = summary {
            run.output_summary
                .insert("finish_turn".into(), summary.clone());
        }
        if !state.usage.is_zero() {
            change.events.push(usage_checkpoint(&state.usage));
        }
        mark_turn_done(run, change, &state.usage, self.now())
    }

    pub(super) async fn handle_response(
        &self,
        run: &mut Run,
        agent: &Agent,
        (tools, skills): (&[ToolDefinition], &RunSkills),
        state: &mut LoopState,
        response: ModelResponse,
        marks: StreamMarks,
    ) -> EngineResult<Flow> {
        state.transcript.push(ChatMessage::assistant(
            response.text.clone(),
            response.tool_calls.clone(),
        ));
        // A lone finish_turn ends the turn (valid) or earns a correction (invalid).
        let finish = match response.tool_calls.as_slice() {
            [only] if canonical_tool_name(&only.name) == control_tools::FINISH_TURN => {
                Some((only.clone(), Self::check_finish(only)))
            }
            _ => None,
        };
        if let Some((call, Ok(summary))) = &finish {
            if let Some(flow) = self
                .gate_completion(run, skills, state, &response, &marks)
                .await?
            {
                return Ok(flow);
            }
            return self
                .finish_with_call(run, state, &response, &marks, call, summary)
                .await;
        }
        if response.tool_calls.is_empty() || finish.is_some() {
            let explicit = run.input.turn_policy.is_explicit_completion();
            if !explicit {
                if let Some(flow) = self
                    .gate_completion(run, skills, state, &response, &marks)
                    .await?
                {
                    return Ok(flow);
                }
            }
            return self
                .end_or_correct(run, state, &response, &marks, &finish)
                .await;
        }
        self.tool_round(run, agent, (tools, &skills.tools), state, response, marks)
            .await
    }

    /// The completion gate before a turn completes the run (chat turns, which pause, pass):
    /// `Some` when the gate stopped the completion (a corrective turn, or the run failed).
    async fn gate_completion(
        &self,
        run: &mut Run,
        skills: &RunSkills,
        state: &mut LoopState,
        response: &ModelResponse,
        marks: &StreamMarks,
    ) -> EngineResult<Option<Flow>> {
        if skills.is_empty() || run.input.turn_policy.pauses_after_assistant() {
            return Ok(None);
        }
        match self
            .completion_gate(run, skills, state.skill_corrected)
            .await?
        {
            Completion::Proceed => Ok(None),
            Completion::Correct(prompt) => {
                state.skill_corrected = true;
                // A lone finish_turn's call needs its result before the correction.
                for call in &response.tool_calls {
                    state.transcript.push(ChatMessage::tool_result(
                        call.id.clone(),
                        "error: the run may not finish yet",
                    ));
                }
                state.transcript.push(ChatMessage::user(prompt.clone()));
                let checkpoint = self.checkpoint(run, state);
                let flow = self
                    .commit_step(run, |run, change| {
                        self.response_records(run, response, marks, change);
                        for call in &response.tool_calls {
                            let text = "error: the run may not finish yet";
                            self.tool_result_records(run, change, call, text, true, 0);
                        }
                        change.messages.push(message(
                            run,
                            MessageRole::User,
                            &prompt,
                            message_type::SYSTEM_NOTIFICATION,
                            self.now(),
                        ));
                        change.checkpoint = Some(checkpoint.clone());
                        Ok(())
                    })
                    .await?;
                Ok(Some(flow))
            }
            Completion::Fail(reason) => {
                let usage = state.usage;
                let checkpoint = self.checkpoint(run, state);
                let flow = self
                    .commit_step(run, |run, change| {
                        self.response_records(run, response, marks, change);
                        change.checkpoint = Some(checkpoint.clone());
                        mark_failed(run, change, &reason, Some(&usage), self.now())
                    })
                    .await?;
                Ok(Some(flow))
            }
        }
    }

    /// A valid lone `finish_turn`: the turn ends with its summary.
    async fn finish_with_call(
        &self,
        run: &mut Run,
        state: &mut LoopState,
        response: &ModelResponse,
        marks: &StreamMarks,
        call: &ModelToolCall,
        summary: &Value,
    ) -> EngineResult<Flow> {
        state
            .transcript
            .push(ChatMessage::tool_result(call.id.clone(), "turn finished"));
        state.pending.clear();
        let checkpoint = self.checkpoint(run, state);
        let frozen = state.clone();
        self.commit_step(run, |run, change| {
            self.response_records(run, response, marks, change);
            self.tool_result_records(run, change, call, "turn finished", false, 0);
            change.checkpoint = Some(checkpoint.clone());
            self.finish_turn(run, change, &frozen, Some(summary))
        })
        .await
    }

    /// A response without tool calls (or with an invalid `finish_turn`): the turn ends, or an
    /// explicit-completion run is told to finish properly (failing once out of corrections).
    async fn end_or_correct(
        &self,
        run: &mut Run,
        state: &mut LoopState,
        response: &ModelResponse,
        marks: &StreamMarks,
        finish: &Option<(ModelToolCall, Result<Value, String>)>,
    ) -> EngineResult<Flow> {
        let explicit = run.input.turn_policy.is_explicit_completion();
        let max_corrections = run.input.turn_policy.max_completion_corrections;
        if explicit {
            state.corrections += 1;
            let problem = match finish {
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
                        self.response_records(run, response, marks, change);
                        change.checkpoint = Some(checkpoint.clone());
                        mark_failed(
                            run,
                            change,
                            &format!("turn_completion_guard_exhausted: {problem}"),
                            Some(&usage),
                            self.now(),
                        )
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
                    self.response_records(run, response, marks, change);
                    if let Some((call, Err(problem))) = finish {
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
                        MessageRole::User,
                        &correction,
                        message_type::SYSTEM_NOTIFICATION,
                        self.now(),
                    ));
                    change.events.push(usage_checkpoint(&usage));
                    change.checkpoint = Some(checkpoint.clone());
                    Ok(())
                })
                .await;
        }
        let checkpoint = self.checkpoint(run, state);
        let frozen = state.clone();
        self.commit_step(run, |run, change| {
            self.response_records(run, response, marks, change);
            change.checkpoint = Some(checkpoint.clone());
            self.finish_turn(run, change, &frozen, None)
        })
        .await
    }

    /// A tool round: each call planned through the gate, reading calls run in parallel, the
    /// round committed, mutating calls settled one by one.
    async fn tool_round(
        &self,
        run: &mut Run,
        agent: &Agent,
        (tools, skills): (&[ToolDefinition], &ar_skills::SkillTools),
        state: &mut LoopState,
        response: ModelResponse,
        marks: StreamMarks,
    ) -> EngineResult<Flow> {
        let gate = self.studio_gate(run).await?;
        let studio = gate.as_ref().map(|g| (g, state.transcript.as_slice()));
        let plans = self.plan_calls(run, agent, (tools, skills), &response.tool_calls, studio);
        let now = self.now();
        let mut round = Self::sort_plans(run, tools, state, &response.tool_calls, plans, now);
        // Non-mutating calls run in parallel; mutating ones one by one after a started marker.
        let (mutating, reading): (Vec<_>, Vec<_>) = std::mem::take(&mut round.to_run)
            .into_iter()
            .partition(|(_, tool, _)| tool.mutating);
        let (read, waiting) = self.run_reading_calls(run, reading).await;
        round.answered.extend(read);
        for (call, output, _, _) in &round.answered {
            state.transcript.push(ChatMessage::tool_result(
                call.id.clone(),
                output.content.clone(),
            ));
        }
        // Calls waiting for a credential run again, once, when the run resumes.
        let retried = waiting.iter().map(|(call, _, _)| call);
        for call in retried.chain(mutating.iter().map(|(call, _, _)| call)) {
            state.pending.push(PendingCall {
                call: call.clone(),
                interaction_id: None,
                record_id: None,
                decision: Some(Decision::Approved),
                started: false,
            });
        }
        // The round's first commit records the response and everything answered so far; it
        // pauses the run when parked calls are all that is left.
        let pause = round
            .pause_reason
            .filter(|_| mutating.is_empty() && waiting.is_empty());
        let checkpoint = self.checkpoint(run, state);
        let usage = state.usage;
        let flow = self
            .commit_step(run, |run, change| {
                self.response_records(run, &response, &marks, change);
                self.round_records(run, change, &round, now);
                if !usage.is_zero() {
                    change.events.push(usage_checkpoint(&usage));
                }
                change.checkpoint = Some(checkpoint.clone());
                if let Some(reason) = pause {
                    mark_paused(run, change, reason)?;
                }
                Ok(())
            })
            .await?;
        if let Flow::Stop = flow {
            return Ok(Flow::Stop);
        }
        if let Some((_, server, reason)) = waiting.first() {
            self.pause_for_mcp_authentication(run, state, server, reason)
                .await?;
            return Ok(Flow::Stop);
        }
        if !mutating.is_empty() {
            // Mutating calls (already approved or not gated) settle through the pending path,
            // which writes the started marker before each one.
            return self.settle_pending(run, agent, tools, state).await;
        }
        Ok(Flow::Continue)
    }

    /// Runs the round's reading (non-mutating) calls in parallel: those answered, and those
    /// whose MCP server wants a new credential.
    async fn run_reading_calls(
        &self,
        run: &Run,
        reading: Vec<(ModelToolCall, ToolDefinition, Value)>,
    ) -> (Vec<Answered>, Vec<WaitingForCredential>) {
        let context = self.tool_context(run);
        let context = &context;
        let runs =
            futures::future::join_all(reading.into_iter().map(|(call, tool, input)| async move {
                let ran = self.run_tool(run, context, &tool, input.clone()).await;
                (call, tool, input, ran)
            }))
            .await;
        let mut answered = Vec::new();
        let mut waiting = Vec::new();
        for (call, tool, input, ran) in runs {
            match ran {
                ToolRun::Done(output, duration) => {
                    answered.push((call, output, Some((tool, input)), duration))
                }
                ToolRun::NeedsAuthentication { server, reason } => {
                    waiting.push((call, server, reason))
                }
            }
        }
        (answered, waiting)
    }

    /// The rows and events of a round's answered and parked calls and its plan updates.
    fn round_records(
        &self,
        run: &Run,
        change: &mut RunChange,
        round: &RoundPlan,
        now: chrono::DateTime<chrono::Utc>,
    ) {
        for (call_id, input) in &round.plan_events {
            self.plan_records(run, change, call_id, input);
        }
        for (call, output, ran, duration) in &round.answered {
            if let Some((tool, input)) = ran {
                let name = canonical_tool_name(&call.name);
                let mut row =
                    tool_call_record(run, &name, input.clone(), tool.mutating, false, now);
                record_tool_output(&mut row, &output.content, output.is_error);
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
        change
            .interactions
            .extend(round.interactions.iter().cloned());
        change
            .tool_calls
            .extend(round.gated_records.iter().cloned());
    }

    /// Sorts a round's planned calls: answered at once, parked for a person (with their
    /// interactions and gated audit rows, and the pause they cause), or to run.
    fn sort_plans(
        run: &Run,
        tools: &[ToolDefinition],
        state: &mut LoopState,
        calls: &[ModelToolCall],
        plans: Vec<Plan>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> RoundPlan {
        let mut interactions: Vec<Interaction> = Vec::new();
        let mut gated_records: Vec<ToolCallRecord> = Vec::new();
        let mut pause_reason: Option<PauseReason> = None;
        let mut answered: Vec<Answered> = Vec::new();
        let mut to_run: Vec<(ModelToolCall, ToolDefinition, Value)> = Vec::new();
        let mut plan_events: Vec<(String, Value)> = Vec::new();
        for (call, plan) in calls.iter().zip(plans) {
            match plan {
                Plan::Reject(reason) => {
                    answered.push((call.clone(), ToolOutput::error(reason), None, 0))
                }
                Plan::Substitute(content) => {
                    answered.push((call.clone(), ToolOutput::text(content), None, 0))
                }
                Plan::Answer {
                    tool,
                    input,
                    output,
                } => answered.push((call.clone(), output, Some((tool, input)), 0)),
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
        RoundPlan {
            interactions,
            gated_records,
            pause_reason,
            answered,
            to_run,
            plan_events,
        }
    }

    pub(super) fn plan_records(
        &self,
        run: &Run,
        change: &mut RunChange,
        call_id: &str,
        input: &Value,
    ) {
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
        let mut data = ar_core::JsonMap::new();
        data.insert("tool_call_id".into(), Value::String(call_id.to_string()));
        change.events.push(RunEvent::PlanUpdated(ev::PlanUpdated {
            content,
            plan,
            note: note.to_string(),
            data,
        }));
    }

    /// Result rows and events of one answered call.
    pub(super) fn tool_result_records(
        &self,
        run: &Run,
        change: &mut RunChange,
        call: &ModelToolCall,
        content: &str,
        is_error: bool,
        duration_ms: u64,
    ) {
        let mut row = message(
            run,
            MessageRole::Tool,
            content,
            message_type::TOOL_RESULT,
            self.now(),
        );
        row.runtime_message_id = call.id.clone();
        let result_message_id = row.id.clone();
        change.messages.push(row);
        change.events.extend(tool_result_events(
            &call.id,
            &canonical_tool_name(&call.name),
            &call.arguments,
            content,
            is_error,
            duration_ms,
            result_message_id,
        ));
    }
}

/// A skill tool's call, answered from the run's available skills.
fn skill_plan(skills: &ar_skills::SkillTools, tool: &ToolDefinition, input: Value) -> Plan {
    match skills.call(&tool.name, &input) {
        Some(output) => Plan::Answer {
            tool: tool.clone(),
            input,
            output,
        },
        None => Plan::Reject(format!("tool {} is not available to this run", tool.name)),
    }
}

/// A call whose MCP server refused the credential, the server, and why.
type WaitingForCredential = (ModelToolCall, ar_core::mcp::McpServer, String);

/// What a round's plans came to (see `Engine::sort_plans`).
struct RoundPlan {
    interactions: Vec<Interaction>,
    gated_records: Vec<ToolCallRecord>,
    pause_reason: Option<PauseReason>,
    answered: Vec<Answered>,
    to_run: Vec<(ModelToolCall, ToolDefinition, Value)>,
    plan_events: Vec<(String, Value)>,
}

/// `tool_call_result` and `tool_call_finished` of one answered call (contents clipped).
pub(crate) fn tool_result_events(
    call_id: &str,
    tool_name: &str,
    arguments: &str,
    content: &str,
    is_error: bool,
    duration_ms: u64,
    result_message_id: String,
) -> [RunEvent; 2] {
    [
        RunEvent::ToolCallResult(ev::ToolCallResult {
            tool_call_id: call_id.to_string(),
            tool_name: tool_name.to_string(),
            content: clip(content, 16 * 1024),
            result_message_id,
        }),
        RunEvent::ToolCallFinished(ev::ToolCallFinished {
            tool_call_id: call_id.to_string(),
            tool_name: tool_name.to_string(),
            tool_input: clip(arguments, 16 * 1024),
            output_summary: clip(content, 512),
            duration_ms,
            error: if is_error {
                clip(content, 2048)
            } else {
                String::new()
            },
        }),
    ]
}
