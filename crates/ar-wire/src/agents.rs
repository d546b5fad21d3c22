//! Agents: the reusable executor definition (`Agent`), skill references, and their enum values.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::de::{nd, raw};

/// An app-scoped, reusable agent definition (`/v1/agents`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct Agent {
    /// Runtime-assigned (or host-chosen on PUT) agent id.
    #[serde(deserialize_with = "nd")]
    pub id: String,
    /// Owning app.
    #[serde(deserialize_with = "nd")]
    pub app_id: String,
    /// Display name.
    #[serde(deserialize_with = "nd")]
    pub name: String,
    /// Adapter kind; see [`runtime_kind`]. Empty means `native_sdk`.
    #[serde(deserialize_with = "nd")]
    pub runtime_kind: String,
    /// Default model provider.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// Default model name.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// System prompt.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub system_prompt: String,
    /// Skills attached to every run of this agent.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<SkillRef>,
    /// Tool allowlist (runs may narrow it, never widen it).
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    /// Allowed target types (empty = any).
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub allowed_targets: Vec<String>,
    /// Approval policy; see [`approval_mode`]. Always written.
    #[serde(deserialize_with = "nd")]
    pub approval_mode: String,
    /// Default invocation mode; see [`invocation_mode`]. Always written.
    #[serde(deserialize_with = "nd")]
    pub default_invocation_mode: String,
    /// Opaque execution configuration (workspace, completion, runtime policy…).
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub execution_config: Option<Value>,
    /// Creation time.
    #[serde(with = "crate::time::rfc3339", default = "crate::time::go_zero")]
    pub created_at: DateTime<Utc>,
    /// Last update time.
    #[serde(with = "crate::time::rfc3339", default = "crate::time::go_zero")]
    pub updated_at: DateTime<Utc>,
}

/// Reference to a skill, by id or by key (optionally pinned to a version).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct SkillRef {
    /// Host skill id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub skill_id: String,
    /// Skill key (built-in or host).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// Version label.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Version key.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub version_key: String,
    /// Opaque per-reference config (e.g. `runtime_skill_role`).
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
}

wire_values! {
    /// `Agent.runtime_kind` / `AgentRun.runtime_kind`.
    pub mod runtime_kind {
        /// In-process native tool loop (default).
        NATIVE_SDK = "native_sdk",
        /// External A2A agent.
        A2A = "a2a",
        /// Claude Code adapter.
        CLAUDE_CODE = "claude_code",
        /// Retired Codex adapter (history only).
        CODEX = "codex",
        /// Retired OpenCode adapter (history only).
        OPENCODE = "opencode",
    }
}

wire_values! {
    /// `Agent.approval_mode`. Empty is treated as `never`.
    pub mod approval_mode {
        /// Never ask.
        NEVER = "never",
        /// Ask before every mutating tool call.
        MUTATING_TOOLS = "mutating_tools",
        /// Pause the run for approval before it starts.
        ALWAYS = "always",
        /// Ask only for sensitive/destructive mutations.
        RISK_BASED = "risk_based",
    }
}

wire_values! {
    /// `Agent.default_invocation_mode`, `StartRunRequest.mode`, `AgentRun.invocation_mode`.
    pub mod invocation_mode {
        /// No human in the loop (default).
        AUTONOMOUS = "autonomous",
        /// A human is present.
        INTERACTIVE = "interactive",
    }
}

wire_values! {
    /// `SkillRef.config.runtime_skill_role`.
    pub mod skill_role {
        /// Already in the host prompt; policy only.
        INSTRUCTION = "instruction",
        /// Staged for `list/search/read_skill`.
        AVAILABLE = "available",
    }
}
