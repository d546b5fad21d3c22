//! The engine handle, its dependencies, and `transact`: the one way a run's state changes.

use std::sync::Arc;

use ar_core::clock::Clock;
use ar_core::event::{EventBus, LiveEvent, RunEvent, TransientEvent};
use ar_core::host::ContextProvider;
use ar_core::model::ModelClient;
use ar_core::redact::Redactor;
use ar_core::store::{Committed, LeaseChange, RunChange, Store, StoreError};
use ar_core::tool::ToolHost;
use ar_core::{Run, RunStatus};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::EngineConfig;
use crate::error::{EngineError, EngineResult};
use crate::owner::{OwnerMsg, Owners, StopReason};
use crate::sealer::Sealer;

/// The adapters the engine drives.
#[derive(Clone)]
pub struct EngineDeps {
    pub store: Arc<dyn Store>,
    pub bus: Arc<dyn EventBus>,
    pub models: Arc<dyn ModelClient>,
    pub tools: Arc<dyn ToolHost>,
    pub context: Arc<dyn ContextProvider>,
    pub clock: Arc<dyn Clock>,
    /// Present when run credentials can be sealed at rest.
    pub sealer: Option<Arc<Sealer>>,
    /// Present when run-scoped MCP servers are offered: their credentials' sealer
    /// (`AGENT_RUNTIME_MCP_CREDENTIAL_ENCRYPTION_KEY`) and the MCP client.
    pub mcp_sealer: Option<Arc<Sealer>>,
    pub mcp: Option<Arc<dyn ar_core::mcp::McpClient>>,
    /// Present when agent CLIs (codex, claude_code, opencode) can run here.
    pub agent_cli: Option<Arc<dyn ar_core::agent_cli::AgentCli>>,
    /// Present when other replicas share the store: how a request received here reaches the
    /// owner of a run executing elsewhere.
    pub replicas: Option<Arc<dyn ar_core::replica::ReplicaLink>>,
    /// Present when some app has a skill provider: host skills are looked up through it.
    pub skills: Option<Arc<dyn ar_skills::SkillLookup>>,
    /// Present when apps may have workspaces: the hosts' providers and the tools opened over
    /// a lease's root.
    pub workspaces: Option<Arc<dyn ar_core::workspace::WorkspaceProvider>>,
    pub workspace_opener: Option<Arc<dyn ar_core::workspace::WorkspaceOpener>>,
    /// Present when some app has a `model_credential_callback`.
    pub credential_refresher: Option<Arc<dyn ar_core::host::CredentialRefresher>>,
    /// Present when durable runs are scheduled by a workflow engine (`TEMPORAL_ADDRESS`).
    pub durable: Option<Arc<dyn ar_core::durable::DurableScheduler>>,
}

pub(crate) struct Inner {
    pub(crate) deps: EngineDeps,
    pub(crate) config: EngineConfig,
    /// Runs executing in this process, by run id, and how to reach their owners.
    pub(crate) owners: Owners,
    /// Striped per-run mutation locks (bounded memory however many runs exist).
    locks: Vec<tokio::sync::Mutex<()>>,
    pub(crate) tasks: TaskTracker,
    /// Cancelled when the process stops taking work.
    pub(crate) shutdown: CancellationToken,
}

/// Cheap, cloneable handle to the engine.
#[derive(Clone)]
pub struct Engine {
    pub(crate) inner: Arc<Inner>,
}

/// What a `transact` closure decided.
pub(crate) enum Decide<T> {
    /// Write the modified run and the change.
    Commit(T),
    /// Nothing to write (idempotent request); the run is returned unchanged.
    Skip(T),
}

const LOCK_STRIPES: usize = 512;
const MAX_CONFLICT_RETRIES: usize = 16;

impl Engine {
    pub fn new(deps: EngineDeps, config: EngineConfig) -> Self {
        let locks = (0..LOCK_STRIPES)
            .map(|_| tokio::sync::Mutex::new(()))
            .collect();
        Engine {
            inner: Arc::new(Inner {
                deps,
                config,
                owners: Owners::default(),
                locks,
                tasks: TaskTracker::new(),
                shutdown: CancellationToken::new(),
            }),
        }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.deps.store
    }

    pub(crate) fn deps(&self) -> &EngineDeps {
        &self.inner.deps
    }

    /// Current time at the precision every store keeps (microseconds), so a record returned
    /// from a write equals the same record read back.
    pub(crate) fn now(&self) -> chrono::DateTime<chrono::Utc> {
        use chrono::SubsecRound as _;
        self.inner.deps.clock.now().trunc_subsecs(6)
    }

    fn stripe(&self, run_id: &str) -> &tokio::sync::Mutex<()> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        run_id.hash(&mut hasher);
        &self.inner.locks[(hasher.finish() as usize) % LOCK_STRIPES]
    }

    pub(crate) async fn load_run(&self, app_id: &str, run_id: &str) -> EngineResult<Run> {
        self.inner
            .deps
            .store
            .get_run(app_id, run_id)
            .await?
            .ok_or_else(EngineError::run_not_found)
    }

    /// Applies `decide` to the freshest copy of the run and commits the result atomically.
    ///
    /// `cached` is the caller's copy (saves a read); on a version conflict the run is re-read
    /// and `decide` runs again, so it must be a pure function of the run it is given. Events
    /// get the run's `host_run_id`, are sequenced by the store, and are published after commit.
    pub(crate) async fn transact<T>(
        &self,
        app_id: &str,
        run_id: &str,
        cached: Option<Run>,
        mut decide: impl FnMut(&mut Run, &mut RunChange) -> EngineResult<Decide<T>>,
    ) -> EngineResult<(Run, Committed, T)> {
        let _guard = self.stripe(run_id).lock().await;
        let mut current = match cached {
            Some(run) => run,
            None => self.load_run(app_id, run_id).await?,
        };
        let redactor = self.redactor_of(run_id);
        for _ in 0..MAX_CONFLICT_RETRIES {
            let mut next = current.clone();
            let mut change = RunChange::for_run(&current);
            let value = match decide(&mut next, &mut change)? {
                Decide::Skip(value) => return Ok((current, Committed::default(), value)),
                Decide::Commit(value) => value,
            };
            next.updated_at = self.now();
            change.host_run_id.clone_from(&next.host_run_id);
            if let Some(redactor) = &redactor {
                redactor.scrub(&mut next.error_message);
                redactor.scrub_map(&mut next.output_summary);
                change.redactor = Some(redactor.clone());
            }
            // A change that stops the run gives up this process's lease with it (a no-op
            // in the store when another process holds the lease).
            let stops = !matches!(next.status(), RunStatus::Queued | RunStatus::Running);
            if stops && change.lease.is_none() {
                change.lease = Some(LeaseChange::Release {
                    owner: self.inner.config.instance_id.clone(),
                });
            }
            let releases = matches!(change.lease, Some(LeaseChange::Release { .. }));
            change.run = Some(next.clone());
            change.expected_version = Some(current.version);
            match self.inner.deps.store.commit(change).await {
                Ok(mut committed) => {
                    next.version = committed.version;
                    if next.is_terminal() {
                        self.inner.owners.tell(run_id, OwnerMsg::Ended);
                    }
                    if releases {
                        self.inner.owners.tell(run_id, OwnerMsg::LeaseReleased);
                    }
                    // Published, not handed back: no caller reads a commit's events.
                    for event in std::mem::take(&mut committed.events) {
                        self.inner.deps.bus.publish(event.into());
                    }
                    return Ok((next, committed, value));
                }
                Err(StoreError::Conflict(_)) => {
                    current = self.load_run(app_id, run_id).await?;
                }
                Err(error) => return Err(error.into()),
            }
        }
        Err(EngineError::Store(StoreError::Conflict(format!(
            "run {run_id} kept changing; gave up after {MAX_CONFLICT_RETRIES} attempts"
        ))))
    }

    /// The secrets of a run executing here (none known for runs owned elsewhere).
    pub(crate) fn redactor_of(&self, run_id: &str) -> Option<Arc<Redactor>> {
        self.inner.owners.redactor(run_id)
    }

    /// Publishes a transient (never persisted) event to live subscribers, its text scrubbed
    /// of the run's secrets (a secret split across two deltas is caught only in the
    /// persisted message that completes them).
    pub(crate) fn publish_transient(&self, run: &Run, mut event: RunEvent) {
        debug_assert!(event.is_transient(), "{} is persisted", event.kind());
        if let Some(redactor) = self.redactor_of(&run.id) {
            match &mut event {
                RunEvent::AssistantMessageDelta(delta) | RunEvent::ReasoningMessageDelta(delta) => {
                    redactor.scrub(&mut delta.text);
                }
                RunEvent::ToolCallArgsDelta(delta) => {
                    redactor.scrub(&mut delta.args_delta);
                }
                RunEvent::ActivityDelta(delta) => redactor.scrub_map(&mut delta.delta),
                _ => {}
            }
        }
        self.inner.deps.bus.publish(LiveEvent::from(TransientEvent {
            app_id: run.app_id.clone(),
            run_id: run.id.clone(),
            host_run_id: run.host_run_id.clone(),
            event,
        }));
    }

    /// Stops intake, lets owners reach a checkpoint, and waits for them (bounded by `deadline`).
    pub async fn shutdown(&self, deadline: std::time::Duration) {
        self.inner.shutdown.cancel();
        self.inner.tasks.close();
        if tokio::time::timeout(deadline, self.inner.tasks.wait())
            .await
            .is_ok()
        {
            return;
        }
        // Steps that could not reach a checkpoint in time are abandoned where they are: the
        // run stays `running` at its last checkpoint, its lease is released, and the next
        // owner (this instance restarted, or another replica) continues it.
        tracing::warn!(
            remaining = self.inner.owners.len(),
            "shutdown deadline passed; abandoning in-flight steps"
        );
        self.inner
            .owners
            .tell_all(&OwnerMsg::Stop(StopReason::Abandoned));
        if tokio::time::timeout(std::time::Duration::from_secs(5), self.inner.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                remaining = self.inner.owners.len(),
                "runs still executing at exit"
            );
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        self.inner.shutdown.is_cancelled()
    }

    /// Number of runs executing in this process.
    pub fn active_owner_count(&self) -> usize {
        self.inner.owners.len()
    }
}
