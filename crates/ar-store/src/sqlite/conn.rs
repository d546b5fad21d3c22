//! SQLite connections and how a store operation runs on one: inline on the calling thread,
//! moving to tokio's blocking pool only when another process holds a lock.
//!
//! Every statement of this backend takes microseconds, so it runs where it is called: no
//! worker thread, no channel, no wake-up per call (each hop costs two context switches,
//! which dominated the store's cost when it went through sqlx's per-connection worker). The
//! one thing that can make a statement slow is a lock held by *another* process on the same
//! file (a second replica, a CLI tool), so inline attempts use no busy wait at all; an attempt
//! that meets `SQLITE_BUSY` is repeated whole on the blocking pool with the full busy timeout,
//! carrying its connection there, so an async worker never sleeps in SQLite's busy handler.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ar_core::store::{StoreError, StoreResult};
use rusqlite::{Connection, ErrorCode, OpenFlags};
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// How long a statement on the blocking pool waits for another process's lock.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the checkpoint thread waits for readers and writers before a truncating
/// checkpoint gives up (it holds the write lock meanwhile, so keep it short).
pub(super) const CHECKPOINT_BUSY_TIMEOUT: Duration = Duration::from_millis(200);
/// Idle reader connections kept for reuse; more are opened under concurrency and closed after.
const IDLE_READERS: usize = 4;
/// Prepared statements kept per connection: every statement of the store fits, so none is
/// prepared twice (the in-memory connection runs reads and writes alike).
const STATEMENT_CACHE: usize = 64;
/// The WAL file is cut back to this size when it restarts, so one burst does not leave a
/// large file behind.
const JOURNAL_SIZE_LIMIT: i64 = 64 * 1024 * 1024;

/// Where a store's connections open.
#[derive(Clone)]
pub(super) enum Target {
    /// A database file.
    File(PathBuf),
    /// A named in-memory database shared (through SQLite's shared cache) by the store's
    /// connection and the short-lived migration connection.
    Memory(String),
}

/// What a connection is for; each role gets its own pragmas.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Writer,
    Reader,
    Checkpointer,
}

impl Target {
    /// A fresh in-memory database name, unique in this process.
    pub fn new_memory() -> Target {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        Target::Memory(format!("file:ar-store-memory-{n}"))
    }

    pub fn path(&self) -> &Path {
        match self {
            Target::File(path) => path,
            Target::Memory(name) => Path::new(name),
        }
    }

    /// Opens and configures a connection.
    pub fn open(&self, role: Role) -> rusqlite::Result<Connection> {
        // URI names are accepted as sqlx accepts them, so both open the same database.
        let base = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = match self {
            Target::File(path) => {
                Connection::open_with_flags(path, base | OpenFlags::SQLITE_OPEN_PRIVATE_CACHE)?
            }
            Target::Memory(name) => Connection::open_with_flags(
                name,
                base | OpenFlags::SQLITE_OPEN_MEMORY | OpenFlags::SQLITE_OPEN_SHARED_CACHE,
            )?,
        };
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        // Temporary b-trees (sorts without an index) stay in memory: no temp files.
        let common = "PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;";
        match (self, role) {
            (Target::Memory(_), _) => conn.execute_batch(common)?,
            (Target::File(_), Role::Writer) => {
                // WAL with synchronous=NORMAL: a commit appends to the WAL without an fsync;
                // checkpoints (on their own thread, see `checkpoint`) sync. Autocheckpoint is
                // off so no commit ever copies the WAL back inline.
                conn.execute_batch(common)?;
                conn.execute_batch(&format!(
                    "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
                     PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT};"
                ))?;
            }
            (Target::File(_), Role::Reader) => conn.execute_batch(common)?,
            (Target::File(_), Role::Checkpointer) => {
                conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = 0;")?;
                conn.busy_timeout(CHECKPOINT_BUSY_TIMEOUT)?;
                return Ok(conn);
            }
        }
        // Inline attempts never wait; see the module comment.
        conn.busy_timeout(Duration::ZERO)?;
        Ok(conn)
    }
}

/// Why a statement failed: SQLite's error, or ours (a value that does not decode).
pub(super) enum Fail {
    Sql(rusqlite::Error),
    Store(StoreError),
}

pub(super) type DbResult<T> = Result<T, Fail>;

impl From<rusqlite::Error> for Fail {
    fn from(error: rusqlite::Error) -> Self {
        Fail::Sql(error)
    }
}

impl From<StoreError> for Fail {
    fn from(error: StoreError) -> Self {
        Fail::Store(error)
    }
}

impl Fail {
    /// Another connection holds a lock this statement needs.
    pub fn is_busy(&self) -> bool {
        matches!(self, Fail::Sql(rusqlite::Error::SqliteFailure(error, _))
            if error.code == ErrorCode::DatabaseBusy)
    }

    pub fn into_store(self, context: &'static str) -> StoreError {
        match self {
            Fail::Sql(error) => StoreError::backend(context, error),
            Fail::Store(error) => error,
        }
    }
}

/// Whether a SQLite error is a unique or primary-key constraint violation.
pub(super) fn is_unique_violation(error: &rusqlite::Error) -> bool {
    const UNIQUE: i32 = 2067; // SQLITE_CONSTRAINT_UNIQUE
    const PRIMARY_KEY: i32 = 1555; // SQLITE_CONSTRAINT_PRIMARYKEY
    matches!(error, rusqlite::Error::SqliteFailure(error, _)
        if error.extended_code == UNIQUE || error.extended_code == PRIMARY_KEY)
}

fn closed(context: &'static str) -> StoreError {
    StoreError::backend_msg(format!("{context}: store is closed"))
}

/// A connection held for one operation, movable to a blocking thread with it.
pub(super) trait Hold: Send + 'static {
    fn conn(&mut self, context: &'static str) -> StoreResult<&Connection>;
}

/// The writer connection, locked. `None` once the store is closed.
pub(super) type WriterSlot = Arc<AsyncMutex<Option<Connection>>>;

pub(super) struct WriterGuard(OwnedMutexGuard<Option<Connection>>);

impl Hold for WriterGuard {
    fn conn(&mut self, context: &'static str) -> StoreResult<&Connection> {
        self.0.as_ref().ok_or_else(|| closed(context))
    }
}

/// Locks the writer. The lock is asynchronous so that callers queue without blocking their
/// thread even while an operation waits on the blocking pool for another process; uncontended,
/// it is one atomic operation.
pub(super) async fn lock_writer(
    writer: &WriterSlot,
    context: &'static str,
) -> StoreResult<WriterGuard> {
    let guard = Arc::clone(writer).lock_owned().await;
    let Some(conn) = guard.as_ref() else {
        return Err(closed(context));
    };
    // Every operation ends its own transaction, also when it fails; one left open means an
    // operation panicked midway. End it so its partial writes are not committed by the next.
    if !conn.is_autocommit() {
        if let Err(error) = conn.execute_batch("ROLLBACK") {
            tracing::warn!(%error, "sqlite: rolling back a transaction left open");
        }
    }
    Ok(WriterGuard(guard))
}

/// Reader connections of a file database: a stack of idle ones (the most recently used on
/// top, so a sequential caller keeps one warm connection), opened on demand.
pub(super) struct Readers {
    target: Target,
    idle: parking_lot::Mutex<Vec<Connection>>,
    closed: AtomicBool,
}

impl Readers {
    pub fn new(target: Target, first: Connection) -> Arc<Readers> {
        Arc::new(Readers {
            target,
            idle: parking_lot::Mutex::new(vec![first]),
            closed: AtomicBool::new(false),
        })
    }

    /// An idle reader, or a new one when all are busy (reads never wait for each other).
    pub fn take(self: &Arc<Self>, context: &'static str) -> StoreResult<ReaderGuard> {
        if self.closed.load(Ordering::Acquire) {
            return Err(closed(context));
        }
        let idle = self.idle.lock().pop();
        let conn = match idle {
            Some(conn) => conn,
            None => self
                .target
                .open(Role::Reader)
                .map_err(|error| StoreError::backend(context, error))?,
        };
        Ok(ReaderGuard {
            conn: Some(conn),
            readers: Arc::clone(self),
        })
    }

    /// Closes the idle readers; busy ones close when their operation ends.
    pub fn close(&self) -> Vec<Connection> {
        self.closed.store(true, Ordering::Release);
        std::mem::take(&mut *self.idle.lock())
    }
}

pub(super) struct ReaderGuard {
    conn: Option<Connection>,
    readers: Arc<Readers>,
}

impl Hold for ReaderGuard {
    fn conn(&mut self, context: &'static str) -> StoreResult<&Connection> {
        self.conn.as_ref().ok_or_else(|| closed(context))
    }
}

impl Drop for ReaderGuard {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        // A connection still inside a transaction (an operation panicked) is not reused.
        if self.readers.closed.load(Ordering::Acquire) || !conn.is_autocommit() {
            return;
        }
        let mut idle = self.readers.idle.lock();
        if idle.len() < IDLE_READERS {
            idle.push(conn);
        }
    }
}

/// Runs `op` on the held connection: inline first, and when another process holds a lock,
/// again on the blocking pool with the full busy timeout. `op` must leave nothing behind when
/// it fails (transactions roll back), so the second attempt starts clean. `input` travels
/// with the operation and is handed back.
pub(super) async fn run<H, S, T, F>(
    mut hold: H,
    context: &'static str,
    input: S,
    op: F,
) -> StoreResult<(S, T)>
where
    H: Hold,
    S: Send + 'static,
    T: Send + 'static,
    F: Fn(&Connection, &S) -> DbResult<T> + Send + 'static,
{
    match op(hold.conn(context)?, &input) {
        Ok(value) => return Ok((input, value)),
        Err(fail) if !fail.is_busy() => return Err(fail.into_store(context)),
        Err(_) => {}
    }
    let job = tokio::task::spawn_blocking(move || {
        let result = match hold.conn(context) {
            Ok(conn) => patiently(conn, |conn| op(conn, &input)),
            Err(error) => Err(Fail::Store(error)),
        };
        // `hold` (the writer lock or the reader) is released here, on this thread.
        drop(hold);
        result.map(|value| (input, value))
    });
    match job.await {
        Ok(result) => result.map_err(|fail| fail.into_store(context)),
        Err(error) => Err(StoreError::backend(context, error)),
    }
}

/// Runs `op` with the full busy timeout, then restores the inline setting.
fn patiently<T>(conn: &Connection, op: impl FnOnce(&Connection) -> DbResult<T>) -> DbResult<T> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let result = op(conn);
    // `op` may have committed: its result stands whatever happens here. Setting a busy
    // timeout only fails on a closed handle, which the next operation reports anyway.
    if let Err(error) = conn.busy_timeout(Duration::ZERO) {
        tracing::warn!(%error, "sqlite: restoring the inline busy timeout");
    }
    result
}

/// Runs `body` in a `BEGIN IMMEDIATE … COMMIT` transaction (the write lock is taken up front,
/// so no statement inside meets a lock), rolling back when any statement fails.
pub(super) fn write_transaction<T>(
    conn: &Connection,
    body: impl FnOnce(&Connection) -> DbResult<T>,
) -> DbResult<T> {
    conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    let result = body(conn).and_then(|value| {
        conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(value)
    });
    if result.is_err() && !conn.is_autocommit() {
        if let Err(error) = conn.execute_batch("ROLLBACK") {
            tracing::debug!(%error, "sqlite: rollback after a failed transaction");
        }
    }
    result
}
