//! The wire contract of the service: /v1 and /v2 bodies, event envelopes and payloads, host-callback bodies, with exact JSON names.
//!
//! Every type mirrors one Go SDK struct field for field (names from its `json` tags):
//!
//! * `omitempty` fields are skipped when empty (`""`, `0`, `false`, empty vec/map, `None`);
//!   fields without it are always written. Go never omits a struct value, so struct-typed
//!   fields (`TargetRef`, `TurnPolicy`, `Usage`) are always written.
//! * Decoding is lenient like Go's: missing fields and JSON `null` leave the zero value.
//!   Only [`runs::StartRunRequest`] rejects unknown fields, at every depth. Request bodies are
//!   decoded with [`decode::from_slice`], which (like Go) reads a struct only from a JSON object.
//! * Collections that Go would write as `null` when nil are written as `[]`/`{}`; Go and
//!   Python clients read both the same way.
//! * `json.RawMessage` with `omitempty` is `Option<Value>`: absent → `None`, a present `null`
//!   → `Some(Value::Null)` (written back as `null`, as Go does). Without `omitempty` it is a
//!   plain `Value` (`null` when unset).
//! * `time.Time` uses [`time`]: Go `RFC3339Nano` output, any RFC 3339 input, UTC.
//! * Enum-like fields stay `String`; each has a module of constants with `ALL` and `is_valid`
//!   so the server can return precise 400 messages.
//! * Secrets (`ModelCredential`, `RunMCPCredential`, `RepositoryAuth`) have hand-written,
//!   redacting `Debug` impls.
//!
//! Choices where the sources disagree or are silent:
//!
//! * `TurnPolicy.completion_mode`: the Go SDK constant is `explicit_finish`, the service prose
//!   says `explicit`. Both are valid on input; [`runs::normalize_completion_mode`] maps either
//!   to `explicit_finish`, the SDK spelling, which is what we store and echo.
//! * Values beyond the SDK constants come from the contract: `risk_based` approval, `manual`
//!   pause, `continue` resume intent, `a2a`/`claude_code` runtime kinds.
//! * `ModelCredentialRefreshRequest.reason` strings are the original's; see [`host::refresh_reason`].
//! * Lifecycle/workspace/A2A event payloads have no Go structs; [`event_data`] fixes their keys.
//! * Go matches JSON keys case-insensitively; we match them exactly, as the SDKs send them.

#[macro_use]
mod macros;
mod de;
mod strict;

pub mod agents;
pub mod artifacts;
pub mod capabilities;
pub mod codex;
/// The one body decoder (defined with the domain, shared with the studio).
pub use ar_core::json as decode;
pub mod error;
pub mod event_data;
pub mod events;
pub mod host;
pub mod interactions;
pub mod mcp;
pub mod messages;
pub mod model;
pub mod nats;
pub mod runs;
pub mod target;
pub mod time;
pub mod tools;
pub mod workspace;

pub use agents::{Agent, SkillRef};
pub use artifacts::{AgentRunArtifact, AppendArtifactRequest};
pub use capabilities::{
    AppComponent, AppSummary, Capabilities, DurableInfo, HealthResponse, NodeInfo,
    ProviderCapability, RunMCPCapability, SkillInfo, StoreInfo,
};
pub use codex::CodexAuthState;
pub use error::ErrorBody;
pub use event_data::{
    A2AFile, A2ATaskEventData, PauseAuthentication, RunCompletedEventData, RunFailedEventData,
    RunMCPCredentialUpdatedEventData, RunPausedEventData, RunResumedEventData,
    WorkspaceCleanedEventData, WorkspaceFinalizedEventData, WorkspacePreparedEventData,
};
pub use events::{
    AssistantMessageEventData, CodexAuthStateEventData, EnvelopeData, Event, EventEnvelope,
    EventEnvelopeRef, EventListQuery, EventListResponse, PlanUpdatedEventData,
    ReasoningMessageEventData, RunPlanStep, StreamStateSnapshot, ToolCallEventData, Usage,
    UsageCheckpointEventData, EVENT_PROTOCOL_HEADER,
};
pub use host::{
    CleanupWorkspaceRequest, CommandExecutionContext, CommandExecutionRequest,
    CommandExecutionResponse, FinalizeWorkspaceRequest, FinalizeWorkspaceResult, GitIdentity,
    ModelCredentialRefreshRequest, PrepareWorkspaceRequest, ProviderToolCallRequest,
    RepositoryAuth, RepositoryWorkspaceSpec, TargetContext, TargetContextRequest,
};
pub use interactions::AgentRunInteraction;
pub use mcp::{
    RunMCPCredential, RunMCPCredentialUpdate, RunMCPServer, RunMCPTool,
    UpdateRunMCPCredentialRequest,
};
pub use messages::{AgentRunMessage, AppendMessageRequest};
pub use model::{
    ModelControls, ModelCredential, ModelEndpoint, OpenRouterModelControls,
    OpenRouterProviderPreferences, RunModel, RunModelCredentialUpdate,
    UpdateRunModelCredentialRequest,
};
pub use runs::{
    AgentRun, RequestChangesRequest, ResumeRunRequest, RunExecutionInfo, RunInput, RunPage,
    RunSearchQuery, StartRunRequest, TurnPolicy,
};
pub use target::{TargetDisplay, TargetRef};
pub use tools::{
    ContentItem, RunToolCallRequest, Tool, ToolCall, ToolCallResult, ToolListResponse,
};
pub use workspace::WorkspaceLease;

/// Placeholder printed by redacting `Debug` impls in place of a non-empty secret.
pub const REDACTED: &str = "[redacted]";

/// `REDACTED` for a non-empty secret, `""` for an empty one (so "unset" stays visible).
pub(crate) fn redact(secret: &str) -> &'static str {
    if secret.is_empty() {
        ""
    } else {
        REDACTED
    }
}
