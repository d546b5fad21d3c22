//! The agent's own policy from `execution_config`: `completion.required_tools` (tools that
//! must have succeeded before the run may complete) and `runtime_policy` (the interaction
//! policy of skills, without a skill). Keys this version does not know are refused, never
//! ignored.

use serde::Deserialize;
use serde_json::Value;

use crate::definition::{clean_list, SkillPolicy};

/// What `execution_config` asks of every run of the agent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecutionPolicy {
    /// Each must have a successful tool call before the run completes.
    pub required_tools: Vec<String>,
    /// Merged with the run's skill policy.
    pub runtime_policy: SkillPolicy,
}

/// An `execution_config` section that cannot be honoured.
#[derive(Debug, thiserror::Error)]
#[error("execution_config.{section}: {message}")]
pub struct PolicyError {
    pub section: &'static str,
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Completion {
    #[serde(default)]
    required_tools: Vec<String>,
}

impl ExecutionPolicy {
    /// Reads the policy sections of an agent's `execution_config` (other sections belong to
    /// other components and are not looked at).
    pub fn from_execution_config(config: Option<&Value>) -> Result<ExecutionPolicy, PolicyError> {
        let Some(config) = config.filter(|c| !c.is_null()) else {
            return Ok(ExecutionPolicy::default());
        };
        let mut policy = ExecutionPolicy::default();
        if let Some(completion) = config.get("completion").filter(|v| !v.is_null()) {
            let completion: Completion = section("completion", completion)?;
            policy.required_tools = clean_list(completion.required_tools)
                .iter()
                .map(|t| ar_core::tool::canonical_tool_name(t))
                .collect();
        }
        if let Some(runtime) = config.get("runtime_policy").filter(|v| !v.is_null()) {
            let mut runtime: SkillPolicy = section("runtime_policy", runtime)?;
            runtime.completion_requires_interaction_kinds =
                clean_list(runtime.completion_requires_interaction_kinds);
            runtime.completion_requires_interaction_kinds.sort();
            policy.runtime_policy = runtime;
        }
        Ok(policy)
    }
}

fn section<T: serde::de::DeserializeOwned>(
    name: &'static str,
    value: &Value,
) -> Result<T, PolicyError> {
    T::deserialize(value).map_err(|error| PolicyError {
        section: name,
        message: format!("{error} (this version does not support it)"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_required_tools_and_runtime_policy() {
        let config = json!({
            "workspace": {"mode": "host_prepared"},
            "completion": {"required_tools": ["publish_outputs", "mcp__agent_runtime__write_file", ""]},
            "runtime_policy": {
                "completion_requires_interaction_kinds": ["review_checkpoint", "approval_request"],
                "allow_implicit_invocation": false
            }
        });
        let policy = ExecutionPolicy::from_execution_config(Some(&config)).unwrap();
        assert_eq!(policy.required_tools, ["publish_outputs", "write_file"]);
        assert_eq!(
            policy.runtime_policy.completion_requires_interaction_kinds,
            ["approval_request", "review_checkpoint"]
        );
        assert_eq!(policy.runtime_policy.allow_implicit_invocation, Some(false));
        assert_eq!(
            ExecutionPolicy::from_execution_config(None).unwrap(),
            ExecutionPolicy::default()
        );
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_refused() {
        for (config, expected) in [
            (
                json!({"completion": {"required_tools": "x"}}),
                "execution_config.completion: invalid type",
            ),
            (
                json!({"completion": {"must_publish": true}}),
                "execution_config.completion: unknown field `must_publish`",
            ),
            (
                json!({"runtime_policy": {"interaction_contracts": []}}),
                "execution_config.runtime_policy: unknown field",
            ),
        ] {
            let error = ExecutionPolicy::from_execution_config(Some(&config)).unwrap_err();
            assert!(error.to_string().starts_with(expected), "{error}");
        }
    }
}
