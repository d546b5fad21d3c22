//! Runs: `AgentRun`, its input, start/resume requests, turn policy, paging, execution info, and run enum values.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::de::{is_zero, nd, raw};
use crate::mcp::RunMCPServer;
use crate::model::{ModelCredential, RunModel};
use crate::target::TargetRef;
use crate::workspace::WorkspaceLease;

/// One execution of an agent against a target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct AgentRun {
    /// Runtime run id (`run_…`).
    #[serde(deserialize_with = "nd")]
    pub id: String,
    /// Owning app.
    #[serde(deserialize_with = "nd")]
    pub app_id: String,
    /// App's idempotency id for the run.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub host_run_id: String,
    /// Agent id.
    #[serde(deserialize_with = "nd")]
    pub agent_id: String,
    /// Target (always written).
    #[serde(deserialize_with = "nd")]
    pub target: TargetRef,
    /// See [`crate::agents::runtime_kind`].
    #[serde(deserialize_with = "nd")]
    pub runtime_kind: String,
    /// See [`execution_mode`].
    #[serde(deserialize_with = "nd")]
    pub execution_mode: String,
    /// See [`crate::agents::invocation_mode`].
    #[serde(deserialize_with = "nd")]
    pub invocation_mode: String,
    /// Acting external user.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub external_actor_id: String,
    /// See [`run_status`].
    #[serde(deserialize_with = "nd")]
    pub status: String,
    /// See [`pause_reason`]; always written (`none` when not paused).
    #[serde(deserialize_with = "nd")]
    pub pause_reason: String,
    /// See [`approval_state`].
    #[serde(deserialize_with = "nd")]
    pub approval_state: String,
    /// Run input (always written).
    #[serde(deserialize_with = "nd")]
    pub input: RunInput,
    /// Opaque output summary (usage, interrupted effects, workspace results…).
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub output_summary: Option<Value>,
    /// Workspace lease, when one was prepared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace_lease: Option<WorkspaceLease>,
    /// Failure message.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub error_message: String,
    /// First execution start.
    #[serde(
        with = "crate::time::rfc3339_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub started_at: Option<DateTime<Utc>>,
    /// Terminal time.
    #[serde(
        with = "crate::time::rfc3339_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub completed_at: Option<DateTime<Utc>>,
    /// Creation time.
    #[serde(with = "crate::time::rfc3339", default = "crate::time::go_zero")]
    pub created_at: DateTime<Utc>,
    /// Last update time.
    #[serde(with = "crate::time::rfc3339", default = "crate::time::go_zero")]
    pub updated_at: DateTime<Utc>,
}

/// The run's admitted input (secret-free).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct RunInput {
    /// Pinned model route.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<RunModel>,
    /// `app` when a run credential was supplied; see [`crate::model::credential_source`].
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub credential_source: String,
    /// Run instructions.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub instructions: String,
    /// Run tool allowlist (narrows the agent's).
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    /// Trigger description.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub trigger: Map<String, Value>,
    /// Host and engine metadata.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// Resolved target context summary.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub context_summary: String,
    /// Turn policy (a struct in Go: `omitempty` never omits it, so `{}` is written).
    #[serde(deserialize_with = "nd")]
    pub turn_policy: TurnPolicy,
}

/// How a run's turns end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct TurnPolicy {
    /// See [`turn_policy_mode`]; empty = `complete_on_finish`.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub mode: String,
    /// Chat idle timeout (only for `pause_after_assistant`).
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub idle_timeout_seconds: i64,
    /// Host-defined strategy for resuming an expired chat.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub expired_resume_strategy: String,
    /// See [`turn_completion_mode`]; empty = `implicit`.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub completion_mode: String,
    /// Corrections allowed before `turn_completion_guard_exhausted` (0..=5, explicit mode only).
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub max_completion_corrections: i64,
}

/// Body of `POST /v1/runs`. Strict: unknown fields at any depth are rejected (400), as in Go's
/// `DisallowUnknownFields`; free-form maps (`trigger`, `metadata`, `target.metadata`, skill
/// `config`, credential `headers`) are not checked inside.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct StartRunRequest {
    /// Pinned model route.
    #[serde(
        deserialize_with = "crate::strict::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub model: Option<RunModel>,
    /// Request-only model credential.
    #[serde(
        deserialize_with = "crate::strict::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub model_credential: Option<ModelCredential>,
    /// Owning app (required).
    #[serde(deserialize_with = "nd")]
    pub app_id: String,
    /// App idempotency key.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub host_run_id: String,
    /// Agent id (required).
    #[serde(deserialize_with = "nd")]
    pub agent_id: String,
    /// Target (required; always written).
    #[serde(deserialize_with = "crate::strict::value")]
    pub target: TargetRef,
    /// Run instructions.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub instructions: String,
    /// Narrowing tool allowlist.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    /// Acting external user.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub external_actor_id: String,
    /// Invocation mode; see [`crate::agents::invocation_mode`].
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub mode: String,
    /// See [`execution_mode`].
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub execution_mode: String,
    /// Trigger description.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub trigger: Map<String, Value>,
    /// Host metadata.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// Turn policy (struct value: always written).
    #[serde(deserialize_with = "crate::strict::value")]
    pub turn_policy: TurnPolicy,
    /// Run-scoped MCP servers (≤ 16).
    #[serde(
        deserialize_with = "crate::strict::value",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub mcp_servers: Vec<RunMCPServer>,
}

/// Body of `POST /v1/runs/{id}/resume`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ResumeRunRequest {
    /// See [`message_provenance`].
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub message_provenance: String,
    /// See [`resume_intent`] (always written).
    #[serde(deserialize_with = "nd")]
    pub intent: String,
    /// Reply text.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub content: String,
    /// Structured interaction response.
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub response_payload: Option<Value>,
    /// Acting external user.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub external_actor_id: String,
    /// Idempotency key (header alias `Idempotency-Key`).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub resume_id: String,
    /// Interaction to resolve (header alias `X-Agent-Runtime-Interaction-ID`).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub interaction_id: String,
    /// Turn-policy override.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_policy: Option<TurnPolicy>,
    /// Budgets raised for the rest of the run (`max_total_tokens`, `max_model_calls`,
    /// `max_wall_time_seconds`): an addition of this version, how a run paused for its budget
    /// goes on.
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub budgets: Option<Value>,
}

/// Body of `POST /v1/runs/{id}/request-changes`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct RequestChangesRequest {
    /// Requested changes.
    #[serde(deserialize_with = "nd")]
    pub content: String,
    /// Acting external user.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub external_actor_id: String,
}

/// Response of `GET /v1/runs/search`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct RunPage {
    /// Matching runs (always written; `[]` when none).
    #[serde(deserialize_with = "nd")]
    pub items: Vec<AgentRun>,
    /// Total matches.
    #[serde(deserialize_with = "nd")]
    pub total: i64,
    /// Effective limit.
    #[serde(deserialize_with = "nd")]
    pub limit: i64,
    /// Effective offset.
    #[serde(deserialize_with = "nd")]
    pub offset: i64,
}

/// Query string of `GET /v1/runs/search` (`app_id`, `q`, `status`, `limit`, `offset`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct RunSearchQuery {
    /// Owning app.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub app_id: String,
    /// Free-text query.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub q: String,
    /// Status filter.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// Page size (default [`SEARCH_DEFAULT_LIMIT`], max [`SEARCH_MAX_LIMIT`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
    /// Offset (default 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
}

/// Default page size of run search.
pub const SEARCH_DEFAULT_LIMIT: i64 = 25;
/// Maximum page size of run search.
pub const SEARCH_MAX_LIMIT: i64 = 100;

/// Response of `GET /v1/runs/{id}/execution`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct RunExecutionInfo {
    /// `lightweight` or `durable`.
    #[serde(deserialize_with = "nd")]
    pub execution_mode: String,
    /// Workflow state, or the run status for lightweight runs.
    #[serde(deserialize_with = "nd")]
    pub state: String,
    /// Durable workflow id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub workflow_id: String,
    /// Durable engine run id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub temporal_run_id: String,
    /// Task queue.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub task_queue: String,
    /// History length.
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub history_length: i64,
    /// History size in bytes.
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub history_size_bytes: i64,
    /// State transitions.
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_zero")]
    pub state_transition_count: i64,
    /// Workflow start.
    #[serde(
        with = "crate::time::rfc3339_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub started_at: Option<DateTime<Utc>>,
    /// Workflow close.
    #[serde(
        with = "crate::time::rfc3339_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub closed_at: Option<DateTime<Utc>>,
}

wire_values! {
    /// `AgentRun.status`.
    pub mod run_status {
        /// Admitted, not yet executing.
        QUEUED = "queued",
        /// Executing a turn.
        RUNNING = "running",
        /// Waiting; see `pause_reason`.
        PAUSED = "paused",
        /// Terminal success.
        COMPLETED = "completed",
        /// Terminal failure.
        FAILED = "failed",
        /// Terminal cancellation.
        CANCELLED = "cancelled",
    }
}

/// Whether a run status is terminal (`completed`, `failed`, `cancelled`).
pub fn is_terminal_status(status: &str) -> bool {
    matches!(
        status,
        run_status::COMPLETED | run_status::FAILED | run_status::CANCELLED
    )
}

/// Whether a run status is active (`queued`, `running`, `paused`).
pub fn is_active_status(status: &str) -> bool {
    matches!(
        status,
        run_status::QUEUED | run_status::RUNNING | run_status::PAUSED
    )
}

wire_values! {
    /// `AgentRun.pause_reason`.
    pub mod pause_reason {
        /// Not paused.
        NONE = "none",
        /// Waiting for user input.
        HUMAN_INPUT = "human_input",
        /// Waiting for approval.
        HUMAN_APPROVAL = "human_approval",
        /// Waiting for model/MCP authentication.
        AUTHENTICATION = "authentication",
        /// Chat turn finished; waiting for the next user message.
        AWAITING_USER_MESSAGE = "awaiting_user_message",
        /// Paused on request (`POST …/pause`).
        MANUAL = "manual",
    }
}

wire_values! {
    /// `AgentRun.approval_state`.
    pub mod approval_state {
        /// No approval needed.
        NOT_REQUIRED = "not_required",
        /// Waiting.
        PENDING = "pending",
        /// Approved.
        APPROVED = "approved",
        /// Changes requested.
        REJECTED = "rejected",
    }
}

wire_values! {
    /// `ResumeRunRequest.intent`.
    pub mod resume_intent {
        /// Answer / next user message.
        REPLY = "reply",
        /// Continue without new input (e.g. after a manual pause).
        CONTINUE = "continue",
        /// Approve.
        APPROVE = "approve",
        /// Reject with feedback.
        REQUEST_CHANGES = "request_changes",
        /// Host finished an authentication flow.
        AUTH_COMPLETED = "auth_completed",
    }
}

wire_values! {
    /// `ResumeRunRequest.message_provenance` (empty is also accepted).
    pub mod message_provenance {
        /// A human wrote it; requires `external_actor_id`.
        HUMAN = "human",
        /// A system notification (reply to an awaiting chat only).
        SYSTEM_NOTIFICATION = "system_notification",
    }
}

wire_values! {
    /// `StartRunRequest.execution_mode` / `AgentRun.execution_mode`.
    pub mod execution_mode {
        /// In-process.
        LIGHTWEIGHT = "lightweight",
        /// Durable workflow.
        DURABLE = "durable",
    }
}

wire_values! {
    /// `TurnPolicy.mode`.
    pub mod turn_policy_mode {
        /// Complete the run when the agent finishes (default).
        COMPLETE_ON_FINISH = "complete_on_finish",
        /// Chat style: pause after each assistant turn.
        PAUSE_AFTER_ASSISTANT = "pause_after_assistant",
    }
}

wire_values! {
    /// `TurnPolicy.completion_mode`. The Go SDK constant `TurnCompletionExplicit` is
    /// `explicit_finish`, while the service prose says `explicit`; both are accepted, and
    /// [`normalize_completion_mode`] maps them to the canonical SDK spelling `explicit_finish`.
    pub mod turn_completion_mode {
        /// The turn ends when the model stops (default).
        IMPLICIT = "implicit",
        /// The model must call `finish_turn` (canonical, as in the Go SDK).
        EXPLICIT_FINISH = "explicit_finish",
        /// Alias of `explicit_finish` used in the service documentation.
        EXPLICIT = "explicit",
    }
}

/// Canonical completion mode: `""`/`implicit` → `implicit`, `explicit`/`explicit_finish` →
/// `explicit_finish` (trimmed, case-insensitive); `None` for anything else.
pub fn normalize_completion_mode(value: &str) -> Option<&'static str> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" | turn_completion_mode::IMPLICIT => Some(turn_completion_mode::IMPLICIT),
        turn_completion_mode::EXPLICIT | turn_completion_mode::EXPLICIT_FINISH => {
            Some(turn_completion_mode::EXPLICIT_FINISH)
        }
        _ => None,
    }
}

/// Maximum `TurnPolicy.max_completion_corrections`.
pub const MAX_COMPLETION_CORRECTIONS: i64 = 5;
/// Corrections used when explicit completion is requested with 0.
pub const DEFAULT_COMPLETION_CORRECTIONS: i64 = 2;
/// Maximum start-run body size in bytes.
pub const MAX_START_RUN_BODY_BYTES: usize = 1024 * 1024;
