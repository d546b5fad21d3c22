//! The store port: durable state of agents, runs and everything a run records.
//!
//! One trait, implemented for SQLite and PostgreSQL in `ar-store`. A run's state changes are
//! written through [`Store::commit`]: one transaction that updates the run row (guarded by its
//! optimistic `version`), appends messages, artifacts and events (each with a contiguous per-run
//! sequence number assigned inside that transaction), upserts interactions and tool calls, and
//! saves the transcript checkpoint. That is what makes "the event and the state change that
//! caused it" one atomic fact.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::agent::Agent;
use crate::event::{RunEvent, StoredEvent};
use crate::records::{Artifact, Interaction, Message, ToolCallRecord};
use crate::run::Run;
use crate::RunStatus;

/// The underlying failure of a database driver, kept as the error's source (shared, so one
/// failure can answer every commit of a group).
pub type BackendCause = std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Errors a store reports.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The record changed since it was read (optimistic concurrency) or a unique key is taken.
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("not found: {0}")]
    NotFound(String),
    /// The database failed or is unreachable; `context` says what the store was doing.
    #[error("store backend error: {context}")]
    Backend {
        context: String,
        #[source]
        cause: Option<BackendCause>,
    },
    /// A stored value could not be decoded.
    #[error("corrupt stored value: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// A backend failure while doing `context`, keeping the driver's error as its source.
    pub fn backend(
        context: impl Into<String>,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreError::Backend {
            context: context.into(),
            cause: Some(std::sync::Arc::new(cause)),
        }
    }

    /// A backend failure the store detected itself (no driver error behind it).
    pub fn backend_msg(context: impl Into<String>) -> Self {
        StoreError::Backend {
            context: context.into(),
            cause: None,
        }
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// A transcript checkpoint: the native loop's state after a step.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    pub run_id: String,
    /// Step number (0 = before the first model call).
    pub step: i64,
    pub state: serde_json::Value,
    pub created_at: DateTime<Utc>,
}

/// A change to a run's encrypted secrets (model credential, MCP credentials).
#[derive(Debug, Clone, PartialEq)]
pub enum SecretChange {
    Put { kind: String, ciphertext: Vec<u8> },
    Delete { kind: String },
    DeleteAll,
}

/// A change to the run's execution lease, written with the run row (create or update; a
/// change without a run record leaves the lease alone).
#[derive(Debug, Clone, PartialEq)]
pub enum LeaseChange {
    /// `owner` holds the lease until `until`. A run's creator takes it with the run, so the
    /// owner it starts next needs no separate write.
    Take { owner: String, until: DateTime<Utc> },
    /// `owner` gives the lease up with the change that stopped the run (no effect when
    /// another owner holds it).
    Release { owner: String },
}

/// Everything one state change of a run writes, atomically.
#[derive(Debug, Clone, Default)]
pub struct RunChange {
    pub app_id: String,
    pub run_id: String,
    /// The run's host run id, added to every persisted event's data (see [`RunEvent::data`]).
    pub host_run_id: String,
    /// New run row; requires `expected_version` to match the stored version.
    pub run: Option<Run>,
    pub expected_version: Option<i64>,
    pub messages: Vec<Message>,
    /// Messages of the run deleted by id, before `messages` are appended: a rolled-back
    /// resume takes back the message it appended (their sequence numbers are not reused).
    pub removed_messages: Vec<String>,
    pub artifacts: Vec<Artifact>,
    /// Inserted, or replaced by id.
    pub interactions: Vec<Interaction>,
    /// Inserted, or replaced by id.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Persisted events (transient ones must not be passed here).
    pub events: Vec<RunEvent>,
    pub checkpoint: Option<Checkpoint>,
    pub secrets: Vec<SecretChange>,
    pub lease: Option<LeaseChange>,
    /// The run's secrets, scrubbed by the store from every record and event it writes.
    pub redactor: Option<std::sync::Arc<crate::redact::Redactor>>,
}

impl RunChange {
    pub fn for_run(run: &Run) -> Self {
        RunChange {
            app_id: run.app_id.clone(),
            run_id: run.id.clone(),
            host_run_id: run.host_run_id.clone(),
            ..RunChange::default()
        }
    }

    /// A change that rewrites the run row, guarded by the version it was read at.
    pub fn update(run: Run, expected_version: i64) -> Self {
        RunChange {
            app_id: run.app_id.clone(),
            run_id: run.id.clone(),
            host_run_id: run.host_run_id.clone(),
            run: Some(run),
            expected_version: Some(expected_version),
            ..RunChange::default()
        }
    }

    pub fn with_event(mut self, event: RunEvent) -> Self {
        self.events.push(event);
        self
    }
}

/// What a commit assigned.
#[derive(Debug, Clone, Default)]
pub struct Committed {
    /// The run's version after the commit.
    pub version: i64,
    pub events: Vec<StoredEvent>,
    pub messages: Vec<Message>,
    pub artifacts: Vec<Artifact>,
}

/// Result of creating a run.
#[derive(Debug, Clone)]
pub enum CreateRun {
    Created(Committed),
    /// A run with the same `(app_id, host_run_id)` already exists.
    HostRunIdTaken(Box<Run>),
}

/// Search parameters for `GET /v1/runs/search`.
#[derive(Debug, Clone, Default)]
pub struct RunSearch {
    pub app_id: String,
    /// Substring matched against run id, host run id, agent id, target id and type.
    pub query: String,
    pub status: Option<RunStatus>,
    pub limit: i64,
    pub offset: i64,
}

/// Durable state of the service.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// `sqlite` or `postgres`.
    fn driver(&self) -> &'static str;
    /// Whether data disappears with the process.
    fn in_memory(&self) -> bool;
    /// Cheap liveness probe.
    async fn ping(&self) -> StoreResult<()>;

    // Agents.
    /// Inserts or replaces an agent by `(app_id, id)`; returns true when it was created.
    async fn put_agent(&self, agent: &Agent) -> StoreResult<bool>;
    async fn get_agent(&self, app_id: &str, agent_id: &str) -> StoreResult<Option<Agent>>;
    /// Oldest first.
    async fn list_agents(&self, app_id: &str) -> StoreResult<Vec<Agent>>;

    // Runs.
    /// Inserts a run (version 1) with its first events and secrets in one transaction.
    async fn create_run(&self, change: RunChange) -> StoreResult<CreateRun>;
    async fn get_run(&self, app_id: &str, run_id: &str) -> StoreResult<Option<Run>>;
    async fn get_run_by_host_run_id(
        &self,
        app_id: &str,
        host_run_id: &str,
    ) -> StoreResult<Option<Run>>;
    /// Newest first.
    async fn list_runs(&self, app_id: &str) -> StoreResult<Vec<Run>>;
    /// A page of runs (newest first) and the total count matching.
    async fn search_runs(&self, search: &RunSearch) -> StoreResult<(Vec<Run>, i64)>;
    /// How many runs of every app have each status (statuses no run has are left out).
    async fn count_runs_by_status(&self) -> StoreResult<Vec<(RunStatus, i64)>>;
    /// Applies a change atomically. `Conflict` when `expected_version` is stale.
    async fn commit(&self, change: RunChange) -> StoreResult<Committed>;

    // Run records.
    async fn list_messages(&self, app_id: &str, run_id: &str) -> StoreResult<Vec<Message>>;
    async fn list_artifacts(&self, app_id: &str, run_id: &str) -> StoreResult<Vec<Artifact>>;
    async fn list_interactions(&self, app_id: &str, run_id: &str) -> StoreResult<Vec<Interaction>>;
    async fn list_tool_calls(&self, app_id: &str, run_id: &str)
        -> StoreResult<Vec<ToolCallRecord>>;
    /// Events with `sequence_no > after`, ascending, at most `limit` when given.
    async fn list_events_after(
        &self,
        app_id: &str,
        run_id: &str,
        after: i64,
        limit: Option<i64>,
    ) -> StoreResult<Vec<StoredEvent>>;
    /// Events of all runs with `position > after`, ascending (the outbox feed).
    async fn list_events_after_position(
        &self,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<StoredEvent>>;

    // Checkpoints.
    async fn latest_checkpoint(&self, run_id: &str) -> StoreResult<Option<Checkpoint>>;
    async fn checkpoint_at(&self, run_id: &str, step: i64) -> StoreResult<Option<Checkpoint>>;

    // Secrets (ciphertext only; encryption happens above the store).
    async fn get_secret(&self, run_id: &str, kind: &str) -> StoreResult<Option<Vec<u8>>>;
    /// Writes (or replaces) an app's sealed secret that outlives any run (a Codex sign-in,
    /// named after its connection).
    async fn put_app_secret(&self, app_id: &str, name: &str, ciphertext: &[u8]) -> StoreResult<()>;
    async fn get_app_secret(&self, app_id: &str, name: &str) -> StoreResult<Option<Vec<u8>>>;

    // Ownership of lightweight runs across processes.
    /// Takes the run's lease when it is free, expired or already held by `owner`.
    async fn try_acquire_lease(
        &self,
        run_id: &str,
        owner: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Extends every lease `owner` holds; returns how many.
    async fn renew_leases(&self, owner: &str, until: DateTime<Utc>) -> StoreResult<u64>;
    async fn release_lease(&self, run_id: &str, owner: &str) -> StoreResult<()>;
    /// Queued or running runs whose lease is missing or expired at `now` (any app).
    async fn list_orphaned_runs(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Run>>;
    /// Durable runs still queued, running or paused whose row has not changed since `before`
    /// (what the durable reconciler inspects), oldest change first.
    async fn list_stale_durable_runs(
        &self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<Vec<Run>>;
    /// Queued or running runs leased by `owner` (to take back a previous life's runs at start).
    async fn list_runs_leased_by(&self, owner: &str) -> StoreResult<Vec<Run>>;

    // Outbox cursors (event callback delivery).
    async fn get_cursor(&self, name: &str) -> StoreResult<Option<i64>>;
    /// Moves a cursor from `from` to `to` (compare-and-swap; `None` creates it). False when
    /// someone else moved it first.
    async fn advance_cursor(&self, name: &str, from: Option<i64>, to: i64) -> StoreResult<bool>;
}
