//! Target context at every turn: the host's context endpoint is asked again each time a run's
//! owner starts executing, so the model sees the target as it is now, not as it was at start;
//! and the text that tells an agent (native or CLI) which target it works on.

use ar_core::host::ContextRequest;
use ar_core::{Run, RunStatus};

use crate::engine::{Decide, Engine};
use crate::error::EngineResult;
use crate::records::mark_failed;

impl Engine {
    /// Re-resolves the run's target context; stores a changed summary. `None` when the run
    /// failed because the context could not be obtained (or stopped running meanwhile).
    pub(crate) async fn refresh_context(&self, run: Run) -> EngineResult<Option<Run>> {
        let resolved = self.deps().context.resolve(&context_request(&run)).await;
        let now = self.now();
        let app_id = run.app_id.clone();
        let run_id = run.id.clone();
        match resolved {
            Ok(context) if context.summary == run.input.context_summary => Ok(Some(run)),
            Ok(context) => {
                let (run, _, proceed) = self
                    .transact(&app_id, &run_id, Some(run), |run, _| {
                        if run.status() != RunStatus::Running {
                            return Ok(Decide::Skip(false));
                        }
                        run.input.context_summary = context.summary.clone();
                        Ok(Decide::Commit(true))
                    })
                    .await?;
                Ok(proceed.then_some(run))
            }
            Err(error) => {
                let message = error.to_string();
                self.transact(&app_id, &run_id, Some(run), |run, change| {
                    if run.is_terminal() {
                        return Ok(Decide::Skip(()));
                    }
                    mark_failed(run, change, &message, None, now)?;
                    Ok(Decide::Commit(()))
                })
                .await?;
                Ok(None)
            }
        }
    }
}

/// What the host's context endpoint is asked about `run`.
pub(crate) fn context_request(run: &Run) -> ContextRequest {
    ContextRequest {
        app_id: run.app_id.clone(),
        run_id: run.id.clone(),
        agent_id: run.agent_id.clone(),
        target: run.target.clone(),
        trigger: run.input.trigger.clone(),
        metadata: run.input.metadata.clone(),
    }
}

/// `Target: <type> <id> (<title>)`, then the context summary the host supplied, if any.
pub(crate) fn target_brief(run: &Run) -> String {
    let mut text = format!("Target: {} {}", run.target.target_type, run.target.id);
    if let Some(display) = &run.target.display {
        if !display.title.is_empty() {
            text.push_str(&format!(" ({})", display.title));
        }
    }
    if !run.input.context_summary.is_empty() {
        text.push_str("\n\nContext:\n");
        text.push_str(&run.input.context_summary);
    }
    text
}
