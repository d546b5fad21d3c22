//! The registration a runtime posts on every connect, its agents, and the studio's answer.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::command::ToolChoice;
use super::manifest_doc::first_agent;
use super::nullable::or_default;

/// The `POST /api/runtime/register` body: the runtime's own, authoritative self-description.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Registration {
    pub runtime_id: String,
    pub host: String,
    pub pid: i64,
    pub service: String,
    pub env: String,
    pub weft_version: String,
    pub budget: Budget,
    pub threads: bool,
    /// The breakpoint set the runtime holds now; adopted by a studio that has none for it.
    #[serde(deserialize_with = "or_default")]
    pub breakpoints: Vec<String>,
    #[serde(deserialize_with = "or_default")]
    pub agents: Vec<AgentRegistration>,
    /// Cadence at which the runtime re-posts `accepted` while it holds a command; 0: none.
    pub heartbeat_ms: i64,
    /// The process instance (one per process start), for discovery.
    pub instance: String,
    /// Whether the runtime holds durable thread sessions the studio may address.
    pub sessions: bool,
    /// The studio URL the runtime dialed.
    pub studio_url: String,
    /// The runtime's working directory.
    pub cwd: String,
    /// The runtime owns its breakpoint set (set in the app's code): its set wins on reconnect.
    pub breakpoints_own: bool,
}

impl Registration {
    /// The agent registered under `name`.
    pub fn agent(&self, name: &str) -> Option<&AgentRegistration> {
        self.agents.iter().find(|a| a.name == name)
    }
}

/// One exposed agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentRegistration {
    pub name: String,
    /// The one-agent manifest document, as a JSON string.
    pub manifest: String,
    #[serde(deserialize_with = "or_default")]
    pub models: Vec<String>,
    pub resolver: bool,
    pub limits: AgentLimits,
    pub defaults: AgentDefaults,
    #[serde(deserialize_with = "or_default")]
    pub side_effects: BTreeMap<String, String>,
    #[serde(deserialize_with = "or_default")]
    pub allow: Vec<String>,
    /// sha256 of the manifest as the runtime computed it; empty lets the studio compute it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub manifest_hash: String,
}

impl AgentRegistration {
    /// Whether `tool` is on the agent's allow-side-effects list.
    pub fn is_allowed(&self, tool: &str) -> bool {
        self.allow.iter().any(|t| t == tool)
    }

    /// The agent's tools in manifest order.
    pub fn manifest_tool_names(&self) -> Vec<String> {
        first_agent(&self.manifest)
            .map(|a| a.tools.into_iter().map(|t| t.name).collect())
            .unwrap_or_default()
    }

    /// The tools that ask for approval in the manifest.
    pub(crate) fn manifest_approval_tools(&self) -> Vec<String> {
        first_agent(&self.manifest)
            .map(|a| {
                a.tools
                    .into_iter()
                    .filter(|t| t.approval || t.require_approval)
                    .map(|t| t.name)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The tools' input schemas by name; `None` when the manifest does not read.
    pub fn manifest_tool_schemas(&self) -> Option<BTreeMap<String, serde_json::Value>> {
        let agent = first_agent(&self.manifest)?;
        let mut out = BTreeMap::new();
        for tool in agent.tools {
            if let Some(raw) = tool.input_schema {
                if raw.get() != "null" {
                    if let Ok(value) = serde_json::from_str(raw.get()) {
                        out.insert(tool.name, value);
                    }
                }
            }
        }
        Some(out)
    }

    /// The agent's own model name.
    pub fn manifest_model_name(&self) -> String {
        first_agent(&self.manifest)
            .map(|a| a.model.name)
            .unwrap_or_default()
    }

    /// The agent's model provider.
    pub fn manifest_model_provider(&self) -> String {
        first_agent(&self.manifest)
            .map(|a| a.model.provider)
            .unwrap_or_default()
    }

    /// The agent's registered system prompt.
    pub fn manifest_instructions(&self) -> String {
        first_agent(&self.manifest)
            .map(|a| a.instructions)
            .unwrap_or_default()
    }

    /// The manifest hash: the registered one, else sha256 (lowercase hex) of the manifest bytes.
    pub fn hash(&self) -> String {
        if !self.manifest_hash.is_empty() {
            return self.manifest_hash.clone();
        }
        hex::encode(Sha256::digest(self.manifest.as_bytes()))
    }

    /// Whether the agent knows `tool`, by manifest or by side-effect annotation.
    pub fn has_tool(&self, tool: &str) -> bool {
        self.side_effects.contains_key(tool) || self.manifest_tool_names().iter().any(|t| t == tool)
    }
}

/// An agent's own lower-only bounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentLimits {
    pub max_steps: i64,
    pub parallelism: i64,
}

/// An agent's run defaults in the override vocabulary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentDefaults {
    pub max_steps: i64,
    pub parallelism: i64,
    pub thinking: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub thinking_budget: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "or_default")]
    pub stop: Vec<String>,
    pub tool_choice: ToolChoice,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// The runtime's per-experiment caps (0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Budget {
    pub max_tokens_per_experiment: i64,
    pub max_runs_per_experiment: i64,
}

/// The answer to a registration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RegisterResponse {
    pub runtime_id: String,
    pub commands_url: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = r#"{"weft":1,"agents":[{"name":"a","instructions":"be brief","model":{"name":"m1","provider":"p"},"tools":[{"name":"search","input_schema":{"type":"object"}},{"name":"pay","approval":true}]}]}"#;

    #[test]
    fn reads_the_manifest() {
        let a = AgentRegistration {
            name: "a".into(),
            manifest: MANIFEST.into(),
            ..Default::default()
        };
        assert_eq!(a.manifest_tool_names(), vec!["search", "pay"]);
        assert_eq!(a.manifest_instructions(), "be brief");
        assert_eq!(a.manifest_model_name(), "m1");
        assert_eq!(a.manifest_model_provider(), "p");
        assert_eq!(a.manifest_approval_tools(), vec!["pay"]);
        let schemas = a.manifest_tool_schemas().unwrap_or_default();
        assert!(schemas.contains_key("search") && !schemas.contains_key("pay"));
        assert_eq!(a.hash().len(), 64);
    }

    #[test]
    fn nulls_read_as_empty() {
        let reg: Registration =
            serde_json::from_str(r#"{"runtime_id":"r","agents":null,"breakpoints":null}"#)
                .unwrap_or_default();
        assert_eq!(reg.runtime_id, "r");
        assert!(reg.agents.is_empty());
    }
}
