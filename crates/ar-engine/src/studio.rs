//! Studio-started runs: the run policy a studio command sets (engine, side effects,
//! breakpoints, narrowed limits), forks of a recorded run from step N with transcript edits,
//! decisions on parked calls, and steering.
//!
//! Steps are counted from 0 as the studio counts them: step `k` is the run's `k`-th model
//! response. A fork from step `N` keeps steps `0..N` of the source (tool results included) and
//! runs step `N` fresh; the input record is context, not a step.

use ar_core::model::{ChatMessage, ChatRole, ModelToolCall};
use ar_core::records::Interaction;
use ar_core::replica::OwnerSignal;
use ar_core::store::Checkpoint;
use ar_core::tool::{canonical_tool_name, ToolDefinition};
use ar_core::{Agent, InteractionStatus, Run, RunModel, RunStatus, TargetRef};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::admission::StartRun;
use crate::engine::{Decide, Engine};
use crate::error::{EngineError, EngineResult};
use crate::lifecycle::ResumeRun;
use crate::owner::OwnerMsg;
use crate::transcript::{Decision, LoopState};

pub use ar_core::studio::{SideEffects, StudioEngine, StudioPolicy};

/// The studio policy of a run; `None` for the app's own runs.
pub fn studio_policy(run: &Run) -> Option<&StudioPolicy> {
    run.engine.studio.as_ref()
}

/// A run created with a chosen id and a starting transcript (a fork's kept prefix).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunSeed {
    pub run_id: String,
    pub state: LoopState,
    /// The studio command's policy for the run.
    pub policy: Option<StudioPolicy>,
}

/// An edit of the kept prefix (the studio's `TranscriptEdit`). Edits apply in the order given;
/// positions come from `step` (and `call_id`), so the wire form's `index` is not needed.
///
/// - `tool_result`: the result of call `call_id` of step `step` becomes `tool_result` (or
///   `content`);
/// - `reply`: the text of step `step`'s response becomes `content` (its calls stay);
/// - `user`: the last user message before step `step` becomes `content`;
/// - `tool_args`: the arguments of call `call_id` become `args`, checked against the tool's
///   input schema (required fields, property types);
/// - `insert`: a user message `content` goes in before step `step` (`step` may equal
///   `from_step`: the message then ends the prefix).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TranscriptEdit {
    /// `tool_result`, `reply`, `user`, `tool_args` or `insert`; empty: the fields decide.
    pub kind: String,
    pub step: i64,
    pub tool_result: String,
    pub call_id: String,
    pub content: String,
    pub args: Option<Value>,
}

/// A studio command's run, as the runtime understands it.
#[derive(Debug, Clone, Default)]
pub struct StudioRunSpec {
    pub app_id: String,
    pub agent_id: String,
    /// The id the run will have (minted before the command is acked).
    pub run_id: String,
    pub input: Option<String>,
    /// `(source run id, from_step)`.
    pub source: Option<(String, i64)>,
    pub edits: Vec<TranscriptEdit>,
    /// Tools narrowed to (empty: the agent's).
    pub only_tools: Vec<String>,
    /// A model override (same provider as the agent's).
    pub model: String,
    /// The command's engine and side-effect mode as sent (validated here).
    pub engine: String,
    pub side_effects: String,
    pub policy: StudioPolicy,
}

/// Why a studio command cannot run; each maps to the studio's error codes.
#[derive(Debug, thiserror::Error)]
pub enum StudioRunError {
    /// 400: malformed or contradictory.
    #[error("{0}")]
    Invalid(String),
    /// 403: widens a limit or a side-effect rule.
    #[error("{0}")]
    Forbidden(String),
    /// 404: unknown agent, run or call.
    #[error("{0}")]
    NotFound(String),
    /// 409: the state moved on (a second decision, a finished run).
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl From<ar_core::store::StoreError> for StudioRunError {
    fn from(error: ar_core::store::StoreError) -> Self {
        StudioRunError::Engine(EngineError::Store(error))
    }
}

impl StudioRunError {
    fn invalid(message: impl Into<String>) -> Self {
        StudioRunError::Invalid(message.into())
    }
}

/// A person's decision on a parked call.
#[derive(Debug, Clone, PartialEq)]
pub enum StudioDecision {
    /// Run the handler.
    Approve,
    /// Skip the handler; the model sees the reason.
    Deny { reason: String },
    /// Skip the handler; `content` is the call's result.
    Resolve { content: String },
}

impl StudioDecision {
    /// The resume intent the decision stands for.
    fn intent(&self) -> &'static str {
        match self {
            StudioDecision::Approve => "approve",
            StudioDecision::Deny { .. } => "request_changes",
            StudioDecision::Resolve { .. } => "reply",
        }
    }

    /// The text the decision carries (a denial's reason, a resolution's result).
    fn content(&self) -> String {
        match self {
            StudioDecision::Approve => String::new(),
            StudioDecision::Deny { reason } => reason.clone(),
            StudioDecision::Resolve { content } => content.clone(),
        }
    }

    /// The decision as the native loop records it on the pending call.
    fn engine_decision(&self) -> Decision {
        match self {
            StudioDecision::Approve => Decision::Approved,
            StudioDecision::Deny { reason } => Decision::Rejected {
                reason: reason.clone(),
            },
            StudioDecision::Resolve { content } => Decision::Answered {
                content: content.clone(),
            },
        }
    }
}

/// Positions of assistant messages in a transcript.
fn assistant_positions(transcript: &[ChatMessage]) -> Vec<usize> {
    transcript
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == ChatRole::Assistant)
        .map(|(at, _)| at)
        .collect()
}

/// Checks `args` against a JSON schema's `required` keys and top-level property types.
fn check_args(schema: &Value, args: &Value) -> Result<(), String> {
    let Some(object) = args.as_object() else {
        return Err("args must be a JSON object".to_string());
    };
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for key in required.iter().filter_map(Value::as_str) {
            if !object.contains_key(key) {
                return Err(format!("args miss the required field {key}"));
            }
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    for (key, value) in object {
        let Some(expected) = properties
            .and_then(|p| p.get(key))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str)
        else {
            if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                return Err(format!("args field {key} is not in the tool's schema"));
            }
            continue;
        };
        let fits = match expected {
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            "null" => value.is_null(),
            _ => true,
        };
        if !fits {
            return Err(format!("args field {key} must be of type {expected}"));
        }
    }
    Ok(())
}

/// Applies `edits` to the kept prefix of `steps` steps, with the reference's rules.
pub fn apply_edits(
    transcript: &mut Vec<ChatMessage>,
    steps: i64,
    edits: &[TranscriptEdit],
    tools: &[ToolDefinition],
) -> Result<(), StudioRunError> {
    for (i, edit) in edits.iter().enumerate() {
        apply_edit(transcript, steps, edit, tools)
            .map_err(|what| StudioRunError::Invalid(format!("transcript_edits[{i}]: {what}")))?;
    }
    Ok(())
}

/// The edit's kind, as sent or (when empty) as its fields imply.
fn edit_kind(edit: &TranscriptEdit) -> &str {
    match edit.kind.as_str() {
        "" if !edit.tool_result.is_empty() => "tool_result",
        "" if edit.args.is_some() => "tool_args",
        "" => "reply",
        other => other,
    }
}

/// Applies one edit; the error says what is wrong with it.
fn apply_edit(
    transcript: &mut Vec<ChatMessage>,
    steps: i64,
    edit: &TranscriptEdit,
    tools: &[ToolDefinition],
) -> Result<(), String> {
    let kind = edit_kind(edit);
    if edit.step < 0 {
        return Err("negative step".into());
    }
    // An insert may end the prefix; every other edit changes a kept step.
    let inside = if kind == "insert" {
        edit.step <= steps
    } else {
        edit.step < steps
    };
    if !inside {
        return Err(format!(
            "step {} is outside the kept prefix (steps before {steps})",
            edit.step
        ));
    }
    let positions = assistant_positions(transcript);
    let step = edit.step as usize;
    match kind {
        "insert" => {
            if edit.content.trim().is_empty() {
                return Err("insert needs content".into());
            }
            let where_ = positions.get(step).copied().unwrap_or(transcript.len());
            transcript.insert(where_, ChatMessage::user(edit.content.clone()));
        }
        "reply" => {
            let pos = step_position(&positions, step)?;
            // A rewrite keeps the step's calls: only the text changes.
            transcript[pos].content = edit.content.clone();
        }
        "user" => {
            let pos = user_message_of_step(transcript, &positions, step)?;
            transcript[pos].content = edit.content.clone();
        }
        "tool_args" => edit_call_args(transcript, &positions, step, edit, tools)?,
        "tool_result" => edit_call_result(transcript, &positions, step, edit)?,
        other => return Err(format!("unknown kind {other:?}")),
    }
    Ok(())
}

/// The transcript position of step `step`'s response.
fn step_position(positions: &[usize], step: usize) -> Result<usize, String> {
    positions
        .get(step)
        .copied()
        .ok_or_else(|| format!("the prefix has no step {step}"))
}

/// The position of the last user message before step `step` (and after the step before it).
fn user_message_of_step(
    transcript: &[ChatMessage],
    positions: &[usize],
    step: usize,
) -> Result<usize, String> {
    let end = step_position(positions, step)?;
    let start = match step {
        0 => 0,
        _ => step_position(positions, step - 1)?,
    };
    (start..end)
        .rev()
        .find(|&p| transcript[p].role == ChatRole::User)
        .ok_or_else(|| format!("step {step} has no user message to edit"))
}

/// The call `call_id` of step `step`.
fn call_of_step<'a>(
    transcript: &'a mut [ChatMessage],
    positions: &[usize],
    step: usize,
    call_id: &str,
) -> Result<&'a mut ModelToolCall, String> {
    if call_id.is_empty() {
        return Err("call_id is required".into());
    }
    let pos = step_position(positions, step)?;
    transcript[pos]
        .tool_calls
        .iter_mut()
        .find(|c| c.id == call_id)
        .ok_or_else(|| format!("call {call_id} is not a call of step {step}"))
}

/// Replaces a call's arguments, checked against its tool's input schema.
fn edit_call_args(
    transcript: &mut [ChatMessage],
    positions: &[usize],
    step: usize,
    edit: &TranscriptEdit,
    tools: &[ToolDefinition],
) -> Result<(), String> {
    let call = call_of_step(transcript, positions, step, &edit.call_id)?;
    let args = edit.args.clone().unwrap_or(Value::Null);
    let name = canonical_tool_name(&call.name);
    if let Some(tool) = tools.iter().find(|t| t.name == name) {
        check_args(&tool.input_schema, &args).map_err(|e| format!("{name}: {e}"))?;
    } else if !args.is_object() {
        return Err("args must be a JSON object".into());
    }
    call.arguments = args.to_string();
    Ok(())
}

/// Replaces the recorded result of a call of step `step`.
fn edit_call_result(
    transcript: &mut [ChatMessage],
    positions: &[usize],
    step: usize,
    edit: &TranscriptEdit,
) -> Result<(), String> {
    call_of_step(transcript, positions, step, &edit.call_id)?;
    let content = if edit.tool_result.is_empty() {
        edit.content.clone()
    } else {
        edit.tool_result.clone()
    };
    let id = edit.call_id.as_str();
    let result = transcript
        .iter_mut()
        .find(|m| m.role == ChatRole::Tool && m.tool_call_id.as_deref() == Some(id))
        .ok_or_else(|| format!("call {id} has no result to edit"))?;
    result.content = content;
    Ok(())
}

/// The kept prefix of `source` before step `from_step`, checked to end at a step boundary
/// with every call answered.
pub fn kept_prefix(source: &LoopState, from_step: i64) -> Result<Vec<ChatMessage>, StudioRunError> {
    let positions = assistant_positions(&source.transcript);
    if from_step < 0 {
        return Err(StudioRunError::invalid(
            "source.from_step must be 0 or more",
        ));
    }
    if from_step as usize > positions.len() {
        return Err(StudioRunError::invalid(format!(
            "source.from_step {from_step} is past the source run's {} steps",
            positions.len()
        )));
    }
    let cut = positions
        .get(from_step as usize)
        .copied()
        .unwrap_or(source.transcript.len());
    let prefix = source.transcript[..cut].to_vec();
    for message in prefix.iter().filter(|m| m.role == ChatRole::Assistant) {
        for call in &message.tool_calls {
            let answered = prefix
                .iter()
                .any(|m| m.role == ChatRole::Tool && m.tool_call_id.as_deref() == Some(&call.id));
            if !answered {
                return Err(StudioRunError::invalid(format!(
                    "the kept prefix does not end at a step boundary: call {} has no result",
                    call.id
                )));
            }
        }
    }
    Ok(prefix)
}

impl Engine {
    /// The step limit of a run: its agent's `max_tool_steps`, else the runtime's (a studio
    /// run may narrow it).
    pub(crate) fn step_limit(&self, run: &Run, agent_limit: Option<i64>) -> i64 {
        let own = agent_limit.unwrap_or(self.config().max_tool_steps);
        match studio_policy(run) {
            Some(policy) if policy.max_steps > 0 => policy.max_steps.min(own),
            _ => own,
        }
    }

    /// The agent as a studio run sees it (an instructions override replaces the prompt).
    pub(crate) fn studio_agent(agent: Agent, run: &Run) -> Agent {
        match studio_policy(run) {
            Some(policy) if !policy.instructions.is_empty() => Agent {
                system_prompt: policy.instructions.clone(),
                ..agent
            },
            _ => agent,
        }
    }

    /// The tools a studio run of `agent` would be offered.
    fn studio_tools(&self, app_id: &str, agent: &Agent, only: &[String]) -> Vec<ToolDefinition> {
        self.deps()
            .tools
            .catalog(app_id)
            .into_iter()
            .filter(|t| agent.allowed_tools.contains(&t.name))
            .filter(|t| only.is_empty() || only.contains(&t.name))
            .collect()
    }

    /// Checks a studio command (the runtime side of the studio's validation) and builds the
    /// run to start: policy in metadata, the fork's kept and edited prefix as its seed.
    pub async fn prepare_studio_run(
        &self,
        spec: StudioRunSpec,
    ) -> Result<StartRun, StudioRunError> {
        let agent = self
            .deps()
            .store
            .get_agent(&spec.app_id, &spec.agent_id)
            .await?
            .ok_or_else(|| StudioRunError::NotFound(format!("unknown agent {}", spec.agent_id)))?;
        let policy = studio_run_policy(&spec)?;
        check_studio_request(&spec, &policy)?;
        self.check_studio_limits(&spec, &policy, &agent)?;
        let tools = self.studio_tools(&spec.app_id, &agent, &spec.only_tools);
        check_side_effects(&policy, &tools)?;
        let forked = match &spec.source {
            Some((source_id, from_step)) => Some(
                self.fork_source(&spec, &policy, &agent, &tools, source_id, *from_step)
                    .await?,
            ),
            None => None,
        };
        let (target, instructions, source_model, seed_state) = match forked {
            Some(fork) => (
                fork.target,
                spec.input.clone().unwrap_or(fork.instructions),
                fork.model,
                fork.state,
            ),
            None => (
                studio_target(&agent, &policy, &spec.run_id),
                spec.input.clone().unwrap_or_default(),
                None,
                None,
            ),
        };
        let model = self.studio_model(&spec, &policy, &agent, source_model);
        Ok(StartRun {
            app_id: spec.app_id.clone(),
            agent_id: agent.id.clone(),
            target,
            instructions,
            allowed_tools: spec.only_tools.clone(),
            external_actor_id: policy.actor.clone(),
            model,
            seed: Some(RunSeed {
                run_id: spec.run_id.clone(),
                state: seed_state.unwrap_or_default(),
                policy: Some(policy),
            }),
            ..StartRun::default()
        })
    }

    /// Refuses tools the agent lacks and a step limit that is negative or widens the runtime's.
    fn check_studio_limits(
        &self,
        spec: &StudioRunSpec,
        policy: &StudioPolicy,
        agent: &Agent,
    ) -> Result<(), StudioRunError> {
        for name in spec.only_tools.iter().chain(&policy.park_on) {
            if !agent.allowed_tools.contains(name) {
                return Err(StudioRunError::invalid(format!("unknown tool {name}")));
            }
        }
        let own = self.config().max_tool_steps;
        if policy.max_steps < 0 {
            return Err(StudioRunError::invalid(
                "options.max_steps must be at least 1",
            ));
        }
        if policy.max_steps > own {
            return Err(StudioRunError::Forbidden(format!(
                "options.max_steps {} raises the runtime's limit {own}: overrides may only narrow",
                policy.max_steps
            )));
        }
        Ok(())
    }

    /// What a fork takes from its source run: target, instructions, model and the kept and
    /// edited prefix of its recorded transcript.
    async fn fork_source(
        &self,
        spec: &StudioRunSpec,
        policy: &StudioPolicy,
        agent: &Agent,
        tools: &[ToolDefinition],
        source_id: &str,
        from_step: i64,
    ) -> Result<ForkedSource, StudioRunError> {
        let source = self
            .deps()
            .store
            .get_run(&spec.app_id, source_id)
            .await?
            .ok_or_else(|| StudioRunError::NotFound(format!("unknown source run {source_id}")))?;
        if source.agent_id != agent.id {
            return Err(StudioRunError::invalid(format!(
                "source run {source_id} belongs to agent {}, not {}",
                source.agent_id, agent.id
            )));
        }
        // An endpoint-bound route needs the source's credential, which a fork does not have.
        let model = source
            .input
            .model
            .clone()
            .filter(|m| m.endpoint.is_none())
            .map(|m| RunModel {
                controls: None,
                ..m
            });
        let recorded = self.recorded_state(source_id).await?;
        if recorded.transcript.is_empty() && from_step > 0 {
            return Err(StudioRunError::invalid(format!(
                "source run {source_id} has no recorded steps"
            )));
        }
        let state = if recorded.transcript.is_empty() {
            if !spec.edits.is_empty() {
                return Err(StudioRunError::invalid(
                    "transcript_edits: the source run has no recorded transcript",
                ));
            }
            None
        } else {
            Some(forked_state(
                &recorded, from_step, spec, policy, agent, tools,
            )?)
        };
        Ok(ForkedSource {
            target: source.target,
            instructions: source.input.instructions,
            model,
            state,
        })
    }

    /// The model a studio run asks for: a placeholder for a scripted replay, the command's
    /// override on the source's (or agent's) provider, else the source's if still configured.
    fn studio_model(
        &self,
        spec: &StudioRunSpec,
        policy: &StudioPolicy,
        agent: &Agent,
        source_model: Option<RunModel>,
    ) -> Option<RunModel> {
        if policy.scripted() {
            // Never called: a scripted run answers from the recording. Any known provider.
            let name = source_model.map(|m| m.model).unwrap_or_default();
            return Some(RunModel {
                provider: "openai".to_string(),
                model: if name.is_empty() {
                    "scripted".to_string()
                } else {
                    name
                },
                endpoint: None,
                controls: None,
            });
        }
        if !spec.model.is_empty() {
            let provider = match (&source_model, agent.provider.is_empty()) {
                (Some(m), _) => m.provider.clone(),
                (None, false) => agent.provider.clone(),
                (None, true) => self.config().default_provider.clone(),
            };
            return Some(RunModel {
                provider,
                model: spec.model.clone(),
                endpoint: None,
                controls: None,
            });
        }
        source_model.filter(|m| {
            self.config()
                .providers
                .get(&m.provider)
                .is_some_and(|defaults| defaults.has_global_key())
        })
    }

    /// Decides one parked call of a studio run. The run resumes once, when every parked call
    /// has a decision; a second decision on the same call is a conflict.
    pub async fn studio_decide(
        &self,
        app_id: &str,
        run_id: &str,
        call_id: &str,
        decision: StudioDecision,
        actor: &str,
    ) -> Result<Run, StudioRunError> {
        let run = self.load_run(app_id, run_id).await?;
        if run.is_terminal() {
            return Err(StudioRunError::Conflict(format!(
                "run {run_id} has finished"
            )));
        }
        let state = self.recorded_state(run_id).await?;
        let interaction_id = parked_interaction_id(&run, &state, run_id, call_id)?;
        let others_wait = state
            .pending
            .iter()
            .any(|p| p.call.id != call_id && p.decision.is_none() && !p.started);
        if !others_wait {
            let resumed = self
                .resume(
                    app_id,
                    run_id,
                    ResumeRun {
                        intent: decision.intent().to_string(),
                        content: decision.content(),
                        interaction_id,
                        external_actor_id: actor.to_string(),
                        ..ResumeRun::default()
                    },
                )
                .await?;
            return Ok(resumed);
        }
        // Other calls still wait: record this decision without resuming.
        let interaction = self
            .pending_interaction(app_id, run_id, &interaction_id, call_id)
            .await?;
        let now = self.now();
        let checkpoint = decided_checkpoint(&state, run_id, call_id, &decision, now);
        let payload =
            json!({"intent": decision.intent(), "content": decision.content(), "call_id": call_id});
        let (run, _, ()) = self
            .transact(app_id, run_id, Some(run), |run, change| {
                if run.status() != RunStatus::Paused {
                    return Err(EngineError::invalid("run is not paused"));
                }
                let mut resolved = interaction.clone();
                resolved.status = InteractionStatus::Resolved;
                resolved.resolved_by_external_id = actor.to_string();
                resolved.resolved_at = Some(now);
                resolved.updated_at = now;
                resolved.response_payload = Some(payload.clone());
                change.interactions.push(resolved);
                change.checkpoint = Some(checkpoint.clone());
                Ok(Decide::Commit(()))
            })
            .await?;
        Ok(run)
    }

    /// The still-pending interaction `interaction_id` that parks call `call_id`.
    async fn pending_interaction(
        &self,
        app_id: &str,
        run_id: &str,
        interaction_id: &str,
        call_id: &str,
    ) -> Result<Interaction, StudioRunError> {
        let interactions = self.deps().store.list_interactions(app_id, run_id).await?;
        let Some(interaction) = interactions.into_iter().find(|i| i.id == interaction_id) else {
            return Err(StudioRunError::NotFound(format!(
                "interaction {interaction_id} not found"
            )));
        };
        if interaction.status != InteractionStatus::Pending {
            return Err(StudioRunError::Conflict(format!(
                "call {call_id} already has a decision"
            )));
        }
        Ok(interaction)
    }

    /// Adds a user message to a run at its next safe boundary (never between a tool call
    /// and its result). Best effort: a run that finishes first never sees it.
    pub async fn studio_steer(
        &self,
        app_id: &str,
        run_id: &str,
        message: &str,
    ) -> Result<(), StudioRunError> {
        let message = message.trim();
        if message.is_empty() {
            return Err(StudioRunError::invalid("message is required"));
        }
        let run = self.load_run(app_id, run_id).await?;
        if run.is_terminal() {
            return Err(StudioRunError::Conflict(format!(
                "run {run_id} has finished"
            )));
        }
        let delivered = self.tell_owner(run_id, OwnerMsg::Steer(message.to_string()));
        if !delivered && run.status() == RunStatus::Paused {
            self.queue_steer(app_id, run, message).await?;
        } else if !delivered
            && !self.signal_remote_owner(run_id, OwnerSignal::Steer(message.to_string()))
        {
            return Err(StudioRunError::Conflict(format!(
                "run {run_id} is not executing in this process"
            )));
        }
        self.append_message(app_id, run_id, "user", message, "")
            .await?;
        Ok(())
    }

    /// Queues a steer message in a paused run's checkpoint, for the turn that resumes it.
    async fn queue_steer(&self, app_id: &str, run: Run, message: &str) -> EngineResult<()> {
        let run_id = run.id.clone();
        let mut state = self.recorded_state(&run_id).await?;
        state.queued_user_messages.push(message.to_string());
        let checkpoint = self.checkpoint(&run, &state);
        self.transact(app_id, &run_id, Some(run), |run, change| {
            if run.status() != RunStatus::Paused {
                return Err(EngineError::invalid("run is no longer paused; steer again"));
            }
            change.checkpoint = Some(checkpoint.clone());
            Ok(Decide::Commit(()))
        })
        .await?;
        Ok(())
    }

    /// The run's latest checkpointed loop state (transcript, pending calls, usage).
    pub async fn loop_state(&self, app_id: &str, run_id: &str) -> Result<LoopState, EngineError> {
        self.load_run(app_id, run_id).await?;
        self.recorded_state(run_id).await
    }
}

/// The interaction parking call `call_id` of the paused `run`, if the call still waits for a
/// decision.
fn parked_interaction_id(
    run: &Run,
    state: &LoopState,
    run_id: &str,
    call_id: &str,
) -> Result<String, StudioRunError> {
    let Some(pending) = state.pending.iter().find(|p| p.call.id == call_id) else {
        return Err(StudioRunError::NotFound(format!(
            "run {run_id} has no parked call {call_id}"
        )));
    };
    if pending.decision.is_some() || pending.started {
        return Err(StudioRunError::Conflict(format!(
            "call {call_id} already has a decision"
        )));
    }
    let Some(interaction_id) = pending.interaction_id.clone() else {
        return Err(StudioRunError::Conflict(format!(
            "call {call_id} is not parked"
        )));
    };
    if run.status() != RunStatus::Paused {
        return Err(StudioRunError::Conflict(format!(
            "run {run_id} is not parked (it is {})",
            run.status()
        )));
    }
    Ok(interaction_id)
}

/// The checkpoint of `state` with `decision` recorded on call `call_id`.
fn decided_checkpoint(
    state: &LoopState,
    run_id: &str,
    call_id: &str,
    decision: &StudioDecision,
    now: DateTime<Utc>,
) -> Checkpoint {
    let mut next = state.clone();
    for p in next.pending.iter_mut().filter(|p| p.call.id == call_id) {
        p.decision = Some(decision.engine_decision());
    }
    Checkpoint {
        run_id: run_id.to_string(),
        step: next.step,
        state: next.to_json(),
        created_at: now,
    }
}

/// What a fork takes from its source run.
struct ForkedSource {
    target: TargetRef,
    /// The source's instructions (used unless the command sends its own input).
    instructions: String,
    /// The source's model, without endpoint-bound routes or controls.
    model: Option<RunModel>,
    /// The kept, edited prefix; `None` when the source has no recorded transcript.
    state: Option<LoopState>,
}

/// The command's policy with its engine, side-effect mode and source resolved.
fn studio_run_policy(spec: &StudioRunSpec) -> Result<StudioPolicy, StudioRunError> {
    let mut policy = spec.policy.clone();
    policy.engine = match spec.engine.trim() {
        "" => StudioEngine::Live,
        text => StudioEngine::parse(text).map_err(|_| {
            StudioRunError::invalid(format!("unsupported engine {:?}", spec.engine))
        })?,
    };
    policy.side_effects = match spec.side_effects.trim() {
        "" => SideEffects::Substitute,
        text => SideEffects::parse(text).map_err(|_| {
            StudioRunError::invalid(format!("unsupported side_effects {:?}", spec.side_effects))
        })?,
    };
    if let Some((source_id, _)) = &spec.source {
        policy.source_run_id.clone_from(source_id);
    }
    Ok(policy)
}

/// Refuses contradictory commands: input with a later step, edits or a scripted replay
/// without a source, overrides a replay would ignore.
fn check_studio_request(spec: &StudioRunSpec, policy: &StudioPolicy) -> Result<(), StudioRunError> {
    let from_step = spec.source.as_ref().map(|(_, n)| *n).unwrap_or(0);
    if spec.input.is_some() && from_step > 0 {
        return Err(StudioRunError::invalid(
            "input re-runs the whole turn: it cannot be combined with from_step > 0",
        ));
    }
    if spec.source.is_none() && !spec.edits.is_empty() {
        return Err(StudioRunError::invalid(
            "transcript_edits need a source run",
        ));
    }
    if policy.scripted() {
        if spec.source.is_none() {
            return Err(StudioRunError::invalid(
                "the scripted engine replays a source run: source is required",
            ));
        }
        if !policy.instructions.is_empty() || !spec.model.is_empty() {
            return Err(StudioRunError::invalid(
                "the scripted engine replays recorded turns: an instructions or model override would be ignored",
            ));
        }
    }
    Ok(())
}

/// Under [`SideEffects::Allow`], every mutating tool offered must be opted in.
fn check_side_effects(
    policy: &StudioPolicy,
    tools: &[ToolDefinition],
) -> Result<(), StudioRunError> {
    if policy.side_effects != SideEffects::Allow {
        return Ok(());
    }
    for tool in tools.iter().filter(|t| t.mutating) {
        if !policy.allow.contains(&tool.name) {
            return Err(StudioRunError::Forbidden(format!(
                "side_effects allow: tool {} is neither opted in nor replay-safe",
                tool.name
            )));
        }
    }
    Ok(())
}

/// The target of a run that forks nothing: the agent's first target type, named by the
/// command (or the run).
fn studio_target(agent: &Agent, policy: &StudioPolicy, run_id: &str) -> TargetRef {
    TargetRef {
        target_type: agent
            .allowed_targets
            .first()
            .cloned()
            .unwrap_or_else(|| "studio".to_string()),
        id: if policy.command_id.is_empty() {
            run_id.to_string()
        } else {
            policy.command_id.clone()
        },
        ..TargetRef::default()
    }
}

/// The fork's starting state: the source's kept prefix before `from_step`, with the
/// command's input, edits and instructions override applied.
fn forked_state(
    recorded: &LoopState,
    from_step: i64,
    spec: &StudioRunSpec,
    policy: &StudioPolicy,
    agent: &Agent,
    tools: &[ToolDefinition],
) -> Result<LoopState, StudioRunError> {
    let mut prefix = kept_prefix(recorded, from_step)?;
    if let (Some(input), Some(first)) = (
        spec.input.as_ref(),
        prefix.iter_mut().find(|m| m.role == ChatRole::User),
    ) {
        first.content = input.clone();
    }
    apply_edits(&mut prefix, from_step, &spec.edits, tools)?;
    if !policy.instructions.is_empty() {
        replace_agent_prompt(&mut prefix, agent, &policy.instructions);
    }
    Ok(LoopState {
        step: from_step,
        transcript: prefix,
        ..LoopState::default()
    })
}

/// Swaps the agent's prompt at the head of the system message for `instructions`, keeping
/// what the loop appended after it.
fn replace_agent_prompt(prefix: &mut [ChatMessage], agent: &Agent, instructions: &str) {
    let old = source_agent_prompt(agent);
    if let Some(system) = prefix.iter_mut().find(|m| m.role == ChatRole::System) {
        let tail = system
            .content
            .strip_prefix(old.as_str())
            .unwrap_or("")
            .to_string();
        system.content = format!("{}{tail}", instructions.trim());
    }
}

/// The agent's own prompt as the native loop starts its system message.
fn source_agent_prompt(agent: &Agent) -> String {
    let prompt = agent.system_prompt.trim().to_string();
    if prompt.is_empty() {
        "You are an agent working for a host application.".to_string()
    } else {
        prompt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded() -> LoopState {
        let call = ModelToolCall {
            id: "c1".into(),
            name: "lookup".into(),
            arguments: r#"{"q":"a"}"#.into(),
        };
        LoopState {
            step: 2,
            transcript: vec![
                ChatMessage::system("sys"),
                ChatMessage::user("task"),
                ChatMessage::assistant("looking".to_string(), vec![call]),
                ChatMessage::tool_result("c1".to_string(), "found".to_string()),
                ChatMessage::assistant("done".to_string(), vec![]),
            ],
            ..LoopState::default()
        }
    }

    #[test]
    fn prefix_keeps_steps_before_n() {
        let state = recorded();
        assert_eq!(kept_prefix(&state, 0).unwrap().len(), 2);
        assert_eq!(kept_prefix(&state, 1).unwrap().len(), 4);
        assert_eq!(kept_prefix(&state, 2).unwrap().len(), 5);
        assert!(kept_prefix(&state, 3).is_err());
        let mut open = state.clone();
        open.transcript.truncate(3);
        assert!(
            kept_prefix(&open, 1).is_err(),
            "unanswered call at the boundary"
        );
    }

    #[test]
    fn edits_stay_inside_the_prefix() {
        let state = recorded();
        let mut prefix = kept_prefix(&state, 1).unwrap();
        let edit = |kind: &str, step: i64| TranscriptEdit {
            kind: kind.into(),
            step,
            call_id: "c1".into(),
            content: "edited".into(),
            ..TranscriptEdit::default()
        };
        assert!(apply_edits(&mut prefix, 1, &[edit("tool_result", 1)], &[]).is_err());
        apply_edits(&mut prefix, 1, &[edit("tool_result", 0)], &[]).unwrap();
        assert_eq!(prefix[3].content, "edited");
        apply_edits(&mut prefix, 1, &[edit("insert", 1)], &[]).unwrap();
        assert_eq!(prefix.last().unwrap().content, "edited");
        let bad_call = TranscriptEdit {
            call_id: "nope".into(),
            ..edit("tool_result", 0)
        };
        assert!(apply_edits(&mut prefix, 1, &[bad_call], &[]).is_err());
    }

    #[test]
    fn contradictory_commands_are_refused() {
        let policy = StudioPolicy::default();
        let fork = |from_step: i64| StudioRunSpec {
            source: Some(("run_src".into(), from_step)),
            ..StudioRunSpec::default()
        };
        assert!(check_studio_request(&fork(1), &policy).is_ok());
        let input_late = StudioRunSpec {
            input: Some("again".into()),
            ..fork(1)
        };
        assert!(check_studio_request(&input_late, &policy).is_err());
        let edits_alone = StudioRunSpec {
            edits: vec![TranscriptEdit::default()],
            ..StudioRunSpec::default()
        };
        assert!(check_studio_request(&edits_alone, &policy).is_err());
        let scripted = StudioPolicy {
            engine: StudioEngine::Scripted,
            ..StudioPolicy::default()
        };
        assert!(check_studio_request(&StudioRunSpec::default(), &scripted).is_err());
        assert!(check_studio_request(&fork(0), &scripted).is_ok());
        let overridden = StudioRunSpec {
            model: "other".into(),
            ..fork(0)
        };
        assert!(check_studio_request(&overridden, &scripted).is_err());
    }

    #[test]
    fn allowed_side_effects_need_every_mutating_tool_opted_in() {
        let tool = |name: &str, mutating: bool| ToolDefinition {
            name: name.into(),
            description: String::new(),
            category: String::new(),
            input_schema: json!({}),
            mutating,
            risk_level: None,
            supported_target_types: Vec::new(),
        };
        let tools = [tool("read", false), tool("write", true)];
        let allow = StudioPolicy {
            side_effects: SideEffects::Allow,
            ..StudioPolicy::default()
        };
        assert!(check_side_effects(&StudioPolicy::default(), &tools).is_ok());
        assert!(matches!(
            check_side_effects(&allow, &tools),
            Err(StudioRunError::Forbidden(_))
        ));
        let opted_in = StudioPolicy {
            allow: vec!["write".into()],
            ..allow
        };
        assert!(check_side_effects(&opted_in, &tools).is_ok());
    }

    #[test]
    fn a_decision_on_one_of_several_calls_is_checkpointed_on_that_call() {
        let parked = |id: &str| crate::transcript::PendingCall {
            call: ModelToolCall {
                id: id.into(),
                name: "lookup".into(),
                arguments: "{}".into(),
            },
            interaction_id: Some(format!("int_{id}")),
            record_id: None,
            decision: None,
            started: false,
        };
        let mut state = recorded();
        state.pending = vec![parked("c1"), parked("c2")];
        let deny = StudioDecision::Deny {
            reason: "no".into(),
        };
        let checkpoint = decided_checkpoint(&state, "run_1", "c2", &deny, Utc::now());
        let next = LoopState::from_json(&checkpoint.state).unwrap();
        assert_eq!(next.pending[0].decision, None);
        assert_eq!(
            next.pending[1].decision,
            Some(Decision::Rejected {
                reason: "no".into()
            })
        );
        assert_eq!(
            (deny.intent(), deny.content()),
            ("request_changes", "no".into())
        );
    }

    #[test]
    fn args_follow_the_schema() {
        let schema = json!({"type":"object","required":["q"],"properties":{"q":{"type":"string"}}});
        assert!(check_args(&schema, &json!({"q": "x"})).is_ok());
        assert!(check_args(&schema, &json!({})).is_err());
        assert!(check_args(&schema, &json!({"q": 1})).is_err());
    }
}
