//! A run's workspace: the opt-in read from the agent's `execution_config.workspace` (or the
//! run metadata keys), the lease prepared through the `WorkspaceProvider` port and recorded on
//! the run, the tools opened over its root for the owner, finalize before the commit that
//! ends or pauses a turn (its `output_summary` merged into the run's), and cleanup by policy.

use ar_core::event::{self as ev, RunEvent};
use ar_core::host::TargetContext;
use ar_core::store::RunChange;
use ar_core::workspace::{
    CleanupPolicy, CleanupReason, CleanupRequest, FinalizeOutcome, FinalizeRequest, FinalizeResult,
    OpenOptions, PrepareRequest, RunToolHost, WorkspaceAccess, WorkspaceLease, WorkspaceMode,
    WorkspaceRun, WorkspaceSpec,
};
use ar_core::{Agent, JsonMap, Run, RunStatus, WorkspaceState};
use serde_json::Value;
use std::sync::Arc;

use crate::engine::{Decide, Engine};
use crate::error::EngineResult;
use crate::native::Flow;
use crate::owner::Owner;
use crate::records::mark_failed;
use crate::transcript::LoopState;

/// The message a run fails with when its recorded workspace cannot be used any more.
pub(crate) const UNAVAILABLE: &str = "workspace for this run is unavailable";

/// The workspace a run asks for: the agent's `execution_config.workspace`, else the run
/// metadata's `workspace_mode` / `workspace.mode`. `Err` names a value that is not the
/// contract's.
pub(crate) fn requested(agent: &Agent, run: &Run) -> Result<Option<WorkspaceSpec>, String> {
    let config = agent
        .execution_config
        .as_ref()
        .and_then(|config| config.get("workspace"));
    let metadata = run.input.metadata.as_ref();
    let from_metadata = metadata.and_then(|m| {
        m.get("workspace_mode")
            .or_else(|| m.get("workspace.mode"))
            .or_else(|| m.get("workspace").and_then(|w| w.get("mode")))
    });
    let mode = config.and_then(|c| c.get("mode")).or(from_metadata);
    let Some(mode) = mode.filter(|m| !m.is_null() && m.as_str() != Some("")) else {
        return Ok(None);
    };
    let mode = mode
        .as_str()
        .and_then(WorkspaceMode::parse)
        .ok_or_else(|| format!("workspace mode {mode} is not host_prepared or repository"))?;
    let access = match config.and_then(|c| c.get("access")) {
        None | Some(Value::Null) => WorkspaceAccess::default(),
        Some(value) => value
            .as_str()
            .and_then(WorkspaceAccess::parse)
            .ok_or_else(|| format!("workspace access {value} is not read_only or read_write"))?,
    };
    Ok(Some(WorkspaceSpec { mode, access }))
}

fn workspace_run(run: &Run) -> WorkspaceRun {
    WorkspaceRun {
        app_id: run.app_id.clone(),
        run_id: run.id.clone(),
        agent_id: run.agent_id.clone(),
        runtime_kind: run.runtime_kind.to_string(),
        target: run.target.clone(),
    }
}

/// The mode the run's lease was prepared in.
fn mode_of(run: &Run) -> WorkspaceMode {
    run.engine
        .workspace
        .map_or(WorkspaceMode::HostPrepared, |ws| ws.spec.mode)
}

/// The lease a run records, unless its workspace was cleaned.
pub(crate) fn live_lease(run: &Run) -> Option<WorkspaceLease> {
    if run.engine.workspace.is_some_and(|ws| ws.cleaned) {
        return None;
    }
    WorkspaceLease::from_value(run.workspace_lease.as_ref())
}

/// What finalize came to, for the commit that ends or pauses the turn.
pub(crate) struct Finalized {
    lease_id: String,
    outcome: FinalizeOutcome,
    result: Result<FinalizeResult, String>,
    /// What the workspace said about itself before finalize (see [`apply_observed`]).
    observed: JsonMap,
}

/// The keys of an observation that differ from what the lease records (a lease that says
/// nothing of `detached_head` is on its branch).
fn observed_changes(lease: &WorkspaceLease, observed: JsonMap) -> JsonMap {
    observed
        .into_iter()
        .filter(|(key, value)| match lease.metadata.get(key) {
            None => !(key == "detached_head" && value == &Value::Bool(false)),
            Some(recorded) => recorded != value,
        })
        .collect()
}

/// Records what the workspace said about itself (a branch the run created or switched to:
/// `work_branch`; a detached HEAD: `detached_head`, `head_commit`) on the lease and in the
/// run's metadata, so a resume checks for the branch the run is really on.
pub(crate) fn apply_observed(run: &mut Run, observed: &JsonMap) {
    if observed.is_empty() {
        return;
    }
    if let Some(mut lease) = WorkspaceLease::from_value(run.workspace_lease.as_ref()) {
        merge(&mut lease.metadata, observed);
        run.workspace_lease = Some(lease.to_value());
    }
    merge(
        run.input.metadata.get_or_insert_with(JsonMap::new),
        observed,
    );
}

/// Workspace tools after which HEAD may be elsewhere.
pub(crate) fn moves_head(tool: &str) -> bool {
    matches!(tool, "create_branch" | "run_command")
}

impl Engine {
    /// Gives the run its workspace before its turn: the recorded lease reused once its
    /// provider validates it (a read-only checkout that fails is cloned again; any other
    /// fails the run), or a new one prepared. `Stop` when the run failed for want of one.
    pub(crate) async fn ensure_workspace(
        &self,
        run: &mut Run,
        agent: &Agent,
        state: &LoopState,
        owner: &Owner,
    ) -> EngineResult<Flow> {
        let spec = match run.engine.workspace {
            Some(ws) => Ok(Some(ws.spec)),
            None => requested(agent, run),
        };
        let spec = match spec {
            Ok(Some(spec)) => spec,
            Ok(None) => return Ok(Flow::Continue),
            Err(reason) => {
                self.fail_step(run, state, &reason).await?;
                return Ok(Flow::Stop);
            }
        };
        if let Some(lease) = live_lease(run) {
            match self.reopen_workspace(run, &lease, spec).await {
                Ok(tools) => {
                    owner.set_workspace(self.with_provider_tools(run, &lease, spec, tools));
                    return Ok(Flow::Continue);
                }
                // A read-only checkout holds nothing of the run's: clone it again.
                Err(reason)
                    if spec.mode == WorkspaceMode::Repository
                        && spec.access == WorkspaceAccess::ReadOnly =>
                {
                    tracing::info!(run_id = %run.id, %reason, "cloning the read-only checkout again");
                }
                Err(reason) => {
                    self.fail_step(run, state, &format!("{UNAVAILABLE}: {reason}"))
                        .await?;
                    return Ok(Flow::Stop);
                }
            }
        }
        match self.prepare_workspace(run, agent, spec).await {
            Ok((lease, tools)) => {
                self.record_lease(run, &lease, spec).await?;
                owner.set_workspace(self.with_provider_tools(run, &lease, spec, tools));
                Ok(Flow::Continue)
            }
            Err(reason) => {
                self.fail_step(run, state, &reason).await?;
                Ok(Flow::Stop)
            }
        }
    }

    /// The tools over a recorded lease, once its provider says it can still be used.
    async fn reopen_workspace(
        &self,
        run: &Run,
        lease: &WorkspaceLease,
        spec: WorkspaceSpec,
    ) -> Result<Arc<dyn RunToolHost>, String> {
        let Some(provider) = &self.deps().workspaces else {
            return Err("this runtime has no workspace provider".to_string());
        };
        provider
            .validate(&workspace_run(run), spec.mode, lease)
            .await
            .map_err(|error| error.to_string())?;
        self.open_workspace(lease, spec.access)
    }

    /// What changed in the run's workspace that its lease does not record yet (a branch
    /// switched to, HEAD detached); empty when nothing did or the provider cannot tell.
    pub(crate) async fn observe_workspace(&self, run: &Run) -> JsonMap {
        let (Some(lease), Some(provider)) = (live_lease(run), self.deps().workspaces.as_ref())
        else {
            return JsonMap::new();
        };
        match provider.observe(&workspace_run(run), &lease).await {
            Some(observed) => observed_changes(&lease, observed),
            None => JsonMap::new(),
        }
    }

    /// The workspace tools and the provider's own for this lease (a repository's git tools).
    fn with_provider_tools(
        &self,
        run: &Run,
        lease: &WorkspaceLease,
        spec: WorkspaceSpec,
        tools: Arc<dyn RunToolHost>,
    ) -> Arc<dyn RunToolHost> {
        let extra = self
            .deps()
            .workspaces
            .as_ref()
            .and_then(|provider| provider.tools(&workspace_run(run), lease, spec.access));
        match extra {
            Some(extra) => Arc::new(Combined(vec![tools, extra])),
            None => tools,
        }
    }

    fn open_workspace(
        &self,
        lease: &WorkspaceLease,
        access: WorkspaceAccess,
    ) -> Result<Arc<dyn RunToolHost>, String> {
        let Some(opener) = &self.deps().workspace_opener else {
            return Err("this runtime has no workspace tools".to_string());
        };
        opener
            .open(&lease.root_path, access, OpenOptions::of(lease))
            .map_err(|error| error.to_string())
    }

    /// Asks the provider for a lease and opens its root. A lease that cannot be used is
    /// handed back to the provider (cleanup `failed`), so nothing is left half-done.
    async fn prepare_workspace(
        &self,
        run: &Run,
        agent: &Agent,
        spec: WorkspaceSpec,
    ) -> Result<(WorkspaceLease, Arc<dyn RunToolHost>), String> {
        let provider = self
            .deps()
            .workspaces
            .as_ref()
            .filter(|provider| provider.supports(&run.app_id, spec.mode))
            .ok_or_else(|| {
                format!(
                    "app {} has no workspace provider for mode {}",
                    run.app_id,
                    spec.mode.as_str()
                )
            })?;
        let request = PrepareRequest {
            run: workspace_run(run),
            target_context: Some(self.target_context(run).await),
            instructions: run.input.instructions.clone(),
            trigger: run.input.trigger.clone().unwrap_or_default(),
            metadata: run.input.metadata.clone().unwrap_or_default(),
            mode: spec.mode,
            execution_config: agent.execution_config.clone(),
        };
        let lease = provider
            .prepare(&request)
            .await
            .map_err(|error| ar_core::error_chain(&error))?;
        match self.open_workspace(&lease, spec.access) {
            Ok(tools) => Ok((lease, tools)),
            Err(reason) => {
                let cleanup = CleanupRequest {
                    run: workspace_run(run),
                    mode: spec.mode,
                    lease: lease.clone(),
                    reason: CleanupReason::Failed,
                };
                if let Err(error) = provider.cleanup(&cleanup).await {
                    tracing::warn!(run_id = %run.id, %error, "cleanup of an unusable workspace failed");
                }
                Err(format!("workspace {} cannot be used: {reason}", lease.id))
            }
        }
    }

    /// The run's target context for the provider: the host's context endpoint asked once
    /// more (the owner refreshed it when it started: this is the same answer, with its data),
    /// else what the run recorded of it.
    async fn target_context(&self, run: &Run) -> TargetContext {
        let request = crate::context::context_request(run);
        match self.deps().context.resolve(&request).await {
            Ok(context) => context,
            Err(error) => {
                tracing::warn!(run_id = %run.id, %error, "target context for the workspace");
                TargetContext {
                    target: run.target.clone(),
                    summary: run.input.context_summary.clone(),
                    data: JsonMap::new(),
                }
            }
        }
    }

    async fn record_lease(
        &self,
        run: &mut Run,
        lease: &WorkspaceLease,
        spec: WorkspaceSpec,
    ) -> EngineResult<()> {
        let event = RunEvent::WorkspacePrepared(ev::WorkspacePrepared {
            lease_id: lease.id.clone(),
            provider: lease.provider.clone(),
            metadata: lease.metadata.clone(),
            primary: None,
            alias: String::new(),
        });
        self.commit_step(run, |run, change| {
            run.workspace_lease = Some(lease.to_value());
            run.engine.workspace = Some(WorkspaceState {
                spec,
                cleaned: false,
            });
            change.events.push(event.clone());
            Ok(())
        })
        .await?;
        Ok(())
    }

    /// Finalizes the workspace when `build` would end or pause the running turn of a run with
    /// a lease (tried on a copy: `build` is a pure function of the run it is given).
    pub(crate) async fn finalize_if_ending(
        &self,
        run: &Run,
        build: &mut impl FnMut(&mut Run, &mut RunChange) -> EngineResult<()>,
    ) -> Option<Finalized> {
        let lease = live_lease(run)?;
        let provider = self.deps().workspaces.clone()?;
        let mut probe = run.clone();
        let mut probe_change = RunChange::for_run(run);
        build(&mut probe, &mut probe_change).ok()?;
        let outcome = match probe.status() {
            RunStatus::Completed => FinalizeOutcome::Completed,
            RunStatus::Failed => FinalizeOutcome::Failed,
            RunStatus::Paused => FinalizeOutcome::Paused,
            _ => return None,
        };
        let observed = self.observe_workspace(run).await;
        let mut lease = lease;
        merge(&mut lease.metadata, &observed);
        let request = FinalizeRequest {
            run: workspace_run(run),
            mode: mode_of(run),
            lease: lease.clone(),
            outcome,
            error_message: probe.error_message.clone(),
            output_summary: probe.output_summary.clone(),
        };
        let result = provider
            .finalize(&request)
            .await
            .map_err(|error| ar_core::error_chain(&error));
        Some(Finalized {
            lease_id: lease.id,
            outcome,
            result,
            observed,
        })
    }

    /// Cleans the run's workspace when its policy says so for the state it is in now.
    pub(crate) async fn clean_workspace(&self, app_id: &str, run_id: &str) {
        let Ok(Some(run)) = self.deps().store.get_run(app_id, run_id).await else {
            return;
        };
        if run.is_terminal() {
            self.remove_skill_staging(run_id).await;
        }
        let (Some(lease), Some(provider)) = (live_lease(&run), self.deps().workspaces.clone())
        else {
            return;
        };
        let Some(reason) = cleanup_due(lease.cleanup(), run.status()) else {
            return;
        };
        let request = CleanupRequest {
            run: workspace_run(&run),
            mode: mode_of(&run),
            lease: lease.clone(),
            reason,
        };
        if let Err(error) = provider.cleanup(&request).await {
            tracing::warn!(run_id, error = %ar_core::error_chain(&error), "workspace cleanup failed");
            return;
        }
        let result = self
            .transact(app_id, run_id, Some(run), |run, change| {
                let Some(ws) = run.engine.workspace.as_mut().filter(|ws| !ws.cleaned) else {
                    return Ok(Decide::Skip(()));
                };
                ws.cleaned = true;
                change
                    .events
                    .push(RunEvent::WorkspaceCleaned(ev::WorkspaceCleaned {
                        lease_id: lease.id.clone(),
                        reason: reason.as_str().to_string(),
                    }));
                Ok(Decide::Commit(()))
            })
            .await;
        if let Err(error) = result {
            tracing::warn!(run_id, %error, "could not record the workspace cleanup");
        }
    }
}

/// Why the workspace is cleaned now, if its policy cleans it in `status`.
fn cleanup_due(policy: CleanupPolicy, status: RunStatus) -> Option<CleanupReason> {
    let reason = match status {
        RunStatus::Completed => CleanupReason::Completed,
        RunStatus::Failed => CleanupReason::Failed,
        RunStatus::Cancelled => CleanupReason::Cancelled,
        RunStatus::Paused => CleanupReason::Paused,
        RunStatus::Queued | RunStatus::Running => return None,
    };
    match policy {
        CleanupPolicy::Manual => None,
        CleanupPolicy::OnTerminal if reason == CleanupReason::Paused => None,
        CleanupPolicy::OnTerminal | CleanupPolicy::Always => Some(reason),
    }
}

/// Applies what finalize came to on the commit that ends or pauses the turn: its summary and
/// metadata merged, `workspace.finalized` before the run's own event. A completion whose
/// finalize failed fails the run instead (what was delivered is unknown).
pub(crate) fn apply_finalized(
    run: &mut Run,
    before: &Run,
    change: &mut RunChange,
    finalized: &Finalized,
    now: chrono::DateTime<chrono::Utc>,
) -> EngineResult<()> {
    apply_observed(run, &finalized.observed);
    let result = match &finalized.result {
        Ok(result) => result,
        Err(reason) if run.status() == RunStatus::Completed => {
            run.state = before.state;
            run.completed_at = before.completed_at;
            change
                .events
                .retain(|event| !matches!(event, RunEvent::RunCompleted(_)));
            let message = format!("workspace finalize failed: {reason}");
            return mark_failed(run, change, &message, None, now);
        }
        Err(reason) => {
            tracing::warn!(run_id = %run.id, %reason, "workspace finalize failed");
            return Ok(());
        }
    };
    merge(&mut run.output_summary, &result.output_summary);
    if let Some(mut lease) = WorkspaceLease::from_value(run.workspace_lease.as_ref()) {
        merge(&mut lease.metadata, &result.metadata);
        run.workspace_lease = Some(lease.to_value());
    }
    let event = RunEvent::WorkspaceFinalized(ev::WorkspaceFinalized {
        lease_id: finalized.lease_id.clone(),
        outcome: finalized.outcome.as_str().to_string(),
    });
    let at = change
        .events
        .iter()
        .position(|event| {
            matches!(
                event,
                RunEvent::RunCompleted(_) | RunEvent::RunFailed(_) | RunEvent::RunPaused(_)
            )
        })
        .unwrap_or(change.events.len());
    change.events.insert(at, event);
    Ok(())
}

/// Several tool hosts as one: each call goes to the first that defines the tool.
struct Combined(Vec<Arc<dyn RunToolHost>>);

#[async_trait::async_trait]
impl RunToolHost for Combined {
    fn definitions(&self) -> Vec<ar_core::tool::ToolDefinition> {
        self.0.iter().flat_map(|host| host.definitions()).collect()
    }

    async fn call(&self, name: &str, input: Value) -> ar_core::tool::ToolOutput {
        for host in &self.0 {
            if host.definitions().iter().any(|tool| tool.name == name) {
                return host.call(name, input).await;
            }
        }
        ar_core::tool::ToolOutput::error(format!("unknown workspace tool {name:?}"))
    }
}

fn merge(into: &mut JsonMap, from: &JsonMap) {
    for (key, value) in from {
        into.insert(key.clone(), value.clone());
    }
}

#[cfg(test)]
mod tests;
