//! Run ownership: one owner task per executing run, its lease in the store, the heartbeat that
//! keeps leases alive, and the sweeper that takes over runs whose owner died.

use ar_core::replica::{LinkMessage, OwnerSignal};
use ar_core::store::LeaseChange;
use ar_core::{Agent, Run, RunStatus};
use futures::FutureExt;

use crate::engine::{Decide, Engine};

mod inbox;
pub(crate) use inbox::{Owner, OwnerMsg, Owners, StopReason};

/// What the request that created a run already read, handed to the run's first owner so it
/// does not read it back: the run as created, its agent, and whether a checkpoint was created
/// with it. The run copy only saves a read; every change still commits under its version.
pub(crate) struct OwnerStart {
    pub(crate) run: Run,
    pub(crate) agent: Agent,
    pub(crate) seeded: bool,
    /// The run was created with this process's lease.
    pub(crate) leased: bool,
    /// The skills admission resolved (the first turn needs no second lookup).
    pub(crate) skills: Option<crate::skills::RunSkills>,
}

impl Engine {
    /// When a lease taken or renewed at `now` expires.
    fn lease_until(&self, now: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
        now + chrono::Duration::from_std(self.inner.config.lease_ttl).unwrap_or_default()
    }

    /// This process's lease on a run, from `now` for one lease period.
    pub(crate) fn lease_for_new_owner(&self, now: chrono::DateTime<chrono::Utc>) -> LeaseChange {
        LeaseChange::Take {
            owner: self.inner.config.instance_id.clone(),
            until: self.lease_until(now),
        }
    }

    /// Tells the run's owner in this process, if any, to resolve its model route again.
    pub(crate) fn mark_route_stale(&self, run_id: &str) {
        self.inner.owners.tell(run_id, OwnerMsg::RouteStale);
    }

    /// Starts executing a run in this process unless it already is.
    pub(crate) fn spawn_owner(&self, app_id: &str, run_id: &str) {
        self.spawn_owner_with(app_id, run_id, None);
    }

    /// `spawn_owner` with what the creating request knows (see [`OwnerStart`]). Returns
    /// whether an owner now runs the run (false when this process is shutting down).
    fn spawn_owner_with(&self, app_id: &str, run_id: &str, start: Option<OwnerStart>) -> bool {
        if self.inner.shutdown.is_cancelled() {
            return false;
        }
        let Some(owner) = self.inner.owners.claim(run_id) else {
            return true;
        };
        let engine = self.clone();
        let app_id = app_id.to_string();
        let run_id = run_id.to_string();
        self.inner.tasks.spawn(async move {
            engine.own(app_id, run_id, owner, start).await;
        });
        true
    }

    /// Starts a new run's first owner with what admission read. When this process is shutting
    /// down, the lease taken with the run is given back at once, so another process (or this
    /// one restarted) picks the run up without waiting for the lease to expire.
    pub(crate) async fn hand_to_first_owner(
        &self,
        run: &Run,
        agent: Agent,
        seeded: bool,
        skills: crate::skills::RunSkills,
    ) {
        let start = OwnerStart {
            run: run.clone(),
            agent,
            seeded,
            leased: true,
            skills: Some(skills),
        };
        if self.spawn_owner_with(&run.app_id, &run.id, Some(start)) {
            return;
        }
        let released = self
            .deps()
            .store
            .release_lease(&run.id, &self.inner.config.instance_id)
            .await;
        if let Err(error) = released {
            tracing::warn!(run_id = %run.id, %error, "could not release the new run's lease");
        }
    }

    /// Scrubs `secret` from everything the run records and streams while its owner runs here.
    pub(crate) fn hold_run_secret(&self, run_id: &str, secret: &ar_core::secret::Secret) {
        self.inner.owners.hold_secret(run_id, secret);
    }

    /// The workspace tools of a run executing here.
    pub(crate) fn workspace_tools_of(
        &self,
        run_id: &str,
    ) -> Option<std::sync::Arc<dyn ar_core::workspace::RunToolHost>> {
        self.inner.owners.workspace(run_id)
    }

    /// Cleans a stopped run's workspace by its policy unless an owner here will (it does when
    /// it stops), in the background.
    pub(crate) fn clean_workspace_later(&self, app_id: &str, run_id: &str) {
        if self.inner.owners.contains(run_id) || self.deps().workspaces.is_none() {
            return;
        }
        let engine = self.clone();
        let (app_id, run_id) = (app_id.to_string(), run_id.to_string());
        self.inner
            .tasks
            .spawn(async move { engine.clean_workspace(&app_id, &run_id).await });
    }

    /// Sends `message` to the run's owner in this process; false when it has none here.
    pub(crate) fn tell_owner(&self, run_id: &str, message: OwnerMsg) -> bool {
        self.inner.owners.tell(run_id, message)
    }

    /// Sends `signal` to the run's owner: in this process when it runs here, otherwise through
    /// the replica link to every other replica (the one owning the run acts on it). False when
    /// no owner can be reached (none here and no link).
    pub(crate) fn signal_owner(&self, run_id: &str, signal: OwnerSignal) -> bool {
        self.tell_owner(run_id, owner_message(&signal)) || self.signal_remote_owner(run_id, signal)
    }

    /// Sends `signal` through the replica link alone; false without a link.
    pub(crate) fn signal_remote_owner(&self, run_id: &str, signal: OwnerSignal) -> bool {
        let Some(link) = &self.deps().replicas else {
            return false;
        };
        link.send(LinkMessage::Owner {
            run_id: run_id.to_string(),
            signal,
        });
        true
    }

    /// A signal another replica received for a run's owner: the same message a request
    /// received here sends (a cancel aborts the model call in flight), when the owner runs here.
    pub fn owner_signal_received(&self, run_id: &str, signal: OwnerSignal) {
        self.tell_owner(run_id, owner_message(&signal));
    }

    /// Drives the run until it pauses, ends or the process stops; then hands it back.
    async fn own(
        &self,
        app_id: String,
        run_id: String,
        mut owner: Owner,
        mut start: Option<OwnerStart>,
    ) {
        loop {
            self.drive_with_lease(&app_id, &run_id, &mut owner, start.take())
                .await;
            self.owner_stopped(&app_id, &run_id).await;
            // A resume that landed while this owner was finishing saw an owner and did not
            // spawn one; look once more so the run is never left running without an owner.
            // A run seen committed terminal cannot be resumed: no need to look.
            if self.inner.shutdown.is_cancelled() || owner.inbox.ended() {
                return;
            }
            let needs_owner = matches!(
                self.deps().store.get_run(&app_id, &run_id).await,
                Ok(Some(run)) if matches!(run.status(), RunStatus::Running | RunStatus::Queued)
            );
            if !needs_owner {
                return;
            }
            match self.inner.owners.claim(&run_id) {
                Some(fresh) => owner = fresh,
                None => return,
            }
        }
    }

    /// Executes the run's turn under this process's lease; false when the lease could not be
    /// taken (another live process holds it, or the store failed).
    pub(crate) async fn drive_with_lease(
        &self,
        app_id: &str,
        run_id: &str,
        owner: &mut Owner,
        start: Option<OwnerStart>,
    ) -> bool {
        let store = &self.deps().store;
        let acquired = if start.as_ref().is_some_and(|start| start.leased) {
            Ok(true)
        } else {
            let now = self.now();
            let until = self.lease_until(now);
            store
                .try_acquire_lease(run_id, &self.inner.config.instance_id, until, now)
                .await
        };
        match acquired {
            Ok(true) => {}
            Ok(false) => {
                tracing::debug!(run_id, "run is owned by another live replica");
                return false;
            }
            Err(error) => {
                tracing::error!(run_id, %error, "could not take the run's lease");
                return false;
            }
        }
        let outcome = std::panic::AssertUnwindSafe(self.execute(app_id, run_id, owner, start))
            .catch_unwind()
            .await;
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::error!(run_id, %error, "run execution failed");
                self.fail_run(app_id, run_id, &format!("internal error: {error}"))
                    .await;
            }
            Err(_) => {
                tracing::error!(run_id, "run execution panicked");
                self.fail_run(app_id, run_id, "internal error: run execution panicked")
                    .await;
            }
        }
        if owner.inbox.lease_released() {
            return true;
        }
        if let Err(error) = store
            .release_lease(run_id, &self.inner.config.instance_id)
            .await
        {
            tracing::warn!(run_id, %error, "could not release the run's lease");
        }
        true
    }

    /// One turn of a run as its owner here, tracked so that a shutdown waits for it to reach a
    /// checkpoint: `None` when the run already has an owner here; otherwise whether the lease
    /// was taken (false: another live process holds it).
    pub(crate) async fn drive_turn_once(
        &self,
        app_id: &str,
        run_id: &str,
    ) -> Option<Result<bool, tokio::task::JoinError>> {
        let mut owner = self.inner.owners.claim(run_id)?;
        let engine = self.clone();
        let (app_id, run_id) = (app_id.to_string(), run_id.to_string());
        let task = self.inner.tasks.spawn(async move {
            let leased = engine
                .drive_with_lease(&app_id, &run_id, &mut owner, None)
                .await;
            engine.owner_stopped(&app_id, &run_id).await;
            leased
        });
        Some(task.await)
    }

    /// What follows an owner's turn: its registration ends, a run that is not executing holds
    /// no MCP session (the next owner opens anew), and its workspace tools went with the
    /// registration; the workspace itself is cleaned when its policy says so for the state the
    /// run stopped in.
    pub(crate) async fn owner_stopped(&self, app_id: &str, run_id: &str) {
        self.inner.owners.release(run_id);
        if let Some(mcp) = &self.deps().mcp {
            mcp.close_run(run_id).await;
        }
        self.clean_workspace(app_id, run_id).await;
    }

    /// Marks a non-terminal run failed (best effort; used when execution itself broke). Its
    /// workspace is finalized (`failed`) first, as on every other way a run ends; the owner
    /// cleans it by policy when it stops.
    pub(crate) async fn fail_run(&self, app_id: &str, run_id: &str, message: &str) {
        let now = self.now();
        let mut build = |run: &mut Run, change: &mut ar_core::store::RunChange| {
            crate::records::mark_failed(run, change, message, None, now)
        };
        let current = self
            .deps()
            .store
            .get_run(app_id, run_id)
            .await
            .ok()
            .flatten();
        let finalized = match &current {
            Some(run) if !run.is_terminal() => self.finalize_if_ending(run, &mut build).await,
            _ => None,
        };
        let result = self
            .transact(app_id, run_id, current, |run, change| {
                if run.is_terminal() {
                    return Ok(Decide::Skip(()));
                }
                let unchanged = run.clone();
                build(run, change)?;
                if let Some(finalized) = &finalized {
                    crate::workspace::apply_finalized(run, &unchanged, change, finalized, now)?;
                }
                Ok(Decide::Commit(()))
            })
            .await;
        if let Err(error) = result {
            tracing::error!(run_id, %error, "could not mark the run failed");
        }
    }

    /// Starts the heartbeat and the orphan sweeper, and takes over runs left behind.
    pub fn start_background(&self) {
        self.start_lease_heartbeat();
        let engine = self.clone();
        self.inner
            .tasks
            .spawn(async move { engine.sweep_loop().await });
    }

    /// Starts only the heartbeat of this process's leases (a durable worker: Temporal, not
    /// the sweeper, decides where a durable run's turn continues).
    pub fn start_lease_heartbeat(&self) {
        let engine = self.clone();
        self.inner
            .tasks
            .spawn(async move { engine.heartbeat_loop().await });
    }

    async fn heartbeat_loop(&self) {
        let period = self.inner.config.lease_ttl / 3;
        let mut ticker = tokio::time::interval(period);
        loop {
            tokio::select! {
                _ = self.inner.shutdown.cancelled() => return,
                _ = ticker.tick() => {}
            }
            if self.inner.owners.is_empty() {
                continue;
            }
            let until = self.lease_until(self.now());
            if let Err(error) = self
                .deps()
                .store
                .renew_leases(&self.inner.config.instance_id, until)
                .await
            {
                tracing::warn!(%error, "lease heartbeat failed");
            }
        }
    }

    async fn sweep_loop(&self) {
        // Runs this instance held in a previous life come back at once; others when their
        // lease expires.
        match self
            .deps()
            .store
            .list_runs_leased_by(&self.inner.config.instance_id)
            .await
        {
            Ok(runs) => self.adopt(runs),
            Err(error) => tracing::warn!(%error, "could not list this instance's runs"),
        }
        let mut ticker = tokio::time::interval(self.inner.config.sweep_interval);
        loop {
            tokio::select! {
                _ = self.inner.shutdown.cancelled() => return,
                _ = ticker.tick() => {}
            }
            match self.deps().store.list_orphaned_runs(self.now(), 200).await {
                Ok(runs) => self.adopt(runs),
                Err(error) => tracing::warn!(%error, "orphan sweep failed"),
            }
        }
    }

    fn adopt(&self, runs: Vec<Run>) {
        for run in runs {
            // A durable run's turns are the workflow's to schedule: its activity retries them.
            if run.execution_mode == ar_core::ExecutionMode::Durable {
                continue;
            }
            if !self.inner.owners.contains(&run.id) {
                tracing::info!(run_id = %run.id, status = %run.status(), "taking over run");
                self.spawn_owner(&run.app_id, &run.id);
            }
        }
    }

    /// Runs one sweep now (tests and startup use it).
    pub async fn sweep_once(&self) -> usize {
        match self.deps().store.list_orphaned_runs(self.now(), 200).await {
            Ok(runs) => {
                let count = runs.len();
                self.adopt(runs);
                count
            }
            Err(error) => {
                tracing::warn!(%error, "orphan sweep failed");
                0
            }
        }
    }

    /// Waits until no run executes in this process (tests and benchmarks).
    pub async fn wait_idle(&self) {
        while !self.inner.owners.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
}

/// The owner message a signal stands for.
fn owner_message(signal: &OwnerSignal) -> OwnerMsg {
    match signal {
        OwnerSignal::Cancel => OwnerMsg::Stop(StopReason::Cancelled),
        OwnerSignal::Pause => OwnerMsg::Pause,
        OwnerSignal::Steer(text) => OwnerMsg::Steer(text.clone()),
    }
}
