//! The embedded SQLite store: one writer connection through which every write goes (SQLite has
//! a single writer anyway; each commit is one `BEGIN IMMEDIATE … COMMIT` batch, so the write
//! lock is taken up front), a few reader connections in WAL mode, or a single connection
//! shared by readers and the writer for an in-memory database.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use ar_core::agent::Agent;
use ar_core::ids::new_id;
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
use sqlx::{Row, Sqlite, SqliteConnection};

use crate::change::{AgentRow, Counters, Prepared, RunRow};
use crate::codec::{self, clean, parse_ts, ts_text, Cols};
use crate::error::{corrupt, is_unique_violation, ConnectError};
use crate::lanes::{Lane, Lanes};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// Read connections of a file database.
const READERS: u32 = 4;
/// How long a statement waits for another process's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// A [`Store`] on SQLite.
#[derive(Clone)]
pub struct SqliteStore {
    /// One connection; every write goes through it.
    writer: Arc<Lanes<Sqlite>>,
    /// Readers (the writer itself for an in-memory database).
    reader: Arc<Lanes<Sqlite>>,
    in_memory: bool,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("in_memory", &self.in_memory)
            .finish_non_exhaustive()
    }
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
        if dsn.is_empty() || dsn == "sqlite:" || dsn == "sqlite://" {
            // SQLite would open a private temporary database per connection.
            return Err(ConnectError::MissingPath);
        }
        let invalid = |source| ConnectError::InvalidAddress {
            backend: "sqlite",
            address: dsn.to_string(),
            source,
        };
        let connect = |source| ConnectError::Connect {
            backend: "sqlite",
            source,
        };

        // Each pool allows one connection more than it has lanes: the spare serves
        // migrations and `writer_pool` users without waiting for a lane.
        let store = if is_memory(dsn) {
            // A named, shared-cache in-memory database that lives while a connection to it
            // is open. The store keeps one connection for readers and the writer alike.
            let options = SqliteConnectOptions::from_str("sqlite::memory:")
                .map_err(invalid)?
                .foreign_keys(true)
                .busy_timeout(BUSY_TIMEOUT);
            let pool = SqlitePoolOptions::new()
                .max_connections(2)
                .idle_timeout(None)
                .max_lifetime(None)
                .test_before_acquire(false)
                .connect_with(options)
                .await
                .map_err(connect)?;
            let lanes = Arc::new(Lanes::new(pool, 1, None));
            SqliteStore {
                writer: Arc::clone(&lanes),
                reader: lanes,
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
                .max_connections(2)
                .max_lifetime(None)
                .idle_timeout(None)
                .test_before_acquire(false)
                .connect_with(options.clone())
                .await
                .map_err(connect)?;
            let reader = SqlitePoolOptions::new()
                .max_connections(READERS)
                .max_lifetime(None)
                .idle_timeout(None)
                .test_before_acquire(false)
                .connect_with(options)
                .await
                .map_err(connect)?;
            SqliteStore {
                writer: Arc::new(Lanes::new(writer, 1, None)),
                reader: Arc::new(Lanes::new(reader, READERS as usize, None)),
                in_memory: false,
            }
        };
        MIGRATOR
            .run(store.writer.pool())
            .await
            .map_err(|source| ConnectError::Migrate {
                backend: "sqlite",
                source,
            })?;
        Ok(store)
    }

    /// A pool on the database for diagnostics and tests (a spare connection beside the
    /// store's own writer).
    pub fn writer_pool(&self) -> &SqlitePool {
        self.writer.pool()
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.reader.close().await;
        self.writer.close().await;
    }

    /// Runs a commit batch on the writer connection. A batch that fails is rolled back here;
    /// one whose caller went away mid-flight is rolled back by the next writer (a no-op when
    /// it had committed).
    async fn run_batch(&self, batch: Batch, change: Prepared) -> StoreResult<(Prepared, Outcome)> {
        let sql = match batch {
            Batch::Create => COMMIT_CREATE.as_str(),
            Batch::Update => COMMIT_UPDATE.as_str(),
            Batch::Touch => COMMIT_TOUCH.as_str(),
        };
        let encoded = Encoded::new(&change)?;
        let query = bind_batch(sql, batch, &change, &encoded)?;
        let mut lane = self.writer_lane("sqlite: commit").await?;
        lane.set_in_batch(true);
        let result = query.fetch_all(lane.conn()).await;
        if result.is_err() {
            rollback(lane.conn()).await;
        }
        lane.set_in_batch(false);
        let rows = result.map_err(|error| lane.fail("sqlite: commit", error))?;
        drop(lane);
        let outcome = outcome_from(&rows)?;
        Ok((change, outcome))
    }

    /// A lane for reading: a reader, or the one connection of an in-memory database.
    async fn read_lane(&self, context: &'static str) -> StoreResult<Lane<Sqlite>> {
        if self.in_memory {
            self.writer_lane(context).await
        } else {
            self.reader.get(context).await
        }
    }

    /// The writer lane, with any batch a cancelled caller left open rolled back.
    async fn writer_lane(&self, context: &'static str) -> StoreResult<Lane<Sqlite>> {
        let mut lane = self.writer.get(context).await?;
        if lane.was_in_batch() {
            rollback(lane.conn()).await;
            lane.set_in_batch(false);
        }
        Ok(lane)
    }

    async fn run_by_host_run_id(
        &self,
        app_id: &str,
        host_run_id: &str,
    ) -> StoreResult<Option<Run>> {
        let mut lane = self.read_lane("sqlite: get run by host run id").await?;
        let row = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE app_id = $1 AND host_run_id = $2"
        ))
        .bind(clean(app_id))
        .bind(clean(host_run_id))
        .fetch_optional(lane.conn())
        .await
        .map_err(|error| lane.fail("sqlite: get run by host run id", error))?;
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

/// Binds the mutable columns of a run, as `$19..$37` of the commit batch.
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

// ---- The commit batch -------------------------------------------------------------------
//
// A commit is one multi-statement query, so it costs one hop to the connection's worker
// thread: `BEGIN IMMEDIATE`, the run-row statement, the record statements, `COMMIT`. The run
// statement stamps the row with a fresh `commit_token`; every record statement joins the run
// row on that token, so when the run statement matched nothing (stale version, unknown run,
// taken host run id) the records write nothing either. Records arrive as JSON arrays of
// arrays and are unpacked with `json_each`, which keeps the SQL text fixed (prepared once).
//
// Parameters: $1 run id, $2 app id, $3 token, $4..$6 event/message/artifact counts, $7 events,
// $8 event time, $9 messages, $10 artifacts, $11 interactions, $12 tool calls, $13..$15
// checkpoint step/state/time, $16 delete all secrets, $17 secret kinds to delete, $18 secrets
// to put; from $19 the run statement's own values.

/// Mutable run columns in binding order (`bind_run_mutable`).
const RUN_MUTABLE: [&str; 19] = [
    "agent_id",
    "target_type",
    "target_id",
    "target",
    "runtime_kind",
    "execution_mode",
    "invocation_mode",
    "external_actor_id",
    "status",
    "pause_reason",
    "approval_state",
    "input",
    "output_summary",
    "workspace_lease",
    "error_message",
    "started_at",
    "completed_at",
    "updated_at",
    "pause_requested",
];

const RUN_RETURNING: &str = "RETURNING version, event_seq, message_seq, artifact_seq, host_run_id";

const GATE: &str = "r.id = $1 AND r.commit_token = $3";

static RECORDS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO events (run_id, app_id, host_run_id, sequence_no, event_id, event_type, data, \
         created_at) \
         SELECT r.id, r.app_id, r.host_run_id, r.event_seq - $4 + j.key + 1, j.value ->> 0, \
         j.value ->> 1, j.value ->> 2, $8 FROM runs r, json_each($7) j WHERE {GATE} \
         ORDER BY j.key RETURNING position, sequence_no;
         INSERT INTO messages (run_id, sequence_no, id, app_id, runtime_message_id, role, content, \
         message_type, content_blocks, tool_invocations, created_at) \
         SELECT r.id, r.message_seq - $5 + j.key + 1, j.value ->> 0, r.app_id, j.value ->> 1, \
         j.value ->> 2, j.value ->> 3, j.value ->> 4, j.value ->> 5, j.value ->> 6, j.value ->> 7 \
         FROM runs r, json_each($9) j WHERE {GATE};
         INSERT INTO artifacts (run_id, sequence_no, id, app_id, artifact_type, format, \
         storage_mode, inline_content, metadata, created_at) \
         SELECT r.id, r.artifact_seq - $6 + j.key + 1, j.value ->> 0, r.app_id, j.value ->> 1, \
         j.value ->> 2, j.value ->> 3, j.value ->> 4, j.value ->> 5, j.value ->> 6 \
         FROM runs r, json_each($10) j WHERE {GATE};
         INSERT INTO interactions (run_id, id, app_id, runtime_kind, interaction_kind, status, \
         title, summary, request_payload, response_payload, resolved_by_external_id, resolved_at, \
         created_at, updated_at) \
         SELECT r.id, j.value ->> 0, r.app_id, j.value ->> 1, j.value ->> 2, j.value ->> 3, \
         j.value ->> 4, j.value ->> 5, j.value ->> 6, j.value ->> 7, j.value ->> 8, \
         j.value ->> 9, j.value ->> 10, j.value ->> 11 \
         FROM runs r, json_each($11) j WHERE {GATE} \
         ON CONFLICT (run_id, id) DO UPDATE SET app_id = excluded.app_id, \
         runtime_kind = excluded.runtime_kind, interaction_kind = excluded.interaction_kind, \
         status = excluded.status, title = excluded.title, summary = excluded.summary, \
         request_payload = excluded.request_payload, response_payload = excluded.response_payload, \
         resolved_by_external_id = excluded.resolved_by_external_id, \
         resolved_at = excluded.resolved_at, created_at = excluded.created_at, \
         updated_at = excluded.updated_at;
         INSERT INTO tool_calls (run_id, id, app_id, tool_name, input, output, error, mutating, \
         approval_required, created_at) \
         SELECT r.id, j.value ->> 0, r.app_id, j.value ->> 1, j.value ->> 2, j.value ->> 3, \
         j.value ->> 4, j.value ->> 5, j.value ->> 6, j.value ->> 7 \
         FROM runs r, json_each($12) j WHERE {GATE} \
         ON CONFLICT (run_id, id) DO UPDATE SET app_id = excluded.app_id, \
         tool_name = excluded.tool_name, input = excluded.input, output = excluded.output, \
         error = excluded.error, mutating = excluded.mutating, \
         approval_required = excluded.approval_required, created_at = excluded.created_at;
         INSERT INTO checkpoints (run_id, step, state, created_at) \
         SELECT r.id, $13, $14, $15 FROM runs r WHERE {GATE} AND $13 IS NOT NULL \
         ON CONFLICT (run_id, step) DO UPDATE SET state = excluded.state, \
         created_at = excluded.created_at;
         DELETE FROM run_secrets WHERE run_id = $1 \
         AND EXISTS (SELECT 1 FROM runs r WHERE {GATE}) \
         AND ($16 OR kind IN (SELECT value FROM json_each($17))) \
         AND kind NOT IN (SELECT value ->> 0 FROM json_each($18));
         INSERT INTO run_secrets (run_id, kind, ciphertext) \
         SELECT r.id, j.value ->> 0, unhex(j.value ->> 1) FROM runs r, json_each($18) j \
         WHERE {GATE} \
         ON CONFLICT (run_id, kind) DO UPDATE SET ciphertext = excluded.ciphertext;
         COMMIT;"
    )
});

/// Update the run row under its version guard ($38 is the expected version).
static COMMIT_UPDATE: LazyLock<String> = LazyLock::new(|| {
    let assignments: Vec<String> = RUN_MUTABLE
        .iter()
        .enumerate()
        .map(|(index, column)| format!("{column} = ${}", 19 + index))
        .collect();
    format!(
        "BEGIN IMMEDIATE;
         UPDATE runs SET {}, version = version + 1, event_seq = event_seq + $4, \
         message_seq = message_seq + $5, artifact_seq = artifact_seq + $6, commit_token = $3 \
         WHERE id = $1 AND app_id = $2 AND version = $38 {RUN_RETURNING};
         {}",
        assignments.join(", "),
        RECORDS.as_str()
    )
});

/// Lock the run row (the write lock is database-wide) and bump its counters only.
static COMMIT_TOUCH: LazyLock<String> = LazyLock::new(|| {
    format!(
        "BEGIN IMMEDIATE;
         UPDATE runs SET event_seq = event_seq + $4, message_seq = message_seq + $5, \
         artifact_seq = artifact_seq + $6, commit_token = $3 \
         WHERE id = $1 AND app_id = $2 {RUN_RETURNING};
         {}",
        RECORDS.as_str()
    )
});

/// Insert the run row ($38 host run id, $39 created_at), unless its id or host run id is taken.
static COMMIT_CREATE: LazyLock<String> = LazyLock::new(|| {
    let values: Vec<String> = (0..RUN_MUTABLE.len())
        .map(|index| format!("${}", 19 + index))
        .collect();
    format!(
        "BEGIN IMMEDIATE;
         INSERT INTO runs (id, app_id, host_run_id, created_at, version, event_seq, message_seq, \
         artifact_seq, commit_token, {}) \
         VALUES ($1, $2, $38, $39, 1, $4, $5, $6, $3, {}) \
         ON CONFLICT DO NOTHING {RUN_RETURNING};
         {}",
        RUN_MUTABLE.join(", "),
        values.join(", "),
        RECORDS.as_str()
    )
});

/// Which run-row statement a batch starts with.
#[derive(Clone, Copy)]
enum Batch {
    Create,
    Update,
    Touch,
}

/// The JSON parameters of a batch.
struct Encoded {
    token: String,
    events: String,
    messages: String,
    artifacts: String,
    interactions: String,
    tool_calls: String,
    secret_deletes: String,
    secret_puts: String,
}

fn to_json<T: serde::Serialize>(value: &T) -> StoreResult<String> {
    serde_json::to_string(value)
        .map_err(|error| StoreError::Backend(format!("sqlite: encoding commit rows: {error}")))
}

impl Encoded {
    fn new(change: &Prepared) -> StoreResult<Encoded> {
        let events: Vec<_> = change
            .events
            .iter()
            .map(|event| (&event.event_id, &event.event_type, &event.data_text))
            .collect();
        let messages: Vec<_> = change
            .messages
            .iter()
            .map(|row| {
                let m = &row.record;
                (
                    &m.id,
                    &m.runtime_message_id,
                    &m.role,
                    &m.content,
                    &m.message_type,
                    &row.content_blocks,
                    &row.tool_invocations,
                    ts_text(m.created_at),
                )
            })
            .collect();
        let artifacts: Vec<_> = change
            .artifacts
            .iter()
            .map(|row| {
                let a = &row.record;
                (
                    &a.id,
                    &a.artifact_type,
                    &a.format,
                    &a.storage_mode,
                    &a.inline_content,
                    &row.metadata,
                    ts_text(a.created_at),
                )
            })
            .collect();
        let interactions: Vec<_> = change
            .interactions
            .iter()
            .map(|row| {
                let i = &row.record;
                (
                    &i.id,
                    i.runtime_kind.as_str(),
                    &i.interaction_kind,
                    i.status.as_str(),
                    &i.title,
                    &i.summary,
                    &row.request_payload,
                    &row.response_payload,
                    &i.resolved_by_external_id,
                    ts_opt_text(i.resolved_at),
                    ts_text(i.created_at),
                    ts_text(i.updated_at),
                )
            })
            .collect();
        let tool_calls: Vec<_> = change
            .tool_calls
            .iter()
            .map(|row| {
                let c = &row.record;
                (
                    &c.id,
                    &c.tool_name,
                    &row.input,
                    &row.output,
                    &c.error,
                    c.mutating,
                    c.approval_required,
                    ts_text(c.created_at),
                )
            })
            .collect();
        let secret_puts: Vec<_> = change
            .secrets
            .puts
            .iter()
            .map(|(kind, ciphertext)| (kind, hex::encode(ciphertext)))
            .collect();
        Ok(Encoded {
            token: new_id("c"),
            events: to_json(&events)?,
            messages: to_json(&messages)?,
            artifacts: to_json(&artifacts)?,
            interactions: to_json(&interactions)?,
            tool_calls: to_json(&tool_calls)?,
            secret_deletes: to_json(&change.secrets.deletes)?,
            secret_puts: to_json(&secret_puts)?,
        })
    }
}

/// Binds `$1..$18`, then the run statement's values.
fn bind_batch<'q>(
    sql: &'q str,
    batch: Batch,
    change: &'q Prepared,
    encoded: &'q Encoded,
) -> StoreResult<SqliteQuery<'q>> {
    let checkpoint = change.checkpoint.as_ref();
    let query = sqlx::query(sql)
        .bind(change.run_id.as_str())
        .bind(change.app_id.as_str())
        .bind(encoded.token.as_str())
        .bind(change.events.len() as i64)
        .bind(change.messages.len() as i64)
        .bind(change.artifacts.len() as i64)
        .bind(encoded.events.as_str())
        .bind(ts_text(change.event_time))
        .bind(encoded.messages.as_str())
        .bind(encoded.artifacts.as_str())
        .bind(encoded.interactions.as_str())
        .bind(encoded.tool_calls.as_str())
        .bind(checkpoint.map(|c| c.step))
        .bind(checkpoint.map(|c| c.state.as_str()))
        .bind(checkpoint.map(|c| ts_text(c.created_at)))
        .bind(change.secrets.delete_all)
        .bind(encoded.secret_deletes.as_str())
        .bind(encoded.secret_puts.as_str());
    let run = change.run.as_ref();
    Ok(match (batch, run) {
        (Batch::Touch, _) => query,
        (Batch::Update, Some(run)) => bind_run_mutable(query, run).bind(change.expected_version),
        (Batch::Create, Some(run)) => bind_run_mutable(query, run)
            .bind(run.host_run_id.as_str())
            .bind(ts_text(run.created_at)),
        (Batch::Update | Batch::Create, None) => {
            return Err(StoreError::Backend(
                "sqlite: run row missing from change".to_string(),
            ))
        }
    })
}

/// What a batch reported: the run row after its statement (None when it matched nothing)
/// and the inserted events' positions in sequence order.
struct Outcome {
    head: Option<Head>,
    positions: Vec<i64>,
}

/// What the run-row statement of a commit hands back.
struct Head {
    version: i64,
    counters: Counters,
    host_run_id: String,
}

fn outcome_from(rows: &[SqliteRow]) -> StoreResult<Outcome> {
    let mut head = None;
    let mut assigned = Vec::new();
    for row in rows {
        if row.try_column("version").is_ok() {
            head = Some(Head {
                version: row.int("version")?,
                counters: Counters {
                    events: row.int("event_seq")?,
                    messages: row.int("message_seq")?,
                    artifacts: row.int("artifact_seq")?,
                },
                host_run_id: row.text("host_run_id")?,
            });
        } else {
            assigned.push((row.int("sequence_no")?, row.int("position")?));
        }
    }
    assigned.sort_unstable();
    Ok(Outcome {
        head,
        positions: assigned.into_iter().map(|(_, position)| position).collect(),
    })
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

static SEARCH_PAGE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {} FROM runs WHERE {SEARCH_FILTER} \
         ORDER BY created_at DESC, id DESC LIMIT $4 OFFSET $5",
        run_columns!()
    )
});

static SEARCH_COUNT: LazyLock<String> =
    LazyLock::new(|| format!("SELECT COUNT(*) FROM runs WHERE {SEARCH_FILTER}"));

#[async_trait]
impl Store for SqliteStore {
    fn driver(&self) -> &'static str {
        "sqlite"
    }

    fn in_memory(&self) -> bool {
        self.in_memory
    }

    async fn ping(&self) -> StoreResult<()> {
        let mut lane = self.read_lane("sqlite: ping").await?;
        sqlx::query("SELECT 1")
            .execute(lane.conn())
            .await
            .map_err(|error| lane.fail("sqlite: ping", error))?;
        Ok(())
    }

    async fn put_agent(&self, agent: &Agent) -> StoreResult<bool> {
        let row = AgentRow::encode(agent)?;
        let mut lane = self.writer_lane("sqlite: put agent").await?;
        lane.set_in_batch(true);
        let result = sqlx::query(
            "BEGIN IMMEDIATE;
                 SELECT EXISTS (SELECT 1 FROM agents WHERE app_id = $1 AND id = $2) AS existed;
                 INSERT INTO agents (app_id, id, name, runtime_kind, provider, model, \
                 system_prompt, skills, allowed_tools, allowed_targets, approval_mode, \
                 default_invocation_mode, execution_config, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) \
                 ON CONFLICT (app_id, id) DO UPDATE SET name = excluded.name, \
                 runtime_kind = excluded.runtime_kind, provider = excluded.provider, \
                 model = excluded.model, system_prompt = excluded.system_prompt, \
                 skills = excluded.skills, allowed_tools = excluded.allowed_tools, \
                 allowed_targets = excluded.allowed_targets, \
                 approval_mode = excluded.approval_mode, \
                 default_invocation_mode = excluded.default_invocation_mode, \
                 execution_config = excluded.execution_config, \
                 created_at = excluded.created_at, updated_at = excluded.updated_at;
                 COMMIT;",
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
        .fetch_all(lane.conn())
        .await;
        if result.is_err() {
            rollback(lane.conn()).await;
        }
        lane.set_in_batch(false);
        let rows = result.map_err(|error| {
            if is_unique_violation(&error) {
                StoreError::Conflict(format!("agent: {error}"))
            } else {
                lane.fail("sqlite: put agent", error)
            }
        })?;
        match rows.first() {
            Some(existed) => Ok(!existed.flag("existed")?),
            None => Err(StoreError::Backend(
                "sqlite: put agent returned nothing".to_string(),
            )),
        }
    }

    async fn get_agent(&self, app_id: &str, agent_id: &str) -> StoreResult<Option<Agent>> {
        let mut lane = self.read_lane("sqlite: get agent").await?;
        let row = sqlx::query(concat!(
            "SELECT ",
            agent_columns!(),
            " FROM agents WHERE app_id = $1 AND id = $2"
        ))
        .bind(clean(app_id))
        .bind(clean(agent_id))
        .fetch_optional(lane.conn())
        .await
        .map_err(|error| lane.fail("sqlite: get agent", error))?;
        row.as_ref().map(codec::agent_from).transpose()
    }

    async fn list_agents(&self, app_id: &str) -> StoreResult<Vec<Agent>> {
        let mut lane = self.read_lane("sqlite: list agents").await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            agent_columns!(),
            " FROM agents WHERE app_id = $1 ORDER BY created_at, id"
        ))
        .bind(clean(app_id))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("sqlite: list agents", error))?;
        rows.iter().map(codec::agent_from).collect()
    }

    async fn create_run(&self, change: RunChange) -> StoreResult<CreateRun> {
        let change = Prepared::for_create(change)?;
        let (change, outcome) = self.run_batch(Batch::Create, change).await?;
        let Some(head) = outcome.head else {
            let (app_id, run_id, host_run_id) = match &change.run {
                Some(run) => (&run.app_id, &run.id, &run.host_run_id),
                None => (&change.app_id, &change.run_id, &change.run_id),
            };
            if !host_run_id.is_empty() {
                if let Some(existing) = self.run_by_host_run_id(app_id, host_run_id).await? {
                    return Ok(CreateRun::HostRunIdTaken(Box::new(existing)));
                }
            }
            return Err(StoreError::Conflict(format!("run {run_id} already exists")));
        };
        change
            .committed(
                head.version,
                &head.host_run_id,
                head.counters,
                &outcome.positions,
            )
            .map(CreateRun::Created)
    }

    async fn get_run(&self, app_id: &str, run_id: &str) -> StoreResult<Option<Run>> {
        let mut lane = self.read_lane("sqlite: get run").await?;
        let row = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE id = $1 AND app_id = $2"
        ))
        .bind(clean(run_id))
        .bind(clean(app_id))
        .fetch_optional(lane.conn())
        .await
        .map_err(|error| lane.fail("sqlite: get run", error))?;
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
        let mut lane = self.read_lane("sqlite: list runs").await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE app_id = $1 ORDER BY created_at DESC, id DESC"
        ))
        .bind(clean(app_id))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("sqlite: list runs", error))?;
        rows.iter().map(codec::run_from).collect()
    }

    async fn search_runs(&self, search: &RunSearch) -> StoreResult<(Vec<Run>, i64)> {
        let needle = search_needle(&search.query);
        let status = search.status.map(RunStatus::as_str);
        // A limit of zero or less means no limit (SQLite reads -1 as unbounded).
        let limit = if search.limit > 0 { search.limit } else { -1 };
        let offset = search.offset.max(0);
        let mut lane = self.read_lane("sqlite: search runs").await?;
        let rows = sqlx::query(SEARCH_PAGE.as_str())
            .bind(clean(&search.app_id))
            .bind(needle.as_str())
            .bind(status)
            .bind(limit)
            .bind(offset)
            .fetch_all(lane.conn())
            .await
            .map_err(|error| lane.fail("sqlite: search runs", error))?;
        let total: i64 = sqlx::query_scalar(SEARCH_COUNT.as_str())
            .bind(clean(&search.app_id))
            .bind(needle.as_str())
            .bind(status)
            .fetch_one(lane.conn())
            .await
            .map_err(|error| lane.fail("sqlite: count runs", error))?;
        let runs = rows
            .iter()
            .map(codec::run_from)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok((runs, total))
    }

    async fn commit(&self, change: RunChange) -> StoreResult<Committed> {
        let change = Prepared::new(change)?;
        let batch = if change.run.is_some() {
            Batch::Update
        } else {
            Batch::Touch
        };
        let (change, outcome) = self.run_batch(batch, change).await?;
        let Some(head) = outcome.head else {
            let mut lane = self.read_lane("sqlite: check run").await?;
            let exists = sqlx::query("SELECT 1 FROM runs WHERE id = $1 AND app_id = $2")
                .bind(change.run_id.as_str())
                .bind(change.app_id.as_str())
                .fetch_optional(lane.conn())
                .await
                .map_err(|error| lane.fail("sqlite: check run", error))?
                .is_some();
            return Err(change.missing_or_stale(exists));
        };
        change.committed(
            head.version,
            &head.host_run_id,
            head.counters,
            &outcome.positions,
        )
    }

    async fn list_messages(&self, app_id: &str, run_id: &str) -> StoreResult<Vec<Message>> {
        let mut lane = self.read_lane("sqlite: list messages").await?;
        let rows = sqlx::query(
            "SELECT run_id, sequence_no, id, app_id, runtime_message_id, role, content, \
             message_type, content_blocks, tool_invocations, created_at FROM messages \
             WHERE run_id = $1 AND app_id = $2 ORDER BY sequence_no",
        )
        .bind(clean(run_id))
        .bind(clean(app_id))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("sqlite: list messages", error))?;
        rows.iter().map(codec::message_from).collect()
    }

    async fn list_artifacts(&self, app_id: &str, run_id: &str) -> StoreResult<Vec<Artifact>> {
        let mut lane = self.read_lane("sqlite: list artifacts").await?;
        let rows = sqlx::query(
            "SELECT run_id, sequence_no, id, app_id, artifact_type, format, storage_mode, \
             inline_content, metadata, created_at FROM artifacts \
             WHERE run_id = $1 AND app_id = $2 ORDER BY sequence_no",
        )
        .bind(clean(run_id))
        .bind(clean(app_id))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("sqlite: list artifacts", error))?;
        rows.iter().map(codec::artifact_from).collect()
    }

    async fn list_interactions(&self, app_id: &str, run_id: &str) -> StoreResult<Vec<Interaction>> {
        let mut lane = self.read_lane("sqlite: list interactions").await?;
        let rows = sqlx::query(
            "SELECT run_id, id, app_id, runtime_kind, interaction_kind, status, title, summary, \
             request_payload, response_payload, resolved_by_external_id, resolved_at, \
             created_at, updated_at FROM interactions \
             WHERE run_id = $1 AND app_id = $2 ORDER BY created_at, id",
        )
        .bind(clean(run_id))
        .bind(clean(app_id))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("sqlite: list interactions", error))?;
        rows.iter().map(codec::interaction_from).collect()
    }

    async fn list_tool_calls(
        &self,
        app_id: &str,
        run_id: &str,
    ) -> StoreResult<Vec<ToolCallRecord>> {
        let mut lane = self.read_lane("sqlite: list tool calls").await?;
        let rows = sqlx::query(
            "SELECT run_id, id, app_id, tool_name, input, output, error, mutating, \
             approval_required, created_at FROM tool_calls \
             WHERE run_id = $1 AND app_id = $2 ORDER BY created_at, id",
        )
        .bind(clean(run_id))
        .bind(clean(app_id))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("sqlite: list tool calls", error))?;
        rows.iter().map(codec::tool_call_from).collect()
    }

    async fn list_events_after(
        &self,
        app_id: &str,
        run_id: &str,
        after: i64,
        limit: Option<i64>,
    ) -> StoreResult<Vec<StoredEvent>> {
        let mut lane = self.read_lane("sqlite: list events").await?;
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
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("sqlite: list events", error))?;
        rows.iter().map(codec::event_from).collect()
    }

    async fn list_events_after_position(
        &self,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<StoredEvent>> {
        let mut lane = self.read_lane("sqlite: list events by position").await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE position > $1 ORDER BY position LIMIT $2"
        ))
        .bind(after)
        .bind(limit.max(0))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("sqlite: list events by position", error))?;
        rows.iter().map(codec::event_from).collect()
    }

    async fn latest_checkpoint(&self, run_id: &str) -> StoreResult<Option<Checkpoint>> {
        let mut lane = self.read_lane("sqlite: latest checkpoint").await?;
        let row = sqlx::query(
            "SELECT run_id, step, state, created_at FROM checkpoints WHERE run_id = $1 \
             ORDER BY step DESC LIMIT 1",
        )
        .bind(clean(run_id))
        .fetch_optional(lane.conn())
        .await
        .map_err(|error| lane.fail("sqlite: latest checkpoint", error))?;
        row.as_ref().map(codec::checkpoint_from).transpose()
    }

    async fn checkpoint_at(&self, run_id: &str, step: i64) -> StoreResult<Option<Checkpoint>> {
        let mut lane = self.read_lane("sqlite: checkpoint at step").await?;
        let row = sqlx::query(
            "SELECT run_id, step, state, created_at FROM checkpoints \
             WHERE run_id = $1 AND step = $2",
        )
        .bind(clean(run_id))
        .bind(step)
        .fetch_optional(lane.conn())
        .await
        .map_err(|error| lane.fail("sqlite: checkpoint at step", error))?;
        row.as_ref().map(codec::checkpoint_from).transpose()
    }

    async fn get_secret(&self, run_id: &str, kind: &str) -> StoreResult<Option<Vec<u8>>> {
        let mut lane = self.read_lane("sqlite: get secret").await?;
        let row = sqlx::query("SELECT ciphertext FROM run_secrets WHERE run_id = $1 AND kind = $2")
            .bind(clean(run_id))
            .bind(clean(kind))
            .fetch_optional(lane.conn())
            .await
            .map_err(|error| lane.fail("sqlite: get secret", error))?;
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
        let mut lane = self.writer_lane("sqlite: acquire lease").await?;
        let taken = sqlx::query(
            "UPDATE runs SET lease_owner = $2, lease_expires_at = $3 WHERE id = $1 \
             AND (lease_owner IS NULL OR lease_owner = $2 OR lease_expires_at IS NULL \
             OR lease_expires_at <= $4)",
        )
        .bind(clean(run_id))
        .bind(owner.as_ref())
        .bind(ts_text(until))
        .bind(ts_text(now))
        .execute(lane.conn())
        .await
        .map_err(|error| lane.fail("sqlite: acquire lease", error))?
        .rows_affected();
        Ok(taken == 1)
    }

    async fn renew_leases(&self, owner: &str, until: DateTime<Utc>) -> StoreResult<u64> {
        let mut lane = self.writer_lane("sqlite: renew leases").await?;
        let renewed = sqlx::query("UPDATE runs SET lease_expires_at = $2 WHERE lease_owner = $1")
            .bind(clean(owner))
            .bind(ts_text(until))
            .execute(lane.conn())
            .await
            .map_err(|error| lane.fail("sqlite: renew leases", error))?
            .rows_affected();
        Ok(renewed)
    }

    async fn release_lease(&self, run_id: &str, owner: &str) -> StoreResult<()> {
        let mut lane = self.writer_lane("sqlite: release lease").await?;
        sqlx::query(
            "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL \
             WHERE id = $1 AND lease_owner = $2",
        )
        .bind(clean(run_id))
        .bind(clean(owner))
        .execute(lane.conn())
        .await
        .map_err(|error| lane.fail("sqlite: release lease", error))?;
        Ok(())
    }

    async fn list_orphaned_runs(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Run>> {
        let mut lane = self.read_lane("sqlite: list orphaned runs").await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE status IN ('queued', 'running') \
             AND (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= $1) \
             ORDER BY created_at, id LIMIT $2"
        ))
        .bind(ts_text(now))
        .bind(limit.max(0))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("sqlite: list orphaned runs", error))?;
        rows.iter().map(codec::run_from).collect()
    }

    async fn list_runs_leased_by(&self, owner: &str) -> StoreResult<Vec<Run>> {
        let mut lane = self.read_lane("sqlite: list leased runs").await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE lease_owner = $1 AND status IN ('queued', 'running') \
             ORDER BY created_at, id"
        ))
        .bind(clean(owner))
        .fetch_all(lane.conn())
        .await
        .map_err(|error| lane.fail("sqlite: list leased runs", error))?;
        rows.iter().map(codec::run_from).collect()
    }

    async fn get_cursor(&self, name: &str) -> StoreResult<Option<i64>> {
        let mut lane = self.read_lane("sqlite: get cursor").await?;
        sqlx::query_scalar("SELECT position FROM cursors WHERE name = $1")
            .bind(clean(name))
            .fetch_optional(lane.conn())
            .await
            .map_err(|error| lane.fail("sqlite: get cursor", error))
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
        let mut lane = self.writer_lane("sqlite: advance cursor").await?;
        let moved = query
            .execute(lane.conn())
            .await
            .map_err(|error| lane.fail("sqlite: advance cursor", error))?
            .rows_affected();
        Ok(moved == 1)
    }
}

/// Ends a batch's transaction after a failure. SQLite has already rolled back on some errors;
/// then there is nothing to end and the error from ROLLBACK is expected, so it is ignored.
async fn rollback(conn: &mut SqliteConnection) {
    if let Err(error) = sqlx::query("ROLLBACK").execute(conn).await {
        tracing::debug!(%error, "sqlite: rollback after a failed batch");
    }
}
