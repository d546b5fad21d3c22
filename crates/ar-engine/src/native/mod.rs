//! The native agent loop (`runtime_kind: native_sdk`): model rounds, tool rounds, the approval
//! gate, runtime-control tools, explicit completion, checkpoints after every step.

use ar_core::event::{self as ev, RunEvent};
use ar_core::ids::{new_id, prefix};
use ar_core::model::{
    ModelError, ModelRequest, ModelResponse, ModelRoute, ModelToolCall, ToolSpec,
};
use ar_core::records::interaction_kind;
use ar_core::store::{Checkpoint, RunChange};
use ar_core::tool::{ToolDefinition, ToolOutput};
use ar_core::{Agent, ApprovalState, CredentialSource, PauseReason, Run, RunStatus, RuntimeKind};
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::admission::MODEL_CREDENTIAL_SECRET;
use crate::control_tools;
use crate::credential_refresh::renewal_due;
use crate::engine::{Decide, Engine};
use crate::error::EngineResult;
use crate::limits::AgentLimits;
use crate::mcp::{CallProblem, Discovery};
use crate::model_route::{has_expired, resolve_route, RunCredential};
use crate::owner::Owner;
use crate::records::{interaction, mark_failed, mark_paused, mark_paused_with};
use crate::skills::RunSkills;
use crate::transcript::LoopState;
use crate::window;
use ar_core::host::RefreshReason;

mod budget;
mod compact;
mod pending;
mod round;
pub(crate) use round::tool_result_events;
mod stream;
use stream::ModelCall;

/// How long the first streamed deltas of a model call are held back to see whether the whole
/// answer arrives at once (saving a commit per step); later deltas stream without delay.
const DELTA_COALESCE_WINDOW: std::time::Duration = std::time::Duration::from_millis(10);

/// How a step's commit ended for the loop.
pub(crate) enum Flow {
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
    /// Answered by the engine itself (the skill tools), recorded like a run tool.
    Answer {
        tool: ToolDefinition,
        input: Value,
        output: ToolOutput,
    },
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

/// What running one tool came to.
pub(crate) enum ToolRun {
    /// Its output and how long it took (ms).
    Done(ToolOutput, u64),
    /// Its MCP server refused the credential: the call waits for a new one.
    NeedsAuthentication {
        server: ar_core::mcp::McpServer,
        reason: String,
    },
}

/// The model route an owner resolved, with when its credential expires (`None`: never).
#[derive(Default)]
struct CachedRoute(Option<(ModelRoute, Option<DateTime<Utc>>)>);

/// What the loop carries from step to step of a turn: its route, its agent's limits, its
/// context window, since when its running time is not counted yet, and whether the provider
/// refused this step's request for its window (it is compacted and asked once more).
struct Turn {
    route: CachedRoute,
    limits: AgentLimits,
    context: Option<compact::ContextFit>,
    running_since: DateTime<Utc>,
    overflowed: bool,
}

impl Turn {
    fn new(limits: AgentLimits, specs: &[ToolSpec], now: DateTime<Utc>) -> Turn {
        Turn {
            route: CachedRoute::default(),
            limits,
            context: limits.context.map(|policy| compact::ContextFit {
                policy,
                tools_tokens: window::estimate_tools(specs),
                retry_above: 0,
            }),
            running_since: now,
            overflowed: false,
        }
    }
}

/// A model step's answer: the response, or the provider's refusal of a request too long for
/// its window (the loop compacts the context and asks again).
// Returned once per step and unpacked at once: boxing the response would only add an
// allocation to every step.
#[allow(clippy::large_enum_variant)]
enum Answer {
    Response(ModelResponse, StreamMarks),
    Overflow,
}

/// What the model is told about each tool.
fn tool_specs(tools: &[ToolDefinition]) -> Vec<ToolSpec> {
    tools
        .iter()
        .map(|tool| ToolSpec {
            name: tool.name.clone(),
            description: tool.description.clone(),
            parameters: tool.input_schema.clone(),
        })
        .collect()
}

/// The turn's tools with the skill tools added when the run has skills to offer (a tool of
/// the same name the run already has wins).
fn with_skill_tools(mut tools: Vec<ToolDefinition>, skills: &RunSkills) -> Vec<ToolDefinition> {
    if skills.tools.is_empty() {
        return tools;
    }
    for tool in ar_skills::tools::tool_definitions() {
        if tools.iter().all(|known| known.name != tool.name) {
            tools.push(tool);
        }
    }
    tools
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

impl StreamMarks {
    fn new() -> Self {
        StreamMarks {
            message_id: new_id(prefix::MESSAGE),
            reasoning_id: new_id(prefix::MESSAGE),
            text_started: false,
            reasoning_started: false,
            tools_started: Vec::new(),
        }
    }
}

impl Engine {
    /// Executes a run's current turn until it pauses, ends, or this process stops.
    pub(crate) async fn execute(
        &self,
        app_id: &str,
        run_id: &str,
        owner: &mut Owner,
        start: Option<crate::owner::OwnerStart>,
    ) -> EngineResult<()> {
        // The creating request's copy saves reading the run back (not for a run waiting for
        // approval: that branch decides on the copy without a version check).
        let (run, known) = match start {
            Some(start) if start.run.approval_state() != ApprovalState::Pending => {
                let known = (start.agent, start.seeded, start.run.version, start.skills);
                (start.run, Some(known))
            }
            _ => (self.load_run(app_id, run_id).await?, None),
        };
        if run.is_terminal() || run.status() == RunStatus::Paused {
            return Ok(());
        }
        let now = self.now();
        if run.approval_state() == ApprovalState::Pending {
            self.transact(app_id, run_id, Some(run), |run, change| {
                if run.is_terminal() || run.status() == RunStatus::Paused {
                    return Ok(Decide::Skip(()));
                }
                mark_paused(run, change, PauseReason::HumanApproval)?;
                Ok(Decide::Commit(()))
            })
            .await?;
            return Ok(());
        }
        // No checkpoint to load when this owner started the run it was handed, with nothing
        // committed in between (the version moved by exactly this commit) and none seeded.
        let mut fresh = false;
        let run = if run.status() == RunStatus::Queued {
            let (run, _, started) = self
                .transact(app_id, run_id, Some(run), |run, change| {
                    if run.status() != RunStatus::Queued {
                        return Ok(Decide::Skip(run.status() == RunStatus::Running));
                    }
                    if run.approval_state() == ApprovalState::Pending {
                        // Became pending after the copy was taken: the owner looks again.
                        return Ok(Decide::Skip(false));
                    }
                    run.start(now)?;
                    change.events.push(RunEvent::RunStarted(ev::RunStarted {}));
                    Ok(Decide::Commit(true))
                })
                .await?;
            if !started {
                return Ok(());
            }
            fresh = matches!(&known, Some((_, false, version, _)) if run.version == version + 1);
            run
        } else {
            run
        };
        // Admission resolved the target context moments ago for a run it hands over; every
        // other owner start is a new turn and asks the host again.
        let admitted = known.is_some();
        let (agent, skills) = match known {
            Some((agent, _, _, skills)) => (agent, skills),
            None => match self.deps().store.get_agent(app_id, &run.agent_id).await? {
                Some(agent) => (agent, None),
                None => {
                    self.fail_run(app_id, run_id, "agent not found").await;
                    return Ok(());
                }
            },
        };
        let agent = Self::studio_agent(agent, &run);
        let run = if admitted {
            run
        } else {
            match self.refresh_context(run).await? {
                Some(run) => run,
                None => return Ok(()),
            }
        };
        match run.runtime_kind {
            RuntimeKind::NativeSdk => self.native_loop(run, agent, owner, (fresh, skills)).await,
            kind if self.serves_cli(kind) => self.cli_loop(run, agent, owner).await,
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

    /// The run's latest checkpointed loop state (a fresh one when there is none, or it is
    /// unreadable).
    pub(crate) async fn load_state(&self, run: &Run) -> EngineResult<LoopState> {
        match self.deps().store.latest_checkpoint(&run.id).await? {
            Some(checkpoint) => Ok(LoopState::from_json(&checkpoint.state).unwrap_or_else(|error| {
                tracing::error!(run_id = %run.id, %error, "checkpoint unreadable; starting the transcript afresh");
                LoopState::default()
            })),
            None => Ok(LoopState::default()),
        }
    }

    pub(crate) fn checkpoint(&self, run: &Run, state: &LoopState) -> Checkpoint {
        Checkpoint {
            run_id: run.id.clone(),
            step: state.step,
            state: state.to_json(),
            created_at: self.now(),
        }
    }

    fn system_prompt(
        agent: &Agent,
        run: &Run,
        tools: &[ToolDefinition],
        skills: &RunSkills,
    ) -> String {
        let mut prompt = agent.system_prompt.trim().to_string();
        if prompt.is_empty() {
            prompt = "You are an agent working for a host application.".to_string();
        }
        prompt.push_str("\n\n");
        prompt.push_str(&crate::context::target_brief(run));
        if run.input.turn_policy.is_explicit_completion()
            && tools.iter().any(|t| t.name == control_tools::FINISH_TURN)
        {
            prompt.push_str("\n\nWhen your work for this turn is done, call finish_turn as the only tool call of your response.");
        }
        let section = skills.prompt_section();
        if !section.is_empty() {
            prompt.push_str("\n\n# Skills\n\n");
            prompt.push_str(&section);
        }
        prompt
    }

    /// Commits `build`'s change on the cached run; `Stop` when the run is no longer executing.
    pub(crate) async fn commit_step(
        &self,
        run: &mut Run,
        mut build: impl FnMut(&mut Run, &mut RunChange) -> EngineResult<()>,
    ) -> EngineResult<Flow> {
        let app_id = run.app_id.clone();
        let run_id = run.id.clone();
        let before = run.version;
        let finalized = self.finalize_if_ending(run, &mut build).await;
        let now = self.now();
        let (fresh, committed, proceed) = self
            .transact(&app_id, &run_id, Some(run.clone()), |current, change| {
                if current.status() != RunStatus::Running {
                    return Ok(Decide::Skip(false));
                }
                let unchanged = finalized.as_ref().map(|_| current.clone());
                build(current, change)?;
                if let (Some(finalized), Some(unchanged)) = (&finalized, &unchanged) {
                    crate::workspace::apply_finalized(current, unchanged, change, finalized, now)?;
                }
                Ok(Decide::Commit(true))
            })
            .await?;
        // A version beyond this commit's own means the run changed elsewhere (another
        // process may have replaced or revoked its credential).
        let own = i64::from(committed.version != 0);
        if fresh.version != before + own {
            self.mark_route_stale(&run_id);
        }
        *run = fresh;
        if !proceed {
            return Ok(Flow::Stop);
        }
        Ok(if run.status() == RunStatus::Running {
            Flow::Continue
        } else {
            Flow::Stop
        })
    }

    async fn native_loop(
        &self,
        mut run: Run,
        agent: Agent,
        owner: &mut Owner,
        (fresh, admitted): (bool, Option<RunSkills>),
    ) -> EngineResult<()> {
        let mut state = if fresh {
            LoopState::default()
        } else {
            self.load_state(&run).await?
        };
        let limits = match AgentLimits::of(agent.runtime_kind, agent.execution_config.as_ref()) {
            Ok(limits) => limits,
            Err(error) => return self.fail_step(&mut run, &state, &error.to_string()).await,
        };
        if let Flow::Stop = self
            .ensure_workspace(&mut run, &agent, &state, owner)
            .await?
        {
            return Ok(());
        }
        let Some(tools) = self.turn_tools(&mut run, &agent, &state).await? else {
            return Ok(());
        };
        let Some(skills) = self.turn_skills(&mut run, &agent, &state, admitted).await? else {
            return Ok(());
        };
        let tools = with_skill_tools(tools, &skills);
        let specs = tool_specs(&tools);
        let mut turn = Turn::new(limits, &specs, self.now());
        loop {
            if let Flow::Stop = self.safe_point(&mut run, &state, owner).await? {
                return Ok(());
            }
            if state.transcript.is_empty() {
                let prompt = Self::system_prompt(&agent, &run, &tools, &skills);
                state.open(prompt, &run.input.instructions);
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
            state.queued_user_messages.extend(owner.inbox.take_steers());
            state.flush_queued_messages();
            let Some(request) = self
                .next_request(&mut run, &mut state, &specs, (&mut turn, owner))
                .await?
            else {
                return Ok(());
            };
            let overflow_retry = turn.context.is_some() && !turn.overflowed;
            // One trace per step: its model call, tool calls and commits are its spans.
            let span = tracing::trace_span!(target: ar_core::trace::TARGET, "run_step",
                app_id = %run.app_id, run_id = %run.id, step = state.step + 1);
            let model_step = self.model_step(
                &mut run,
                &state,
                (&request, &mut turn.route),
                owner,
                overflow_retry,
            );
            let answer = tracing::Instrument::instrument(model_step, span.clone()).await?;
            state.model_calls += 1;
            let (response, marks) = match answer {
                Some(Answer::Response(response, marks)) => (response, marks),
                Some(Answer::Overflow) => {
                    turn.overflowed = true;
                    continue;
                }
                None => return Ok(()),
            };
            turn.overflowed = false;
            state.step += 1;
            state.turn_steps += 1;
            state.usage.add(&response.usage);
            let tools = (tools.as_slice(), &skills);
            let handled =
                self.handle_response(&mut run, &agent, tools, &mut state, response, marks);
            if let Flow::Stop = tracing::Instrument::instrument(handled, span).await? {
                return Ok(());
            }
        }
    }

    /// The tools of this turn: the run's effective tools and those its MCP servers add.
    /// `None` when the run stopped (a server needs a new credential, or cannot serve it).
    async fn turn_tools(
        &self,
        run: &mut Run,
        agent: &Agent,
        state: &LoopState,
    ) -> EngineResult<Option<Vec<ToolDefinition>>> {
        let mut tools = self.current_tools(run, agent).await;
        match self.discover_mcp_tools(run).await {
            Discovery::Tools(mcp) => {
                tools.extend(mcp);
                Ok(Some(tools))
            }
            Discovery::NeedsAuthentication { server, reason } => {
                self.pause_for_mcp_authentication(run, state, &server, &reason)
                    .await?;
                Ok(None)
            }
            Discovery::Failed(reason) => {
                self.fail_step(run, state, &reason).await?;
                Ok(None)
            }
        }
    }

    /// This turn's skills and policy (those admission resolved moments ago for a run it hands
    /// over, else resolved now), with the `runtime_skill_manifest` recorded when there are
    /// skills. `None` when the run stopped (they can no longer be resolved: it failed).
    async fn turn_skills(
        &self,
        run: &mut Run,
        agent: &Agent,
        state: &LoopState,
        admitted: Option<RunSkills>,
    ) -> EngineResult<Option<RunSkills>> {
        let resolved = match admitted {
            Some(skills) => Ok(skills),
            None => self.run_skills(agent, run).await,
        };
        let skills = match resolved {
            Ok(skills) => skills,
            Err(crate::error::EngineError::Invalid(reason)) => {
                self.fail_step(run, state, &reason).await?;
                return Ok(None);
            }
            Err(other) => return Err(other),
        };
        let skills = match self.place_skills(agent, run, skills).await {
            Ok(skills) => skills,
            Err(reason) => {
                self.fail_step(run, state, &reason).await?;
                return Ok(None);
            }
        };
        if skills.resolution.skills.is_empty() {
            return Ok(Some(skills));
        }
        let content = skills.manifest().to_string();
        let flow = self
            .commit_step(run, |run, change| {
                change.artifacts.push(crate::records::artifact(
                    run,
                    ar_skills::tools::MANIFEST_ARTIFACT,
                    "json",
                    &content,
                    self.now(),
                ));
                Ok(())
            })
            .await?;
        Ok(matches!(flow, Flow::Continue).then_some(skills))
    }

    /// The loop's safe point: `Stop` when the owner was told to stop, the process is shutting
    /// down, or a pause was requested (then the run is paused at this checkpoint).
    pub(crate) async fn safe_point(
        &self,
        run: &mut Run,
        state: &LoopState,
        owner: &mut Owner,
    ) -> EngineResult<Flow> {
        if owner.inbox.stop_requested() || self.is_shutting_down() {
            return Ok(Flow::Stop);
        }
        if !owner.inbox.pause_requested() && !run.state.pause_requested() {
            return Ok(Flow::Continue);
        }
        let checkpoint = self.checkpoint(run, state);
        self.commit_step(run, |run, change| {
            mark_paused(run, change, PauseReason::Manual)?;
            change.checkpoint = Some(checkpoint.clone());
            Ok(())
        })
        .await?;
        Ok(Flow::Stop)
    }

    /// The next model request of the turn; `None` when the run stopped instead: its turn used
    /// up the step limit (failed), or the call would go past a budget (paused).
    async fn next_request(
        &self,
        run: &mut Run,
        state: &mut LoopState,
        specs: &[ToolSpec],
        (turn, owner): (&mut Turn, &mut Owner),
    ) -> EngineResult<Option<ModelRequest>> {
        if let Flow::Stop = self
            .check_step_limit(run, state, turn.limits.max_tool_steps)
            .await?
        {
            return Ok(None);
        }
        if let Some(fit) = turn.context.as_mut() {
            let force = turn.overflowed;
            let flow = self
                .fit_context(run, state, fit, (owner, &mut turn.route), force)
                .await?;
            if let Flow::Stop = flow {
                return Ok(None);
            }
        }
        let request = ModelRequest {
            messages: state.transcript.clone(),
            tools: specs.to_vec(),
            max_output_tokens: turn.limits.context.map(|c| c.max_output_tokens),
        };
        state.count_running(&mut turn.running_since, self.now());
        let next_input = || window::estimate(&request.messages) + window::estimate_tools(specs);
        if let Flow::Stop = self.within_budget(run, state, next_input).await? {
            return Ok(None);
        }
        Ok(Some(request))
    }

    /// Fails the run (`Stop`) when its turn used up the step limit.
    async fn check_step_limit(
        &self,
        run: &mut Run,
        state: &LoopState,
        agent_limit: Option<i64>,
    ) -> EngineResult<Flow> {
        let limit = self.step_limit(run, agent_limit);
        if state.turn_steps < limit {
            return Ok(Flow::Continue);
        }
        self.fail_step(run, state, &format!("tool step limit of {limit} reached"))
            .await?;
        Ok(Flow::Stop)
    }

    /// Fails the run with `reason`, recording the usage so far.
    pub(crate) async fn fail_step(
        &self,
        run: &mut Run,
        state: &LoopState,
        reason: &str,
    ) -> EngineResult<()> {
        let usage = state.usage;
        self.commit_step(run, |run, change| {
            mark_failed(run, change, reason, Some(&usage), self.now())
        })
        .await?;
        Ok(())
    }

    /// The model route for this step. The route (and the sealed credential behind it) is read
    /// once per owner and again only when the credential may have changed (replaced or revoked
    /// while the run runs) or has expired, so a step costs no secret read. `None` when the run
    /// stopped for want of one (paused for authentication, or failed).
    async fn current_route<'r>(
        &self,
        run: &mut Run,
        state: &LoopState,
        owner: &mut Owner,
        cache: &'r mut CachedRoute,
    ) -> EngineResult<Option<&'r ModelRoute>> {
        if owner.inbox.take_route_stale() {
            cache.0 = None;
        }
        let cached = match cache.0.take() {
            Some((resolved, expires_at)) if !renewal_due(expires_at, self.now()) => {
                Ok((resolved, expires_at))
            }
            _ => self.route_for(run).await,
        };
        match cached {
            Ok(current) => {
                let (route, _) = cache.0.insert(current);
                owner.secrets.hold(route.api_key.as_ref());
                Ok(Some(route))
            }
            Err(RouteProblem::Authentication(reason)) => {
                self.pause_for_authentication(run, state, &reason).await?;
                Ok(None)
            }
            Err(RouteProblem::Other(reason)) => {
                self.fail_step(run, state, &reason).await?;
                Ok(None)
            }
        }
    }

    /// One model call of the step, on the run's current route. A 401 before anything was
    /// streamed renews an app credential through the app's callback and asks once more;
    /// `None` when the run stopped meanwhile or because of the answer (paused for
    /// authentication, failed).
    async fn model_step(
        &self,
        run: &mut Run,
        state: &LoopState,
        (request, cache): (&ModelRequest, &mut CachedRoute),
        owner: &mut Owner,
        overflow_retry: bool,
    ) -> EngineResult<Option<Answer>> {
        let mut renewed = false;
        loop {
            let Some(route) = self.current_route(run, state, owner, cache).await? else {
                return Ok(None);
            };
            let mut marks = StreamMarks::new();
            let reason = match self
                .call_model(run, route, request, owner, &mut marks)
                .await?
            {
                ModelCall::Answered(Ok(response)) => {
                    return Ok(Some(Answer::Response(response, marks)))
                }
                ModelCall::Answered(Err(ModelError::Authentication(reason))) => reason,
                ModelCall::Answered(Err(ModelError::ContextOverflow { .. })) if overflow_retry => {
                    return Ok(Some(Answer::Overflow))
                }
                ModelCall::Answered(Err(error)) => {
                    let mut reason = error.to_string();
                    if matches!(error, ModelError::ContextOverflow { .. }) {
                        reason.push_str(
                            " (an agent's execution_config.native_context keeps long runs within the model's window: set it, or lower its limits)",
                        );
                    }
                    self.fail_step(run, state, &reason).await?;
                    return Ok(None);
                }
                // Stopped, or paused here as at the safe point before the call (the state is
                // that point's: the answer was not applied).
                ModelCall::Interrupted => {
                    self.safe_point(run, state, owner).await?;
                    return Ok(None);
                }
                ModelCall::Stopped => return Ok(None),
            };
            let untouched =
                !marks.text_started && !marks.reasoning_started && marks.tools_started.is_empty();
            if !renewed && untouched && self.renew_after_rejection(run).await {
                renewed = true;
                cache.0 = None;
                continue;
            }
            self.pause_for_authentication(run, state, &reason).await?;
            return Ok(None);
        }
    }

    /// After a 401: the app's credential renewed through its callback, if it has one.
    async fn renew_after_rejection(&self, run: &Run) -> bool {
        if run.input.credential_source != Some(CredentialSource::App) {
            return false;
        }
        let Ok(Some(current)) = self.open_run_credential(run).await else {
            return false;
        };
        self.refresh_credential(run, &current, RefreshReason::Unauthorized)
            .await
            .is_some()
    }

    /// The credential itself when it is not due for renewal; else the renewed one, or the
    /// current one while it is still valid, or an authentication problem.
    async fn renewed_if_due(
        &self,
        run: &Run,
        credential: RunCredential,
    ) -> Result<RunCredential, RouteProblem> {
        if !renewal_due(credential.expires_at, self.now()) {
            return Ok(credential);
        }
        if let Some(renewed) = self
            .refresh_credential(run, &credential, RefreshReason::Expired)
            .await
        {
            return Ok(renewed);
        }
        if has_expired(credential.expires_at, self.now()) {
            return Err(RouteProblem::Authentication(
                "the run's model credential expired".to_string(),
            ));
        }
        Ok(credential)
    }

    /// Runs one tool: through the run's MCP server that grants it, else the tool host.
    pub(crate) async fn run_tool(
        &self,
        run: &Run,
        context: &ar_core::tool::ToolContext,
        tool: &ToolDefinition,
        input: Value,
    ) -> ToolRun {
        let span = tracing::trace_span!(target: ar_core::trace::TARGET, "tool_call",
            tool = %tool.name, run_id = %run.id);
        tracing::Instrument::instrument(self.run_tool_here(run, context, tool, input), span).await
    }

    async fn run_tool_here(
        &self,
        run: &Run,
        context: &ar_core::tool::ToolContext,
        tool: &ToolDefinition,
        input: Value,
    ) -> ToolRun {
        let started = std::time::Instant::now();
        if let Some(workspace) = self.workspace_tools_of(&run.id) {
            if workspace.definitions().iter().any(|t| t.name == tool.name) {
                let output = workspace.call(&tool.name, input).await;
                return ToolRun::Done(output, started.elapsed().as_millis() as u64);
            }
        }
        let output = match self.call_mcp_tool(run, &tool.name, input.clone()).await {
            Some(Ok(output)) => output,
            Some(Err(CallProblem::Authentication { server, reason })) => {
                return ToolRun::NeedsAuthentication { server, reason }
            }
            None => self.deps().tools.call(context, &tool.name, input).await,
        };
        ToolRun::Done(output, started.elapsed().as_millis() as u64)
    }

    /// The run's own credential as stored (`None`: the run uses the runtime's key).
    async fn open_run_credential(&self, run: &Run) -> Result<Option<RunCredential>, RouteProblem> {
        if run.input.credential_source != Some(CredentialSource::App) {
            return Ok(None);
        }
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
        let provider = run.input.model.as_ref().map_or("", |m| m.provider.as_str());
        crate::model_credential::open(
            self.deps().sealer.as_deref(),
            (&run.app_id, &run.id),
            provider,
            &sealed,
        )
        .map(Some)
        .map_err(|error| match error {
            crate::model_credential::OpenError::NoKey => RouteProblem::Other(error.to_string()),
            error => RouteProblem::Authentication(error.to_string()),
        })
    }

    /// The host connection of the run's own credential, read from its binding in the clear
    /// (empty: the runtime's key, or a credential revoked or never bound to a connection), so
    /// the host knows which sign-in an authentication pause is about.
    async fn credential_connection(&self, run: &Run) -> String {
        if run.input.credential_source != Some(CredentialSource::App) {
            return String::new();
        }
        match self
            .deps()
            .store
            .get_secret(&run.id, MODEL_CREDENTIAL_SECRET)
            .await
        {
            Ok(Some(stored)) => crate::model_credential::CredentialBinding::read(&stored)
                .map(|binding| binding.connection_id)
                .unwrap_or_default(),
            _ => String::new(),
        }
    }

    /// The run's model route and when its credential expires (`None`: never).
    pub(crate) async fn route_for(
        &self,
        run: &Run,
    ) -> Result<(ModelRoute, Option<DateTime<Utc>>), RouteProblem> {
        if crate::studio_replay::is_scripted(run) {
            return Ok((crate::studio_replay::scripted_route(run), None));
        }
        let Some(model) = run.input.model.as_ref() else {
            return Err(RouteProblem::Other("run has no model route".to_string()));
        };
        let credential = match self.open_run_credential(run).await? {
            Some(credential) => Some(self.renewed_if_due(run, credential).await?),
            None => None,
        };
        let expires_at = credential
            .as_ref()
            .and_then(|credential| credential.expires_at);
        resolve_route(self.config(), model, credential.as_ref())
            .map(|route| (route, expires_at))
            .map_err(RouteProblem::Other)
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
        let connection_id = self.credential_connection(run).await;
        let now = self.now();
        let checkpoint = self.checkpoint(run, state);
        self.commit_step(run, |run, change| {
            let payload = serde_json::json!({"provider": provider,
                "connection_id": connection_id, "reason": reason});
            change.interactions.push(interaction(
                run,
                interaction_kind::AUTHENTICATION,
                "Model authentication required",
                reason,
                payload,
                now,
            ));
            let mut paused = ev::RunPaused::because(PauseReason::Authentication);
            paused.provider.clone_from(&provider);
            paused.connection_id.clone_from(&connection_id);
            mark_paused_with(run, change, paused)?;
            change.checkpoint = Some(checkpoint.clone());
            Ok(())
        })
        .await?;
        Ok(())
    }
}
