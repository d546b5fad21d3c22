//! Experiment budgets on the runtime side: runs reserved at admission, tokens charged at the end, failed runs counted.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::wire::Budget;

/// Kind of the rejection reason when an experiment's budget is spent.
pub const REASON_BUDGET_EXCEEDED: &str = "budget_exceeded";

#[derive(Debug, Default, Clone, Copy)]
struct Spent {
    runs: i64,
    tokens: i64,
}

/// Per-experiment spending against the registration's caps.
#[derive(Debug, Default)]
pub(crate) struct Budgets {
    spent: Mutex<HashMap<String, Spent>>,
}

impl Budgets {
    /// Reserves one run for `experiment`; the message says why when the cap is reached.
    pub(crate) fn reserve(&self, experiment: &str, caps: Budget) -> Result<(), String> {
        if experiment.is_empty() {
            return Ok(());
        }
        let mut spent = self.spent.lock();
        let s = spent.entry(experiment.to_string()).or_default();
        if caps.max_runs_per_experiment > 0 && s.runs >= caps.max_runs_per_experiment {
            return Err(format!(
                "budget_exceeded: experiment {experiment} used its {} runs",
                caps.max_runs_per_experiment
            ));
        }
        if caps.max_tokens_per_experiment > 0 && s.tokens >= caps.max_tokens_per_experiment {
            return Err(format!(
                "budget_exceeded: experiment {experiment} used its {} tokens",
                caps.max_tokens_per_experiment
            ));
        }
        s.runs += 1;
        Ok(())
    }

    /// Charges the tokens a run used.
    pub(crate) fn charge(&self, experiment: &str, tokens: i64) {
        if experiment.is_empty() || tokens <= 0 {
            return;
        }
        let mut spent = self.spent.lock();
        let s = spent.entry(experiment.to_string()).or_default();
        s.tokens = s.tokens.saturating_add(tokens);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserves_runs_and_charges_tokens() {
        let b = Budgets::default();
        let caps = Budget {
            max_runs_per_experiment: 2,
            max_tokens_per_experiment: 100,
        };
        assert!(b.reserve("e", caps).is_ok());
        b.charge("e", 100);
        assert!(b.reserve("e", caps).is_err());
        let runs_only = Budget {
            max_runs_per_experiment: 1,
            max_tokens_per_experiment: 0,
        };
        assert!(b.reserve("f", runs_only).is_ok());
        assert!(b.reserve("f", runs_only).is_err());
        assert!(b.reserve("", runs_only).is_ok());
    }
}
