//! SQLite and PostgreSQL implementations of the domain store traits, with migrations per backend.
//!
//! [`SqliteStore`] is the embedded default (a file, or memory for tests and demos);
//! [`PostgresStore`] serves deployments with several processes. Both implement
//! [`ar_core::store::Store`] with identical observable behaviour: the conformance suite in
//! `tests/it` runs the same cases against each. Choices callers can see:
//!
//! - Values are normalized on write: NUL characters are stripped from all text, JSON strings
//!   and keys (PostgreSQL rejects them), also in lookup keys; timestamps are truncated to
//!   microseconds. Records returned by `commit` are the normalized ones, so they equal what a
//!   later read returns.
//! - `commit` on a run that does not exist (or belongs to another app) is `NotFound`; a stale
//!   `expected_version` is `Conflict`. Without `expected_version`, the run record's own
//!   `version` guards the update. The run row's identity (`id`, `app_id`, `host_run_id`,
//!   `created_at`) and its lease are never changed by a commit.
//! - Interactions and tool calls are replaced by id within their run (provider tool-call ids
//!   repeat across conversations).
//! - On PostgreSQL the position feed (`list_events_after_position`) only shows events of
//!   transactions older than every transaction still running, so a reader never skips a
//!   position that commits late; the feed may lag a running transaction by its duration.
//! - A store keeps its connections open for its whole life (SQLite: see `sqlite`; PostgreSQL:
//!   `lanes`); `close` ends them. A commit whose caller gives up midway applies whole or not
//!   at all.
//! - [`connect_pg_link`]: the replica link over PostgreSQL `LISTEN/NOTIFY` (live events and
//!   owner signals between the replicas on one database, when NATS is not configured).

use std::sync::Arc;

use ar_core::store::Store;

/// Columns of a run row, in the names `codec::run_from` reads (JSON columns are TEXT).
macro_rules! run_columns {
    () => {
        "id, app_id, host_run_id, agent_id, target, runtime_kind, execution_mode, \
         invocation_mode, external_actor_id, status, pause_reason, approval_state, input, \
         output_summary, workspace_lease, error_message, started_at, completed_at, created_at, \
         updated_at, version, pause_requested, engine_state"
    };
}

/// Columns of an agent row, in the names `codec::agent_from` reads.
macro_rules! agent_columns {
    () => {
        "app_id, id, name, runtime_kind, provider, model, system_prompt, skills, allowed_tools, \
         allowed_targets, approval_mode, default_invocation_mode, execution_config, created_at, \
         updated_at"
    };
}

/// Columns of an event row, in the names `codec::event_from` reads.
macro_rules! event_columns {
    () => {
        "position, event_id, app_id, run_id, host_run_id, sequence_no, event_type, data, \
         created_at"
    };
}

mod change;
mod codec;
mod error;
mod lanes;
mod pg_link;
mod position_gaps;
mod postgres;
mod sqlite;

pub use error::ConnectError;
pub use pg_link::{connect_pg_link, PgReplicaLink};
pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

/// Opens the store the configuration names: `sqlite` (file or `sqlite:` URL in `sqlite_dsn`),
/// `postgres` (`postgres_url`) or `memory` (SQLite in memory).
pub async fn open(
    driver: &str,
    sqlite_dsn: &str,
    postgres_url: &str,
) -> Result<Arc<dyn Store>, ConnectError> {
    match driver.trim().to_ascii_lowercase().as_str() {
        "sqlite" => Ok(Arc::new(SqliteStore::connect(sqlite_dsn).await?)),
        "postgres" | "postgresql" => Ok(Arc::new(PostgresStore::connect(postgres_url).await?)),
        "memory" => Ok(Arc::new(SqliteStore::connect(":memory:").await?)),
        other => Err(ConnectError::UnknownDriver(other.to_string())),
    }
}

/// Status counts as read from a store, each status parsed (an unknown one is corrupt data).
fn statuses_counted(
    counts: Vec<(String, i64)>,
) -> ar_core::store::StoreResult<Vec<(ar_core::RunStatus, i64)>> {
    counts
        .into_iter()
        .map(|(status, count)| {
            ar_core::RunStatus::parse(&status)
                .map(|status| (status, count))
                .map_err(|_| ar_core::store::StoreError::Corrupt(format!("run status {status:?}")))
        })
        .collect()
}
