//! The embedded SQLite store: statements run inline on the calling thread through rusqlite,
//! on one writer connection (SQLite has one writer anyway; each commit is one
//! `BEGIN IMMEDIATE … COMMIT`) and a few reader connections in WAL mode, or on one connection
//! for reads and writes alike for an in-memory database.
//!
//! The schema is applied at connect by sqlx's migrator (the same `_sqlx_migrations` table as
//! always, so existing databases open unchanged) through a short-lived sqlx pool that is closed
//! before the store is used. How an operation runs on a connection (inline, or on the
//! blocking pool while another process holds the lock) is in `conn`; the commit transaction in
//! `commit`; WAL checkpoints in `checkpoint`.

mod checkpoint;
mod commit;
mod conn;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, LazyLock};

use ar_core::agent::Agent;
use ar_core::records::{Artifact, Interaction, Message, ToolCallRecord};
use ar_core::store::{
    Checkpoint, Committed, CreateRun, RunChange, RunSearch, Store, StoreError, StoreResult,
};
use ar_core::{Run, RunStatus, StoredEvent};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::types::{FromSql, ValueRef};
use rusqlite::{params, Connection, Params};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use self::checkpoint::Checkpointer;
use self::commit::{Applied, Kind};
use self::conn::{
    is_unique_violation, lock_writer, write_transaction, DbResult, Fail, Hold as _, Readers, Role,
    Target, WriterSlot, BUSY_TIMEOUT,
};
use crate::change::{AgentRow, Prepared};
use crate::codec::{self, clean, parse_ts, ts_text, Cols};
use crate::error::{corrupt, ConnectError};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// A [`Store`] on SQLite.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// Every write goes through this connection; an in-memory database reads through it too.
    writer: WriterSlot,
    /// Readers of a file database (`None` in memory).
    readers: Option<Arc<Readers>>,
    /// WAL checkpoints of a file database.
    checkpointer: Option<Checkpointer>,
    in_memory: bool,
    /// Commits waiting for the writer: whoever holds it next writes all of them in one
    /// transaction (group commit).
    queue: parking_lot::Mutex<Vec<QueuedCommit>>,
}

/// A commit waiting for the writer, and where its outcome goes.
struct QueuedCommit {
    kind: Kind,
    change: Prepared,
    reply: CommitReply,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("in_memory", &self.inner.in_memory)
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

/// Applies the migrations through a short-lived sqlx pool of one connection.
async fn migrate(options: SqliteConnectOptions) -> Result<(), ConnectError> {
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .test_before_acquire(false)
        .connect_with(options)
        .await
        .map_err(|source| ConnectError::Connect {
            backend: "sqlite",
            source,
        })?;
    let result = MIGRATOR.run(&pool).await;
    pool.close().await;
    result.map_err(|source| ConnectError::Migrate {
        backend: "sqlite",
        source,
    })
}

fn open_error(source: rusqlite::Error) -> ConnectError {
    ConnectError::Open { source }
}

impl SqliteStore {
    /// Opens (creating if missing) the database at a file path or `sqlite:` URL, or an
    /// in-memory database for `:memory:` / `sqlite::memory:`, and applies the migrations.
    ///
    /// A URL's query parameters are checked and honoured by the migration connection; the
    /// store's own connections always open the file read-write with a private cache.
    pub async fn connect(dsn_or_path: &str) -> Result<Self, ConnectError> {
        let dsn = dsn_or_path.trim();
        if dsn.is_empty() || dsn == "sqlite:" || dsn == "sqlite://" {
            // SQLite would open a private temporary database per connection.
            return Err(ConnectError::MissingPath);
        }
        if is_memory(dsn) {
            return Self::connect_memory().await;
        }
        let options = if dsn.starts_with("sqlite:") {
            SqliteConnectOptions::from_str(dsn).map_err(|source| ConnectError::InvalidAddress {
                backend: "sqlite",
                address: dsn.to_string(),
                source,
            })?
        } else {
            SqliteConnectOptions::new().filename(dsn)
        };
        create_parent_dir(options.get_filename())?;
        let target = Target::File(options.get_filename().to_path_buf());
        // Creates the file and switches it to WAL (a property of the file) before the
        // store's connections open it.
        migrate(
            options
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(BUSY_TIMEOUT)
                .foreign_keys(true),
        )
        .await?;
        let writer: WriterSlot = Arc::new(tokio::sync::Mutex::new(Some(
            target.open(Role::Writer).map_err(open_error)?,
        )));
        let reader = target.open(Role::Reader).map_err(open_error)?;
        let checkpointer = Checkpointer::start(
            target.open(Role::Checkpointer).map_err(open_error)?,
            Arc::clone(&writer),
        )
        .map_err(|source| ConnectError::Thread { source })?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                writer,
                readers: Some(Readers::new(target, reader)),
                checkpointer: Some(checkpointer),
                in_memory: false,
                queue: parking_lot::Mutex::new(Vec::new()),
            }),
        })
    }

    /// A named in-memory database with one connection for the store. The database lives while
    /// that connection is open, so it is opened before the migration connection and outlives it.
    async fn connect_memory() -> Result<Self, ConnectError> {
        let target = Target::new_memory();
        let conn = target.open(Role::Writer).map_err(open_error)?;
        migrate(
            SqliteConnectOptions::new()
                .filename(target.path())
                .in_memory(true)
                .shared_cache(true)
                .foreign_keys(true),
        )
        .await?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                writer: Arc::new(tokio::sync::Mutex::new(Some(conn))),
                readers: None,
                checkpointer: None,
                in_memory: true,
                queue: parking_lot::Mutex::new(Vec::new()),
            }),
        })
    }

    /// Reads a pragma (its query form, `PRAGMA name`) on the writer connection, as text; for
    /// diagnostics and tests. `name` must be a plain identifier.
    pub async fn pragma(&self, name: &str) -> StoreResult<Option<String>> {
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(StoreError::backend_msg(format!(
                "sqlite: invalid pragma name {name:?}"
            )));
        }
        let sql = format!("PRAGMA {name}");
        let (_, value) = self
            .write("sqlite: pragma", sql, |conn, sql| {
                let mut statement = conn.prepare(sql)?;
                let mut rows = statement.query([])?;
                let Some(row) = rows.next()? else {
                    return Ok(None);
                };
                Ok(match row.get_ref(0)? {
                    ValueRef::Null => None,
                    ValueRef::Integer(value) => Some(value.to_string()),
                    ValueRef::Real(value) => Some(value.to_string()),
                    ValueRef::Text(text) | ValueRef::Blob(text) => {
                        Some(String::from_utf8_lossy(text).into_owned())
                    }
                })
            })
            .await?;
        Ok(value)
    }

    /// Closes every connection and stops the checkpoint thread. Operations after this fail.
    pub async fn close(&self) {
        let mut conns = Vec::new();
        if let Some(readers) = &self.inner.readers {
            conns.extend(readers.close());
        }
        if let Some(writer) = self.inner.writer.lock().await.take() {
            conns.push(writer);
        }
        let thread = self
            .inner
            .checkpointer
            .as_ref()
            .and_then(Checkpointer::stop);
        // Closing the last connection to a file checkpoints the WAL into it: not on this thread.
        let closing = tokio::task::spawn_blocking(move || {
            drop(conns);
            if let Some(thread) = thread {
                let _ = thread.join();
            }
        });
        if let Err(error) = closing.await {
            tracing::warn!(%error, "sqlite: closing connections");
        }
    }

    /// Runs a read on a reader (the single connection of an in-memory database).
    async fn read<T, F>(&self, context: &'static str, op: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: Fn(&Connection) -> DbResult<T> + Send + 'static,
    {
        let op = move |conn: &Connection, _: &()| op(conn);
        let ((), value) = match &self.inner.readers {
            Some(readers) => conn::run(readers.take(context)?, context, (), op).await?,
            None => {
                let writer = lock_writer(&self.inner.writer, context).await?;
                conn::run(writer, context, (), op).await?
            }
        };
        Ok(value)
    }

    /// Runs a write on the writer connection; `input` travels with it and is handed back.
    async fn write<S, T, F>(&self, context: &'static str, input: S, op: F) -> StoreResult<(S, T)>
    where
        S: Send + 'static,
        T: Send + 'static,
        F: Fn(&Connection, &S) -> DbResult<T> + Send + 'static,
    {
        let writer = lock_writer(&self.inner.writer, context).await?;
        let result = conn::run(writer, context, input, op).await;
        if result.is_ok() {
            self.note_write();
        }
        result
    }

    /// Counts a committed write towards the next WAL checkpoint.
    fn note_write(&self) {
        if let Some(checkpointer) = &self.inner.checkpointer {
            checkpointer.note_write();
        }
    }

    /// Runs a commit; the change is handed back with what it did.
    ///
    /// Group commit: the commit joins a queue, and the task that gets the writer first lets
    /// the tasks that are ready to run queue theirs too (one yield), then writes the whole
    /// queue in one transaction, each commit in its own savepoint, and answers every one.
    /// Under load this shares a transaction's fixed cost (locks, WAL frames of the pages
    /// commits have in common) among many runs; alone, a commit is written by itself.
    async fn apply(&self, kind: Kind, change: Prepared) -> StoreResult<(Prepared, Applied)> {
        const CONTEXT: &str = "sqlite: commit";
        let unanswered = || StoreError::backend_msg(format!("{CONTEXT}: the store went away"));
        let (reply, mut answer) = tokio::sync::oneshot::channel();
        self.inner.queue.lock().push(QueuedCommit {
            kind,
            change,
            reply,
        });
        let mut writer = tokio::select! {
            biased;
            answered = &mut answer => return answered.unwrap_or_else(|_| Err(unanswered())),
            writer = lock_writer(&self.inner.writer, CONTEXT) => writer?,
        };
        // Whoever held the writer before may have written this commit with theirs.
        if let Ok(answered) = answer.try_recv() {
            return answered;
        }
        tokio::task::yield_now().await;
        let queued = std::mem::take(&mut *self.inner.queue.lock());
        let (jobs, replies): (Vec<_>, Vec<_>) = queued
            .into_iter()
            .map(|queued| ((queued.kind, queued.change), queued.reply))
            .unzip();
        tracing::trace!(count = jobs.len(), "sqlite: group commit");
        // Written inline; from here until every commit is answered nothing awaits, so a
        // caller that goes away cannot strand the others' answers.
        let inline = match writer.conn(CONTEXT) {
            Ok(conn) => commit::apply_group(conn, &jobs, CONTEXT),
            Err(error) => Err(error.into()),
        };
        match inline {
            Ok(outcomes) => {
                drop(writer);
                self.answer(jobs, outcomes, replies);
            }
            Err(fail) if fail.is_busy() => {
                // Another process holds the database: wait for it on the blocking pool, in
                // a task of its own that answers everyone whatever becomes of this caller.
                let store = self.clone();
                tokio::spawn(async move {
                    let group = |conn: &Connection, jobs: &Vec<(Kind, Prepared)>| {
                        commit::apply_group(conn, jobs, CONTEXT)
                    };
                    match conn::run(writer, CONTEXT, jobs, group).await {
                        Ok((jobs, outcomes)) => store.answer(jobs, outcomes, replies),
                        Err(error) => fail_all(replies, &error),
                    }
                });
            }
            Err(fail) => {
                drop(writer);
                fail_all(replies, &fail.into_store(CONTEXT));
            }
        }
        answer.await.unwrap_or_else(|_| Err(unanswered()))
    }

    /// Hands each grouped commit its outcome (with its change back).
    fn answer(
        &self,
        jobs: Vec<(Kind, Prepared)>,
        outcomes: Vec<StoreResult<Applied>>,
        replies: Vec<CommitReply>,
    ) {
        for (((_, change), outcome), reply) in jobs.into_iter().zip(outcomes).zip(replies) {
            if outcome.is_ok() {
                self.note_write();
            }
            let _ = reply.send(outcome.map(|applied| (change, applied)));
        }
    }
}

type CommitReply = tokio::sync::oneshot::Sender<StoreResult<(Prepared, Applied)>>;

/// Answers every grouped commit with the error that failed the group.
fn fail_all(replies: Vec<CommitReply>, error: &StoreError) {
    for reply in replies {
        let _ = reply.send(Err(error.clone()));
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

// ---- Reading rows -----------------------------------------------------------------------

/// One result row with the names of the columns its query selected, in order. Columns are
/// looked up in this list (a few pointer-sized comparisons) rather than through SQLite's
/// column names, which are C strings checked for UTF-8 on every lookup.
struct SqlRow<'a, 'r> {
    row: &'a rusqlite::Row<'r>,
    names: &'a [&'static str],
}

impl SqlRow<'_, '_> {
    fn get<T: FromSql>(&self, column: &str) -> StoreResult<T> {
        let Some(index) = self.names.iter().position(|name| *name == column) else {
            return Err(StoreError::Corrupt(format!("{column}: not selected")));
        };
        self.row.get(index).map_err(|error| corrupt(column, error))
    }
}

impl Cols for SqlRow<'_, '_> {
    fn text(&self, column: &str) -> StoreResult<String> {
        self.get(column)
    }

    fn text_opt(&self, column: &str) -> StoreResult<Option<String>> {
        self.get(column)
    }

    fn int(&self, column: &str) -> StoreResult<i64> {
        self.get(column)
    }

    fn flag(&self, column: &str) -> StoreResult<bool> {
        self.get(column)
    }

    fn bytes(&self, column: &str) -> StoreResult<Vec<u8>> {
        self.get(column)
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

/// The names in a column list (`"a, b, c"`).
fn names(list: &'static str) -> Vec<&'static str> {
    list.split(',').map(str::trim).collect()
}

/// A query's SQL with the names of the columns it selects.
struct Select {
    sql: LazyLock<String>,
    names: LazyLock<Vec<&'static str>>,
}

macro_rules! select {
    ($columns:expr, $rest:expr) => {
        Select {
            sql: LazyLock::new(|| format!("SELECT {} {}", $columns, $rest)),
            names: LazyLock::new(|| names($columns)),
        }
    };
}

/// Runs a query and decodes every row.
fn query_all<T>(
    conn: &Connection,
    select: &Select,
    params: impl Params,
    decode: impl Fn(&SqlRow<'_, '_>) -> StoreResult<T>,
) -> DbResult<Vec<T>> {
    let mut statement = conn.prepare_cached(&select.sql)?;
    let mut rows = statement.query(params)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(decode(&SqlRow {
            row,
            names: &select.names,
        })?);
    }
    Ok(out)
}

/// Runs a query and decodes its first row, if any.
fn query_one<T>(
    conn: &Connection,
    select: &Select,
    params: impl Params,
    decode: impl Fn(&SqlRow<'_, '_>) -> StoreResult<T>,
) -> DbResult<Option<T>> {
    let mut statement = conn.prepare_cached(&select.sql)?;
    let mut rows = statement.query(params)?;
    match rows.next()? {
        Some(row) => Ok(Some(decode(&SqlRow {
            row,
            names: &select.names,
        })?)),
        None => Ok(None),
    }
}

/// The `ciphertext` column of the one row `sql` selects, if there is one (sealed run and app
/// secrets).
fn ciphertext(conn: &Connection, sql: &str, params: impl Params) -> DbResult<Option<Vec<u8>>> {
    let mut statement = conn.prepare_cached(sql)?;
    let mut rows = statement.query(params)?;
    match rows.next()? {
        Some(row) => {
            Ok(Some(row.get(0).map_err(|error| {
                Fail::Store(corrupt("ciphertext", error))
            })?))
        }
        None => Ok(None),
    }
}

const RUN_COLUMNS: &str = run_columns!();
const AGENT_COLUMNS: &str = agent_columns!();
const EVENT_COLUMNS: &str = event_columns!();
const MESSAGE_COLUMNS: &str = "run_id, sequence_no, id, app_id, runtime_message_id, role, \
     content, message_type, content_blocks, tool_invocations, created_at";
const ARTIFACT_COLUMNS: &str = "run_id, sequence_no, id, app_id, artifact_type, format, \
     storage_mode, inline_content, metadata, created_at";
const INTERACTION_COLUMNS: &str = "run_id, id, app_id, runtime_kind, interaction_kind, status, \
     title, summary, request_payload, response_payload, resolved_by_external_id, resolved_at, \
     created_at, updated_at";
const TOOL_CALL_COLUMNS: &str = "run_id, id, app_id, tool_name, input, output, error, mutating, \
     approval_required, created_at";
const CHECKPOINT_COLUMNS: &str = "run_id, step, state, created_at";

static GET_AGENT: Select = select!(AGENT_COLUMNS, "FROM agents WHERE app_id = ?1 AND id = ?2");
static LIST_AGENTS: Select = select!(
    AGENT_COLUMNS,
    "FROM agents WHERE app_id = ?1 ORDER BY created_at, id"
);
static GET_RUN: Select = select!(RUN_COLUMNS, "FROM runs WHERE id = ?1 AND app_id = ?2");
static RUN_BY_HOST_RUN_ID: Select = select!(
    RUN_COLUMNS,
    "FROM runs WHERE app_id = ?1 AND host_run_id = ?2"
);
static LIST_RUNS: Select = select!(
    RUN_COLUMNS,
    "FROM runs WHERE app_id = ?1 ORDER BY created_at DESC, id DESC"
);

/// The search filter: `?1` app, `?2` lowercased needle (`instr`, so `%` and `_` are
/// literal), `?3` status or NULL.
const SEARCH_FILTER: &str = "app_id = ?1 \
     AND (?2 = '' OR instr(lower(id), ?2) > 0 OR instr(lower(host_run_id), ?2) > 0 \
     OR instr(lower(agent_id), ?2) > 0 OR instr(lower(target_id), ?2) > 0 \
     OR instr(lower(target_type), ?2) > 0) \
     AND (?3 IS NULL OR status = ?3)";

static SEARCH_PAGE: Select = Select {
    sql: LazyLock::new(|| {
        format!(
            "SELECT {RUN_COLUMNS} FROM runs WHERE {SEARCH_FILTER} \
             ORDER BY created_at DESC, id DESC LIMIT ?4 OFFSET ?5"
        )
    }),
    names: LazyLock::new(|| names(RUN_COLUMNS)),
};

static SEARCH_COUNT: LazyLock<String> =
    LazyLock::new(|| format!("SELECT COUNT(*) FROM runs WHERE {SEARCH_FILTER}"));

const COUNT_BY_STATUS: &str = "SELECT status, COUNT(*) FROM runs GROUP BY status";

static LIST_MESSAGES: Select = select!(
    MESSAGE_COLUMNS,
    "FROM messages WHERE run_id = ?1 AND app_id = ?2 ORDER BY sequence_no"
);
static LIST_ARTIFACTS: Select = select!(
    ARTIFACT_COLUMNS,
    "FROM artifacts WHERE run_id = ?1 AND app_id = ?2 ORDER BY sequence_no"
);
static LIST_INTERACTIONS: Select = select!(
    INTERACTION_COLUMNS,
    "FROM interactions WHERE run_id = ?1 AND app_id = ?2 ORDER BY created_at, id"
);
static LIST_TOOL_CALLS: Select = select!(
    TOOL_CALL_COLUMNS,
    "FROM tool_calls WHERE run_id = ?1 AND app_id = ?2 ORDER BY created_at, id"
);
static EVENTS_AFTER: Select = select!(
    EVENT_COLUMNS,
    "FROM events WHERE run_id = ?1 AND app_id = ?2 AND sequence_no > ?3 \
     ORDER BY sequence_no LIMIT ?4"
);
static EVENTS_AFTER_POSITION: Select = select!(
    EVENT_COLUMNS,
    "FROM events WHERE position > ?1 ORDER BY position LIMIT ?2"
);
static LATEST_CHECKPOINT: Select = select!(
    CHECKPOINT_COLUMNS,
    "FROM checkpoints WHERE run_id = ?1 ORDER BY step DESC LIMIT 1"
);
static CHECKPOINT_AT: Select = select!(
    CHECKPOINT_COLUMNS,
    "FROM checkpoints WHERE run_id = ?1 AND step = ?2"
);
static ORPHANED_RUNS: Select = select!(
    RUN_COLUMNS,
    "FROM runs WHERE status IN ('queued', 'running') \
     AND (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= ?1) \
     ORDER BY created_at, id LIMIT ?2"
);
static STALE_DURABLE_RUNS: Select = select!(
    RUN_COLUMNS,
    "FROM runs WHERE execution_mode = 'durable' AND status IN ('queued', 'running', 'paused') \
     AND updated_at <= ?1 ORDER BY updated_at, id LIMIT ?2"
);
static RUNS_LEASED_BY: Select = select!(
    RUN_COLUMNS,
    "FROM runs WHERE lease_owner = ?1 AND status IN ('queued', 'running') \
     ORDER BY created_at, id"
);

const AGENT_EXISTS: &str = "SELECT 1 FROM agents WHERE app_id = ?1 AND id = ?2";

const UPSERT_AGENT: &str = "INSERT INTO agents (app_id, id, name, runtime_kind, provider, model, \
     system_prompt, skills, allowed_tools, allowed_targets, approval_mode, \
     default_invocation_mode, execution_config, created_at, updated_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15) \
     ON CONFLICT (app_id, id) DO UPDATE SET name = excluded.name, \
     runtime_kind = excluded.runtime_kind, provider = excluded.provider, \
     model = excluded.model, system_prompt = excluded.system_prompt, \
     skills = excluded.skills, allowed_tools = excluded.allowed_tools, \
     allowed_targets = excluded.allowed_targets, approval_mode = excluded.approval_mode, \
     default_invocation_mode = excluded.default_invocation_mode, \
     execution_config = excluded.execution_config, \
     created_at = excluded.created_at, updated_at = excluded.updated_at";

/// A run by host run id (also read inside a create that found it taken).
fn read_run_by_host_run_id(
    conn: &Connection,
    app_id: &str,
    host_run_id: &str,
) -> DbResult<Option<Run>> {
    query_one(
        conn,
        &RUN_BY_HOST_RUN_ID,
        params![app_id, host_run_id],
        |row| codec::run_from(row),
    )
}

fn owned(text: &str) -> String {
    clean(text).into_owned()
}

/// Escapes nothing: the search uses `instr`, so `%` and `_` in a query are literal.
fn search_needle(query: &str) -> String {
    clean(query.trim()).to_lowercase()
}

#[async_trait]
impl Store for SqliteStore {
    fn driver(&self) -> &'static str {
        "sqlite"
    }

    fn in_memory(&self) -> bool {
        self.inner.in_memory
    }

    async fn ping(&self) -> StoreResult<()> {
        self.read("sqlite: ping", |conn| {
            conn.prepare_cached("SELECT 1")?
                .query_row([], |_| Ok(()))
                .map_err(Fail::from)
        })
        .await
    }

    async fn put_agent(&self, agent: &Agent) -> StoreResult<bool> {
        let row = AgentRow::encode(agent)?;
        let (_, created) = self
            .write("sqlite: put agent", row, |conn, row| {
                write_transaction(conn, |conn| {
                    let existed = conn
                        .prepare_cached(AGENT_EXISTS)?
                        .exists(params![row.app_id, row.id])?;
                    conn.prepare_cached(UPSERT_AGENT)?
                        .execute(params![
                            row.app_id,
                            row.id,
                            row.name,
                            row.runtime_kind,
                            row.provider,
                            row.model,
                            row.system_prompt,
                            row.skills,
                            row.allowed_tools,
                            row.allowed_targets,
                            row.approval_mode,
                            row.default_invocation_mode,
                            row.execution_config,
                            ts_text(row.created_at),
                            ts_text(row.updated_at),
                        ])
                        .map_err(|error| {
                            if is_unique_violation(&error) {
                                Fail::Store(StoreError::Conflict(format!("agent: {error}")))
                            } else {
                                Fail::Sql(error)
                            }
                        })?;
                    Ok(!existed)
                })
            })
            .await?;
        Ok(created)
    }

    async fn get_agent(&self, app_id: &str, agent_id: &str) -> StoreResult<Option<Agent>> {
        let (app_id, agent_id) = (owned(app_id), owned(agent_id));
        self.read("sqlite: get agent", move |conn| {
            query_one(conn, &GET_AGENT, params![app_id, agent_id], |row| {
                codec::agent_from(row)
            })
        })
        .await
    }

    async fn list_agents(&self, app_id: &str) -> StoreResult<Vec<Agent>> {
        let app_id = owned(app_id);
        self.read("sqlite: list agents", move |conn| {
            query_all(conn, &LIST_AGENTS, params![app_id], |row| {
                codec::agent_from(row)
            })
        })
        .await
    }

    async fn create_run(&self, change: RunChange) -> StoreResult<CreateRun> {
        let change = Prepared::for_create(change)?;
        let (change, applied) = self.apply(Kind::Create, change).await?;
        match applied {
            Applied::Done { head, positions } => change
                .committed(head.version, &head.host_run_id, head.counters, &positions)
                .map(CreateRun::Created),
            Applied::Taken(Some(existing)) => Ok(CreateRun::HostRunIdTaken(existing)),
            Applied::Taken(None) | Applied::Missing { .. } => Err(StoreError::Conflict(format!(
                "run {} already exists",
                change.run_id
            ))),
        }
    }

    async fn get_run(&self, app_id: &str, run_id: &str) -> StoreResult<Option<Run>> {
        let (app_id, run_id) = (owned(app_id), owned(run_id));
        self.read("sqlite: get run", move |conn| {
            query_one(conn, &GET_RUN, params![run_id, app_id], |row| {
                codec::run_from(row)
            })
        })
        .await
    }

    async fn get_run_by_host_run_id(
        &self,
        app_id: &str,
        host_run_id: &str,
    ) -> StoreResult<Option<Run>> {
        if host_run_id.is_empty() {
            return Ok(None);
        }
        let (app_id, host_run_id) = (owned(app_id), owned(host_run_id));
        self.read("sqlite: get run by host run id", move |conn| {
            read_run_by_host_run_id(conn, &app_id, &host_run_id)
        })
        .await
    }

    async fn list_runs(&self, app_id: &str) -> StoreResult<Vec<Run>> {
        let app_id = owned(app_id);
        self.read("sqlite: list runs", move |conn| {
            query_all(conn, &LIST_RUNS, params![app_id], |row| {
                codec::run_from(row)
            })
        })
        .await
    }

    async fn search_runs(&self, search: &RunSearch) -> StoreResult<(Vec<Run>, i64)> {
        let app_id = owned(&search.app_id);
        let needle = search_needle(&search.query);
        let status = search.status.map(RunStatus::as_str);
        // A limit of zero or less means no limit (SQLite reads -1 as unbounded).
        let limit = if search.limit > 0 { search.limit } else { -1 };
        let offset = search.offset.max(0);
        self.read("sqlite: search runs", move |conn| {
            let runs = query_all(
                conn,
                &SEARCH_PAGE,
                params![app_id, needle, status, limit, offset],
                |row| codec::run_from(row),
            )?;
            let total: i64 = conn
                .prepare_cached(&SEARCH_COUNT)?
                .query_row(params![app_id, needle, status], |row| row.get(0))?;
            Ok((runs, total))
        })
        .await
    }

    async fn count_runs_by_status(&self) -> StoreResult<Vec<(RunStatus, i64)>> {
        let counts: Vec<(String, i64)> = self
            .read("sqlite: count runs by status", |conn| {
                let mut statement = conn.prepare_cached(COUNT_BY_STATUS)?;
                let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await?;
        crate::statuses_counted(counts)
    }

    async fn commit(&self, change: RunChange) -> StoreResult<Committed> {
        let change = Prepared::new(change)?;
        let kind = if change.run.is_some() {
            Kind::Update
        } else {
            Kind::Touch
        };
        let (change, applied) = self.apply(kind, change).await?;
        match applied {
            Applied::Done { head, positions } => {
                change.committed(head.version, &head.host_run_id, head.counters, &positions)
            }
            Applied::Missing { exists } => Err(change.missing_or_stale(exists)),
            Applied::Taken(_) => Err(StoreError::backend_msg(
                "sqlite: commit: an update reported a create conflict".to_string(),
            )),
        }
    }

    async fn list_messages(&self, app_id: &str, run_id: &str) -> StoreResult<Vec<Message>> {
        let (app_id, run_id) = (owned(app_id), owned(run_id));
        self.read("sqlite: list messages", move |conn| {
            query_all(conn, &LIST_MESSAGES, params![run_id, app_id], |row| {
                codec::message_from(row)
            })
        })
        .await
    }

    async fn list_artifacts(&self, app_id: &str, run_id: &str) -> StoreResult<Vec<Artifact>> {
        let (app_id, run_id) = (owned(app_id), owned(run_id));
        self.read("sqlite: list artifacts", move |conn| {
            query_all(conn, &LIST_ARTIFACTS, params![run_id, app_id], |row| {
                codec::artifact_from(row)
            })
        })
        .await
    }

    async fn list_interactions(&self, app_id: &str, run_id: &str) -> StoreResult<Vec<Interaction>> {
        let (app_id, run_id) = (owned(app_id), owned(run_id));
        self.read("sqlite: list interactions", move |conn| {
            query_all(conn, &LIST_INTERACTIONS, params![run_id, app_id], |row| {
                codec::interaction_from(row)
            })
        })
        .await
    }

    async fn list_tool_calls(
        &self,
        app_id: &str,
        run_id: &str,
    ) -> StoreResult<Vec<ToolCallRecord>> {
        let (app_id, run_id) = (owned(app_id), owned(run_id));
        self.read("sqlite: list tool calls", move |conn| {
            query_all(conn, &LIST_TOOL_CALLS, params![run_id, app_id], |row| {
                codec::tool_call_from(row)
            })
        })
        .await
    }

    async fn list_events_after(
        &self,
        app_id: &str,
        run_id: &str,
        after: i64,
        limit: Option<i64>,
    ) -> StoreResult<Vec<StoredEvent>> {
        let (app_id, run_id) = (owned(app_id), owned(run_id));
        let limit = limit.map(|limit| limit.max(0)).unwrap_or(-1);
        self.read("sqlite: list events", move |conn| {
            query_all(
                conn,
                &EVENTS_AFTER,
                params![run_id, app_id, after, limit],
                |row| codec::event_from(row),
            )
        })
        .await
    }

    async fn list_events_after_position(
        &self,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<StoredEvent>> {
        let limit = limit.max(0);
        self.read("sqlite: list events by position", move |conn| {
            query_all(conn, &EVENTS_AFTER_POSITION, params![after, limit], |row| {
                codec::event_from(row)
            })
        })
        .await
    }

    async fn latest_checkpoint(&self, run_id: &str) -> StoreResult<Option<Checkpoint>> {
        let run_id = owned(run_id);
        self.read("sqlite: latest checkpoint", move |conn| {
            query_one(conn, &LATEST_CHECKPOINT, params![run_id], |row| {
                codec::checkpoint_from(row)
            })
        })
        .await
    }

    async fn checkpoint_at(&self, run_id: &str, step: i64) -> StoreResult<Option<Checkpoint>> {
        let run_id = owned(run_id);
        self.read("sqlite: checkpoint at step", move |conn| {
            query_one(conn, &CHECKPOINT_AT, params![run_id, step], |row| {
                codec::checkpoint_from(row)
            })
        })
        .await
    }

    async fn get_secret(&self, run_id: &str, kind: &str) -> StoreResult<Option<Vec<u8>>> {
        let (run_id, kind) = (owned(run_id), owned(kind));
        self.read("sqlite: get secret", move |conn| {
            ciphertext(
                conn,
                "SELECT ciphertext FROM run_secrets WHERE run_id = ?1 AND kind = ?2",
                params![run_id, kind],
            )
        })
        .await
    }

    async fn put_app_secret(&self, app_id: &str, name: &str, ciphertext: &[u8]) -> StoreResult<()> {
        let input = (
            owned(app_id),
            owned(name),
            ciphertext.to_vec(),
            ts_text(Utc::now()),
        );
        self.write(
            "sqlite: put app secret",
            input,
            |conn, (app, name, blob, at)| {
                conn.prepare_cached(
                    "INSERT INTO app_secrets (app_id, name, ciphertext, updated_at) \
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT (app_id, name) \
                 DO UPDATE SET ciphertext = excluded.ciphertext, updated_at = excluded.updated_at",
                )?
                .execute(params![app, name, blob, at])?;
                Ok(())
            },
        )
        .await?;
        Ok(())
    }

    async fn get_app_secret(&self, app_id: &str, name: &str) -> StoreResult<Option<Vec<u8>>> {
        let (app_id, name) = (owned(app_id), owned(name));
        self.read("sqlite: get app secret", move |conn| {
            ciphertext(
                conn,
                "SELECT ciphertext FROM app_secrets WHERE app_id = ?1 AND name = ?2",
                params![app_id, name],
            )
        })
        .await
    }

    async fn try_acquire_lease(
        &self,
        run_id: &str,
        owner: &str,
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let input = (owned(run_id), owned(owner), ts_text(until), ts_text(now));
        let (_, taken) = self
            .write(
                "sqlite: acquire lease",
                input,
                |conn, (run_id, owner, until, now)| {
                    Ok(conn
                    .prepare_cached(
                        "UPDATE runs SET lease_owner = ?2, lease_expires_at = ?3 WHERE id = ?1 \
                         AND (lease_owner IS NULL OR lease_owner = ?2 OR lease_expires_at IS NULL \
                         OR lease_expires_at <= ?4)",
                    )?
                    .execute(params![run_id, owner, until, now])?)
                },
            )
            .await?;
        Ok(taken == 1)
    }

    async fn renew_leases(&self, owner: &str, until: DateTime<Utc>) -> StoreResult<u64> {
        let input = (owned(owner), ts_text(until));
        let (_, renewed) = self
            .write("sqlite: renew leases", input, |conn, (owner, until)| {
                Ok(conn
                    .prepare_cached("UPDATE runs SET lease_expires_at = ?2 WHERE lease_owner = ?1")?
                    .execute(params![owner, until])?)
            })
            .await?;
        Ok(renewed as u64)
    }

    async fn release_lease(&self, run_id: &str, owner: &str) -> StoreResult<()> {
        let input = (owned(run_id), owned(owner));
        self.write("sqlite: release lease", input, |conn, (run_id, owner)| {
            conn.prepare_cached(
                "UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL \
                 WHERE id = ?1 AND lease_owner = ?2",
            )?
            .execute(params![run_id, owner])?;
            Ok(())
        })
        .await?;
        Ok(())
    }

    async fn list_orphaned_runs(&self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Run>> {
        let now = ts_text(now);
        let limit = limit.max(0);
        self.read("sqlite: list orphaned runs", move |conn| {
            query_all(conn, &ORPHANED_RUNS, params![now, limit], |row| {
                codec::run_from(row)
            })
        })
        .await
    }

    async fn list_stale_durable_runs(
        &self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<Vec<Run>> {
        let before = ts_text(before);
        let limit = limit.max(0);
        self.read("sqlite: list stale durable runs", move |conn| {
            query_all(conn, &STALE_DURABLE_RUNS, params![before, limit], |row| {
                codec::run_from(row)
            })
        })
        .await
    }

    async fn list_runs_leased_by(&self, owner: &str) -> StoreResult<Vec<Run>> {
        let owner = owned(owner);
        self.read("sqlite: list leased runs", move |conn| {
            query_all(conn, &RUNS_LEASED_BY, params![owner], |row| {
                codec::run_from(row)
            })
        })
        .await
    }

    async fn get_cursor(&self, name: &str) -> StoreResult<Option<i64>> {
        let name = owned(name);
        self.read("sqlite: get cursor", move |conn| {
            let mut statement =
                conn.prepare_cached("SELECT position FROM cursors WHERE name = ?1")?;
            let mut rows = statement.query(params![name])?;
            match rows.next()? {
                Some(row) => {
                    Ok(Some(row.get(0).map_err(|error| {
                        Fail::Store(corrupt("position", error))
                    })?))
                }
                None => Ok(None),
            }
        })
        .await
    }

    async fn advance_cursor(&self, name: &str, from: Option<i64>, to: i64) -> StoreResult<bool> {
        let (_, moved) = self
            .write("sqlite: advance cursor", owned(name), move |conn, name| {
                let moved = match from {
                    None => conn
                        .prepare_cached(
                            "INSERT INTO cursors (name, position) VALUES (?1, ?2) \
                             ON CONFLICT (name) DO NOTHING",
                        )?
                        .execute(params![name, to])?,
                    Some(from) => conn
                        .prepare_cached(
                            "UPDATE cursors SET position = ?2 WHERE name = ?1 AND position = ?3",
                        )?
                        .execute(params![name, to, from])?,
                };
                Ok(moved)
            })
            .await?;
        Ok(moved == 1)
    }
}
