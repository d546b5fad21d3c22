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
}

/// One thing a CLI did, in arrival order.
#[derive(Debug, Clone, PartialEq)]
pub enum CliEvent {
    /// The process runs in `workdir`.
    Started { workdir: String },
    /// A piece of assistant text (CLIs that stream).
    AssistantDelta { text: String },
    /// A complete assistant message.
    AssistantCompleted { text: String },
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
}

/// Control of a running turn.
#[async_trait]
pub trait CliControl: Send + Sync {
    /// Kills the turn's process group; idempotent.
    fn cancel(&self);
    /// Sends more user input to the running CLI (only CLIs that read stdin turns).
    async fn signal(&self, input: &str) -> Result<(), AgentCliError>;
}

/// A started turn: its events (ending after `Exited`) and its control.
pub struct CliTurn {
    pub events: BoxStream<'static, CliEvent>,
    pub control: std::sync::Arc<dyn CliControl>,
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
    /// Starts one turn. On error nothing was started.
    async fn start_turn(&self, request: CliTurnRequest) -> Result<CliTurn, AgentCliError>;
}
