//! The service as a studio runtime: its registration (the apps' agents with their models,
//! tools and side-effect classes) and the `CommandHandler` that turns studio commands into
//! service runs (experiments, forks from step N, scripted replays), decisions on parked
//! calls, steering and cancels.
//!
//! Agents register as `<app_id>/<agent_id>`. Only runs started here are the studio's to
//! drive: the app's own runs stay view-only.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ar_config::app::AppConfig;
use ar_core::ids::{new_id, prefix};
use ar_core::store::Store;
use ar_core::tool::ToolDefinition;
use ar_core::{Agent, ApprovalMode, Run, RunStatus, RuntimeKind};
use ar_engine::{
    Engine, StartRun, StudioDecision, StudioPolicy, StudioRunError, StudioRunSpec, TranscriptEdit,
};
use ar_studio::link::{Admission, CommandHandler, Outcome, Rejection, Work};
use ar_studio::wire::{
    AckReason, AgentDefaults, AgentLimits, AgentRegistration, ApprovalDecision, Budget, Command,
    Reason, Registration, RunStatus as StudioRunStatus, SteerMessage, ToolChoice,
};
use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// How long a prepared run waits for its command to execute.
const PREPARED_TTL: Duration = Duration::from_secs(600);

/// How often a studio command's run is looked at while it executes.
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// The service's side of the studio link.
pub struct StudioRuntime {
    engine: Engine,
    store: Arc<dyn Store>,
    apps: Arc<AppConfig>,
    runtime_id: String,
    budget: Mutex<Budget>,
    /// The breakpoint set each linked studio sent (by link slot); runs park on their union.
    breakpoints: Mutex<BTreeMap<usize, Vec<String>>>,
    /// Runs prepared at admission, started when the command executes (by command id). A
    /// command refused after admission (budget, a lost ack) leaves its entry behind until it
    /// expires.
    prepared: Mutex<HashMap<String, (Instant, String, StartRun)>>,
    /// The app of every run this runtime started.
    started: Mutex<HashMap<String, String>>,
    /// Decisions on one run are taken one at a time.
    deciding: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for StudioRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StudioRuntime")
            .field("runtime_id", &self.runtime_id)
            .finish_non_exhaustive()
    }
}

fn reject(error: StudioRunError) -> Rejection {
    let kind = match &error {
        StudioRunError::Invalid(_) => "bad_request",
        StudioRunError::Forbidden(_) => "forbidden",
        StudioRunError::NotFound(_) => "not_found",
        StudioRunError::Conflict(_) => "conflict",
        StudioRunError::Engine(_) => "internal",
    };
    Rejection::with_kind(error.to_string(), kind)
}

/// A tool's side-effect class: `safe` for read-only tools, else its risk level.
pub fn side_effect_class(tool: &ToolDefinition) -> String {
    if tool.mutating {
        tool.effective_risk().as_str().to_string()
    } else {
        "safe".to_string()
    }
}

impl StudioRuntime {
    pub fn new(engine: Engine, store: Arc<dyn Store>, apps: Arc<AppConfig>) -> Self {
        let runtime_id = format!("ar-{}", engine.config().instance_id);
        StudioRuntime {
            engine,
            store,
            apps,
            runtime_id,
            budget: Mutex::new(Budget::default()),
            breakpoints: Mutex::new(BTreeMap::new()),
            prepared: Mutex::new(HashMap::new()),
            started: Mutex::new(HashMap::new()),
            deciding: tokio::sync::Mutex::new(()),
        }
    }

    /// Records the breakpoint set the studio behind link `slot` sent.
    pub fn set_breakpoints(&self, slot: usize, tools: Vec<String>) {
        self.breakpoints.lock().insert(slot, tools);
    }

    /// The breakpoint set of link `slot`.
    pub fn breakpoints_of(&self, slot: usize) -> Vec<String> {
        self.breakpoints
            .lock()
            .get(&slot)
            .cloned()
            .unwrap_or_default()
    }

    /// Every linked studio's breakpoints together.
    fn all_breakpoints(&self) -> Vec<String> {
        let mut all: Vec<String> = Vec::new();
        for tool in self.breakpoints.lock().values().flatten() {
            if !all.contains(tool) {
                all.push(tool.clone());
            }
        }
        all
    }

    /// The id this runtime registers under.
    pub fn runtime_id(&self) -> &str {
        &self.runtime_id
    }

    /// Experiment caps sent with the registration (reserved at admission by the link).
    pub fn set_budget(&self, max_tokens_per_experiment: i64, max_runs_per_experiment: i64) {
        *self.budget.lock() = Budget {
            max_tokens_per_experiment,
            max_runs_per_experiment,
        };
    }

    fn agent_tools(&self, agent: &Agent) -> Vec<ToolDefinition> {
        self.engine
            .catalog(&agent.app_id)
            .into_iter()
            .filter(|t| agent.allowed_tools.contains(&t.name))
            .collect()
    }

    fn agent_registration(&self, agent: &Agent) -> AgentRegistration {
        let tools = self.agent_tools(agent);
        let config = self.engine.config();
        let provider = if agent.provider.is_empty() {
            config.default_provider.clone()
        } else {
            agent.provider.clone()
        };
        let model = if agent.model.is_empty() {
            config
                .providers
                .get(&provider)
                .map(|p| p.default_model.clone())
                .unwrap_or_default()
        } else {
            agent.model.clone()
        };
        let gated = agent.approval_mode != ApprovalMode::Never;
        let manifest = json!({
            "weft": 1,
            "agents": [{
                "name": format!("{}/{}", agent.app_id, agent.id),
                "instructions": agent.system_prompt,
                "model": {"name": model, "provider": provider},
                "tools": tools.iter().map(|t| json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.input_schema,
                    "mutating": t.mutating,
                    "risk": t.effective_risk().as_str(),
                    "approval": gated && t.mutating,
                })).collect::<Vec<_>>(),
            }]
        });
        let side_effects: BTreeMap<String, String> = tools
            .iter()
            .map(|t| (t.name.clone(), side_effect_class(t)))
            .collect();
        let max_steps = config.max_tool_steps;
        AgentRegistration {
            name: format!("{}/{}", agent.app_id, agent.id),
            manifest: manifest.to_string(),
            models: if model.is_empty() {
                vec![]
            } else {
                vec![model]
            },
            resolver: true,
            limits: AgentLimits {
                max_steps,
                parallelism: 0,
            },
            defaults: AgentDefaults {
                max_steps,
                tool_choice: ToolChoice {
                    mode: "auto".to_string(),
                    name: String::new(),
                },
                ..AgentDefaults::default()
            },
            side_effects,
            allow: Vec::new(),
            manifest_hash: String::new(),
        }
    }

    /// The registration as of now: every native agent of every configured app.
    pub async fn current_registration(&self) -> Registration {
        let mut agents = Vec::new();
        for app_id in self.apps.apps.keys() {
            match self.store.list_agents(app_id).await {
                // Forks, scripted replay and the side-effect gate live in the native loop.
                Ok(list) => agents.extend(
                    list.iter()
                        .filter(|a| a.runtime_kind == RuntimeKind::NativeSdk)
                        .map(|a| self.agent_registration(a)),
                ),
                Err(error) => tracing::warn!(%error, app_id, "studio: could not list agents"),
            }
        }
        agents.sort_by(|a, b| a.name.cmp(&b.name));
        Registration {
            runtime_id: self.runtime_id.clone(),
            host: ar_config::env::process_env("HOSTNAME").unwrap_or_default(),
            pid: i64::from(std::process::id()),
            service: "agent-runtime".to_string(),
            env: "dev".to_string(),
            weft_version: format!("agent-runtime/{}", env!("CARGO_PKG_VERSION")),
            budget: *self.budget.lock(),
            threads: false,
            breakpoints: self.all_breakpoints(),
            agents,
            heartbeat_ms: 0,
            instance: self.engine.config().instance_id.clone(),
            sessions: false,
            studio_url: String::new(),
            cwd: std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            breakpoints_own: false,
        }
    }

    /// The app holding `run_id`: a run this runtime started, else any configured app's.
    async fn app_of(&self, run_id: &str) -> Option<String> {
        if let Some(app) = self.started.lock().get(run_id) {
            return Some(app.clone());
        }
        for app_id in self.apps.apps.keys() {
            if let Ok(Some(_)) = self.store.get_run(app_id, run_id).await {
                return Some(app_id.clone());
            }
        }
        None
    }

    fn spec_of(&self, cmd: &Command, run_id: &str) -> Result<StudioRunSpec, Rejection> {
        let (app_id, agent_id) = cmd.agent.split_once('/').ok_or_else(|| {
            Rejection::with_kind(format!("unknown agent {}", cmd.agent), "not_found")
        })?;
        let o = &cmd.overrides;
        if cmd.thread == "fork" {
            return Err(Rejection::with_kind(
                "thread fork is unsupported: this runtime holds no thread sessions",
                "unsupported",
            ));
        }
        if !matches!(o.thinking.as_str(), "" | "off") {
            return Err(Rejection::with_kind(
                format!(
                    "unsupported override thinking {:?}: the agents here do not think on request",
                    o.thinking
                ),
                "unsupported",
            ));
        }
        if o.params.is_some() {
            return Err(Rejection::with_kind(
                "unsupported override params: this runtime sends no sampling parameters",
                "unsupported",
            ));
        }
        if let Some(choice) = &o.tool_choice {
            if !matches!(choice.mode.as_str(), "" | "auto") {
                return Err(Rejection::with_kind(
                    format!("unsupported tool_choice {:?}: only auto", choice.mode),
                    "unsupported",
                ));
            }
        }
        let mut max_steps = 0i64;
        for (name, value) in &o.options {
            match name.as_str() {
                "max_steps" if *value >= 1.0 && value.fract() == 0.0 => max_steps = *value as i64,
                "max_steps" => {
                    return Err(Rejection::with_kind(
                        "options.max_steps must be a whole number of at least 1",
                        "bad_request",
                    ))
                }
                other => {
                    return Err(Rejection::with_kind(
                        format!("unsupported option {other}: this runtime only narrows max_steps"),
                        "unsupported",
                    ))
                }
            }
        }
        let mut park_on = self.all_breakpoints();
        for tool in &o.park_on {
            if !park_on.contains(tool) {
                park_on.push(tool.clone());
            }
        }
        let only_tools = if o.only_tools.is_empty() {
            o.tools_enabled.clone()
        } else {
            o.only_tools.clone()
        };
        Ok(StudioRunSpec {
            app_id: app_id.to_string(),
            agent_id: agent_id.to_string(),
            run_id: run_id.to_string(),
            input: cmd.input.clone(),
            source: cmd.source.as_ref().map(|s| (s.run_id.clone(), s.from_step)),
            edits: cmd
                .transcript_edits
                .iter()
                .map(|e| TranscriptEdit {
                    kind: e.kind.clone(),
                    step: e.step,
                    tool_result: e.tool_result.clone(),
                    call_id: e.call_id.clone(),
                    content: e.content.clone(),
                    args: e.args.clone(),
                })
                .collect(),
            only_tools,
            model: o.model.clone(),
            engine: cmd.engine.clone(),
            side_effects: cmd.side_effects.clone(),
            policy: StudioPolicy {
                command_id: cmd.command_id.clone(),
                park_on,
                instructions: o.instructions.clone(),
                max_steps,
                experiment_id: cmd.experiment_id.clone(),
                actor: cmd.actor.clone(),
                ..StudioPolicy::default()
            },
        })
    }

    async fn admit_run(&self, cmd: &Command) -> Result<Admission, Rejection> {
        let run_id = new_id(prefix::RUN);
        let mut spec = self.spec_of(cmd, &run_id)?;
        if let Some((source, from_step)) = &spec.source {
            spec.policy.source_run_id = source.clone();
            spec.policy.from_step = *from_step;
        }
        let app_id = spec.app_id.clone();
        let start = self.engine.prepare_studio_run(spec).await.map_err(reject)?;
        let mut prepared = self.prepared.lock();
        prepared.retain(|_, (at, _, _)| at.elapsed() < PREPARED_TTL);
        prepared.insert(cmd.command_id.clone(), (Instant::now(), app_id, start));
        Ok(Admission { run_id })
    }

    async fn admit_decision(&self, d: &ApprovalDecision) -> Result<Admission, Rejection> {
        if !matches!(d.decision.as_str(), "approve" | "deny" | "resolve") {
            return Err(Rejection::with_kind(
                "decision must be approve, deny or resolve",
                "bad_request",
            ));
        }
        let app = self.app_of(&d.run_id).await.ok_or_else(|| {
            Rejection::with_kind(format!("unknown run {}", d.run_id), "not_found")
        })?;
        self.studio_started(&app, &d.run_id).await?;
        let state = self
            .engine
            .loop_state(&app, &d.run_id)
            .await
            .map_err(|e| reject(e.into()))?;
        match state.pending.iter().find(|p| p.call.id == d.call_id) {
            None => Err(Rejection::with_kind(
                format!("run {} has no parked call {}", d.run_id, d.call_id),
                "not_found",
            )),
            Some(p) if p.decision.is_some() || p.interaction_id.is_none() => {
                Err(Rejection::with_kind(
                    format!("call {} already has a decision", d.call_id),
                    "conflict",
                ))
            }
            Some(_) => Ok(Admission {
                run_id: d.run_id.clone(),
            }),
        }
    }

    /// Refuses runs the app started itself: they are view-only for the studio.
    async fn studio_started(&self, app: &str, run_id: &str) -> Result<(), Rejection> {
        match self.store.get_run(app, run_id).await {
            Ok(Some(run)) if run.engine.studio.is_some() => Ok(()),
            Ok(Some(_)) => Err(Rejection::with_kind(
                format!("run {run_id} was not started from the studio: it is view-only"),
                "forbidden",
            )),
            Ok(None) => Err(Rejection::with_kind(
                format!("unknown run {run_id}"),
                "not_found",
            )),
            Err(error) => Err(Rejection::with_kind(error.to_string(), "internal")),
        }
    }

    async fn execute_run(
        &self,
        cmd: Command,
        admission: Admission,
        cancel: CancellationToken,
    ) -> Outcome {
        let Some((_, app_id, start)) = self.prepared.lock().remove(&cmd.command_id) else {
            return Outcome::failed("the command was not admitted here");
        };
        let run_id = admission.run_id.clone();
        self.started.lock().insert(run_id.clone(), app_id.clone());
        if let Err(error) = self.engine.start_run(start).await {
            return Outcome {
                run_id,
                ..Outcome::failed(error.to_string())
            };
        }
        let mut cancelled = false;
        let run = loop {
            tokio::select! {
                _ = cancel.cancelled(), if !cancelled => {
                    cancelled = true;
                    if let Err(error) = self.engine.cancel(&app_id, &run_id).await {
                        tracing::warn!(%error, run_id, "studio: cancel failed");
                    }
                }
                _ = tokio::time::sleep(WATCH_EVERY) => {}
            }
            match self.store.get_run(&app_id, &run_id).await {
                Ok(Some(run)) if run.is_terminal() => break run,
                Ok(_) => {}
                Err(error) => tracing::debug!(%error, run_id, "studio: run watch read failed"),
            }
        };
        // Later decisions and steers on a finished run find its app through the store.
        self.started.lock().remove(&run_id);
        outcome_of(&run)
    }

    async fn execute_decision(&self, d: ApprovalDecision) -> Outcome {
        let _one_at_a_time = self.deciding.lock().await;
        let Some(app) = self.app_of(&d.run_id).await else {
            return Outcome::failed(format!("unknown run {}", d.run_id));
        };
        let decision = match d.decision.as_str() {
            "approve" => StudioDecision::Approve,
            "deny" => StudioDecision::Deny {
                reason: d.reason.clone(),
            },
            _ => StudioDecision::Resolve {
                content: d.content.clone(),
            },
        };
        match self
            .engine
            .studio_decide(&app, &d.run_id, &d.call_id, decision, &d.actor)
            .await
        {
            Ok(_) => Outcome {
                run_id: d.run_id,
                ..Outcome::succeeded()
            },
            Err(error) => Outcome {
                run_id: d.run_id,
                ..Outcome::failed(error.to_string())
            },
        }
    }
}

/// How a finished run reads as a command outcome.
fn outcome_of(run: &Run) -> Outcome {
    let tokens = run
        .output_summary
        .get("usage")
        .and_then(|u| u.get("total_tokens"))
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(0);
    let (status, error) = match run.status() {
        RunStatus::Completed => (StudioRunStatus::Succeeded, String::new()),
        RunStatus::Cancelled => (StudioRunStatus::Failed, "cancelled".to_string()),
        _ => (
            StudioRunStatus::Failed,
            if run.error_message.is_empty() {
                format!("run ended {}", run.status())
            } else {
                run.error_message.clone()
            },
        ),
    };
    let reason = Reason::of(&error).map(|r| AckReason {
        kind: r.kind,
        step: r.step,
        components: r.components,
    });
    Outcome {
        run_id: run.id.clone(),
        status,
        error,
        reason,
        tokens,
    }
}

#[async_trait]
impl CommandHandler for StudioRuntime {
    async fn registration(&self) -> Registration {
        self.current_registration().await
    }

    async fn admit(&self, work: &Work) -> Result<Admission, Rejection> {
        if self.engine.is_shutting_down() {
            return Err(Rejection::with_kind(
                "the runtime is shutting down",
                "unavailable",
            ));
        }
        match work {
            Work::Run(cmd) => self.admit_run(cmd).await,
            Work::Approve(d) => self.admit_decision(d).await,
            Work::Session(_) => Err(Rejection::with_kind(
                "this runtime holds no thread sessions",
                "unsupported",
            )),
        }
    }

    async fn execute(
        &self,
        work: Work,
        admission: Admission,
        cancel: CancellationToken,
    ) -> Outcome {
        match work {
            Work::Run(cmd) => self.execute_run(cmd, admission, cancel).await,
            Work::Approve(d) => self.execute_decision(d).await,
            Work::Session(_) => Outcome::failed("this runtime holds no thread sessions"),
        }
    }

    async fn steer(&self, steer: SteerMessage) {
        let Some(app) = self.app_of(&steer.run_id).await else {
            tracing::debug!(run_id = steer.run_id, "studio: steer for an unknown run");
            return;
        };
        if let Err(refused) = self.studio_started(&app, &steer.run_id).await {
            tracing::info!(
                run_id = steer.run_id,
                why = refused.message,
                "studio: steer refused"
            );
            return;
        }
        if let Err(error) = self
            .engine
            .studio_steer(&app, &steer.run_id, &steer.message)
            .await
        {
            tracing::info!(%error, run_id = steer.run_id, "studio: steer not delivered");
        }
    }

    async fn breakpoints(&self, tools: Vec<String>) {
        self.set_breakpoints(0, tools);
    }
}

/// One link's view of the runtime: the same handler, with the breakpoint set of the studio
/// at the other end kept apart (a studio's empty set must not clear another studio's).
pub struct LinkedRuntime {
    pub runtime: Arc<StudioRuntime>,
    pub slot: usize,
}

#[async_trait]
impl CommandHandler for LinkedRuntime {
    async fn registration(&self) -> Registration {
        let mut reg = self.runtime.current_registration().await;
        reg.breakpoints = self.runtime.breakpoints_of(self.slot);
        reg
    }

    async fn admit(&self, work: &Work) -> Result<Admission, Rejection> {
        self.runtime.admit(work).await
    }

    async fn execute(
        &self,
        work: Work,
        admission: Admission,
        cancel: CancellationToken,
    ) -> Outcome {
        self.runtime.execute(work, admission, cancel).await
    }

    async fn steer(&self, steer: SteerMessage) {
        self.runtime.steer(steer).await
    }

    async fn breakpoints(&self, tools: Vec<String>) {
        self.runtime.set_breakpoints(self.slot, tools);
    }
}
