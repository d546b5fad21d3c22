//! A run's budgets: the most tokens, model calls and running time it may spend. An agent sets
//! them in `execution_config.budgets`; the run keeps its own copy from admission, which a
//! resume may raise. The engine checks them before every model call and pauses the run
//! (`pause_reason: budget`) before the call that would go past one.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The keys of `execution_config.budgets`.
pub const BUDGET_KEYS: [&str; 3] = [
    "max_total_tokens",
    "max_model_calls",
    "max_wall_time_seconds",
];

/// The budgets of a run; `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunBudgets {
    /// Input and output tokens of all the run's model calls (summaries included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_total_tokens: Option<u64>,
    /// Model calls of the run (summaries included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_model_calls: Option<u64>,
    /// Seconds the run has spent running (time paused waiting for a person or the host is not
    /// counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wall_time_seconds: Option<u64>,
}

/// Which budget a run spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetLimit {
    MaxTotalTokens,
    MaxModelCalls,
    MaxWallTimeSeconds,
}

impl BudgetLimit {
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetLimit::MaxTotalTokens => "max_total_tokens",
            BudgetLimit::MaxModelCalls => "max_model_calls",
            BudgetLimit::MaxWallTimeSeconds => "max_wall_time_seconds",
        }
    }
}

/// What a run has spent, and what its next model call would add.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BudgetSpend {
    /// Input plus output tokens so far.
    pub tokens: u64,
    /// The next call's input, as estimated.
    pub next_input_tokens: u64,
    /// Model calls made so far.
    pub model_calls: u64,
    /// Seconds spent running so far.
    pub running_seconds: u64,
}

/// The budget the next model call would go past: its limit, what it allows, what the run has
/// spent, and what the call needs (a raised budget must allow at least that much).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetExceeded {
    pub limit: BudgetLimit,
    pub allowed: u64,
    pub used: u64,
    pub needed: u64,
}

impl std::fmt::Display for BudgetExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (limit, allowed, used) = (self.limit.as_str(), self.allowed, self.used);
        match self.limit {
            BudgetLimit::MaxTotalTokens => write!(
                f,
                "budget {limit} reached: {used} of {allowed} tokens used, the next model call needs about {} more",
                self.needed.saturating_sub(used)
            ),
            BudgetLimit::MaxModelCalls => {
                write!(f, "budget {limit} reached: {used} of {allowed} model calls made")
            }
            BudgetLimit::MaxWallTimeSeconds => {
                write!(f, "budget {limit} reached: {used} of {allowed} seconds spent running")
            }
        }
    }
}

impl RunBudgets {
    /// Reads a `budgets` object (`where_` names it in errors): only the known keys, each a
    /// positive integer (`null` leaves it unset).
    pub fn parse(value: &Value, where_: &str) -> Result<RunBudgets, String> {
        let Some(object) = value.as_object() else {
            return Err(format!("{where_} must be an object"));
        };
        let mut budgets = RunBudgets::default();
        for (key, value) in object {
            let slot = match key.as_str() {
                "max_total_tokens" => &mut budgets.max_total_tokens,
                "max_model_calls" => &mut budgets.max_model_calls,
                "max_wall_time_seconds" => &mut budgets.max_wall_time_seconds,
                other => {
                    return Err(format!(
                        "{where_}: unknown budget {other:?} (expected {})",
                        BUDGET_KEYS.join(", ")
                    ))
                }
            };
            if value.is_null() {
                continue;
            }
            match value.as_u64().filter(|n| *n > 0 && *n <= i64::MAX as u64) {
                Some(n) => *slot = Some(n),
                None => {
                    return Err(format!(
                        "{where_}.{key} must be a positive integer, not {value}"
                    ))
                }
            }
        }
        Ok(budgets)
    }

    /// The budgets an agent's `execution_config` sets: `budgets`, and the original's
    /// `native_context.max_total_tokens` (the lower of the two token budgets wins). `None`
    /// when it sets none.
    pub fn from_execution_config(config: Option<&Value>) -> Result<Option<RunBudgets>, String> {
        let Some(config) = config.and_then(Value::as_object) else {
            return Ok(None);
        };
        let mut budgets = match config.get("budgets").filter(|v| !v.is_null()) {
            Some(value) => RunBudgets::parse(value, "execution_config.budgets")?,
            None => RunBudgets::default(),
        };
        let legacy = config
            .get("native_context")
            .and_then(|context| context.get("max_total_tokens"))
            .filter(|v| !v.is_null());
        if let Some(value) = legacy {
            let tokens = value.as_u64().ok_or_else(|| {
                format!("execution_config.native_context.max_total_tokens must be a nonnegative integer, not {value}")
            })?;
            if tokens > 0 {
                budgets.max_total_tokens = Some(
                    budgets
                        .max_total_tokens
                        .map_or(tokens, |own| own.min(tokens)),
                );
            }
        }
        Ok((budgets != RunBudgets::default()).then_some(budgets))
    }

    /// These budgets with each one `raise` sets replacing this one's.
    pub fn raised_by(self, raise: RunBudgets) -> RunBudgets {
        RunBudgets {
            max_total_tokens: raise.max_total_tokens.or(self.max_total_tokens),
            max_model_calls: raise.max_model_calls.or(self.max_model_calls),
            max_wall_time_seconds: raise.max_wall_time_seconds.or(self.max_wall_time_seconds),
        }
    }

    /// The budget the next model call would go past, if any (calls first, then time, then
    /// tokens).
    pub fn exceeded(&self, spend: &BudgetSpend) -> Option<BudgetExceeded> {
        let over = |limit, allowed: Option<u64>, used: u64, needed: u64| {
            allowed
                .filter(|allowed| needed > *allowed)
                .map(|allowed| BudgetExceeded {
                    limit,
                    allowed,
                    used,
                    needed,
                })
        };
        over(
            BudgetLimit::MaxModelCalls,
            self.max_model_calls,
            spend.model_calls,
            spend.model_calls + 1,
        )
        .or_else(|| {
            over(
                BudgetLimit::MaxWallTimeSeconds,
                self.max_wall_time_seconds,
                spend.running_seconds,
                spend.running_seconds,
            )
        })
        .or_else(|| {
            over(
                BudgetLimit::MaxTotalTokens,
                self.max_total_tokens,
                spend.tokens,
                spend.tokens + spend.next_input_tokens,
            )
        })
    }

    /// What this budget allows of `limit`.
    pub fn allowed(&self, limit: BudgetLimit) -> Option<u64> {
        match limit {
            BudgetLimit::MaxTotalTokens => self.max_total_tokens,
            BudgetLimit::MaxModelCalls => self.max_model_calls,
            BudgetLimit::MaxWallTimeSeconds => self.max_wall_time_seconds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn budgets_are_positive_integers_of_known_names() {
        let ok = RunBudgets::parse(
            &json!({"max_total_tokens": 1000, "max_model_calls": 3, "max_wall_time_seconds": null}),
            "b",
        )
        .unwrap();
        assert_eq!(ok.max_total_tokens, Some(1000));
        assert_eq!(ok.max_model_calls, Some(3));
        assert_eq!(ok.max_wall_time_seconds, None);
        for (bad, says) in [
            (json!({"max_cost": 5}), "unknown budget \"max_cost\""),
            (
                json!({"max_model_calls": 0}),
                "b.max_model_calls must be a positive integer",
            ),
            (json!({"max_model_calls": -2}), "positive integer"),
            (json!({"max_model_calls": 2.5}), "positive integer"),
            (json!({"max_total_tokens": "100"}), "positive integer"),
            (json!([1]), "must be an object"),
        ] {
            let error = RunBudgets::parse(&bad, "b").unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    #[test]
    fn the_agents_config_sets_them_with_the_originals_token_budget() {
        assert_eq!(RunBudgets::from_execution_config(None).unwrap(), None);
        assert_eq!(
            RunBudgets::from_execution_config(Some(&json!({"workspace": {}}))).unwrap(),
            None
        );
        let both = json!({"budgets": {"max_total_tokens": 5000, "max_model_calls": 9},
                          "native_context": {"max_total_tokens": 3000}});
        let budgets = RunBudgets::from_execution_config(Some(&both))
            .unwrap()
            .unwrap();
        assert_eq!(budgets.max_total_tokens, Some(3000));
        assert_eq!(budgets.max_model_calls, Some(9));
        let bad = json!({"native_context": {"max_total_tokens": -1}});
        assert!(RunBudgets::from_execution_config(Some(&bad)).is_err());
    }

    #[test]
    fn the_call_that_would_go_past_a_budget_is_found_before_it_is_made() {
        let budgets = RunBudgets {
            max_total_tokens: Some(1000),
            max_model_calls: Some(3),
            max_wall_time_seconds: Some(60),
        };
        let spend = BudgetSpend {
            tokens: 600,
            next_input_tokens: 300,
            model_calls: 2,
            running_seconds: 10,
        };
        assert_eq!(budgets.exceeded(&spend), None);
        let third = BudgetSpend {
            model_calls: 3,
            ..spend
        };
        let exceeded = budgets.exceeded(&third).unwrap();
        assert_eq!(
            (exceeded.limit, exceeded.used, exceeded.needed),
            (BudgetLimit::MaxModelCalls, 3, 4)
        );
        let long = BudgetSpend {
            next_input_tokens: 500,
            ..spend
        };
        let exceeded = budgets.exceeded(&long).unwrap();
        assert_eq!(
            (exceeded.limit, exceeded.allowed, exceeded.needed),
            (BudgetLimit::MaxTotalTokens, 1000, 1100)
        );
        assert!(
            exceeded.to_string().contains("600 of 1000 tokens"),
            "{exceeded}"
        );
        let slow = BudgetSpend {
            running_seconds: 61,
            ..spend
        };
        assert_eq!(
            budgets.exceeded(&slow).map(|e| e.limit),
            Some(BudgetLimit::MaxWallTimeSeconds)
        );
        let raised = budgets.raised_by(RunBudgets {
            max_model_calls: Some(10),
            ..RunBudgets::default()
        });
        assert_eq!(raised.exceeded(&third), None);
        assert_eq!(raised.max_total_tokens, Some(1000));
    }
}
