//! What the studio shows: runtime, agent and tool views, command status rows, remembered manifests.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::registration::AgentDefaults;
use super::Reason;

/// The breakpoint set was adopted from the runtime's registration.
pub const BREAKPOINTS_BY_RUNTIME: &str = "runtime";
/// The breakpoint set was delivered by the studio.
pub const BREAKPOINTS_BY_STUDIO: &str = "studio";
/// The breakpoint set was restored from the studio's store after a restart.
pub const BREAKPOINTS_BY_STORE: &str = "store";
/// The breakpoint set came through the HTTP API.
pub const BREAKPOINTS_SURFACE_API: &str = "api";

/// A command's lifecycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommandState {
    Queued,
    Accepted,
    Rejected,
    Finished,
    Lost,
}

impl CommandState {
    /// Whether nothing but a late ack can change the row any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Rejected | Self::Finished | Self::Lost)
    }

    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Accepted => "accepted",
            Self::Rejected => "rejected",
            Self::Finished => "finished",
            Self::Lost => "lost",
        }
    }
}

/// The `GET /api/playground/commands/{id}` row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandStatus {
    pub command_id: String,
    pub state: CommandState,
    pub run_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    pub error: Option<String>,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
}

/// One registered runtime in `GET /api/runtimes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeView {
    pub id: String,
    pub host: String,
    pub pid: i64,
    pub service: String,
    pub env: String,
    pub weft_version: String,
    pub instance: String,
    pub studio_url: String,
    pub cwd: String,
    pub connected_since: DateTime<Utc>,
    pub last_seen: DateTime<Utc>,
    pub connected: bool,
    /// Known only from the store: the runtime has not registered since the studio restarted.
    pub restored: bool,
    pub sessions: bool,
    pub agents: Vec<AgentView>,
    pub breakpoints: Vec<String>,
    pub breakpoints_own: bool,
    /// Who set the stored breakpoint set: `runtime`, `studio` or `store`.
    pub breakpoints_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breakpoints_set_at: Option<DateTime<Utc>>,
    /// Through which surface the studio set it (`api`); empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub breakpoints_surface: String,
}

/// One agent of a runtime.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentView {
    pub name: String,
    pub models: Vec<String>,
    pub resolver: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defaults: Option<AgentDefaults>,
    pub tools: Vec<ToolView>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instructions: String,
    pub manifest_hash: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model_provider: String,
}

/// One tool of an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolView {
    pub name: String,
    pub side_effects: String,
    pub allow: bool,
    /// The manifest marks the tool as needing approval.
    pub approval: bool,
}

/// One remembered registration manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ManifestSource {
    pub service: String,
    /// sha256 (lowercase hex) of the registration's agents as one manifest document.
    pub manifest_hash: String,
    /// A runtime holding a stream now registered with this manifest.
    pub live: bool,
    pub registered_at: DateTime<Utc>,
    pub runtime_id: String,
    pub agents: Vec<ManifestAgent>,
    /// The documents' format version.
    pub version: i64,
}

/// One agent of a remembered manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ManifestAgent {
    pub name: String,
    pub manifest_hash: String,
    /// The agent's object in the manifest's `agents` array.
    pub entry: Box<serde_json::value::RawValue>,
}
