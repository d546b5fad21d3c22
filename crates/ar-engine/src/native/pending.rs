//! Pending tool calls settled: approved calls run (after a started marker for mutations),
//! rejected or answered ones get their result, and a crash mid-call reports an unknown outcome.

use std::time::Instant;

use ar_core::model::ChatMessage;
use ar_core::tool::{canonical_tool_name, ToolDefinition, ToolOutput};
use ar_core::{Agent, PauseReason, Run};
use serde_json::{json, Value};

use crate::control_tools;
use crate::engine::Engine;
use crate::error::EngineResult;
use crate::gate::consume_approval;
use crate::records::{mark_paused, record_tool_output, tool_call_record};
use crate::transcript::{Decision, LoopState};

use super::*;

impl Engine {
    /// Gives every pending call a result: executes approved ones (with a started marker first
    /// for mutations), answers rejected/answered ones, and reports unknown outcomes after a
    /// crash. Stops (parks) if a call still waits for a person.
    pub(super) async fn settle_pending(
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
                mark_paused(run, change, reason)
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
                                Ok(())
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
                        record_tool_output(&mut row, &output.content, output.is_error);
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
                    Ok(())
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
