//! The agent-CLI adapter: implements the engine's [`AgentCli`] port with ar-dispatch. Each turn
//! becomes a `RunSpec` with a turn setup (the run's model route, the CLI's permissions, the MCP
//! bridge to the run's tools; [`ar_dispatch::turn`] sets it up where the CLI runs), placed by
//! ar-dispatch's cluster router on this machine or on a node of the fleet
//! (`AGENT_RUNTIME_NODES`). The CLI's own JSON stream (codex `exec --json`, Claude Code
//! `stream-json`, opencode `--format json`) is read by ar-dispatch's parser of that CLI, here
//! for both (a node sends its raw lines); this adapter turns the typed events into domain
//! [`CliEvent`]s with tool inputs, outputs and usage.
//!
//! The CLI never holds the route's key: the runtime that starts it (this process, or the node)
//! runs a model egress proxy for the turn and hands the CLI its loopback address and a
//! placeholder. The bridge's settings (the service's URL as the CLI's machine reaches it, the
//! app, the run, the turn's gateway token as `AGENT_RUNTIME_SERVICE_TOKEN`) go to the bridge
//! process alone; on a node the bridge reaches the service at the fleet's `service_url`.
//!
//! Placement: an agent's `execution_config.placement` names a machine (`local` or a node) or
//! labels; without one a ready node that has the CLI takes the run, else this machine. A run
//! whose workspace lease is on this machine stays here. A node that dies or is unreachable
//! mid-turn ends the turn [`CliOutcome::Lost`] and is marked down (the engine runs the turn
//! again elsewhere); when no machine can take a turn, [`AgentCliError::NoPlacement`] says why.
//!
//! Runs are non-interactive: nobody can answer a CLI's permission prompt. codex runs with
//! `--dangerously-bypass-approvals-and-sandbox` (its sandbox needs kernel features containers
//! often lack) and Claude Code with `--dangerously-skip-permissions` (`IS_SANDBOX=1` lets it do
//! so as root) unless [`AgentCliConfig::bypass_permissions`] is off. Run the service and its
//! nodes in an isolated environment when agents may run arbitrary commands.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ar_config::env::{
    API_BASE_URL, APP_ID, MCP_BRIDGE_HTTP_TIMEOUT_SECONDS, RUN_ID, SERVICE_TOKEN,
};
use ar_core::agent_cli::{
    AgentCli, AgentCliError, CliControl, CliEgress, CliEvent, CliOutcome, CliPlacement, CliTurn,
    CliTurnRequest, ToolGatewayAccess,
};
use ar_core::{RuntimeKind, Usage};
use ar_dispatch::egress::EgressReport;
use ar_dispatch::turn::is_bridged;
use ar_dispatch::{
    AgentEvent, AgentOutput, ClaudeProvider, ClusterRouter, CodexProvider, DispatchError,
    LocalConfig, LocalRuntime, OpenCodeProvider, PlaceError, Placement, ProviderUsage, Run,
    RunError, RunEvents, RunSpec, Slot, State, TurnBridge, TurnPermissions, TurnResources,
    TurnRoute, TurnSetup,
};
use futures::StreamExt;

/// How CLIs start the MCP bridge to their run's tools.
#[derive(Debug, Clone)]
pub struct McpBridge {
    /// The `agent-runtime` executable, started as `<program> mcp-bridge`.
    pub program: PathBuf,
    /// The service's base URL as this host reaches it (loopback).
    pub base_url: String,
    /// Bound of one gateway request, and of one tool call in the CLI's MCP client.
    pub timeout: Duration,
}

/// How the adapter runs CLIs.
#[derive(Debug, Clone)]
pub struct AgentCliConfig {
    /// Per-run workdirs (`<root>/<run id>`) and private homes (`<root>/.homes/<run id>`).
    pub root: PathBuf,
    /// Programs by runtime kind (only installed CLIs are listed).
    pub programs: HashMap<RuntimeKind, String>,
    /// Skip the CLIs' approval prompts and codex's sandbox (see the module docs).
    pub bypass_permissions: bool,
    /// The MCP bridge offered to turns that carry gateway access; `None`: no bridge here.
    pub bridge: Option<McpBridge>,
    /// The service's URL as the nodes' bridges reach it (`None`: the bridge's own URL).
    pub node_service_url: Option<String>,
    /// The ChatGPT-subscription text-only lane (`None`: not offered).
    pub lane: Option<crate::subscription_lane::LaneSettings>,
}

impl AgentCliConfig {
    /// Looks `codex`, `claude` and `opencode` up on this process's `PATH`.
    pub fn detect(root: impl Into<PathBuf>) -> Self {
        let mut programs = HashMap::new();
        for (kind, program) in [
            (RuntimeKind::Codex, "codex"),
            (RuntimeKind::ClaudeCode, "claude"),
            (RuntimeKind::OpenCode, "opencode"),
        ] {
            if let Some(path) = ar_process::find_program(program, None) {
                programs.insert(kind, path.display().to_string());
            }
        }
        AgentCliConfig {
            root: root.into(),
            programs,
            bypass_permissions: true,
            bridge: None,
            node_service_url: None,
            lane: None,
        }
    }

    /// Offers `bridge` to turns that carry gateway access.
    pub fn with_bridge(mut self, bridge: McpBridge) -> Self {
        self.bridge = Some(bridge);
        self
    }

    /// The runtime kinds whose CLI was found here, in contract order.
    pub fn kinds(&self) -> Vec<RuntimeKind> {
        RuntimeKind::ALL
            .iter()
            .copied()
            .filter(|kind| self.programs.contains_key(kind))
            .collect()
    }

    /// This machine's runtime over the CLIs found, setting turns up.
    fn local_runtime(&self) -> Result<LocalRuntime, DispatchError> {
        let upstream = ar_dispatch::egress::upstream_client()
            .map_err(|error| DispatchError::Setup(format!("egress client: {error}")))?;
        let resources = TurnResources {
            bridge_program: self.bridge.as_ref().map(|bridge| bridge.program.clone()),
            egress_limits: ar_dispatch::egress::EgressLimits::default(),
            upstream,
        };
        let mut runtime =
            LocalRuntime::empty(LocalConfig::new(&self.root).with_turns(resources)).named("local");
        for (kind, program) in &self.programs {
            runtime = match kind {
                RuntimeKind::Codex => runtime.with_provider(Arc::new(CodexProvider {
                    program: program.clone(),
                    ..CodexProvider::default()
                })),
                RuntimeKind::ClaudeCode => runtime.with_provider(Arc::new(ClaudeProvider {
                    program: program.clone(),
                    ..ClaudeProvider::default()
                })),
                RuntimeKind::OpenCode => runtime.with_provider(Arc::new(OpenCodeProvider {
                    program: program.clone(),
                    ..OpenCodeProvider::default()
                })),
                _ => runtime,
            };
        }
        Ok(runtime)
    }
}

/// The dispatch agent name of a CLI runtime kind.
fn agent_of(kind: RuntimeKind) -> Option<&'static str> {
    match kind {
        RuntimeKind::Codex => Some("codex"),
        RuntimeKind::ClaudeCode => Some("claude"),
        RuntimeKind::OpenCode => Some("opencode"),
        _ => None,
    }
}

/// [`AgentCli`] over ar-dispatch's cluster router (this machine and the fleet's nodes).
#[derive(Debug, Clone)]
pub struct DispatchAgentCli {
    config: AgentCliConfig,
    router: Arc<ClusterRouter>,
    lane: Option<Arc<crate::subscription_lane::Lane>>,
}

impl DispatchAgentCli {
    /// Runs on this machine alone.
    pub fn new(config: AgentCliConfig) -> Result<Self, DispatchError> {
        Self::with_nodes(config, Vec::new())
    }

    /// Runs on this machine and on `nodes`.
    pub fn with_nodes(
        config: AgentCliConfig,
        nodes: Vec<ar_dispatch::NodeSpec>,
    ) -> Result<Self, DispatchError> {
        let local_agents = config
            .kinds()
            .into_iter()
            .filter_map(agent_of)
            .map(str::to_string)
            .collect();
        let mut router = ClusterRouter::new("local", Arc::new(config.local_runtime()?))
            .with_local_agents(local_agents);
        for node in nodes {
            router = router.with_node(node)?;
        }
        let lane = config.lane.clone().map(|settings| {
            Arc::new(crate::subscription_lane::Lane::new(
                settings,
                config.root.join(".lane"),
            ))
        });
        Ok(DispatchAgentCli {
            config,
            router: Arc::new(router),
            lane,
        })
    }

    pub fn config(&self) -> &AgentCliConfig {
        &self.config
    }

    /// The cluster router (the nodes' health and inventory).
    pub fn router(&self) -> &Arc<ClusterRouter> {
        &self.router
    }

    /// The turn setup of a request placed on `slot`.
    fn setup(&self, request: &CliTurnRequest, slot: &Slot) -> TurnSetup {
        let route = request.route.as_ref().map(|route| TurnRoute {
            base_url: route.base_url.trim_end_matches('/').to_string(),
            model: route.model.clone(),
            api_key: route.api_key.clone().filter(|key| !key.is_empty()),
            account_id: route.account_id.clone(),
        });
        let permissions = match (request.read_only, self.config.bypass_permissions) {
            (true, _) => TurnPermissions::ReadOnly,
            (false, true) => TurnPermissions::Bypass,
            (false, false) => TurnPermissions::CliDefault,
        };
        let bridge = match (&request.tool_gateway, &self.config.bridge) {
            (Some(access), Some(bridge)) => {
                let base_url = match (&self.config.node_service_url, slot.is_local()) {
                    (Some(url), false) => url.trim_end_matches('/').to_string(),
                    _ => bridge.base_url.clone(),
                };
                Some(bridge_setup(bridge, &base_url, access, &request.run_id))
            }
            _ => None,
        };
        TurnSetup {
            route,
            permissions,
            bridge,
        }
    }

    /// The run's spec for the machine of `slot`.
    fn spec(&self, request: &CliTurnRequest, agent: &str, slot: &Slot) -> RunSpec {
        RunSpec {
            run_id: request.run_id.clone(),
            agent: agent.to_string(),
            model: request
                .route
                .as_ref()
                .map(|route| route.model.clone())
                .unwrap_or_default(),
            prompt: request.prompt.clone(),
            // A node runs in a workdir of its own; here the lease's root or `<root>/<run>`.
            workdir: match (&request.workdir, slot.is_local()) {
                (Some(dir), true) => dir.clone(),
                _ => String::new(),
            },
            env: request
                .env
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect(),
            turn: Some(self.setup(request, slot)),
            ..RunSpec::default()
        }
    }

    /// Places the turn and starts it; a node that cannot be reached or refuses is marked down
    /// and the next eligible machine tried.
    async fn place_and_start(
        &self,
        request: &CliTurnRequest,
        agent: &str,
    ) -> Result<(Slot, Run<AgentOutput>), AgentCliError> {
        let mut placement = placement_of(request, agent);
        loop {
            let slot = self
                .router
                .place(&placement)
                .await
                .map_err(|error| match error {
                    PlaceError::UnknownMachine(_) => AgentCliError::Invalid(error.to_string()),
                    PlaceError::NoneEligible(reason) => AgentCliError::NoPlacement(reason),
                })?;
            let spec = self.spec(request, agent, &slot);
            match slot.start(spec).await {
                Ok(run) => return Ok((slot, run)),
                Err(DispatchError::Remote { status, message })
                    if !slot.is_local() && status.is_none_or(|code| code >= 500 || code == 409) =>
                {
                    let reason = format!("the node refused or could not take the turn: {message}");
                    tracing::warn!(node = slot.machine(), %reason, "trying another machine");
                    if status != Some(409) {
                        self.router.mark_down(slot.machine(), &reason);
                    }
                    placement.avoid.push(slot.machine().to_string());
                }
                Err(error) if error.is_client_error() => {
                    return Err(AgentCliError::Invalid(error.to_string()))
                }
                Err(error) => return Err(AgentCliError::Start(error.to_string())),
            }
        }
    }
}

/// The router's placement of a turn.
fn placement_of(request: &CliTurnRequest, agent: &str) -> Placement {
    Placement {
        agent: agent.to_string(),
        machine: request.placement.machine.clone(),
        labels: request.placement.labels.clone(),
        avoid: request.avoid_machines.clone(),
        // The workspace lease's root is on this machine.
        local_only: request.workdir.is_some(),
    }
}

/// The bridge's settings for one turn, set for the bridge process alone.
fn bridge_setup(
    bridge: &McpBridge,
    base_url: &str,
    access: &ToolGatewayAccess,
    run_id: &str,
) -> TurnBridge {
    let timeout_secs = bridge.timeout.as_secs().max(1);
    let env = [
        (API_BASE_URL.name, base_url.to_string()),
        (APP_ID.name, access.app_id.clone()),
        (RUN_ID.name, run_id.to_string()),
        (SERVICE_TOKEN.name, access.token.expose().to_string()),
        (
            MCP_BRIDGE_HTTP_TIMEOUT_SECONDS.name,
            timeout_secs.to_string(),
        ),
    ];
    TurnBridge {
        env: env
            .into_iter()
            .map(|(name, value)| (name.to_string(), value))
            .collect(),
        timeout_secs,
    }
}

#[async_trait::async_trait]
impl AgentCli for DispatchAgentCli {
    fn serves(&self, kind: RuntimeKind) -> bool {
        agent_of(kind).is_some()
            && (self.config.programs.contains_key(&kind) || self.router.has_nodes())
    }

    fn bridges_tools(&self, kind: RuntimeKind) -> bool {
        self.config.bridge.is_some() && self.serves(kind)
    }

    fn serves_subscription(&self) -> bool {
        self.lane.is_some()
    }

    async fn start_turn(&self, request: CliTurnRequest) -> Result<CliTurn, AgentCliError> {
        if let Some(turn) = &request.subscription {
            let lane = self
                .lane
                .as_ref()
                .ok_or(AgentCliError::Unavailable(request.kind))?;
            return lane.start(&request, turn).await;
        }
        let Some(agent) = agent_of(request.kind).filter(|_| self.serves(request.kind)) else {
            return Err(AgentCliError::Unavailable(request.kind));
        };
        if let Some(dir) = &request.workdir {
            if !std::path::Path::new(dir).is_absolute() {
                return Err(AgentCliError::Invalid(format!(
                    "workdir {dir:?} must be absolute"
                )));
            }
        }
        let (slot, run) = self.place_and_start(&request, agent).await?;
        let run = Arc::new(run);
        let Some(outputs) = run.events() else {
            return Err(AgentCliError::Start("the run's events were taken".into()));
        };
        let machine = slot.machine().to_string();
        let workdir = match (&request.workdir, slot.is_local()) {
            (Some(dir), true) => dir.clone(),
            (None, true) => self.config.root.join(&request.run_id).display().to_string(),
            (_, false) => format!("node:{machine}"),
        };
        let reader = TurnReader {
            run: run.clone(),
            outputs,
            queue: VecDeque::new(),
            done: false,
            workdir,
            agent,
            bridged: request.tool_gateway.is_some() && self.config.bridge.is_some(),
            error: String::new(),
            lost: None,
            slot: Some(slot),
            router: self.router.clone(),
        };
        Ok(CliTurn {
            events: reader.into_stream(),
            control: Arc::new(RunHandle(run)),
            machine,
        })
    }

    fn check_placement(
        &self,
        kind: RuntimeKind,
        placement: &CliPlacement,
        has_workspace: bool,
    ) -> Result<(), String> {
        let agent = agent_of(kind)
            .ok_or_else(|| format!("runtime kind {kind} does not run on machines"))?;
        let pinned_remote = placement
            .machine
            .as_deref()
            .is_some_and(|machine| machine != ar_dispatch::cluster::LOCAL_MACHINE)
            || !placement.labels.is_empty();
        if has_workspace && pinned_remote {
            return Err("a run with a workspace runs on this machine (its lease is here); remove execution_config.placement or the workspace".into());
        }
        if placement.machine.as_deref() == Some(ar_dispatch::cluster::LOCAL_MACHINE)
            && !self.config.programs.contains_key(&kind)
        {
            return Err(format!("this machine has no {agent}"));
        }
        self.router
            .check(&Placement {
                agent: agent.to_string(),
                machine: placement.machine.clone(),
                labels: placement.labels.clone(),
                ..Placement::default()
            })
            .map_err(|error| error.to_string())
    }
}

/// Cancel and signal of a dispatched run. Dropping the last handle of a running run kills it.
struct RunHandle(Arc<Run<AgentOutput>>);

#[async_trait::async_trait]
impl CliControl for RunHandle {
    fn cancel(&self) {
        self.0.cancel();
    }

    async fn signal(&self, input: &str) -> Result<(), AgentCliError> {
        self.0.signal(input).await.map_err(|error| match error {
            RunError::Finished => AgentCliError::Finished,
            RunError::SignalUnsupported(_) => AgentCliError::SignalUnsupported,
            other => AgentCliError::Signal(other.to_string()),
        })
    }
}

/// Reads the run's typed output and queues the domain events it means.
struct TurnReader {
    run: Arc<Run<AgentOutput>>,
    outputs: RunEvents<AgentOutput>,
    queue: VecDeque<CliEvent>,
    done: bool,
    workdir: String,
    /// The dispatch agent (whose bridged tool names to leave out).
    agent: &'static str,
    /// Whether the turn has a bridge.
    bridged: bool,
    /// The failure the CLI reported in its stream (`turn.failed`, an error result).
    error: String,
    /// Why the machine running the turn went away.
    lost: Option<String>,
    /// The turn's place, held until it ends.
    slot: Option<Slot>,
    router: Arc<ClusterRouter>,
}

impl TurnReader {
    fn into_stream(self) -> futures::stream::BoxStream<'static, CliEvent> {
        futures::stream::unfold(self, |mut reader| async move {
            loop {
                if let Some(next) = reader.queue.pop_front() {
                    return Some((next, reader));
                }
                if reader.done {
                    return None;
                }
                reader.advance().await;
            }
        })
        .boxed()
    }

    async fn advance(&mut self) {
        match self.outputs.next().await {
            Some(AgentOutput::Started) => self.queue.push_back(CliEvent::Started {
                workdir: self.workdir.clone(),
            }),
            Some(AgentOutput::Line { text, events }) => {
                let before = self.queue.len();
                for event in events {
                    self.take(event);
                }
                if self.queue.len() == before {
                    self.queue.push_back(CliEvent::Diagnostic { text });
                }
            }
            Some(AgentOutput::Stderr(text)) => self.queue.push_back(CliEvent::Diagnostic { text }),
            Some(AgentOutput::Lost(reason)) => self.lost = Some(reason),
            Some(AgentOutput::Exited { egress, .. }) => self.exit(egress).await,
            None => self.exit(None).await,
        }
    }

    /// Queues what one event of the CLI's stream means for the run.
    fn take(&mut self, event: AgentEvent) {
        if let AgentEvent::ToolStarted { name, .. } | AgentEvent::ToolFinished { name, .. } = &event
        {
            if self.bridged && is_bridged(self.agent, name) {
                return;
            }
        }
        let cli_event = match event {
            AgentEvent::TextDelta(text) => CliEvent::AssistantDelta { text },
            AgentEvent::Message(text) => CliEvent::AssistantCompleted {
                text,
                metadata: None,
            },
            AgentEvent::ToolStarted { id, name, input } => {
                CliEvent::ToolStarted { id, name, input }
            }
            AgentEvent::ToolFinished {
                id,
                name,
                input,
                output,
                is_error,
            } => CliEvent::ToolFinished {
                id,
                name,
                input,
                output,
                is_error,
            },
            AgentEvent::Usage(usage) => CliEvent::Usage(turn_usage(usage)),
            AgentEvent::Failed(error) => {
                self.error = error;
                return;
            }
            // Subagents and notices are the CLI's own business; the transcript has no place for them.
            AgentEvent::Subagent { .. } | AgentEvent::Notice(_) => return,
        };
        self.queue.push_back(cli_event);
    }

    async fn exit(&mut self, egress: Option<EgressReport>) {
        if self.done {
            return;
        }
        self.done = true;
        let status = self.run.wait_status().await;
        let slot = self.slot.take();
        if let (Some(reason), Some(slot)) = (&self.lost, &slot) {
            self.router.mark_down(slot.machine(), reason);
        }
        drop(slot);
        let proxy_error = egress.as_ref().map(|e| e.error.clone()).unwrap_or_default();
        if let Some(report) = egress {
            self.queue.push_back(CliEvent::Egress(CliEgress {
                requests: report.requests,
                refused: report.refused,
                usage: turn_usage(report.usage),
                error: report.error,
            }));
        }
        let outcome = match status.state {
            _ if self.lost.is_some() => CliOutcome::Lost,
            State::Succeeded if self.error.is_empty() => CliOutcome::Succeeded,
            State::Canceled => CliOutcome::Cancelled,
            _ => CliOutcome::Failed,
        };
        // The proxy's reason is the clear one when it cut a model call (the CLI only saw a
        // broken stream).
        let error = match outcome {
            CliOutcome::Succeeded => String::new(),
            CliOutcome::Lost => self.lost.clone().unwrap_or_default(),
            _ if !proxy_error.is_empty() => proxy_error,
            _ if !self.error.is_empty() => self.error.clone(),
            _ => status.err.clone(),
        };
        self.queue.push_back(CliEvent::Exited {
            outcome,
            exit_code: status.exit_code,
            error,
        });
    }
}

fn turn_usage(usage: ProviderUsage) -> Usage {
    Usage {
        input_tokens: usage.input_tokens,
        cached_input_tokens: usage.cached_input_tokens,
        output_tokens: usage.output_tokens,
        reasoning_output_tokens: usage.reasoning_tokens,
        total_tokens: 0,
    }
}
