//! The agent-CLI port: start one turn of a coding-agent CLI (codex, Claude Code, opencode) for a
//! run and read what it does as domain events.
//!
//! The engine drives runs whose `runtime_kind` names a CLI through this trait; the server
//! implements it on top of the dispatch crate (processes in their own process group). One call
//! of [`AgentCli::start_turn`] is one CLI turn: the process starts in the turn's workdir with the
//! run's model route handed to it, its output arrives as [`CliEvent`]s, and the stream ends
//! with exactly one [`CliEvent::Exited`]. Cancelling kills the whole process group.
//!
//! A turn may also carry [`ToolGatewayAccess`]: the run's own tools (host tools, run MCP tools)
//! are then offered to the CLI as an MCP server whose calls go through the service's run tool
//! gateway, so they pass the approval gate and are recorded there. Those calls are the
//! gateway's to record: the adapter does not report them again as [`CliEvent`]s.
//!
//! Where a turn runs is the adapter's choice within the run's [`CliPlacement`] (this machine or
//! a node of a fleet); [`CliTurn::machine`] says where. A turn whose machine went away before
//! it ended ends [`CliOutcome::Lost`]: the engine runs it again elsewhere from the turn's
//! checkpoint, avoiding that machine, or pauses the run when no machine can take it
//! ([`AgentCliError::NoPlacement`]).

use std::collections::BTreeMap;

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::model::ModelRoute;
use crate::secret::Secret;
use crate::{RuntimeKind, Usage};

/// How a CLI turn reaches its run's tool gateway: the run's app, and the token minted for this
/// turn, which the gateway accepts for this run's tools and nothing else.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolGatewayAccess {
    pub app_id: String,
    pub token: Secret,
}

/// Where an agent's CLI runs may go (`execution_config.placement`): a machine by name, or
/// labels every chosen node must carry; empty: anywhere the CLI is ready.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CliPlacement {
    /// `local`, or a node's name.
    pub machine: Option<String>,
    /// Labels of the node (all of them).
    pub labels: BTreeMap<String, String>,
}

impl CliPlacement {
    /// Reads `execution_config.placement` (`{"machine": "...", "labels": {"k": "v"}}`);
    /// `None` when absent; an error naming the problem when it is malformed.
    pub fn from_execution_config(
        config: Option<&serde_json::Value>,
    ) -> Result<Option<Self>, String> {
        let Some(value) = config.and_then(|c| c.get("placement")) else {
            return Ok(None);
        };
        let Some(object) = value.as_object() else {
            return Err("execution_config.placement must be an object".into());
        };
        let mut placement = CliPlacement::default();
        for (key, field) in object {
            match key.as_str() {
                "machine" => match field.as_str().map(str::trim) {
                    Some(name) if !name.is_empty() => placement.machine = Some(name.to_string()),
                    _ => {
                        return Err(
                            "execution_config.placement.machine must be a non-empty string".into(),
                        )
                    }
                },
                "labels" => placement.labels = placement_labels(field)?,
                other => {
                    return Err(format!(
                        "execution_config.placement.{other} is not supported (machine, labels)"
                    ))
                }
            }
        }
        if placement.machine.is_some() && !placement.labels.is_empty() {
            return Err("execution_config.placement takes a machine or labels, not both".into());
        }
        Ok(Some(placement))
    }
}

fn placement_labels(field: &serde_json::Value) -> Result<BTreeMap<String, String>, String> {
    let Some(map) = field.as_object() else {
        return Err("execution_config.placement.labels must be an object of strings".into());
    };
    map.iter()
        .map(|(key, value)| match value.as_str() {
            Some(text) if !key.trim().is_empty() => Ok((key.clone(), text.to_string())),
            _ => Err(format!(
                "execution_config.placement.labels.{key} must be a string"
            )),
        })
        .collect()
}

/// The authority seed 000 names for the ChatGPT-subscription text-only lane.
pub const CHAT_SUBSCRIPTION_AUTHORITY: &str = "chat_subscription_isolated_v1";

/// An agent that runs through the ChatGPT-subscription text-only lane
/// (`execution_config.authority: "chat_subscription_isolated_v1"`), signed in as the app's
/// ChatGPT account `execution_config.chatgpt_account_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatSubscription {
    pub account_id: String,
}

impl ChatSubscription {
    /// Reads `execution_config.authority` and `chatgpt_account_id`; `None` without an
    /// authority; an error naming the problem when they are malformed.
    pub fn from_execution_config(
        config: Option<&serde_json::Value>,
    ) -> Result<Option<Self>, String> {
        let Some(value) = config.and_then(|c| c.get("authority")) else {
            return Ok(None);
        };
        if value.as_str() != Some(CHAT_SUBSCRIPTION_AUTHORITY) {
            return Err(format!(
                "execution_config.authority {value} is not supported ({CHAT_SUBSCRIPTION_AUTHORITY})"
            ));
        }
        match config
            .and_then(|c| c.get("chatgpt_account_id"))
            .and_then(serde_json::Value::as_str)
            .map(str::trim)
        {
            Some(id) if !id.is_empty() => Ok(Some(ChatSubscription {
                account_id: id.to_string(),
            })),
            _ => Err(format!(
                "execution_config.authority {CHAT_SUBSCRIPTION_AUTHORITY} needs execution_config.chatgpt_account_id (the app's signed-in ChatGPT account)"
            )),
        }
    }
}

/// A turn through the subscription lane: the model, and the app's sign-in it runs as.
#[derive(Debug, Clone, PartialEq)]
pub struct SubscriptionTurn {
    /// The model the lane asks for.
    pub model: String,
    /// The account's ChatGPT plan (`plus`, `pro`, …).
    pub account_plan: String,
    /// Codex's `auth.json` of the sign-in.
    pub auth_json: Secret,
}

/// What one CLI turn needs.
#[derive(Debug, Clone, PartialEq)]
pub struct CliTurnRequest {
    /// The run (used for the per-run workdir and process naming).
    pub run_id: String,
    /// Which CLI: `codex`, `claude_code` or `opencode`.
    pub kind: RuntimeKind,
    /// The whole prompt of this turn (instructions, or the conversation so far plus the new
    /// message for later turns).
    pub prompt: String,
    /// Absolute directory to work in; `None` lets the adapter use its per-run directory.
    pub workdir: Option<String>,
    /// The run's workspace is `access: read_only`: the CLI runs in its own read-only mode
    /// where it has one, never with its permission checks bypassed.
    pub read_only: bool,
    /// The model route (endpoint, model, key); `None` leaves the CLI on its own configuration.
    pub route: Option<ModelRoute>,
    /// Extra environment for the process (`KEY`, `VALUE`).
    pub env: Vec<(String, String)>,
    /// The run's tools for the CLI, through the gateway; `None` when the run has none to offer.
    pub tool_gateway: Option<ToolGatewayAccess>,
    /// Where the turn may run.
    pub placement: CliPlacement,
    /// Machines that lost this turn before: not to be used again for it.
    pub avoid_machines: Vec<String>,
    /// The turn runs through the subscription lane (no route, tools or workspace).
    pub subscription: Option<SubscriptionTurn>,
}

/// How a CLI turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CliOutcome {
    /// The CLI finished the turn (exit status 0).
    Succeeded,
    /// The CLI failed (non-zero exit, model error, deadline).
    Failed,
    /// The turn was cancelled and the process group killed.
    Cancelled,
    /// The machine running the turn went away before it ended (died, unreachable, shut
    /// down): the turn may run again elsewhere.
    Lost,
}

/// What a turn's model egress proxy saw (the CLI never held the route's key).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CliEgress {
    /// Model calls forwarded.
    pub requests: u64,
    /// Calls refused (wrong token, another host, outside the route).
    pub refused: u64,
    /// Token usage the route's answers reported.
    pub usage: Usage,
    /// Why a model call failed at the proxy (an answer over its bound); empty when none did.
    pub error: String,
}

/// One thing a CLI did, in arrival order.
#[derive(Debug, Clone, PartialEq)]
pub enum CliEvent {
    /// The process runs in `workdir`.
    Started { workdir: String },
    /// A piece of assistant text (CLIs that stream).
    AssistantDelta { text: String },
    /// A complete assistant message; `metadata`: what the lane validated about the answer
    /// (seed 000's `ResponseMetadata`), recorded with the message.
    AssistantCompleted {
        text: String,
        metadata: Option<serde_json::Value>,
    },
    /// A tool call began (`id` is unique within the turn).
    ToolStarted {
        id: String,
        name: String,
        input: serde_json::Value,
    },
    /// A tool call ended with its output.
    ToolFinished {
        id: String,
        name: String,
        input: serde_json::Value,
        output: String,
        is_error: bool,
    },
    /// Tokens used since the previous `Usage` event of the turn (to be added up).
    Usage(Usage),
    /// A diagnostic line (stderr, unclassified output); not part of the transcript.
    Diagnostic { text: String },
    /// What the turn's model egress proxy saw; just before `Exited`.
    Egress(CliEgress),
    /// The process ended; always the last event.
    Exited {
        outcome: CliOutcome,
        exit_code: i32,
        /// Why it failed (empty on success).
        error: String,
    },
}

/// Why a turn could not start, or a control request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentCliError {
    /// No CLI for this runtime kind is configured or installed.
    #[error("runtime kind {0} is not available on this runtime")]
    Unavailable(RuntimeKind),
    /// The request is unusable (bad workdir, route the CLI cannot take).
    #[error("invalid agent CLI request: {0}")]
    Invalid(String),
    /// The process could not be started.
    #[error("could not start the agent CLI: {0}")]
    Start(String),
    /// The CLI does not read input while it runs.
    #[error("this agent CLI does not accept input while it runs")]
    SignalUnsupported,
    /// The turn already ended.
    #[error("the agent CLI turn already ended")]
    Finished,
    /// Delivering input failed.
    #[error("signal failed: {0}")]
    Signal(String),
    /// No machine the run's placement allows can take the turn now (the run waits).
    #[error("{0}")]
    NoPlacement(String),
}

/// Control of a running turn.
#[async_trait]
pub trait CliControl: Send + Sync {
    /// Kills the turn's process group; idempotent.
    fn cancel(&self);
    /// Sends more user input to the running CLI (only CLIs that read stdin turns).
    async fn signal(&self, input: &str) -> Result<(), AgentCliError>;
}

/// A started turn: its events (ending after `Exited`), its control, and where it runs.
pub struct CliTurn {
    pub events: BoxStream<'static, CliEvent>,
    pub control: std::sync::Arc<dyn CliControl>,
    /// `local`, or the node's name.
    pub machine: String,
}

impl std::fmt::Debug for CliTurn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CliTurn")
    }
}

/// Starts CLI turns for runs.
#[async_trait]
pub trait AgentCli: Send + Sync + 'static {
    /// Whether this runtime kind can run here (its CLI is configured and installed).
    fn serves(&self, kind: RuntimeKind) -> bool;
    /// Whether turns of this kind can be offered the run's tools ([`ToolGatewayAccess`]).
    fn bridges_tools(&self, kind: RuntimeKind) -> bool;
    /// Whether turns can run through the ChatGPT-subscription text-only lane here.
    fn serves_subscription(&self) -> bool {
        false
    }
    /// Starts one turn. On error nothing was started.
    async fn start_turn(&self, request: CliTurnRequest) -> Result<CliTurn, AgentCliError>;
    /// Whether runs of `kind` with this placement can run here at all (a machine that
    /// exists, labels some node carries, a workspace kept on this machine); an error naming
    /// the problem otherwise. Checked when a run is admitted.
    fn check_placement(
        &self,
        kind: RuntimeKind,
        placement: &CliPlacement,
        has_workspace: bool,
    ) -> Result<(), String> {
        let _ = (kind, has_workspace);
        match &placement.machine {
            Some(machine) if machine != "local" => Err(format!("unknown machine {machine:?}")),
            _ if !placement.labels.is_empty() => Err("no node is configured".into()),
            _ => Ok(()),
        }
    }
}
