//! Typed `data` payloads of lifecycle, workspace and A2A events, which the Go SDK leaves as plain maps.
//!
//! The service builds these payloads as ad-hoc maps, so there are no Go tags to copy: keys come
//! from the contract (§4), and every optional key is omitted when empty. The event sink adds
//! `host_run_id` to every payload when the run has one; these types ignore it on input.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::de::{nd, raw};
use crate::events::Usage;

/// Encodes a payload struct into the `data` map of an event.
pub fn to_data<T: Serialize>(payload: &T) -> serde_json::Result<Map<String, Value>> {
    match serde_json::to_value(payload)? {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        other => Err(serde::ser::Error::custom(format!(
            "event data must be a JSON object, got {other}"
        ))),
    }
}

/// `data` of `run.paused`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunPausedEventData {
    /// See [`crate::runs::pause_reason`].
    #[serde(deserialize_with = "nd")]
    pub pause_reason: String,
    /// MCP authentication details (MCP auth pauses).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authentication: Option<PauseAuthentication>,
    /// Model provider (model-credential auth pauses).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// Host connection id (model-credential auth pauses).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub connection_id: String,
}

/// Why an MCP server needs authentication.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PauseAuthentication {
    /// `mcp` for run MCP servers.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// MCP server id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub server_id: String,
    /// MCP server name.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub server_name: String,
    /// Failure reason.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// `data` of `run.resumed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunResumedEventData {
    /// Accepted resume id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub resume_id: String,
    /// Resolved interaction.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub interaction_id: String,
}

/// `data` of `run.completed`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunCompletedEventData {
    /// Non-default completion reason (e.g. `idle_timeout`).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Cumulative usage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// See [`crate::events::usage_semantic`].
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub usage_semantic: String,
    /// Side effects whose outcome is unknown (recovered from checkpoints).
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub interrupted_external_effects: Option<Value>,
}

/// `data` of `run.failed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunFailedEventData {
    /// Failure message.
    #[serde(deserialize_with = "nd")]
    pub error: String,
    /// Cumulative usage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// See [`crate::events::usage_semantic`].
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub usage_semantic: String,
}

/// `data` of `run.mcp_credential_updated`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunMCPCredentialUpdatedEventData {
    /// MCP server id.
    #[serde(deserialize_with = "nd")]
    pub server_id: String,
    /// New expiry.
    #[serde(
        with = "crate::time::rfc3339_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub expires_at: Option<DateTime<Utc>>,
}

/// `data` of `workspace.prepared`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkspacePreparedEventData {
    /// Lease id.
    #[serde(deserialize_with = "nd")]
    pub lease_id: String,
    /// Workspace provider.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// Lease metadata (secret-free).
    #[serde(deserialize_with = "nd", skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
    /// Whether this is the primary checkout (multi-repository runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primary: Option<bool>,
    /// Secondary checkout alias.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub alias: String,
}

/// `data` of `workspace.finalized`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkspaceFinalizedEventData {
    /// Lease id.
    #[serde(deserialize_with = "nd")]
    pub lease_id: String,
    /// See [`crate::workspace::finalize_outcome`].
    #[serde(deserialize_with = "nd")]
    pub outcome: String,
}

/// `data` of `workspace.cleaned`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkspaceCleanedEventData {
    /// Lease id.
    #[serde(deserialize_with = "nd")]
    pub lease_id: String,
    /// See [`crate::workspace::cleanup_reason`].
    #[serde(deserialize_with = "nd")]
    pub reason: String,
}

/// `data` of `a2a.task`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct A2ATaskEventData {
    /// External agent id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub external_agent_id: String,
    /// A2A context id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub context_id: String,
    /// A2A task id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub task_id: String,
    /// Remote task state.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub state: String,
    /// Remote message text.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// URL file parts.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<A2AFile>,
    /// Remote message id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub message_id: String,
}

/// One URL file part of an A2A message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct A2AFile {
    /// File name.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Media type.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub media_type: String,
    /// Download URL.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub url: String,
}
