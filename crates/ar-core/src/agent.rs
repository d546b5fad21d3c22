//! Agents: app-scoped, reusable executor definitions.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{ApprovalMode, InvocationMode, RuntimeKind};

/// A skill reference attached to an agent or run-scoped MCP server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillRef {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub skill_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Value>,
}

/// An agent definition, owned by one app.
#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    pub id: String,
    pub app_id: String,
    pub name: String,
    pub runtime_kind: RuntimeKind,
    pub provider: String,
    pub model: String,
    pub system_prompt: String,
    pub skills: Vec<SkillRef>,
    pub allowed_tools: Vec<String>,
    pub allowed_targets: Vec<String>,
    pub approval_mode: ApprovalMode,
    pub default_invocation_mode: InvocationMode,
    /// Opaque execution configuration (workspace, completion contract, runtime policy).
    pub execution_config: Option<serde_json::Value>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}
