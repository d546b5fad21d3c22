//! [`MeteredStore`]: the service's store, with each commit timed and read for what it says
//! about runs (status changes, finished tool calls, checkpointed steps).

use std::sync::Arc;
use std::time::Instant;

use ar_core::event::RunEvent;
use ar_core::store::*;
use ar_core::{Agent, Run, RunStatus};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use dashmap::DashMap;

use super::{Metrics, StatusLabel, ToolLabels};

/// A [`Store`] that records [`Metrics`] around the one it wraps.
pub struct MeteredStore {
    inner: Arc<dyn Store>,
    metrics: Arc<Metrics>,
    /// When each executing run's current step began (its start, resumption or last step).
    steps: DashMap<String, Instant>,
}

/// What a change says, read before the store consumes it (nothing of it is cloned but the
/// finished tool calls' names).
struct Seen {
    run_id: String,
    /// The run's status after the change, and when it started.
    status: Option<(RunStatus, Option<DateTime<Utc>>)>,
    /// Statuses entered, as `run.*` events say.
    entered: Vec<RunStatus>,
    /// Finished tool calls: name, whether it failed, milliseconds.
    tools: Vec<(String, bool, u64)>,
    checkpoint: bool,
}

impl Seen {
    fn of(change: &RunChange) -> Seen {
        let mut seen = Seen {
            run_id: change.run_id.clone(),
            status: change
                .run
                .as_ref()
                .map(|run| (run.status(), run.started_at)),
            entered: Vec::new(),
            tools: Vec::new(),
            checkpoint: change.checkpoint.is_some(),
        };
        for event in &change.events {
            match event {
                RunEvent::RunQueued(_) => seen.entered.push(RunStatus::Queued),
                RunEvent::RunStarted(_) | RunEvent::RunResumed(_) => {
                    seen.entered.push(RunStatus::Running)
                }
                RunEvent::RunPaused(_) => seen.entered.push(RunStatus::Paused),
                RunEvent::RunCompleted(_) => seen.entered.push(RunStatus::Completed),
                RunEvent::RunFailed(_) => seen.entered.push(RunStatus::Failed),
                RunEvent::RunCancelled(_) => seen.entered.push(RunStatus::Cancelled),
                RunEvent::ToolCallFinished(finished) => seen.tools.push((
                    finished.tool_name.clone(),
                    !finished.error.is_empty(),
                    finished.duration_ms,
                )),
                _ => {}
            }
        }
        seen
    }
}

impl MeteredStore {
    pub fn wrap(inner: Arc<dyn Store>, metrics: Arc<Metrics>) -> Arc<dyn Store> {
        Arc::new(MeteredStore {
            inner,
            metrics,
            steps: DashMap::new(),
        })
    }

    /// Records a committed change: its time, the statuses entered, the tool calls finished,
    /// and the step it ends.
    fn observe(&self, seen: Seen, started: Instant) {
        let now = Instant::now();
        let metrics = &self.metrics;
        metrics
            .commit_seconds
            .observe(now.duration_since(started).as_secs_f64());
        for status in &seen.entered {
            let label = StatusLabel {
                status: status.as_str(),
            };
            metrics.run_transitions.get_or_create(&label).inc();
            if let (true, Some((_, Some(began)))) = (status.is_terminal(), seen.status) {
                let took = (Utc::now() - began).num_microseconds().unwrap_or(0) as f64 / 1e6;
                metrics
                    .run_seconds
                    .get_or_create(&label)
                    .observe(took.max(0.0));
            }
        }
        for (tool, failed, millis) in seen.tools {
            let outcome = if failed { "error" } else { "ok" };
            let labels = ToolLabels { tool, outcome };
            metrics.tool_calls.get_or_create(&labels).inc();
            let seconds = millis as f64 / 1000.0;
            metrics.tool_seconds.get_or_create(&labels).observe(seconds);
        }
        self.observe_step(
            &seen.run_id,
            seen.status.map(|(status, _)| status),
            seen.checkpoint,
            now,
        );
    }

    /// A step ends with a checkpoint; one begins when the run starts or resumes, or after the
    /// previous step; a paused or ended run has none.
    fn observe_step(
        &self,
        run_id: &str,
        status: Option<RunStatus>,
        checkpoint: bool,
        now: Instant,
    ) {
        if checkpoint {
            if let Some(mut began) = self.steps.get_mut(run_id) {
                let step = now.duration_since(*began);
                self.metrics.step_seconds.observe(step.as_secs_f64());
                *began = now;
            }
        }
        match status {
            Some(RunStatus::Running) if !self.steps.contains_key(run_id) => {
                self.steps.insert(run_id.to_string(), now);
            }
            Some(status) if status != RunStatus::Running => {
                self.steps.remove(run_id);
            }
            _ => {}
        }
    }
}

#[async_trait]
impl Store for MeteredStore {
    fn driver(&self) -> &'static str {
        self.inner.driver()
    }
    fn in_memory(&self) -> bool {
        self.inner.in_memory()
    }
    async fn ping(&self) -> StoreResult<()> {
        self.inner.ping().await
    }
    async fn put_agent(&self, agent: &Agent) -> StoreResult<bool> {
        self.inner.put_agent(agent).await
    }
    async fn get_agent(&self, app_id: &str, agent_id: &str) -> StoreResult<Option<Agent>> {
        self.inner.get_agent(app_id, agent_id).await
    }
    async fn list_agents(&self, app_id: &str) -> StoreResult<Vec<Agent>> {
        self.inner.list_agents(app_id).await
    }
    async fn create_run(&self, change: RunChange) -> StoreResult<CreateRun> {
        let seen = Seen::of(&change);
        let started = Instant::now();
        let created = self.inner.create_run(change).await?;
        if matches!(created, CreateRun::Created(_)) {
            self.observe(seen, started);
        }
        Ok(created)
    }
    async fn get_run(&self, app_id: &str, run_id: &str) -> StoreResult<Option<Run>> {
        self.inner.get_run(app_id, run_id).await
    }
    async fn get_run_by_host_run_id(
        &self,
        app_id: &str,
        host_run_id: &str,
    ) -> StoreResult<Option<Run>> {
        self.inner.get_run_by_host_run_id(app_id, host_run_id).await
    }
    async fn list_runs(&self, app_id: &str) -> StoreResult<Vec<Run>> {
        self.inner.list_runs(app_id).await
    }
    async fn search_runs(&self, search: &RunSearch) -> StoreResult<(Vec<Run>, i64)> {
        self.inner.search_runs(search).await
    }
    async fn count_runs_by_status(&self) -> StoreResult<Vec<(RunStatus, i64)>> {
        self.inner.count_runs_by_status().await
    }
    async fn commit(&self, change: RunChange) -> StoreResult<Committed> {
        let seen = Seen::of(&change);
        let started = Instant::now();
        let span = tracing::trace_span!(target: ar_core::trace::TARGET, "store_commit",
            run_id = %change.run_id, events = change.events.len());
        let committed = tracing::Instrument::instrument(self.inner.commit(change), span).await?;
        self.observe(seen, started);
        Ok(committed)
    }
    async fn list_messages(
        &self,
        app_id: &str,
        run_id: &str,
    ) -> StoreResult<Vec<ar_core::records::Message>> {
        self.inner.list_messages(app_id, run_id).await
    }
    async fn list_artifacts(
        &self,
        app_id: &str,
        run_id: &str,
    ) -> StoreResult<Vec<ar_core::records::Artifact>> {
        self.inner.list_artifacts(app_id, run_id).await
    }
    async fn list_interactions(
        &self,
        app_id: &str,
        run_id: &str,
    ) -> StoreResult<Vec<ar_core::records::Interaction>> {
        self.inner.list_interactions(app_id, run_id).await
    }
    async fn list_tool_calls(
        &self,
        app_id: &str,
        run_id: &str,
    ) -> StoreResult<Vec<ar_core::records::ToolCallRecord>> {
        self.inner.list_tool_calls(app_id, run_id).await
    }
    async fn list_events_after(
        &self,
        app_id: &str,
        run_id: &str,
        after: i64,
        limit: Option<i64>,
    ) -> StoreResult<Vec<ar_core::event::StoredEvent>> {
        self.inner
            .list_events_after(app_id, run_id, after, limit)
            .await
    }
    async fn list_events_after_position(
        &self,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<ar_core::event::StoredEvent>> {
        self.inner.list_events_after_position(after, limit).await
    }
    async fn latest_checkpoint(&self, run_id: &str) -> StoreResult<Option<Checkpoint>> {
        self.inner.latest_checkpoint(run_id).await
    }
    async fn checkpoint_at(&self, run_id: &str, step: i64) -> StoreResult<Option<Checkpoint>> {
        self.inner.checkpoint_at(run_id, step).await
    }
    async fn get_secret(&self, run_id: &str, kind: &str) -> StoreResult<Option<Vec<u8>>> {
        self.inner.get_secret(run_id, kind).await
    }
    async fn put_app_secret(&self, app_id: &str, name: &str, ciphertext: &[u8]) -> StoreResult<()> {
        self.inner.put_app_secret(app_id, name, ciphertext).await
    }
    async fn get_app_secret(&self, app_id: &str, name: &str) -> StoreResult<Option<Vec<u8>>> {
        self.inner.get_app_secret(app_id, name).await
    }
    async fn try_acquire_lease(
        &self,
        run_id: &str,
        owner: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        self.inner
            .try_acquire_lease(run_id, owner, until, now)
            .await
    }
    async fn renew_leases(&self, owner: &str, until: DateTime<Utc>) -> StoreResult<u64> {
        self.inner.renew_leases(owner, until).await
    }
    async fn release_lease(&self, run_id: &str, owner: &str) -> StoreResult<()> {
        self.inner.release_lease(run_id, owner).await
    }
    async fn list_orphaned_runs(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Run>> {
        self.inner.list_orphaned_runs(now, limit).await
    }
    async fn list_stale_durable_runs(
        &self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<Vec<Run>> {
        self.inner.list_stale_durable_runs(before, limit).await
    }
    async fn list_runs_leased_by(&self, owner: &str) -> StoreResult<Vec<Run>> {
        self.inner.list_runs_leased_by(owner).await
    }
    async fn get_cursor(&self, name: &str) -> StoreResult<Option<i64>> {
        self.inner.get_cursor(name).await
    }
    async fn advance_cursor(&self, name: &str, from: Option<i64>, to: i64) -> StoreResult<bool> {
        self.inner.advance_cursor(name, from, to).await
    }
}
