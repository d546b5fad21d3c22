//! Runs: one execution of an agent against a target, and the values pinned into it at admission.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{
    ApprovalState, ExecutionMode, InvocationMode, JsonMap, PauseReason, RunStatus, RuntimeKind,
};

/// Display hints for a target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetDisplay {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
}

/// A thing in the host's world that a run works on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetRef {
    #[serde(rename = "type")]
    pub target_type: String,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<TargetDisplay>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonMap>,
}

/// Turn policy of a run (normalized at admission).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnPolicy {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mode: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub idle_timeout_seconds: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub expired_resume_strategy: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub completion_mode: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_completion_corrections: i64,
}

fn is_zero(value: &i64) -> bool {
    *value == 0
}

impl TurnPolicy {
    pub fn pauses_after_assistant(&self) -> bool {
        self.mode == crate::TurnMode::PauseAfterAssistant.as_str()
    }

    pub fn is_explicit_completion(&self) -> bool {
        crate::CompletionMode::parse(&self.completion_mode)
            .map(|mode| mode.is_explicit())
            .unwrap_or(false)
    }
}

/// An approved model endpoint binding (for `openai_compatible`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelEndpoint {
    pub id: String,
    pub base_url: String,
    pub auth_mode: String,
}

/// The model route pinned into a run (never carries secrets).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunModel {
    pub provider: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<ModelEndpoint>,
    /// Model controls (reasoning effort, service tier, provider preferences), as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controls: Option<serde_json::Value>,
}

/// Inputs of a run fixed at admission and amended by the engine (metadata keys).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunInput {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<RunModel>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub credential_source: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub instructions: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<JsonMap>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonMap>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub context_summary: String,
    #[serde(default)]
    pub turn_policy: TurnPolicy,
}

/// A run record.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub id: String,
    pub app_id: String,
    pub host_run_id: String,
    pub agent_id: String,
    pub target: TargetRef,
    pub runtime_kind: RuntimeKind,
    pub execution_mode: ExecutionMode,
    pub invocation_mode: InvocationMode,
    pub external_actor_id: String,
    pub status: RunStatus,
    pub pause_reason: PauseReason,
    pub approval_state: ApprovalState,
    pub input: RunInput,
    pub output_summary: JsonMap,
    pub workspace_lease: Option<serde_json::Value>,
    pub error_message: String,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Optimistic-concurrency version; every committed change increments it.
    pub version: i64,
    /// A pause was requested and the owner stops at its next safe point.
    pub pause_requested: bool,
}

impl Run {
    pub fn is_terminal(&self) -> bool {
        self.status.is_terminal()
    }

    /// A metadata value set by the host or the engine.
    pub fn metadata_value(&self, key: &str) -> Option<&serde_json::Value> {
        self.input.metadata.as_ref().and_then(|map| map.get(key))
    }

    /// Sets an engine-maintained metadata key.
    pub fn set_metadata(&mut self, key: &str, value: serde_json::Value) {
        self.input
            .metadata
            .get_or_insert_with(JsonMap::new)
            .insert(key.to_string(), value);
    }
}
