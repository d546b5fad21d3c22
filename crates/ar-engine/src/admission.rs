//! Admission of new runs (`POST /v1/runs`): the contract's checks, in the contract's order.

use ar_core::event::{self as ev, RunEvent};
use ar_core::host::ContextRequest;
use ar_core::ids::{new_id, prefix, validate_external_id};
use ar_core::store::{CreateRun, RunChange, SecretChange};
use ar_core::tool::canonical_tool_name;
use ar_core::{
    Agent, ApprovalMode, CompletionMode, CredentialSource, EngineState, ExecutionMode,
    InvocationMode, JsonMap, Run, RunInput, RunModel, RunState, RuntimeKind, TargetRef, TurnMode,
    TurnPolicy,
};

use crate::engine::Engine;
use crate::error::{EngineError, EngineResult};
use crate::limits::AgentLimits;
use crate::model_route::{
    agent_controls, default_model, normalized_controls, validate_run_model, RunCredential, CHATGPT,
};

/// Sealed-secret kind of the run model credential.
pub(crate) const MODEL_CREDENTIAL_SECRET: &str = "model_credential";

/// A start-run request after wire decoding (enum strings still unvalidated).
#[derive(Debug, Clone, Default)]
pub struct StartRun {
    pub app_id: String,
    pub host_run_id: String,
    pub agent_id: String,
    pub target: TargetRef,
    pub instructions: String,
    pub allowed_tools: Vec<String>,
    pub external_actor_id: String,
    pub mode: String,
    pub execution_mode: String,
    pub trigger: Option<JsonMap>,
    pub metadata: Option<JsonMap>,
    pub turn_policy: TurnPolicyRequest,
    /// Run-scoped MCP servers to attach (checked here, after the `host_run_id` lookup).
    pub mcp_servers: Vec<crate::mcp::McpServerRequest>,
    pub model: Option<RunModel>,
    pub model_credential: Option<RunCredential>,
    /// A studio-started run: its chosen id and starting transcript (see `studio`).
    pub seed: Option<crate::studio::RunSeed>,
}

/// A turn policy as a host sent it (strings not yet validated). Serialized only into resume
/// fingerprints, in the shape they have always used.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct TurnPolicyRequest {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub mode: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub idle_timeout_seconds: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub expired_resume_strategy: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub completion_mode: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub max_completion_corrections: i64,
}

fn is_zero(value: &i64) -> bool {
    *value == 0
}

fn parse_optional<T>(
    value: &str,
    parse: impl Fn(&str) -> Result<T, ar_core::UnknownValue>,
) -> EngineResult<Option<T>> {
    match value.trim() {
        "" => Ok(None),
        text => parse(text)
            .map(Some)
            .map_err(|error| EngineError::invalid(error.to_string())),
    }
}

/// Validates and normalizes a turn policy for a runtime kind.
pub(crate) fn normalize_turn_policy(
    request: &TurnPolicyRequest,
    runtime: RuntimeKind,
) -> EngineResult<TurnPolicy> {
    let mode = parse_optional(&request.mode, TurnMode::parse)?;
    let chat = mode == Some(TurnMode::PauseAfterAssistant);
    let completion_mode = parse_optional(&request.completion_mode, CompletionMode::parse)?;
    let explicit = completion_mode.is_some_and(CompletionMode::is_explicit);
    let mut policy = TurnPolicy {
        mode,
        idle_timeout_seconds: if chat {
            request.idle_timeout_seconds.max(0)
        } else {
            0
        },
        expired_resume_strategy: if chat {
            request.expired_resume_strategy.clone()
        } else {
            String::new()
        },
        completion_mode,
        max_completion_corrections: request.max_completion_corrections,
    };
    if !explicit && policy.max_completion_corrections != 0 {
        return Err(EngineError::invalid(
            "turn_policy.max_completion_corrections is only allowed with completion_mode explicit",
        ));
    }
    if explicit {
        if !(0..=5).contains(&policy.max_completion_corrections) {
            return Err(EngineError::invalid(
                "turn_policy.max_completion_corrections must be between 0 and 5",
            ));
        }
        if policy.max_completion_corrections == 0 {
            policy.max_completion_corrections = 2;
        }
        if !matches!(
            runtime,
            RuntimeKind::NativeSdk | RuntimeKind::Codex | RuntimeKind::A2a
        ) {
            return Err(EngineError::invalid(format!(
                "completion_mode {} is not supported by runtime {}",
                request.completion_mode.trim(),
                runtime
            )));
        }
    }
    Ok(policy)
}

/// The run's tools: the agent's, narrowed to those the request names (never widened).
fn narrowed_tools(agent: &Agent, requested: &[String]) -> EngineResult<Vec<String>> {
    let mut allowed_tools = Vec::new();
    for tool in requested {
        let name = canonical_tool_name(tool);
        if !agent.allowed_tools.contains(&name) {
            return Err(EngineError::invalid(format!(
                "allowed_tools may only narrow the agent's tools: {name:?} is not allowed for agent {}",
                agent.id
            )));
        }
        if !allowed_tools.contains(&name) {
            allowed_tools.push(name);
        }
    }
    Ok(allowed_tools)
}

fn trim_target(target: &TargetRef) -> TargetRef {
    let mut target = target.clone();
    target.target_type = target.target_type.trim().to_string();
    target.id = target.id.trim().to_string();
    target
}

impl Engine {
    /// The model route pinned into the run (secret-free): the request's, else the agent's
    /// provider and model (native runs only), with its controls normalised. An explicit
    /// `controls` object (even `{}`) replaces the agent's legacy `execution_config` controls.
    fn pinned_model(&self, request: &StartRun, agent: &Agent) -> EngineResult<Option<RunModel>> {
        let Some(mut model) = self.pinned_route(request, agent)? else {
            return Ok(None);
        };
        model.controls = match &model.controls {
            Some(controls) => Some(normalized_controls(
                &model.provider,
                controls,
                "model.controls",
            )?),
            None => agent_controls(agent.execution_config.as_ref(), &model.provider)?,
        };
        Ok(Some(model))
    }

    fn pinned_route(&self, request: &StartRun, agent: &Agent) -> EngineResult<Option<RunModel>> {
        Ok(match (&request.model, agent.runtime_kind) {
            (Some(model), _) => {
                let mut model = model.clone();
                model.provider = model.provider.trim().to_string();
                model.model = model.model.trim().to_string();
                Some(model)
            }
            (None, RuntimeKind::NativeSdk) if request.model_credential.is_none() => {
                Some(default_model(self.config(), &agent.provider, &agent.model)?)
            }
            (None, RuntimeKind::NativeSdk) => {
                let provider = if agent.provider.is_empty() {
                    self.config().default_provider.clone()
                } else {
                    agent.provider.clone()
                };
                let model_name = if agent.model.is_empty() {
                    self.config()
                        .providers
                        .get(&provider)
                        .map(|d| d.default_model.clone())
                        .unwrap_or_default()
                } else {
                    agent.model.clone()
                };
                if model_name.is_empty() {
                    return Err(EngineError::invalid(
                        "model is required: the agent names no model",
                    ));
                }
                Some(RunModel {
                    provider,
                    model: model_name,
                    endpoint: None,
                    controls: None,
                })
            }
            (None, _) => None,
        })
    }

    /// Admits a run: validates, persists it `queued` with `run.queued`, and starts executing it.
    pub async fn start_run(&self, request: StartRun) -> EngineResult<Run> {
        if self.is_shutting_down() {
            return Err(EngineError::ShuttingDown);
        }
        // 1. Required fields and modes.
        let checked = CheckedRequest::from_request(&request)?;
        if checked.execution_mode == ExecutionMode::Durable && !self.durable_enabled() {
            return Err(crate::durable::durable_off());
        }
        // 2. Idempotent start by host_run_id.
        let store = &self.deps().store;
        if !checked.host_run_id.is_empty() {
            if let Some(existing) = store
                .get_run_by_host_run_id(&checked.app_id, &checked.host_run_id)
                .await?
            {
                return self.admitted_again(existing).await;
            }
        }
        // A required tool catalogue of the app has not loaded (a new run would start without
        // its tools): the host may retry.
        if let Some(reason) = self.deps().tools.unready(&checked.app_id) {
            return Err(EngineError::NotReady(reason));
        }
        // 3. Agent, model route and credential, turn policy, target type and tools.
        let agent = store
            .get_agent(&checked.app_id, &checked.agent_id)
            .await?
            .ok_or_else(EngineError::agent_not_found)?;
        let now = self.now();
        let input = self.run_input(&request, &checked, &agent, now)?;
        let limits = AgentLimits::of(agent.runtime_kind, agent.execution_config.as_ref())?;
        // 4. Target context.
        let run_id = match &request.seed {
            Some(seed) if !seed.run_id.is_empty() => seed.run_id.clone(),
            _ => new_id(prefix::RUN),
        };
        let context = self
            .deps()
            .context
            .resolve(&ContextRequest {
                app_id: checked.app_id.clone(),
                run_id: run_id.clone(),
                agent_id: agent.id.clone(),
                target: checked.target.clone(),
                trigger: request.trigger.clone(),
                metadata: request.metadata.clone(),
            })
            .await?;
        // 5. Run-scoped MCP servers (URL policy, credentials).
        let input = RunInput {
            context_summary: context.summary,
            mcp_servers: self.admit_mcp_servers(&request.mcp_servers, agent.runtime_kind, now)?,
            ..input
        };
        // 6. Persist atomically with the sealed credentials; emit run.queued.
        let mut run = new_run(run_id, checked, &agent, input, &request, now);
        run.engine.budgets = limits.budgets;
        // The subscription lane its agent asks for, and where its agent CLI may run:
        // refused here when they cannot be honoured.
        self.check_subscription(&agent, &run).await?;
        self.check_placement(&agent, &run)?;
        // Skills and execution policy: refused here when they cannot be honoured.
        let skills = self.run_skills(&agent, &run).await?;
        let change = self.creation_change(&run, &request, now)?;
        match store.create_run(change).await? {
            CreateRun::HostRunIdTaken(existing) => self.admitted_again(*existing).await,
            CreateRun::Created(committed) => {
                for stored in committed.events {
                    self.deps().bus.publish(stored.into());
                }
                // 7. Dispatch (lightweight: this process; durable: its workflow).
                if run.execution_mode == ExecutionMode::Durable {
                    self.start_durable(&run).await?;
                } else {
                    self.hand_to_first_owner(&run, agent, request.seed.is_some(), skills)
                        .await;
                }
                Ok(run)
            }
        }
    }

    /// A run already admitted under the same `host_run_id`, returned as it is; a durable one
    /// still queued has its workflow started again (idempotent by workflow id), which repairs
    /// a row committed by a process that died before starting it.
    async fn admitted_again(&self, existing: Run) -> EngineResult<Run> {
        if existing.execution_mode == ExecutionMode::Durable
            && existing.status() == ar_core::RunStatus::Queued
        {
            self.start_durable(&existing).await?;
        }
        Ok(existing)
    }

    /// The run's input as admitted (without the target context, resolved next): checks the
    /// model route and credential, the turn policy, the target type, tools and runtime kind.
    fn run_input(
        &self,
        request: &StartRun,
        checked: &CheckedRequest,
        agent: &Agent,
        now: chrono::DateTime<chrono::Utc>,
    ) -> EngineResult<RunInput> {
        let policy = self.config().app(&checked.app_id);
        validate_run_model(
            self.config(),
            &policy,
            request.model.as_ref(),
            request.model_credential.as_ref(),
            now,
        )?;
        let turn_policy = normalize_turn_policy(&request.turn_policy, agent.runtime_kind)?;
        let target_type = &checked.target.target_type;
        if !agent.allowed_targets.is_empty() && !agent.allowed_targets.contains(target_type) {
            return Err(EngineError::invalid(format!(
                "target type {target_type:?} is not allowed for agent {}",
                agent.id
            )));
        }
        let allowed_tools = narrowed_tools(agent, &request.allowed_tools)?;
        let model = self.pinned_model(request, agent)?;
        if agent.runtime_kind != RuntimeKind::NativeSdk
            && model.as_ref().is_some_and(|m| m.provider == CHATGPT)
        {
            return Err(EngineError::invalid(format!(
                "provider {CHATGPT} serves native_sdk runs only, not runtime kind {}",
                agent.runtime_kind
            )));
        }
        if agent.runtime_kind != RuntimeKind::NativeSdk && !self.serves_cli(agent.runtime_kind) {
            return Err(EngineError::invalid(format!(
                "runtime kind {} is not available on this runtime",
                agent.runtime_kind
            )));
        }
        Ok(RunInput {
            model,
            credential_source: request
                .model_credential
                .is_some()
                .then_some(CredentialSource::App),
            instructions: request.instructions.trim().to_string(),
            allowed_tools,
            trigger: request.trigger.clone(),
            metadata: request.metadata.clone(),
            context_summary: String::new(),
            turn_policy,
            mcp_servers: Vec::new(),
        })
    }

    /// The servers a run keeps of its request's `mcp_servers`; a 400 when run MCP is not
    /// configured here or a server breaks a rule.
    fn admit_mcp_servers(
        &self,
        requests: &[crate::mcp::McpServerRequest],
        runtime_kind: RuntimeKind,
        now: chrono::DateTime<chrono::Utc>,
    ) -> EngineResult<Vec<ar_core::mcp::McpServer>> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        // An agent CLI sees the run's MCP tools through its MCP bridge to the run tool
        // gateway; a CLI offered no bridge here would not see them, so the run is refused.
        let bridged = self
            .deps()
            .agent_cli
            .as_ref()
            .is_some_and(|cli| cli.bridges_tools(runtime_kind));
        if runtime_kind != RuntimeKind::NativeSdk && !bridged {
            return Err(EngineError::invalid(format!(
                "mcp_servers: runs of runtime kind {runtime_kind} cannot use run-scoped MCP servers on this runtime (its agent CLIs get no MCP bridge to the run's tools)"
            )));
        }
        if self.deps().mcp_sealer.is_none() || self.deps().mcp.is_none() {
            return Err(EngineError::invalid(
                "mcp_servers: run-scoped MCP servers are not configured on this runtime (AGENT_RUNTIME_MCP_CREDENTIAL_ENCRYPTION_KEY is not set)",
            ));
        }
        crate::mcp::check_servers(requests, &self.config().mcp, now)
    }

    /// The change that creates `run`: the run with this process's lease, `run.queued`, the
    /// studio seed's checkpoint, and the sealed model credential.
    fn creation_change(
        &self,
        run: &Run,
        request: &StartRun,
        now: chrono::DateTime<chrono::Utc>,
    ) -> EngineResult<RunChange> {
        let mut change = RunChange::for_run(run);
        change.run = Some(run.clone());
        // This process executes a lightweight run next: it takes the lease with the run
        // itself. A durable run's lease is taken by the worker that executes its turn.
        if run.execution_mode != ExecutionMode::Durable {
            change.lease = Some(self.lease_for_new_owner(now));
        }
        change
            .events
            .push(RunEvent::RunQueued(ev::RunQueued::default()));
        if let Some(seed) = &request.seed {
            change.checkpoint = Some(ar_core::store::Checkpoint {
                run_id: run.id.clone(),
                step: seed.state.step,
                state: seed.state.to_json(),
                created_at: now,
            });
        }
        if let Some(credential) = &request.model_credential {
            let provider = run.input.model.as_ref().map_or("", |m| m.provider.as_str());
            let ciphertext = crate::model_credential::seal(
                self.deps().sealer.as_deref(),
                (&run.app_id, &run.id),
                provider,
                credential,
            )?;
            change.secrets.push(SecretChange::Put {
                kind: MODEL_CREDENTIAL_SECRET.to_string(),
                ciphertext,
            });
        }
        if let Some(sealer) = &self.deps().mcp_sealer {
            let ids = (run.app_id.as_str(), run.id.as_str());
            let sealed = crate::mcp::seal_credentials(sealer, ids, &request.mcp_servers, now)?;
            change.secrets.extend(sealed);
        }
        Ok(change)
    }
}

/// A start request's identifiers and modes, trimmed and checked in the contract's order.
struct CheckedRequest {
    app_id: String,
    agent_id: String,
    host_run_id: String,
    target: TargetRef,
    invocation_mode: Option<InvocationMode>,
    execution_mode: ExecutionMode,
}

impl CheckedRequest {
    fn from_request(request: &StartRun) -> EngineResult<Self> {
        let app_id = request.app_id.trim().to_string();
        let agent_id = request.agent_id.trim().to_string();
        let host_run_id = request.host_run_id.trim().to_string();
        let target = trim_target(&request.target);
        required_id("app_id", &app_id)?;
        required_id("agent_id", &agent_id)?;
        if target.target_type.is_empty() {
            return Err(EngineError::invalid("target.type is required"));
        }
        if target.id.is_empty() {
            return Err(EngineError::invalid("target.id is required"));
        }
        if !host_run_id.is_empty() {
            validate_external_id("host_run_id", &host_run_id).map_err(EngineError::Invalid)?;
        }
        let invocation_mode = parse_optional(&request.mode, InvocationMode::parse)?;
        let execution_mode = parse_optional(&request.execution_mode, ExecutionMode::parse)?
            .unwrap_or(ExecutionMode::Lightweight);
        Ok(CheckedRequest {
            app_id,
            agent_id,
            host_run_id,
            target,
            invocation_mode,
            execution_mode,
        })
    }
}

/// A required external identifier: present and well formed.
fn required_id(field: &str, value: &str) -> EngineResult<()> {
    if value.is_empty() {
        return Err(EngineError::invalid(format!("{field} is required")));
    }
    validate_external_id(field, value).map_err(EngineError::Invalid)
}

/// A new queued run as admitted.
fn new_run(
    run_id: String,
    checked: CheckedRequest,
    agent: &Agent,
    input: RunInput,
    request: &StartRun,
    now: chrono::DateTime<chrono::Utc>,
) -> Run {
    Run {
        id: run_id,
        app_id: checked.app_id,
        host_run_id: checked.host_run_id,
        agent_id: agent.id.clone(),
        target: checked.target,
        runtime_kind: agent.runtime_kind,
        execution_mode: checked.execution_mode,
        invocation_mode: checked
            .invocation_mode
            .unwrap_or(agent.default_invocation_mode),
        external_actor_id: request.external_actor_id.trim().to_string(),
        state: RunState::queued(agent.approval_mode == ApprovalMode::Always),
        input,
        output_summary: JsonMap::new(),
        workspace_lease: None,
        error_message: String::new(),
        started_at: None,
        completed_at: None,
        created_at: now,
        updated_at: now,
        version: 1,
        engine: EngineState {
            studio: request.seed.as_ref().and_then(|seed| seed.policy.clone()),
            ..EngineState::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_policy_rules() {
        let chat = TurnPolicyRequest {
            mode: "pause_after_assistant".into(),
            idle_timeout_seconds: -5,
            ..Default::default()
        };
        assert_eq!(
            normalize_turn_policy(&chat, RuntimeKind::NativeSdk)
                .unwrap()
                .idle_timeout_seconds,
            0
        );
        let task = TurnPolicyRequest {
            idle_timeout_seconds: 30,
            ..Default::default()
        };
        assert_eq!(
            normalize_turn_policy(&task, RuntimeKind::NativeSdk)
                .unwrap()
                .idle_timeout_seconds,
            0
        );
        let explicit = TurnPolicyRequest {
            completion_mode: "explicit".into(),
            ..Default::default()
        };
        assert_eq!(
            normalize_turn_policy(&explicit, RuntimeKind::NativeSdk)
                .unwrap()
                .max_completion_corrections,
            2
        );
        assert!(normalize_turn_policy(&explicit, RuntimeKind::OpenCode).is_err());
        let corrections = TurnPolicyRequest {
            max_completion_corrections: 1,
            ..Default::default()
        };
        assert!(normalize_turn_policy(&corrections, RuntimeKind::NativeSdk).is_err());
        let too_many = TurnPolicyRequest {
            completion_mode: "explicit".into(),
            max_completion_corrections: 6,
            ..Default::default()
        };
        assert!(normalize_turn_policy(&too_many, RuntimeKind::NativeSdk).is_err());
        assert!(normalize_turn_policy(
            &TurnPolicyRequest {
                mode: "chatty".into(),
                ..Default::default()
            },
            RuntimeKind::NativeSdk
        )
        .is_err());
    }
}
