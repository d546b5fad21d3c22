//! Tools: definitions, audit records (`ToolCall`), the run tool gateway request/result, and risk levels.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::de::{is_false, nd, object_or_null, raw};

/// A tool definition as listed by capabilities and the run tool gateway.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct Tool {
    /// Canonical tool name.
    #[serde(deserialize_with = "nd")]
    pub name: String,
    /// Description shown to the model (always written).
    #[serde(deserialize_with = "nd")]
    pub description: String,
    /// Category (e.g. `Workspace`).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub category: String,
    /// JSON Schema of the input (always written; `null` when unknown).
    pub input_schema: Value,
    /// Whether the tool mutates state.
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_false")]
    pub mutating: bool,
    /// See [`risk_level`].
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub risk_level: String,
    /// Target types the tool supports (empty = any).
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub supported_target_types: Vec<String>,
}

/// Durable audit record of one tool call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ToolCall {
    /// Record id.
    #[serde(deserialize_with = "nd")]
    pub id: String,
    /// App id.
    #[serde(deserialize_with = "nd")]
    pub app_id: String,
    /// Run id.
    #[serde(deserialize_with = "nd")]
    pub run_id: String,
    /// Tool name.
    #[serde(deserialize_with = "nd")]
    pub tool_name: String,
    /// Input (always written).
    pub input: Value,
    /// Output.
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Error message.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// Whether the tool is mutating (always written).
    #[serde(deserialize_with = "nd")]
    pub mutating: bool,
    /// Whether the call was gated for approval (always written).
    #[serde(deserialize_with = "nd")]
    pub approval_required: bool,
    /// Call time.
    #[serde(with = "crate::time::rfc3339", default = "crate::time::go_zero")]
    pub created_at: DateTime<Utc>,
}

/// Result of `POST /v1/runs/{id}/tools` (MCP-shaped).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ToolCallResult {
    /// Content items (always written).
    #[serde(deserialize_with = "nd")]
    pub content: Vec<ContentItem>,
    /// Structured result.
    #[serde(deserialize_with = "raw", skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// Tool-level error (HTTP status stays 200).
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_false")]
    pub is_error: bool,
    /// The call is waiting for approval.
    #[serde(deserialize_with = "nd", skip_serializing_if = "is_false")]
    pub approval_required: bool,
    /// Approval interaction id.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub interaction_id: String,
}

/// One content item of a tool result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ContentItem {
    /// Item type (`text`).
    #[serde(rename = "type", deserialize_with = "nd")]
    pub item_type: String,
    /// Text.
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub text: String,
}

impl ContentItem {
    /// A `text` item.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            item_type: "text".to_owned(),
            text: text.into(),
        }
    }
}

/// Body of `POST /v1/runs/{id}/tools`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct RunToolCallRequest {
    /// Tool name (required).
    #[serde(deserialize_with = "nd")]
    pub tool_name: String,
    /// Input: a JSON object (always written; `null` when unset).
    #[serde(deserialize_with = "object_or_null")]
    pub input: Value,
}

/// Response of `GET /v1/runs/{id}/tools`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ToolListResponse {
    /// Effective tools of the run.
    #[serde(deserialize_with = "nd")]
    pub tools: Vec<Tool>,
}

wire_values! {
    /// `Tool.risk_level`, independent of `mutating`.
    pub mod risk_level {
        /// Read-only.
        READ = "read",
        /// Routine change.
        ROUTINE_MUTATION = "routine_mutation",
        /// Sensitive change (default for mutating tools without a valid level).
        SENSITIVE_MUTATION = "sensitive_mutation",
        /// Destructive change.
        DESTRUCTIVE_MUTATION = "destructive_mutation",
    }
}

/// Effective risk level: non-mutating → `read`; mutating without a valid mutation level → `sensitive_mutation`.
pub fn effective_risk_level(mutating: bool, declared: &str) -> &'static str {
    if !mutating {
        return risk_level::READ;
    }
    match declared {
        risk_level::ROUTINE_MUTATION => risk_level::ROUTINE_MUTATION,
        risk_level::DESTRUCTIVE_MUTATION => risk_level::DESTRUCTIVE_MUTATION,
        _ => risk_level::SENSITIVE_MUTATION,
    }
}
