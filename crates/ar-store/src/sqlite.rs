//! The embedded SQLite store: one writer connection (SQLite has a single writer anyway, and
//! `BEGIN IMMEDIATE` takes the write lock up front), a small pool of readers in WAL mode, or
//! one shared connection for an in-memory database.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use ar_core::agent::Agent;
use ar_core::records::{Artifact, Interaction, Message, ToolCallRecord};
use ar_core::store::{
    Checkpoint, Committed, CreateRun, RunChange, RunSearch, Store, StoreError, StoreResult,
};
use ar_core::{Run, RunStatus, StoredEvent};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteRow, SqliteSynchronous,
};
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection};

use crate::change::{AgentRow, Counters, Prepared, RunRow};
use crate::codec::{self, clean, parse_ts, ts_text, Cols};
use crate::error::{corrupt, db, is_unique_violation, ConnectError};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// Rows per multi-row INSERT (well under SQLite's 32766 bound variables).
const INSERT_CHUNK: usize = 200;
/// Read connections of a file database.
const READERS: u32 = 4;
/// How long a statement waits for another process's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// A [`Store`] on SQLite.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    /// One connection; every write goes through it.
    writer: SqlitePool,
    /// Readers (the writer itself for an in-memory database).
    reader: SqlitePool,
    in_memory: bool,
}

/// Whether a DSN names an in-memory database.
fn is_memory(dsn: &str) -> bool {
    let dsn = dsn.trim();
    matches!(
        dsn,
        ":memory:" | "sqlite::memory:" | "sqlite://:memory:" | "sqlite:memory:"
    ) || (dsn.starts_with("sqlite:") && dsn.contains("mode=memory"))
}

impl SqliteStore {
    /// Opens (creating if missing) the database at a file path or `sqlite:` URL, or an
    /// in-memory database for `:memory:` / `sqlite::memory:`, and applies the migrations.
    pub async fn connect(dsn_or_path: &str) -> Result<Self, ConnectError> {
        let dsn = dsn_or_path.trim();
        let invalid = |source| ConnectError::InvalidAddress {
            backend: "sqlite",
            address: dsn.to_string(),
            source,
        };
        let connect = |source| ConnectError::Connect {
            backend: "sqlite",
            source,
        };

        let store = if is_memory(dsn) {
            let options = SqliteConnectOptions::from_str("sqlite::memory:")
                .map_err(invalid)?
                .foreign_keys(true)
                .busy_timeout(BUSY_TIMEOUT);
            // A private in-memory database lives as long as its connection: keep exactly one,
            // forever, and share it between readers and the writer.
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(options)
                .await
                .map_err(connect)?;
            SqliteStore {
                writer: pool.clone(),
                reader: pool,
                in_memory: true,
            }
        } else {
            let options = if dsn.starts_with("sqlite:") {
                SqliteConnectOptions::from_str(dsn).map_err(invalid)?
            } else {
                SqliteConnectOptions::new().filename(dsn)
            };
            create_parent_dir(options.get_filename())?;
            let options = options
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(BUSY_TIMEOUT)
                .foreign_keys(true);
            let writer = SqlitePoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .max_lifetime(None)
                .idle_timeout(None)
                .connect_with(options.clone())
                .await
                .map_err(connect)?;
            let reader = SqlitePoolOptions::new()
                .max_connections(READERS)
                .connect_with(options)
                .await
                .map_err(connect)?;
            SqliteStore {
                writer,
                reader,
                in_memory: false,
            }
        };
        MIGRATOR
            .run(&store.writer)
            .await
            .map_err(|source| ConnectError::Migrate {
                backend: "sqlite",
                source,
            })?;
        Ok(store)
    }

    /// The pool writes go through (one connection), for diagnostics and tests.
    pub fn writer_pool(&self) -> &SqlitePool {
        &self.writer
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.reader.close().await;
        self.writer.close().await;
    }

    async fn begin_write(&self) -> StoreResult<sqlx::Transaction<'static, Sqlite>> {
        self.writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(db("sqlite: begin write transaction"))
    }

    async fn run_by_host_run_id(
        &self,
        app_id: &str,
        host_run_id: &str,
    ) -> StoreResult<Option<Run>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE app_id = $1 AND host_run_id = $2"
        ))
        .bind(clean(app_id))
        .bind(clean(host_run_id))
        .fetch_optional(&self.reader)
        .await
        .map_err(db("sqlite: get run by host run id"))?;
        row.as_ref().map(codec::run_from).transpose()
    }
}

fn create_parent_dir(path: &Path) -> Result<(), ConnectError> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() && !parent.exists() => {
            std::fs::create_dir_all(parent).map_err(|source| ConnectError::CreateDir {
                path: PathBuf::from(parent),
                source,
            })
        }
        _ => Ok(()),
    }
}

impl Cols for SqliteRow {
    fn text(&self, column: &str) -> StoreResult<String> {
        self.try_get(column).map_err(|error| corrupt(column, error))
    }

    fn text_opt(&self, column: &str) -> StoreResult<Option<String>> {
        self.try_get(column).map_err(|error| corrupt(column, error))
    }

    fn int(&self, column: &str) -> StoreResult<i64> {
        self.try_get(column).map_err(|error| corrupt(column, error))
    }

    fn flag(&self, column: &str) -> StoreResult<bool> {
        self.try_get(column).map_err(|error| corrupt(column, error))
    }

    fn bytes(&self, column: &str) -> StoreResult<Vec<u8>> {
        self.try_get(column).map_err(|error| corrupt(column, error))
    }

    fn ts(&self, column: &str) -> StoreResult<DateTime<Utc>> {
        parse_ts(column, &self.text(column)?)
    }

    fn ts_opt(&self, column: &str) -> StoreResult<Option<DateTime<Utc>>> {
        self.text_opt(column)?
            .map(|text| parse_ts(column, &text))
            .transpose()
    }
}

type SqliteQuery<'q> = sqlx::query::Query<'q, Sqlite, SqliteArguments<'q>>;

fn ts_opt_text(at: Option<DateTime<Utc>>) -> Option<String> {
    at.map(ts_text)
}

/// Binds the mutable columns of a run, in the order of `RUN_MUTABLE` placeholders `$1..$19`.
fn bind_run_mutable<'q>(query: SqliteQuery<'q>, run: &'q RunRow) -> SqliteQuery<'q> {
    query
        .bind(run.agent_id.as_str())
        .bind(run.target_type.as_str())
        .bind(run.target_id.as_str())
        .bind(run.target.as_str())
        .bind(run.runtime_kind)
        .bind(run.execution_mode)
        .bind(run.invocation_mode)
        .bind(run.external_actor_id.as_str())
        .bind(run.status)
        .bind(run.pause_reason)
        .bind(run.approval_state)
        .bind(run.input.as_str())
        .bind(run.output_summary.as_str())
        .bind(run.workspace_lease.as_deref())
        .bind(run.error_message.as_str())
        .bind(ts_opt_text(run.started_at))
        .bind(ts_opt_text(run.completed_at))
        .bind(ts_text(run.updated_at))
        .bind(run.pause_requested)
}

const UPDATE_RUN: &str = "UPDATE runs SET agent_id = $1, target_type = $2, target_id = $3, \
     target = $4, runtime_kind = $5, execution_mode = $6, invocation_mode = $7, \
     external_actor_id = $8, status = $9, pause_reason = $10, approval_state = $11, input = $12, \
     output_summary = $13, workspace_lease = $14, error_message = $15, started_at = $16, \
     completed_at = $17, updated_at = $18, pause_requested = $19, version = version + 1, \
     event_seq = event_seq + $20, message_seq = message_seq + $21, \
     artifact_seq = artifact_seq + $22 \
     WHERE id = $23 AND app_id = $24 AND version = $25 \
     RETURNING version, event_seq, message_seq, artifact_seq, host_run_id";

const TOUCH_RUN: &str = "UPDATE runs SET event_seq = event_seq + $1, \
     message_seq = message_seq + $2, artifact_seq = artifact_seq + $3 \
     WHERE id = $4 AND app_id = $5 \
     RETURNING version, event_seq, message_seq, artifact_seq, host_run_id";

const INSERT_RUN: &str = "INSERT INTO runs (agent_id, target_type, target_id, target, \
     runtime_kind, execution_mode, invocation_mode, external_actor_id, status, pause_reason, \
     approval_state, input, output_summary, workspace_lease, error_message, started_at, \
     completed_at, updated_at, pause_requested, event_seq, message_seq, artifact_seq, id, \
     app_id, host_run_id, created_at, version) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, \
     $19, $20, $21, $22, $23, $24, $25, $26, 1) \
     ON CONFLICT DO NOTHING \
     RETURNING version, event_seq, message_seq, artifact_seq, host_run_id";

/// What the run-row statement of a commit hands back.
struct Head {
    version: i64,
    counters: Counters,
    host_run_id: String,
}

fn head_from(row: &SqliteRow) -> StoreResult<Head> {
    Ok(Head {
        version: row.int("version")?,
        counters: Counters {
            events: row.int("event_seq")?,
            messages: row.int("message_seq")?,
            artifacts: row.int("artifact_seq")?,
        },
        host_run_id: row.text("host_run_id")?,
    })
}

/// Writes everything of a change except the run row; returns the events' positions in
/// sequence order.
async fn write_records(
    conn: &mut SqliteConnection,
    change: &Prepared,
    head: &Head,
) -> StoreResult<Vec<i64>> {
    let mut positions = Vec::with_capacity(change.events.len());
    if !change.events.is_empty() {
        let base = head.counters.events - change.events.len() as i64;
        let created_at = ts_text(change.event_time);
        for (chunk_index, chunk) in change.events.chunks(INSERT_CHUNK).enumerate() {
            let offset = base + (chunk_index * INSERT_CHUNK) as i64;
            let mut insert = QueryBuilder::<Sqlite>::new(
                "INSERT INTO events (run_id, app_id, host_run_id, sequence_no, event_id, \
                 event_type, data, created_at) ",
            );
            insert.push_values(chunk.iter().enumerate(), |mut row, (index, event)| {
                row.push_bind(change.run_id.as_str())
                    .push_bind(change.app_id.as_str())
                    .push_bind(head.host_run_id.as_str())
                    .push_bind(offset + index as i64 + 1)
                    .push_bind(event.event_id.as_str())
                    .push_bind(event.event_type.as_str())
                    .push_bind(event.data_text.as_str())
                    .push_bind(created_at.as_str());
            });
            insert.push(" RETURNING position, sequence_no");
            let rows = insert
                .build()
                .fetch_all(&mut *conn)
                .await
                .map_err(db("sqlite: insert events"))?;
            let mut assigned = rows
                .iter()
                .map(|row| Ok((row.int("sequence_no")?, row.int("position")?)))
                .collect::<StoreResult<Vec<(i64, i64)>>>()?;
            assigned.sort_unstable();
            positions.extend(assigned.into_iter().map(|(_, position)| position));
        }
    }

    if !change.messages.is_empty() {
        let base = head.counters.messages - change.messages.len() as i64;
        for (chunk_index, chunk) in change.messages.chunks(INSERT_CHUNK).enumerate() {
            let offset = base + (chunk_index * INSERT_CHUNK) as i64;
            let mut insert = QueryBuilder::<Sqlite>::new(
                "INSERT INTO messages (run_id, sequence_no, id, app_id, runtime_message_id, role, \
                 content, message_type, content_blocks, tool_invocations, created_at) ",
            );
            insert.push_values(chunk.iter().enumerate(), |mut row, (index, message)| {
                let record = &message.record;
                row.push_bind(change.run_id.as_str())
                    .push_bind(offset + index as i64 + 1)
                    .push_bind(record.id.as_str())
                    .push_bind(change.app_id.as_str())
                    .push_bind(record.runtime_message_id.as_str())
                    .push_bind(record.role.as_str())
                    .push_bind(record.content.as_str())
                    .push_bind(record.message_type.as_str())
                    .push_bind(message.content_blocks.as_deref())
                    .push_bind(message.tool_invocations.as_deref())
                    .push_bind(ts_text(record.created_at));
            });
            insert
                .build()
                .execute(&mut *conn)
                .await
                .map_err(db("sqlite: insert messages"))?;
        }
    }

    if !change.artifacts.is_empty() {
        let base = head.counters.artifacts - change.artifacts.len() as i64;
        for (chunk_index, chunk) in change.artifacts.chunks(INSERT_CHUNK).enumerate() {
            let offset = base + (chunk_index * INSERT_CHUNK) as i64;
            let mut insert = QueryBuilder::<Sqlite>::new(
                "INSERT INTO artifacts (run_id, sequence_no, id, app_id, artifact_type, format, \
                 storage_mode, inline_content, metadata, created_at) ",
            );
            insert.push_values(chunk.iter().enumerate(), |mut row, (index, artifact)| {
                let record = &artifact.record;
                row.push_bind(change.run_id.as_str())
                    .push_bind(offset + index as i64 + 1)
                    .push_bind(record.id.as_str())
                    .push_bind(change.app_id.as_str())
                    .push_bind(record.artifact_type.as_str())
                    .push_bind(record.format.as_str())
                    .push_bind(record.storage_mode.as_str())
                    .push_bind(record.inline_content.as_str())
                    .push_bind(artifact.metadata.as_deref())
                    .push_bind(ts_text(record.created_at));
            });
            insert
                .build()
                .execute(&mut *conn)
                .await
                .map_err(db("sqlite: insert artifacts"))?;
        }
    }

    for chunk in change.interactions.chunks(INSERT_CHUNK) {
        let mut upsert = QueryBuilder::<Sqlite>::new(
            "INSERT INTO interactions (run_id, id, app_id, runtime_kind, interaction_kind, \
             status, title, summary, request_payload, response_payload, \
             resolved_by_external_id, resolved_at, created_at, updated_at) ",
        );
        upsert.push_values(chunk, |mut row, interaction| {
            let record = &interaction.record;
            row.push_bind(change.run_id.as_str())
                .push_bind(record.id.as_str())
                .push_bind(change.app_id.as_str())
                .push_bind(record.runtime_kind.as_str())
                .push_bind(record.interaction_kind.as_str())
                .push_bind(record.status.as_str())
                .push_bind(record.title.as_str())
                .push_bind(record.summary.as_str())
                .push_bind(interaction.request_payload.as_deref())
                .push_bind(interaction.response_payload.as_deref())
                .push_bind(record.resolved_by_external_id.as_str())
                .push_bind(ts_opt_text(record.resolved_at))
                .push_bind(ts_text(record.created_at))
                .push_bind(ts_text(record.updated_at));
        });
        upsert.push(
            " ON CONFLICT (run_id, id) DO UPDATE SET app_id = excluded.app_id, \
             runtime_kind = excluded.runtime_kind, interaction_kind = excluded.interaction_kind, \
             status = excluded.status, title = excluded.title, summary = excluded.summary, \
             request_payload = excluded.request_payload, \
             response_payload = excluded.response_payload, \
             resolved_by_external_id = excluded.resolved_by_external_id, \
             resolved_at = excluded.resolved_at, created_at = excluded.created_at, \
             updated_at = excluded.updated_at",
        );
        upsert
            .build()
            .execute(&mut *conn)
            .await
            .map_err(db("sqlite: upsert interactions"))?;
    }

    for chunk in change.tool_calls.chunks(INSERT_CHUNK) {
        let mut upsert = QueryBuilder::<Sqlite>::new(
            "INSERT INTO tool_calls (run_id, id, app_id, tool_name, input, output, error, \
             mutating, approval_required, created_at) ",
        );
        upsert.push_values(chunk, |mut row, call| {
            let record = &call.record;
            row.push_bind(change.run_id.as_str())
                .push_bind(record.id.as_str())
                .push_bind(change.app_id.as_str())
                .push_bind(record.tool_name.as_str())
                .push_bind(call.input.as_str())
                .push_bind(call.output.as_deref())
                .push_bind(record.error.as_str())
                .push_bind(record.mutating)
                .push_bind(record.approval_required)
                .push_bind(ts_text(record.created_at));
        });
        upsert.push(
            " ON CONFLICT (run_id, id) DO UPDATE SET app_id = excluded.app_id, \
             tool_name = excluded.tool_name, input = excluded.input, output = excluded.output, \
             error = excluded.error, mutating = excluded.mutating, \
             approval_required = excluded.approval_required, created_at = excluded.created_at",
        );
        upsert
            .build()
            .execute(&mut *conn)
            .await
            .map_err(db("sqlite: upsert tool calls"))?;
    }

    if let Some(checkpoint) = &change.checkpoint {
        sqlx::query(
            "INSERT INTO checkpoints (run_id, step, state, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (run_id, step) DO UPDATE SET state = excluded.state, \
             created_at = excluded.created_at",
        )
        .bind(change.run_id.as_str())
        .bind(checkpoint.step)
        .bind(checkpoint.state.as_str())
        .bind(ts_text(checkpoint.created_at))
        .execute(&mut *conn)
        .await
        .map_err(db("sqlite: save checkpoint"))?;
    }

    let secrets = &change.secrets;
    if !secrets.is_empty() {
        if secrets.delete_all {
            sqlx::query("DELETE FROM run_secrets WHERE run_id = $1")
                .bind(change.run_id.as_str())
                .execute(&mut *conn)
                .await
                .map_err(db("sqlite: delete secrets"))?;
        }
        for kind in &secrets.deletes {
            sqlx::query("DELETE FROM run_secrets WHERE run_id = $1 AND kind = $2")
                .bind(change.run_id.as_str())
                .bind(kind.as_str())
                .execute(&mut *conn)
                .await
                .map_err(db("sqlite: delete secret"))?;
        }
        for (kind, ciphertext) in &secrets.puts {
            sqlx::query(
                "INSERT INTO run_secrets (run_id, kind, ciphertext) VALUES ($1, $2, $3) \
                 ON CONFLICT (run_id, kind) DO UPDATE SET ciphertext = excluded.ciphertext",
            )
            .bind(change.run_id.as_str())
            .bind(kind.as_str())
            .bind(ciphertext.as_slice())
            .execute(&mut *conn)
            .await
            .map_err(db("sqlite: put secret"))?;
        }
    }

    Ok(positions)
}

fn counts(change: &Prepared) -> (i64, i64, i64) {
    (
        change.events.len() as i64,
        change.messages.len() as i64,
        change.artifacts.len() as i64,
    )
}

/// Escapes nothing: the search uses `instr`, so `%` and `_` in a query are literal.
fn search_needle(query: &str) -> String {
    clean(query.trim()).to_lowercase()
}

const SEARCH_FILTER: &str = "app_id = $1 \
     AND ($2 = '' OR instr(lower(id), $2) > 0 OR instr(lower(host_run_id), $2) > 0 \
     OR instr(lower(agent_id), $2) > 0 OR instr(lower(target_id), $2) > 0 \
     OR instr(lower(target_type), $2) > 0) \
     AND ($3 IS NULL OR status = $3)";

#[async_trait]
impl Store for SqliteStore {
    fn driver(&self) -> &'static str {
        "sqlite"
    }

    fn in_memory(&self) -> bool {
        self.in_memory
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1")
            .execute(&self.reader)
            .await
            .map_err(db("sqlite: ping"))?;
        Ok(())
    }

    async fn put_agent(&self, agent: &Agent) -> StoreResult<bool> {
        let row = AgentRow::encode(agent)?;
        let mut tx = self.begin_write().await?;
        let inserted = sqlx::query(
            "INSERT INTO agents (app_id, id, name, runtime_kind, provider, model, system_prompt, \
             skills, allowed_tools, allowed_targets, approval_mode, default_invocation_mode, \
             execution_config, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) \
             ON CONFLICT (app_id, id) DO NOTHING",
        )
        .bind(row.app_id.as_str())
        .bind(row.id.as_str())
        .bind(row.name.as_str())
        .bind(row.runtime_kind)
        .bind(row.provider.as_str())
        .bind(row.model.as_str())
        .bind(row.system_prompt.as_str())
        .bind(row.skills.as_str())
        .bind(row.allowed_tools.as_str())
        .bind(row.allowed_targets.as_str())
        .bind(row.approval_mode)
        .bind(row.default_invocation_mode)
        .bind(row.execution_config.as_deref())
        .bind(ts_text(row.created_at))
        .bind(ts_text(row.updated_at))
        .execute(&mut *tx)
        .await
        .map_err(agent_error)?
        .rows_affected()
            == 1;
        if !inserted {
            sqlx::query(
                "UPDATE agents SET name = $3, runtime_kind = $4, provider = $5, model = $6, \
                 system_prompt = $7, skills = $8, allowed_tools = $9, allowed_targets = $10, \
                 approval_mode = $11, default_invocation_mode = $12, execution_config = $13, \
                 created_at = $14, updated_at = $15 WHERE app_id = $1 AND id = $2",
            )
            .bind(row.app_id.as_str())
            .bind(row.id.as_str())
            .bind(row.name.as_str())
            .bind(row.runtime_kind)
            .bind(row.provider.as_str())
            .bind(row.model.as_str())
            .bind(row.system_prompt.as_str())
            .bind(row.skills.as_str())
            .bind(row.allowed_tools.as_str())
            .bind(row.allowed_targets.as_str())
            .bind(row.approval_mode)
            .bind(row.default_invocation_mode)
            .bind(row.execution_config.as_deref())
            .bind(ts_text(row.created_at))
            .bind(ts_text(row.updated_at))
            .execute(&mut *tx)
            .await
            .map_err(agent_error)?;
        }
        tx.commit().await.map_err(db("sqlite: commit agent"))?;
        Ok(inserted)
    }

    async fn get_agent(&self, app_id: &str, agent_id: &str) -> StoreResult<Option<Agent>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            agent_columns!(),
            " FROM agents WHERE app_id = $1 AND id = $2"
        ))
        .bind(clean(app_id))
        .bind(clean(agent_id))
        .fetch_optional(&self.reader)
        .await
        .map_err(db("sqlite: get agent"))?;
        row.as_ref().map(codec::agent_from).transpose()
    }

    async fn list_agents(&self, app_id: &str) -> StoreResult<Vec<Agent>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            agent_columns!(),
            " FROM agents WHERE app_id = $1 ORDER BY created_at, id"
        ))
        .bind(clean(app_id))
        .fetch_all(&self.reader)
        .await
        .map_err(db("sqlite: list agents"))?;
        rows.iter().map(codec::agent_from).collect()
    }

    async fn create_run(&self, change: RunChange) -> StoreResult<CreateRun> {
        let change = Prepared::for_create(change)?;
        let Some(run) = change.run.as_ref() else {
            return Err(StoreError::Backend("create_run: missing run".to_string()));
        };
        let (events, messages, artifacts) = counts(&change);
        let mut tx = self.begin_write().await?;
        let head = bind_run_mutable(sqlx::query(INSERT_RUN), run)
            .bind(events)
            .bind(messages)
            .bind(artifacts)
            .bind(run.id.as_str())
            .bind(run.app_id.as_str())
            .bind(run.host_run_id.as_str())
            .bind(ts_text(run.created_at))
            .fetch_optional(&mut *tx)
            .await
            .map_err(db("sqlite: insert run"))?;
        let Some(head) = head else {
            tx.rollback().await.map_err(db("sqlite: rollback"))?;
            if !run.host_run_id.is_empty() {
                if let Some(existing) = self
                    .run_by_host_run_id(&run.app_id, &run.host_run_id)
                    .await?
                {
                    return Ok(CreateRun::HostRunIdTaken(Box::new(existing)));
                }
            }
            return Err(StoreError::Conflict(format!(
                "run {} already exists",
                run.id
            )));
        };
        let head = head_from(&head)?;
        let positions = write_records(&mut tx, &change, &head).await?;
        tx.commit()
            .await
            .map_err(db("sqlite: commit run creation"))?;
        change
            .committed(head.version, &head.host_run_id, head.counters, &positions)
            .map(CreateRun::Created)
    }

    async fn get_run(&self, app_id: &str, run_id: &str) -> StoreResult<Option<Run>> {
        let row = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE id = $1 AND app_id = $2"
        ))
        .bind(clean(run_id))
        .bind(clean(app_id))
        .fetch_optional(&self.reader)
        .await
        .map_err(db("sqlite: get run"))?;
        row.as_ref().map(codec::run_from).transpose()
    }

    async fn get_run_by_host_run_id(
        &self,
        app_id: &str,
        host_run_id: &str,
    ) -> StoreResult<Option<Run>> {
        if host_run_id.is_empty() {
            return Ok(None);
        }
        self.run_by_host_run_id(app_id, host_run_id).await
    }

    async fn list_runs(&self, app_id: &str) -> StoreResult<Vec<Run>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE app_id = $1 ORDER BY created_at DESC, id DESC"
        ))
        .bind(clean(app_id))
        .fetch_all(&self.reader)
        .await
        .map_err(db("sqlite: list runs"))?;
        rows.iter().map(codec::run_from).collect()
    }

    async fn search_runs(&self, search: &RunSearch) -> StoreResult<(Vec<Run>, i64)> {
        let needle = search_needle(&search.query);
        let status = search.status.map(RunStatus::as_str);
        let limit = if search.limit > 0 { search.limit } else { -1 };
        let offset = search.offset.max(0);
        let mut conn = self.reader.acquire().await.map_err(db("sqlite: acquire"))?;
        let rows = sqlx::query(&format!(
            "SELECT {} FROM runs WHERE {SEARCH_FILTER} \
             ORDER BY created_at DESC, id DESC LIMIT $4 OFFSET $5",
            run_columns!()
        ))
        .bind(clean(&search.app_id))
        .bind(needle.as_str())
        .bind(status)
        .bind(limit)
        .bind(offset)
        .fetch_all(&mut *conn)
        .await
        .map_err(db("sqlite: search runs"))?;
        let total: i64 =
            sqlx::query_scalar(&format!("SELECT COUNT(*) FROM runs WHERE {SEARCH_FILTER}"))
                .bind(clean(&search.app_id))
                .bind(needle.as_str())
                .bind(status)
                .fetch_one(&mut *conn)
                .await
                .map_err(db("sqlite: count runs"))?;
        let runs = rows
            .iter()
            .map(codec::run_from)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((runs, total))
    }

    async fn commit(&self, change: RunChange) -> StoreResult<Committed> {
        let change = Prepared::new(change)?;
        let (events, messages, artifacts) = counts(&change);
        let mut tx = self.begin_write().await?;
        let head = match &change.run {
            Some(run) => bind_run_mutable(sqlx::query(UPDATE_RUN), run)
                .bind(events)
                .bind(messages)
                .bind(artifacts)
                .bind(change.run_id.as_str())
                .bind(change.app_id.as_str())
                .bind(change.expected_version)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db("sqlite: update run"))?,
            None => sqlx::query(TOUCH_RUN)
                .bind(events)
                .bind(messages)
                .bind(artifacts)
                .bind(change.run_id.as_str())
                .bind(change.app_id.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(db("sqlite: lock run"))?,
        };
        let Some(head) = head else {
            let exists = sqlx::query("SELECT 1 FROM runs WHERE id = $1 AND app_id = $2")
                .bind(change.run_id.as_str())
                .bind(change.app_id.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(db("sqlite: check run"))?
                .is_some();
            tx.rollback().await.map_err(db("sqlite: rollback"))?;
            return Err(change.missing_or_stale(exists));
        };
        let head = head_from(&head)?;
        let positions = write_records(&mut tx, &change, &head).await?;
        tx.commit().await.map_err(db("sqlite: commit"))?;
        change.committed(head.version, &head.host_run_id, head.counters, &positions)
    }

    async fn list_messages(&self, app_id: &str, run_id: &str) -> StoreResult<Vec<Message>> {
        let rows = sqlx::query(
            "SELECT run_id, sequence_no, id, app_id, runtime_message_id, role, content, \
             message_type, content_blocks, tool_invocations, created_at FROM messages \
             WHERE run_id = $1 AND app_id = $2 ORDER BY sequence_no",
        )
        .bind(clean(run_id))
        .bind(clean(app_id))
        .fetch_all(&self.reader)
        .await
        .map_err(db("sqlite: list messages"))?;
        rows.iter().map(codec::message_from).collect()
    }

    async fn list_artifacts(&self, app_id: &str, run_id: &str) -> StoreResult<Vec<Artifact>> {
        let rows = sqlx::query(
            "SELECT run_id, sequence_no, id, app_id, artifact_type, format, storage_mode, \
             inline_content, metadata, created_at FROM artifacts \
             WHERE run_id = $1 AND app_id = $2 ORDER BY sequence_no",
        )
        .bind(clean(run_id))
        .bind(clean(app_id))
        .fetch_all(&self.reader)
        .await
        .map_err(db("sqlite: list artifacts"))?;
        rows.iter().map(codec::artifact_from).collect()
    }

    async fn list_interactions(&self, app_id: &str, run_id: &str) -> StoreResult<Vec<Interaction>> {
        let rows = sqlx::query(
            "SELECT run_id, id, app_id, runtime_kind, interaction_kind, status, title, summary, \
             request_payload, response_payload, resolved_by_external_id, resolved_at, \
             created_at, updated_at FROM interactions \
             WHERE run_id = $1 AND app_id = $2 ORDER BY created_at, id",
        )
        .bind(clean(run_id))
        .bind(clean(app_id))
        .fetch_all(&self.reader)
        .await
        .map_err(db("sqlite: list interactions"))?;
        rows.iter().map(codec::interaction_from).collect()
    }

    async fn list_tool_calls(
        &self,
        app_id: &str,
        run_id: &str,
    ) -> StoreResult<Vec<ToolCallRecord>> {
        let rows = sqlx::query(
            "SELECT run_id, id, app_id, tool_name, input, output, error, mutating, \
             approval_required, created_at FROM tool_calls \
             WHERE run_id = $1 AND app_id = $2 ORDER BY created_at, id",
        )
        .bind(clean(run_id))
        .bind(clean(app_id))
        .fetch_all(&self.reader)
        .await
        .map_err(db("sqlite: list tool calls"))?;
        rows.iter().map(codec::tool_call_from).collect()
    }

    async fn list_events_after(
        &self,
        app_id: &str,
        run_id: &str,
        after: i64,
        limit: Option<i64>,
    ) -> StoreResult<Vec<StoredEvent>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE run_id = $1 AND app_id = $2 AND sequence_no > $3 \
             ORDER BY sequence_no LIMIT $4"
        ))
        .bind(clean(run_id))
        .bind(clean(app_id))
        .bind(after)
        .bind(limit.map(|limit| limit.max(0)).unwrap_or(-1))
        .fetch_all(&self.reader)
        .await
        .map_err(db("sqlite: list events"))?;
        rows.iter().map(codec::event_from).collect()
    }

    async fn list_events_after_position(
        &self,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<StoredEvent>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE position > $1 ORDER BY position LIMIT $2"
        ))
        .bind(after)
        .bind(limit.max(0))
        .fetch_all(&self.reader)
        .await
        .map_err(db("sqlite: list events by position"))?;
        rows.iter().map(codec::event_from).collect()
    }

    async fn latest_checkpoint(&self, run_id: &str) -> StoreResult<Option<Checkpoint>> {
        let row = sqlx::query(
            "SELECT run_id, step, state, created_at FROM checkpoints WHERE run_id = $1 \
             ORDER BY step DESC LIMIT 1",
        )
        .bind(clean(run_id))
        .fetch_optional(&self.reader)
        .await
        .map_err(db("sqlite: latest checkpoint"))?;
        row.as_ref().map(codec::checkpoint_from).transpose()
    }

    async fn checkpoint_at(&self, run_id: &str, step: i64) -> StoreResult<Option<Checkpoint>> {
        let row = sqlx::query(
            "SELECT run_id, step, state, created_at FROM checkpoints \
             WHERE run_id = $1 AND step = $2",
        )
        .bind(clean(run_id))
        .bind(step)
        .fetch_optional(&self.reader)
        .await
        .map_err(db("sqlite: checkpoint at step"))?;
        row.as_ref().map(codec::checkpoint_from).transpose()
    }

    async fn get_secret(&self, run_id: &str, kind: &str) -> StoreResult<Option<Vec<u8>>> {
        let row = sqlx::query("SELECT ciphertext FROM run_secrets WHERE run_id = $1 AND kind = $2")
            .bind(clean(run_id))
            .bind(clean(kind))
            .fetch_optional(&self.reader)
            .await
            .map_err(db("sqlite: get secret"))?;
        row.as_ref().map(|row| row.bytes("ciphertext")).transpose()
    }

    async fn try_acquire_lease(
        &self,
        run_id: &str,
        owner: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let owner = clean(owner);
        let taken = sqlx::query(
            "UPDATE runs SET lease_owner = $2, lease_expires_at = $3 WHERE id = $1 \
             AND (lease_owner IS NULL OR lease_owner = $2 OR lease_expires_at IS NULL \
             OR lease_expires_at <= $4)",
        )
        .bind(clean(run_id))
        .bind(owner.as_ref())
        .bind(ts_text(until))
        .bind(ts_text(now))
        .execute(&self.writer)
        .await
        .map_err(db("sqlite: acquire lease"))?
        .rows_affected();
        Ok(taken == 1)
    }

    async fn renew_leases(&self, owner: &str, until: DateTime<Utc>) -> StoreResult<u64> {
        let renewed = sqlx::query("UPDATE runs SET lease_expires_at = $2 WHERE lease_owner = $1")
            .bind(clean(owner))
            .bind(ts_text(until))
            .execute(&self.writer)
            .await
            .map_err(db("sqlite: renew leases"))?
            .rows_affected();
        Ok(renewed)
    }

    async fn release_lease(&self, run_id: &str, owner: &str) -> StoreResult<()> {
        sqlx::query(
            "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL \
             WHERE id = $1 AND lease_owner = $2",
        )
        .bind(clean(run_id))
        .bind(clean(owner))
        .execute(&self.writer)
        .await
        .map_err(db("sqlite: release lease"))?;
        Ok(())
    }

    async fn list_orphaned_runs(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Run>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE status IN ('queued', 'running') \
             AND (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= $1) \
             ORDER BY created_at, id LIMIT $2"
        ))
        .bind(ts_text(now))
        .bind(limit.max(0))
        .fetch_all(&self.reader)
        .await
        .map_err(db("sqlite: list orphaned runs"))?;
        rows.iter().map(codec::run_from).collect()
    }

    async fn list_runs_leased_by(&self, owner: &str) -> StoreResult<Vec<Run>> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE lease_owner = $1 AND status IN ('queued', 'running') \
             ORDER BY created_at, id"
        ))
        .bind(clean(owner))
        .fetch_all(&self.reader)
        .await
        .map_err(db("sqlite: list leased runs"))?;
        rows.iter().map(codec::run_from).collect()
    }

    async fn get_cursor(&self, name: &str) -> StoreResult<Option<i64>> {
        sqlx::query_scalar("SELECT position FROM cursors WHERE name = $1")
            .bind(clean(name))
            .fetch_optional(&self.reader)
            .await
            .map_err(db("sqlite: get cursor"))
    }

    async fn advance_cursor(&self, name: &str, from: Option<i64>, to: i64) -> StoreResult<bool> {
        let query = match from {
            None => sqlx::query(
                "INSERT INTO cursors (name, position) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
            )
            .bind(clean(name))
            .bind(to),
            Some(from) => {
                sqlx::query("UPDATE cursors SET position = $2 WHERE name = $1 AND position = $3")
                    .bind(clean(name))
                    .bind(to)
                    .bind(from)
            }
        };
        let moved = query
            .execute(&self.writer)
            .await
            .map_err(db("sqlite: advance cursor"))?
            .rows_affected();
        Ok(moved == 1)
    }
}

fn agent_error(error: sqlx::Error) -> StoreError {
    if is_unique_violation(&error) {
        StoreError::Conflict(format!("agent: {error}"))
    } else {
        db("sqlite: write agent")(error)
    }
}
