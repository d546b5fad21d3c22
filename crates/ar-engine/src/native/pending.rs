//! Pending tool calls settled: approved calls run (after a started marker for mutations),
//! rejected or answered ones get their result, and a crash mid-call reports an unknown outcome.

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
use crate::window::UNKNOWN_OUTCOME;

use super::*;

/// What settling one pending call produced: its output, the tool if it ran, and how long it took.
type Settled = (ToolOutput, Option<ToolDefinition>, u64);

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
        if let Some(reason) = waiting_for_a_person(state) {
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
            let input: Value = serde_json::from_str(&pending.call.arguments).unwrap_or(json!({}));
            let settled = match self
                .settle_call(run, agent, tools, state, &context, &input)
                .await?
            {
                Step::Settled(settled) => settled,
                Step::Stopped => return Ok(Flow::Stop),
                Step::NeedsAuthentication { server, reason } => {
                    // Not run: it waits, unstarted, for the host to rotate the credential.
                    state.pending[0].started = false;
                    self.pause_for_mcp_authentication(run, state, &server, &reason)
                        .await?;
                    return Ok(Flow::Stop);
                }
            };
            state.pending.remove(0);
            state.transcript.push(ChatMessage::tool_result(
                pending.call.id.clone(),
                settled.0.content.clone(),
            ));
            state.flush_queued_messages();
            if let Flow::Stop = self
                .commit_settled(run, state, &pending, &input, settled)
                .await?
            {
                return Ok(Flow::Stop);
            }
        }
        Ok(Flow::Continue)
    }

    /// The outcome of the first pending call (see [`Step`]).
    async fn settle_call(
        &self,
        run: &mut Run,
        agent: &Agent,
        tools: &[ToolDefinition],
        state: &mut LoopState,
        context: &ar_core::tool::ToolContext,
        input: &Value,
    ) -> EngineResult<Step> {
        let pending = &state.pending[0];
        let name = canonical_tool_name(&pending.call.name);
        if pending.started {
            return Ok(Step::Settled(answered(ToolOutput::error(format!(
                "{UNKNOWN_OUTCOME} the runtime stopped while {name} was running; check its effect before repeating it"
            )))));
        }
        let tool = match &pending.decision {
            Some(Decision::Rejected { reason }) if reason.is_empty() => {
                return Ok(Step::Settled(answered(ToolOutput::error(
                    "the reviewer rejected this tool call",
                ))))
            }
            Some(Decision::Rejected { reason }) => {
                return Ok(Step::Settled(answered(ToolOutput::error(format!(
                    "the reviewer rejected this tool call: {reason}"
                )))))
            }
            Some(Decision::Answered { content }) => {
                return Ok(Step::Settled(answered(ToolOutput::text(content.clone()))))
            }
            None => return Ok(Step::Settled(unreachable_pending())),
            Some(Decision::Approved) => match tools.iter().find(|tool| tool.name == name) {
                Some(tool) if control_tools::pauses(&tool.name) => {
                    return Ok(Step::Settled(answered(ToolOutput::text("approved"))))
                }
                Some(tool) => tool.clone(),
                None => {
                    return Ok(Step::Settled(answered(ToolOutput::error(format!(
                        "tool {name} is not available to this run"
                    )))))
                }
            },
        };
        // Marker first: a crash during the call must not repeat a mutation.
        state.pending[0].started = true;
        let checkpoint = self.checkpoint(run, state);
        let mode = agent.approval_mode;
        let flow = self
            .commit_step(run, |run, change| {
                change.checkpoint = Some(checkpoint.clone());
                consume_approval(mode, run);
                Ok(())
            })
            .await?;
        if let Flow::Stop = flow {
            return Ok(Step::Stopped);
        }
        Ok(
            match self.run_tool(run, context, &tool, input.clone()).await {
                ToolRun::Done(output, duration) => Step::Settled((output, Some(tool), duration)),
                ToolRun::NeedsAuthentication { server, reason } => {
                    Step::NeedsAuthentication { server, reason }
                }
            },
        )
    }

    /// Commits a settled call: its audit row (when it ran), result message and events, and
    /// the checkpoint after it.
    async fn commit_settled(
        &self,
        run: &mut Run,
        state: &LoopState,
        pending: &crate::transcript::PendingCall,
        input: &Value,
        (output, ran, duration): Settled,
    ) -> EngineResult<Flow> {
        let checkpoint = self.checkpoint(run, state);
        let now = self.now();
        // A branch the call created or switched to is on the lease before anything else
        // happens (an owner taking over revalidates against it).
        let observed = match &ran {
            Some(tool) if !output.is_error && crate::workspace::moves_head(&tool.name) => {
                self.observe_workspace(run).await
            }
            _ => ar_core::JsonMap::new(),
        };
        self.commit_step(run, |run, change| {
            crate::workspace::apply_observed(run, &observed);
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
        .await
    }
}

/// What settling the first pending call came to.
enum Step {
    Settled(Settled),
    /// The run stopped before an approved mutation could start.
    Stopped,
    /// Its MCP server refused the credential.
    NeedsAuthentication {
        server: ar_core::mcp::McpServer,
        reason: String,
    },
}

/// Why the run must stay parked: a pending call still waits for a person's decision.
fn waiting_for_a_person(state: &LoopState) -> Option<PauseReason> {
    let waiting =
        |pending: &&crate::transcript::PendingCall| pending.decision.is_none() && !pending.started;
    state.pending.iter().find(waiting)?;
    let asks_for_input = state
        .pending
        .iter()
        .any(|p| canonical_tool_name(&p.call.name) == control_tools::REQUEST_USER_INPUT);
    Some(if asks_for_input {
        PauseReason::HumanInput
    } else {
        PauseReason::HumanApproval
    })
}

/// A call answered without running anything.
fn answered(output: ToolOutput) -> Settled {
    (output, None, 0)
}

/// Calls without a decision were parked before settling; answer defensively instead of panicking.
fn unreachable_pending() -> Settled {
    answered(ToolOutput::error(
        "tool call is still waiting for a decision",
    ))
}
