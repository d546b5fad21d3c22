//! SQLite and PostgreSQL implementations of the domain store traits, with migrations per backend.
//!
//! [`SqliteStore`] is the embedded default (a file, or memory for tests and demos);
//! [`PostgresStore`] serves deployments with several processes. Both implement
//! [`ar_core::store::Store`] with identical observable behaviour: the conformance suite in
//! `tests/it` runs the same cases against each. Values are normalized on write (NUL characters
//! stripped from text, timestamps truncated to microseconds) so a record reads back exactly
//! as the store reported it.

use std::sync::Arc;

use ar_core::store::Store;

/// Columns of a run row, in the names `codec::run_from` reads (JSON columns are TEXT).
macro_rules! run_columns {
    () => {
        "id, app_id, host_run_id, agent_id, target, runtime_kind, execution_mode, \
         invocation_mode, external_actor_id, status, pause_reason, approval_state, input, \
         output_summary, workspace_lease, error_message, started_at, completed_at, created_at, \
         updated_at, version, pause_requested"
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
mod postgres;
mod sqlite;

pub use error::ConnectError;
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
