//! The approval gate and the run tool gateway (`/v1/runs/{id}/tools`).

use ar_core::event::{self as ev, RunEvent};
use ar_core::ids::{new_id, prefix};
use ar_core::records::{interaction_kind, message_type, ToolCallRecord};
use ar_core::tool::{
    canonical_tool_name, ToolContext, ToolDefinition, ToolOutput, WORKSPACE_LEASE_KEY,
};
use ar_core::{
    Agent, ApprovalMode, ApprovalState, JsonMap, MessageRole, PauseReason, RiskLevel, Run,
    RunStatus, RuntimeKind,
};
use serde_json::{json, Value};

use crate::control_tools;
use crate::engine::{Decide, Engine};
use crate::error::{EngineError, EngineResult};
use crate::mcp::Discovery;
use crate::native::{tool_result_events, ToolRun};
use crate::records::{interaction, mark_paused, message, record_tool_output, tool_call_record};

/// Whether a call of `tool` must wait for a person under the agent's approval mode.
pub(crate) fn needs_approval(mode: ApprovalMode, run: &Run, tool: &ToolDefinition) -> bool {
    if !tool.mutating || control_tools::pauses(&tool.name) {
        return false;
    }
    match mode {
        ApprovalMode::Never => false,
        ApprovalMode::MutatingTools => run.approval_state() != ApprovalState::Approved,
        ApprovalMode::Always => run.approval_state() != ApprovalState::Approved,
        ApprovalMode::RiskBased => {
            matches!(
                tool.effective_risk(),
                RiskLevel::SensitiveMutation | RiskLevel::DestructiveMutation
            ) && run.approval_state() != ApprovalState::Approved
        }
    }
}

/// Per-call approvals are single-use: executing an approved mutation consumes the approval.
pub(crate) fn consume_approval(mode: ApprovalMode, run: &mut Run) {
    if matches!(mode, ApprovalMode::MutatingTools | ApprovalMode::RiskBased) {
        run.consume_approval();
    }
}

/// The approval request written for a gated call.
pub(crate) fn approval_payload(tool: &ToolDefinition, input: &Value) -> Value {
    json!({
        "schema": "approval_request_v1",
        "tool_name": tool.name,
        "mutating": tool.mutating,
        "risk_level": tool.effective_risk().as_str(),
        "input": input,
    })
}

/// Result of a gateway tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayResult {
    pub output: ToolOutput,
    pub approval_required: bool,
    pub interaction_id: String,
}

impl Engine {
    /// Tools a run may use: agent allowlist ∩ run allowlist, filtered by target type.
    pub(crate) fn effective_tools(&self, run: &Run, agent: &Agent) -> Vec<ToolDefinition> {
        let mut catalog = self.deps().tools.catalog(&run.app_id);
        if let Some(workspace) = self.workspace_tools_of(&run.id) {
            // The run's workspace tools take the place of any host tool of the same name.
            let tools = workspace.definitions();
            catalog.retain(|tool| !tools.iter().any(|w| w.name == tool.name));
            catalog.extend(tools);
        }
        let explicit = run.input.turn_policy.is_explicit_completion();
        catalog
            .into_iter()
            .filter(|tool| {
                let allowed_by_agent = agent.allowed_tools.iter().any(|name| name == &tool.name);
                let allowed_by_run = run.input.allowed_tools.is_empty()
                    || run
                        .input
                        .allowed_tools
                        .iter()
                        .any(|name| name == &tool.name);
                let finish = explicit && tool.name == control_tools::FINISH_TURN;
                (finish || (allowed_by_agent && allowed_by_run))
                    && tool.supports_target(&run.target.target_type)
            })
            .collect()
    }

    /// The effective tools; when the agent and run allow tools the catalogue lacks (a
    /// provider may have added them since it was listed), the tool host refreshes once and
    /// they are computed again.
    pub(crate) async fn current_tools(&self, run: &Run, agent: &Agent) -> Vec<ToolDefinition> {
        let tools = self.effective_tools(run, agent);
        let missing: Vec<String> = agent
            .allowed_tools
            .iter()
            .filter(|name| !name.starts_with(ar_core::mcp::ALIAS_PREFIX))
            .filter(|name| {
                run.input.allowed_tools.is_empty() || run.input.allowed_tools.contains(name)
            })
            .filter(|name| !tools.iter().any(|tool| &tool.name == *name))
            .cloned()
            .collect();
        if missing.is_empty()
            || !self
                .deps()
                .tools
                .refresh_for_unknown(&run.app_id, &missing)
                .await
        {
            return tools;
        }
        self.effective_tools(run, agent)
    }

    pub(crate) fn tool_context(&self, run: &Run) -> ToolContext {
        ToolContext {
            app_id: run.app_id.clone(),
            run_id: run.id.clone(),
            agent_id: run.agent_id.clone(),
            external_actor_id: run.external_actor_id.clone(),
            target: run.target.clone(),
            context_summary: run.input.context_summary.clone(),
            run_metadata: tool_run_metadata(run),
        }
    }

    async fn active_run_and_agent(&self, app_id: &str, run_id: &str) -> EngineResult<(Run, Agent)> {
        let run = self.load_run(app_id, run_id).await?;
        if run.is_terminal() {
            return Err(EngineError::invalid("agent run is not active"));
        }
        let agent = self
            .deps()
            .store
            .get_agent(app_id, &run.agent_id)
            .await?
            .ok_or_else(EngineError::agent_not_found)?;
        Ok((run, agent))
    }

    /// `GET /v1/runs/{id}/tools`: the run's effective tools and its MCP servers' tools (a
    /// server that cannot list them now adds none; the run itself pauses or fails on it).
    pub async fn run_tools(&self, app_id: &str, run_id: &str) -> EngineResult<Vec<ToolDefinition>> {
        let (run, agent) = self.active_run_and_agent(app_id, run_id).await?;
        Ok(self.gateway_tools(&run, &agent).await)
    }

    async fn gateway_tools(&self, run: &Run, agent: &Agent) -> Vec<ToolDefinition> {
        let mut tools = self.current_tools(run, agent).await;
        match self.discover_mcp_tools(run).await {
            Discovery::Tools(mcp) => tools.extend(mcp),
            Discovery::NeedsAuthentication { server, reason } => {
                tracing::info!(run_id = %run.id, server_id = %server.server_id, %reason, "gateway lists no tools of an MCP server that needs a credential");
            }
            Discovery::Failed(reason) => {
                tracing::warn!(run_id = %run.id, %reason, "gateway lists no MCP tools");
            }
        }
        tools
    }

    /// `POST /v1/runs/{id}/tools`: executes a tool for an external agent through the same gate.
    /// Every call is a ToolCall row with its `tool_call_*` events and result message, like a
    /// native call; the replay of a call that waited for approval settles the row it left.
    pub async fn call_run_tool(
        &self,
        app_id: &str,
        run_id: &str,
        tool_name: &str,
        input: Value,
    ) -> EngineResult<GatewayResult> {
        let name = canonical_tool_name(tool_name);
        if name.is_empty() {
            return Err(EngineError::invalid("tool_name is required"));
        }
        let (run, agent) = self.active_run_and_agent(app_id, run_id).await?;
        let tool = self.gateway_tool(&run, &agent, &name).await?;
        let input = if input.is_null() {
            Value::Object(JsonMap::new())
        } else {
            input
        };
        if needs_approval(agent.approval_mode, &run, &tool) {
            return self.park_gateway_call(run, &tool, input).await;
        }
        let replayed = tool.mutating && run.approval_state() == ApprovalState::Approved;
        let gated = if replayed {
            self.gated_row(&run, &tool.name, &input).await?
        } else {
            None
        };
        let context = self.tool_context(&run);
        let (output, duration_ms) = match self.run_tool(&run, &context, &tool, input.clone()).await
        {
            ToolRun::Done(output, duration_ms) => (output, duration_ms),
            ToolRun::NeedsAuthentication { server, reason } => (
                ToolOutput::error(format!(
                    "mcp server {} needs a new credential: {reason}",
                    server.server_id
                )),
                0,
            ),
        };
        let call = GatewayCall {
            tool,
            input,
            output,
            duration_ms,
            gated,
            mode: agent.approval_mode,
        };
        self.record_gateway_call(app_id, run_id, &call).await?;
        Ok(GatewayResult {
            output: call.output,
            approval_required: false,
            interaction_id: String::new(),
        })
    }

    /// The run's tool `name` if the gateway may call it.
    async fn gateway_tool(
        &self,
        run: &Run,
        agent: &Agent,
        name: &str,
    ) -> EngineResult<ToolDefinition> {
        let Some(tool) = self
            .gateway_tools(run, agent)
            .await
            .into_iter()
            .find(|tool| tool.name == name)
        else {
            return Err(EngineError::invalid(format!(
                "tool {name:?} is not available to this run"
            )));
        };
        if !control_tools::gateway_callable(name) {
            return Err(EngineError::invalid(format!(
                "tool {name:?} is a runtime-control tool and cannot be called through the gateway"
            )));
        }
        Ok(tool)
    }

    /// The row a gated call of `name` with `input` left, still without an outcome: the call
    /// now replayed after its approval.
    async fn gated_row(
        &self,
        run: &Run,
        name: &str,
        input: &Value,
    ) -> EngineResult<Option<ToolCallRecord>> {
        let rows = self
            .deps()
            .store
            .list_tool_calls(&run.app_id, &run.id)
            .await?;
        Ok(rows.into_iter().rev().find(|row| {
            row.approval_required
                && row.output.is_none()
                && row.tool_name == name
                && &row.input == input
        }))
    }

    /// Commits a call the gateway ran: its row, result message and events.
    async fn record_gateway_call(
        &self,
        app_id: &str,
        run_id: &str,
        call: &GatewayCall,
    ) -> EngineResult<()> {
        let now = self.now();
        let input_text = call.input.to_string();
        let output = &call.output;
        let row_id = call.gated.as_ref().map(|row| row.id.clone());
        let row_id = row_id.unwrap_or_else(|| new_id(prefix::TOOL_CALL));
        let message_id = new_id(prefix::MESSAGE);
        self.transact(app_id, run_id, None, |run, change| {
            let mut row = match &call.gated {
                Some(gated) => gated.clone(),
                None => {
                    let tool = &call.tool;
                    let input = call.input.clone();
                    tool_call_record(run, &tool.name, input, tool.mutating, false, now)
                }
            };
            row.id.clone_from(&row_id);
            record_tool_output(&mut row, &output.content, output.is_error);
            change.tool_calls.push(row);
            if call.gated.is_none() {
                change
                    .events
                    .push(tool_call_started(&row_id, &call.tool.name));
            }
            let mut result = message(
                run,
                MessageRole::Tool,
                &output.content,
                message_type::TOOL_RESULT,
                now,
            );
            result.id.clone_from(&message_id);
            result.runtime_message_id.clone_from(&row_id);
            change.messages.push(result);
            change.events.extend(tool_result_events(
                &row_id,
                &call.tool.name,
                &input_text,
                &output.content,
                output.is_error,
                call.duration_ms,
                message_id.clone(),
            ));
            if call.tool.mutating {
                consume_approval(call.mode, run);
            }
            Ok(Decide::Commit(()))
        })
        .await?;
        Ok(())
    }
}

/// A call the gateway ran, with what it came to.
struct GatewayCall {
    tool: ToolDefinition,
    input: Value,
    output: ToolOutput,
    duration_ms: u64,
    /// The row the call left when it waited for approval (its replay settles it).
    gated: Option<ToolCallRecord>,
    mode: ApprovalMode,
}

/// `tool_call_started` of a gateway call (no assistant message of the service's own to hang
/// it off: the calling agent keeps its messages).
fn tool_call_started(call_id: &str, tool_name: &str) -> RunEvent {
    RunEvent::ToolCallStarted(ev::ToolCallStarted {
        tool_call_id: call_id.to_string(),
        tool_name: tool_name.to_string(),
        parent_message_id: String::new(),
    })
}

/// Whether `run` is executing a turn of an agent CLI, the agent that calls the gateway through
/// its MCP bridge: a call it must wait for is parked, and the run pauses when the turn ends.
fn in_cli_turn(run: &Run) -> bool {
    run.status() == RunStatus::Running
        && matches!(
            run.runtime_kind,
            RuntimeKind::Codex | RuntimeKind::ClaudeCode | RuntimeKind::OpenCode
        )
}

impl Engine {
    /// A gateway call that needs a person: an approval interaction, a gated tool-call row and
    /// its `tool_call_started`; the caller is told approval is pending. The run pauses for
    /// approval now, or, when the caller is the run's own CLI turn, when that turn ends (the
    /// CLI was told to stop and is not cut off mid-answer).
    async fn park_gateway_call(
        &self,
        run: Run,
        tool: &ToolDefinition,
        input: Value,
    ) -> EngineResult<GatewayResult> {
        let (app_id, run_id) = (run.app_id.clone(), run.id.clone());
        let now = self.now();
        let payload = approval_payload(tool, &input);
        let row_id = new_id(prefix::TOOL_CALL);
        let (_, _, interaction_id) = self
            .transact(&app_id, &run_id, Some(run), |run, change| {
                if run.is_terminal() {
                    return Err(EngineError::invalid("agent run is not active"));
                }
                let pending = interaction(
                    run,
                    interaction_kind::APPROVAL_REQUEST,
                    "Approve tool call",
                    "",
                    payload.clone(),
                    now,
                );
                let id = pending.id.clone();
                change.interactions.push(pending);
                let mut row = tool_call_record(run, &tool.name, input.clone(), true, true, now);
                row.id.clone_from(&row_id);
                change.tool_calls.push(row);
                change.events.push(tool_call_started(&row_id, &tool.name));
                if run.status() != RunStatus::Paused && !in_cli_turn(run) {
                    mark_paused(run, change, PauseReason::HumanApproval)?;
                }
                Ok(Decide::Commit(id))
            })
            .await?;
        Ok(GatewayResult {
            output: ToolOutput::text(format!("approval required before running {}", tool.name)),
            approval_required: true,
            interaction_id,
        })
    }
}

impl Engine {
    /// The tool catalog offered to runs of an app (capabilities).
    pub fn catalog(&self, app_id: &str) -> Vec<ToolDefinition> {
        self.deps().tools.catalog(app_id)
    }
}

/// The run's input metadata, with its workspace lease under [`WORKSPACE_LEASE_KEY`] (marked
/// `read_only` for a read-only workspace) for the tools that work in it.
fn tool_run_metadata(run: &Run) -> ar_core::JsonMap {
    let mut metadata = run.input.metadata.clone().unwrap_or_default();
    if let Some(serde_json::Value::Object(lease)) = &run.workspace_lease {
        let mut lease = lease.clone();
        let read_only = run.engine.workspace.is_some_and(|workspace| {
            workspace.spec.access == ar_core::workspace::WorkspaceAccess::ReadOnly
        });
        if read_only {
            lease.insert("access".into(), "read_only".into());
        }
        metadata.insert(WORKSPACE_LEASE_KEY.into(), serde_json::Value::Object(lease));
    }
    metadata
}
