//! A run's budgets checked before every model call: the run pauses (`pause_reason: budget`,
//! with a pending `budget` interaction saying which limit and how much more the call needs)
//! before the call that would go past one. A resume that raises the budget lets it go on.

use ar_core::budget::{BudgetExceeded, BudgetSpend};
use ar_core::records::interaction_kind;
use ar_core::{PauseReason, Run};
use serde_json::json;

use crate::engine::Engine;
use crate::error::EngineResult;
use crate::records::{interaction, mark_paused};
use crate::transcript::LoopState;

use super::Flow;

impl Engine {
    /// `Stop` (the run paused) when the next model call would go past one of the run's
    /// budgets; `next_input` estimates its input tokens (asked only for a token budget).
    pub(super) async fn within_budget(
        &self,
        run: &mut Run,
        state: &LoopState,
        next_input: impl FnOnce() -> u64,
    ) -> EngineResult<Flow> {
        let Some(budgets) = run.engine.budgets else {
            return Ok(Flow::Continue);
        };
        let usage = state.usage;
        let spend = BudgetSpend {
            tokens: u64::try_from(usage.input_tokens + usage.output_tokens).unwrap_or(0),
            next_input_tokens: if budgets.max_total_tokens.is_some() {
                next_input()
            } else {
                0
            },
            model_calls: state.model_calls,
            running_seconds: state.running_ms / 1000,
        };
        let Some(exceeded) = budgets.exceeded(&spend) else {
            return Ok(Flow::Continue);
        };
        self.pause_for_budget(run, state, exceeded).await?;
        Ok(Flow::Stop)
    }

    async fn pause_for_budget(
        &self,
        run: &mut Run,
        state: &LoopState,
        exceeded: BudgetExceeded,
    ) -> EngineResult<()> {
        let now = self.now();
        let checkpoint = self.checkpoint(run, state);
        let reason = exceeded.to_string();
        self.commit_step(run, |run, change| {
            let payload = json!({
                "limit": exceeded.limit,
                "allowed": exceeded.allowed,
                "used": exceeded.used,
                "needed": exceeded.needed,
                "budgets": run.engine.budgets,
            });
            change.interactions.push(interaction(
                run,
                interaction_kind::BUDGET,
                "Budget reached",
                &reason,
                payload,
                now,
            ));
            mark_paused(run, change, PauseReason::Budget)?;
            change.checkpoint = Some(checkpoint.clone());
            Ok(())
        })
        .await?;
        Ok(())
    }
}
