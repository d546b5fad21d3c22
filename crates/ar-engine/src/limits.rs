//! What an agent's `execution_config` limits in its native runs: `max_tool_steps` (the
//! original's: model rounds per turn), `budgets` (tokens, model calls and running time of the
//! whole run) and `native_context` (the model's context window, see `window`). Read and
//! checked in one place, so that saving an agent and admitting a run refuse the same mistakes
//! with a 400 naming them.

use ar_core::budget::RunBudgets;
use ar_core::RuntimeKind;
use serde_json::Value;

use crate::error::{EngineError, EngineResult};
use crate::window::ContextPolicy;

/// The most model rounds per turn an agent may ask for (the original's cap).
pub(crate) const MAX_TOOL_STEPS: u64 = 2000;

/// An agent's limits as its native runs apply them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct AgentLimits {
    pub budgets: Option<RunBudgets>,
    pub context: Option<ContextPolicy>,
    /// Model rounds per turn (`None`: the runtime's limit).
    pub max_tool_steps: Option<i64>,
}

impl AgentLimits {
    /// The limits `config` sets for an agent of `kind`. The sections apply to native runs
    /// only: an agent CLI manages its own loop, so a CLI agent that sets one is refused
    /// rather than have it ignored.
    pub(crate) fn of(kind: RuntimeKind, config: Option<&Value>) -> EngineResult<AgentLimits> {
        let budgets = RunBudgets::from_execution_config(config).map_err(EngineError::Invalid)?;
        let context = ContextPolicy::from_execution_config(config).map_err(EngineError::Invalid)?;
        let max_tool_steps = max_tool_steps(config)?;
        if kind != RuntimeKind::NativeSdk {
            let named = [
                ("budgets", budgets.is_some()),
                ("native_context", context.is_some()),
                ("max_tool_steps", max_tool_steps.is_some()),
            ];
            if let Some((section, _)) = named.iter().find(|(_, set)| *set) {
                return Err(EngineError::invalid(format!(
                    "execution_config.{section} applies to native_sdk agents only, not runtime kind {kind}"
                )));
            }
        }
        Ok(AgentLimits {
            budgets,
            context,
            max_tool_steps,
        })
    }
}

/// `execution_config.max_tool_steps`: a positive integer up to [`MAX_TOOL_STEPS`].
fn max_tool_steps(config: Option<&Value>) -> EngineResult<Option<i64>> {
    let Some(value) = config
        .and_then(|config| config.get("max_tool_steps"))
        .filter(|v| !v.is_null())
    else {
        return Ok(None);
    };
    match value.as_u64().filter(|n| (1..=MAX_TOOL_STEPS).contains(n)) {
        Some(steps) => Ok(Some(steps as i64)),
        None => Err(EngineError::invalid(format!(
            "execution_config.max_tool_steps must be an integer from 1 to {MAX_TOOL_STEPS}, not {value}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn native_agents_read_their_limits_and_cli_agents_may_not_set_them() {
        let config = json!({"max_tool_steps": 400, "budgets": {"max_model_calls": 7},
                            "native_context": {"enabled": true, "context_window": 8192}});
        let limits = AgentLimits::of(RuntimeKind::NativeSdk, Some(&config)).unwrap();
        assert_eq!(limits.max_tool_steps, Some(400));
        assert_eq!(limits.budgets.unwrap().max_model_calls, Some(7));
        assert_eq!(limits.context.unwrap().context_window, 8192);
        let error = AgentLimits::of(RuntimeKind::Codex, Some(&config)).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("execution_config.budgets applies to native_sdk"),
            "{error}"
        );
        for bad in [
            json!({"max_tool_steps": 0}),
            json!({"max_tool_steps": 2001}),
            json!({"max_tool_steps": "9"}),
        ] {
            let error = AgentLimits::of(RuntimeKind::NativeSdk, Some(&bad)).unwrap_err();
            assert!(
                error
                    .to_string()
                    .contains("max_tool_steps must be an integer from 1 to 2000"),
                "{error}"
            );
        }
        let plain = json!({"workspace": {"mode": "host_prepared"}});
        assert_eq!(
            AgentLimits::of(RuntimeKind::Codex, Some(&plain)).unwrap(),
            AgentLimits::default()
        );
    }
}
