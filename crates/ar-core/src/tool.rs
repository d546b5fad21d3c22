//! Tools: definitions, risk, name canonicalization, and the port to tool implementations.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{JsonMap, RiskLevel, TargetRef};

/// A tool the model can call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub category: String,
    pub input_schema: serde_json::Value,
    #[serde(default)]
    pub mutating: bool,
    #[serde(default)]
    pub risk_level: Option<RiskLevel>,
    #[serde(default)]
    pub supported_target_types: Vec<String>,
}

impl ToolDefinition {
    /// Non-mutating tools are `read`; mutating tools without a level are `sensitive_mutation`.
    pub fn effective_risk(&self) -> RiskLevel {
        if !self.mutating {
            return RiskLevel::Read;
        }
        match self.risk_level {
            Some(RiskLevel::Read) | None => RiskLevel::SensitiveMutation,
            Some(level) => level,
        }
    }

    /// Whether the tool may be offered for a target of this type.
    pub fn supports_target(&self, target_type: &str) -> bool {
        self.supported_target_types.is_empty()
            || self.supported_target_types.iter().any(|t| t == target_type)
    }
}

/// Canonical tool name: trimmed, runtime MCP prefixes stripped, legacy aliases mapped.
pub fn canonical_tool_name(name: &str) -> String {
    let trimmed = name.trim();
    let stripped = trimmed
        .strip_prefix("mcp__agent_runtime__")
        .or_else(|| trimmed.strip_prefix("mcp__helpin__"))
        .unwrap_or(trimmed);
    match stripped {
        "request_human_input" => "request_user_input".to_string(),
        "request_human_approval" => "request_approval".to_string(),
        other => other.to_string(),
    }
}

/// Key of [`ToolContext::run_metadata`] where the engine places the run's workspace lease (its
/// wire form, plus `"access": "read_only"` for a read-only workspace), so host commands get
/// its metadata and `fetch_url` can write beneath its root. Not forwarded to hosts as part of
/// the run's input metadata.
pub const WORKSPACE_LEASE_KEY: &str = "workspace_lease";

/// What a tool implementation knows about the call.
#[derive(Debug, Clone, Default)]
pub struct ToolContext {
    pub app_id: String,
    pub run_id: String,
    pub agent_id: String,
    pub external_actor_id: String,
    pub target: TargetRef,
    pub context_summary: String,
    pub run_metadata: JsonMap,
}

/// Result of one tool call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    /// Text shown to the model.
    pub content: String,
    pub structured: Option<serde_json::Value>,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn text(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            structured: None,
            is_error: false,
        }
    }

    pub fn error(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            structured: None,
            is_error: true,
        }
    }
}

/// Executes tools that are not runtime-control tools (those the engine handles itself).
#[async_trait]
pub trait ToolHost: Send + Sync + 'static {
    /// Tools this host offers to runs of `app_id`.
    fn catalog(&self, app_id: &str) -> Vec<ToolDefinition>;
    /// Runs one call. Failures come back as `is_error` outputs, not as Rust errors.
    async fn call(
        &self,
        context: &ToolContext,
        tool_name: &str,
        input: serde_json::Value,
    ) -> ToolOutput;
    /// Why runs of `app_id` cannot start now (a catalogue the app requires has not loaded);
    /// `None` when they can.
    fn unready(&self, _app_id: &str) -> Option<String> {
        None
    }
    /// A run names tools the catalogue of `app_id` lacks: refresh the catalogues that may
    /// have gained them (the host limits how often). True when the catalogue changed.
    async fn refresh_for_unknown(&self, _app_id: &str, _names: &[String]) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_names() {
        assert_eq!(
            canonical_tool_name(" mcp__agent_runtime__get_context "),
            "get_context"
        );
        assert_eq!(
            canonical_tool_name("request_human_input"),
            "request_user_input"
        );
        assert_eq!(
            canonical_tool_name("mcp__helpin__request_human_approval"),
            "request_approval"
        );
    }

    #[test]
    fn risk_defaults() {
        let mut tool = ToolDefinition {
            name: "x".into(),
            description: String::new(),
            category: String::new(),
            input_schema: serde_json::json!({}),
            mutating: false,
            risk_level: Some(RiskLevel::DestructiveMutation),
            supported_target_types: vec![],
        };
        assert_eq!(tool.effective_risk(), RiskLevel::Read);
        tool.mutating = true;
        tool.risk_level = None;
        assert_eq!(tool.effective_risk(), RiskLevel::SensitiveMutation);
    }
}
