//! Keeping the next request inside the model's context window (`execution_config.
//! native_context`): old tool outputs cut first, then a summary turn replacing the oldest
//! turns, each compaction committed with its checkpoint and its `context.compaction_*` events.
//! The pure steps are in `crate::context`.

use ar_core::event::{self as ev, RunEvent};
use ar_core::model::{ModelError, ModelRequest, ModelResponse};
use ar_core::Run;

use crate::engine::Engine;
use crate::error::EngineResult;
use crate::owner::Owner;
use crate::transcript::LoopState;
use crate::window::{
    estimate, recent_start, replace_with_summary, summary_request, trim_old_outputs, ContextPolicy,
};

use super::*;

/// What the loop knows about its context for the turn: the policy, the estimate of the tools
/// every request declares, and below which estimate a failed summary is not tried again.
pub(super) struct ContextFit {
    pub(super) policy: ContextPolicy,
    pub(super) tools_tokens: u64,
    pub(super) retry_above: u64,
}

impl ContextFit {
    /// The estimated input of the next request.
    pub(super) fn next_input(&self, state: &LoopState) -> u64 {
        estimate(&state.transcript) + self.tools_tokens
    }
}

/// How a summary turn ended.
enum Summary {
    Text(String),
    /// It could not be had; the reason.
    Failed(String),
    /// The run stopped meanwhile (paused, ended, or handed over).
    Stopped,
}

impl Engine {
    /// Makes the next request fit: nothing below the trigger (unless `force`d after the
    /// provider refused the window), else old tool outputs cut, else a summary turn; a request
    /// still over the input limit has its newest outputs cut too, or fails the run. `Stop`
    /// when the run stopped (paused, failed, or no longer ours).
    pub(super) async fn fit_context(
        &self,
        run: &mut Run,
        state: &mut LoopState,
        fit: &mut ContextFit,
        (owner, route): (&mut Owner, &mut CachedRoute),
        force: bool,
    ) -> EngineResult<Flow> {
        let policy = fit.policy;
        let before = fit.next_input(state);
        let deferred = before < fit.retry_above && before <= policy.input_limit;
        if !force && (before < policy.trigger_tokens || deferred) {
            return Ok(Flow::Continue);
        }
        let recent = recent_start(&state.transcript, policy.keep_recent_tokens);
        let trimmed = trim_old_outputs(&mut state.transcript, recent, &policy);
        let after_trim = fit.next_input(state);
        let flow = if after_trim < policy.trigger_tokens && !force {
            let event = compacted(state, before, after_trim, trimmed, 0);
            self.commit_compaction(run, state, event).await?
        } else {
            let old = (recent, before, trimmed);
            self.summarize_old_turns(run, state, fit, (owner, route), old)
                .await?
        };
        if let Flow::Stop = flow {
            return Ok(Flow::Stop);
        }
        if fit.next_input(state) <= policy.input_limit {
            return Ok(Flow::Continue);
        }
        // Over the limit still: the newest outputs are cut as well, as a last resort.
        let len = state.transcript.len();
        trim_old_outputs(&mut state.transcript, len, &policy);
        let last = fit.next_input(state);
        if last <= policy.input_limit {
            return Ok(Flow::Continue);
        }
        self.cannot_fit(
            run,
            state,
            fit,
            last,
            "even the newest tool outputs are cut",
        )
        .await
    }

    /// The summary turn over the messages before `recent`, replacing them when it shrinks the
    /// context enough (`before` tokens, `trimmed` outputs cut just before).
    async fn summarize_old_turns(
        &self,
        run: &mut Run,
        state: &mut LoopState,
        fit: &mut ContextFit,
        (owner, route): (&mut Owner, &mut CachedRoute),
        (recent, before, trimmed): (usize, u64, usize),
    ) -> EngineResult<Flow> {
        let policy = fit.policy;
        let after_trim = fit.next_input(state);
        if recent < 2 {
            let reason = "nothing old enough to summarize";
            return self.cannot_fit(run, state, fit, after_trim, reason).await;
        }
        let request = summary_request(&state.transcript, recent, &policy);
        let summary_input = || estimate(&request.messages);
        if let Flow::Stop = self.within_budget(run, state, summary_input).await? {
            return Ok(Flow::Stop);
        }
        let started = RunEvent::ContextCompactionStarted(ev::ContextCompactionStarted {
            generation: state.compactions + 1,
            estimated_input_tokens: after_trim,
        });
        let flow = self
            .commit_step(run, |_, change| {
                change.events.push(started.clone());
                Ok(())
            })
            .await?;
        if let Flow::Stop = flow {
            return Ok(Flow::Stop);
        }
        let text = match self.summarize(run, state, &request, (owner, route)).await? {
            Summary::Text(text) => text,
            Summary::Stopped => return Ok(Flow::Stop),
            Summary::Failed(reason) => {
                return self.cannot_fit(run, state, fit, after_trim, &reason).await
            }
        };
        let compacted_transcript = replace_with_summary(&state.transcript, recent, &text);
        let after = estimate(&compacted_transcript) + fit.tools_tokens;
        if after >= policy.trigger_tokens.min(after_trim * 9 / 10) {
            let reason = format!("the summary left the context at about {after} tokens");
            return self.cannot_fit(run, state, fit, after_trim, &reason).await;
        }
        state.transcript = compacted_transcript;
        state.compactions += 1;
        fit.retry_above = 0;
        let event = compacted(state, before, after, trimmed, recent - 1);
        self.commit_compaction(run, state, event).await
    }

    /// Commits the compacted transcript as a checkpoint, with its event.
    async fn commit_compaction(
        &self,
        run: &mut Run,
        state: &LoopState,
        event: RunEvent,
    ) -> EngineResult<Flow> {
        let checkpoint = self.checkpoint(run, state);
        self.commit_step(run, |_, change| {
            change.events.push(event.clone());
            change.checkpoint = Some(checkpoint.clone());
            Ok(())
        })
        .await
    }

    /// A compaction that did not work: `context.compaction_failed`; the run fails when the next
    /// request cannot fit its input limit, else it goes on and tries again once the context
    /// has grown by an eighth of the trigger (at least 1024 tokens).
    async fn cannot_fit(
        &self,
        run: &mut Run,
        state: &LoopState,
        fit: &mut ContextFit,
        estimate: u64,
        reason: &str,
    ) -> EngineResult<Flow> {
        let policy = fit.policy;
        let failed = RunEvent::ContextCompactionFailed(ev::ContextCompactionFailed {
            generation: state.compactions + 1,
            error: reason.to_string(),
        });
        if estimate <= policy.input_limit {
            fit.retry_above = estimate + (policy.trigger_tokens / 8).max(1024);
            tracing::warn!(run_id = %run.id, reason, "context compaction deferred");
            return self
                .commit_step(run, |_, change| {
                    change.events.push(failed.clone());
                    Ok(())
                })
                .await;
        }
        let message = format!(
            "the next model request (about {estimate} tokens) exceeds the context's input limit of {} tokens and could not be compacted: {reason}",
            policy.input_limit
        );
        let usage = state.usage;
        let checkpoint = self.checkpoint(run, state);
        self.commit_step(run, |run, change| {
            change.events.push(failed.clone());
            change.checkpoint = Some(checkpoint.clone());
            crate::records::mark_failed(run, change, &message, Some(&usage), self.now())
        })
        .await?;
        Ok(Flow::Stop)
    }

    /// The summary turn on the run's route (its credential renewed after a 401 like any call),
    /// counted in the run's usage and model calls.
    async fn summarize(
        &self,
        run: &mut Run,
        state: &mut LoopState,
        request: &ModelRequest,
        (owner, cache): (&mut Owner, &mut CachedRoute),
    ) -> EngineResult<Summary> {
        let mut renewed = false;
        loop {
            let Some(route) = self.current_route(run, state, owner, cache).await? else {
                return Ok(Summary::Stopped);
            };
            let models = self.deps().models.clone();
            let call = async {
                let mut ignore = |_: ar_core::model::StreamDelta| {};
                models.complete(route, request, &mut ignore).await
            };
            state.model_calls += 1;
            let answer = tokio::select! {
                answer = call => answer,
                () = owner.inbox.stopped_or_paused() => {
                    self.safe_point(run, state, owner).await?;
                    return Ok(Summary::Stopped);
                }
            };
            match answer {
                Ok(response) => {
                    state.usage.add(&response.usage);
                    return Ok(summary_text(response));
                }
                Err(ModelError::Authentication(reason)) => {
                    if !renewed && self.renew_after_rejection(run).await {
                        renewed = true;
                        cache.0 = None;
                        continue;
                    }
                    self.pause_for_authentication(run, state, &reason).await?;
                    return Ok(Summary::Stopped);
                }
                Err(error) => return Ok(Summary::Failed(error.to_string())),
            }
        }
    }
}

/// The summary a response carries, or why it is not one.
fn summary_text(response: ModelResponse) -> Summary {
    if !response.tool_calls.is_empty() {
        return Summary::Failed("the summary turn called tools".to_string());
    }
    if response.finish_reason == "length" {
        return Summary::Failed("the summary was cut off at its output limit".to_string());
    }
    if response.text.trim().is_empty() {
        return Summary::Failed("the summary turn returned no text".to_string());
    }
    Summary::Text(response.text)
}

/// `context.compaction_completed` for a compaction from `before` to `after` tokens.
fn compacted(
    state: &LoopState,
    before: u64,
    after: u64,
    trimmed: usize,
    summarized: usize,
) -> RunEvent {
    RunEvent::ContextCompactionCompleted(ev::ContextCompactionCompleted {
        generation: state.compactions,
        estimated_before: before,
        estimated_after: after,
        trimmed_tool_outputs: trimmed as u64,
        summarized_messages: summarized as u64,
    })
}
