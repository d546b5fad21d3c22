//! Background WAL checkpoints of a file store, on a thread of its own.
//!
//! The writer connection has `wal_autocheckpoint = 0`: SQLite would otherwise copy the WAL
//! back into the database inside whichever commit crosses 1000 pages, with two fsyncs, on the
//! async thread that made the commit. Instead, every [`EVERY`] writes this thread runs a
//! PASSIVE checkpoint on its own connection, concurrently with the writer. The WAL only
//! starts over from its beginning (and so stays small) when a write transaction begins with
//! every frame copied, which a writer that keeps appending during the checkpoint prevents; so
//! when frames were added meanwhile, the thread copies the few remaining ones while holding
//! the store's writer lock (writers wait for it asynchronously, no async thread blocks). When
//! the store has been idle for [`IDLE`] the thread truncates the WAL. Should readers keep
//! the WAL from being copied whole and it pass [`WAL_CAP_FRAMES`], a RESTART checkpoint
//! under the writer lock waits (briefly) for them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;

use super::conn::WriterSlot;

/// Writes between two checkpoints. A write dirties ~8 pages, so this lets the WAL grow to
/// ~3200 pages (~13 MB) first: pages written again and again (the run rows, index pages) are
/// copied back once per checkpoint, and fewer checkpoints cost less (measured: 10% less store
/// CPU per run than every 100 writes; every 1000 gains nothing more).
const EVERY: u64 = 400;
/// Quiet time after which the WAL is truncated.
const IDLE: Duration = Duration::from_secs(1);
/// WAL size (in pages) past which a checkpoint may briefly block the writer to restart it.
const WAL_CAP_FRAMES: i64 = 20_000;

/// The store's handle on its checkpoint thread.
pub(super) struct Checkpointer {
    shared: Arc<Shared>,
    signals: mpsc::Sender<Signal>,
    thread: parking_lot::Mutex<Option<JoinHandle<()>>>,
}

struct Shared {
    /// Writes made through the store since it opened.
    writes: AtomicU64,
    /// The thread waits for a signal with nothing to do; the next write must wake it.
    asleep: AtomicBool,
}

enum Signal {
    Checkpoint,
    Wake,
    Stop,
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    Passive,
    Restart,
    Truncate,
}

impl Mode {
    fn sql(self) -> &'static str {
        match self {
            Mode::Passive => "PRAGMA wal_checkpoint(PASSIVE)",
            Mode::Restart => "PRAGMA wal_checkpoint(RESTART)",
            Mode::Truncate => "PRAGMA wal_checkpoint(TRUNCATE)",
        }
    }
}

impl Checkpointer {
    /// Starts the thread on its own connection (opened with the `Checkpointer` role).
    pub fn start(conn: Connection, writer: WriterSlot) -> std::io::Result<Checkpointer> {
        let shared = Arc::new(Shared {
            writes: AtomicU64::new(0),
            asleep: AtomicBool::new(false),
        });
        let (signals, receiver) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("ar-sqlite-ckpt".to_string())
            .spawn({
                let shared = Arc::clone(&shared);
                move || checkpoint_loop(&conn, &writer, &receiver, &shared)
            })?;
        Ok(Checkpointer {
            shared,
            signals,
            thread: parking_lot::Mutex::new(Some(thread)),
        })
    }

    /// Counts one write transaction; every [`EVERY`]th asks for a checkpoint.
    pub fn note_write(&self) {
        // SeqCst pairs with the thread's store of `asleep` and load of `writes`: either the
        // thread sees this write before it sleeps, or this sees it asleep and wakes it.
        let writes = self.shared.writes.fetch_add(1, Ordering::SeqCst) + 1;
        // `is_multiple_of` needs Rust 1.87; the workspace supports 1.85.
        #[allow(clippy::manual_is_multiple_of)]
        let due = writes % EVERY == 0;
        if due {
            let _ = self.signals.send(Signal::Checkpoint);
        } else if self.shared.asleep.load(Ordering::SeqCst)
            && self.shared.asleep.swap(false, Ordering::SeqCst)
        {
            let _ = self.signals.send(Signal::Wake);
        }
    }

    /// Stops the thread (after a last truncating checkpoint) and hands it back for joining.
    pub fn stop(&self) -> Option<JoinHandle<()>> {
        let _ = self.signals.send(Signal::Stop);
        self.thread.lock().take()
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        // Not joined: dropping a store must not wait for a checkpoint in progress.
        let _ = self.signals.send(Signal::Stop);
    }
}

fn checkpoint_loop(
    conn: &Connection,
    writer: &WriterSlot,
    signals: &mpsc::Receiver<Signal>,
    shared: &Shared,
) {
    let mut truncated_at = 0;
    loop {
        let before = shared.writes.load(Ordering::SeqCst);
        let signal = if before == truncated_at {
            // Nothing written since the last truncation: sleep until a write or stop.
            shared.asleep.store(true, Ordering::SeqCst);
            if shared.writes.load(Ordering::SeqCst) != before {
                shared.asleep.store(false, Ordering::SeqCst);
                continue;
            }
            signals.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            signals.recv_timeout(IDLE)
        };
        match signal {
            Ok(Signal::Checkpoint) => copy_back(conn, writer),
            Ok(Signal::Wake) => {}
            Err(RecvTimeoutError::Timeout) => {
                if shared.writes.load(Ordering::SeqCst) == before {
                    checkpoint(conn, Mode::Truncate);
                    truncated_at = before;
                }
            }
            Ok(Signal::Stop) | Err(RecvTimeoutError::Disconnected) => {
                if before != truncated_at {
                    checkpoint(conn, Mode::Truncate);
                }
                return;
            }
        }
    }
}

/// Copies the WAL back into the database so that the next write can start it over.
fn copy_back(conn: &Connection, writer: &WriterSlot) {
    // The bulk, concurrently with the store's writes.
    if checkpoint(conn, Mode::Passive).is_none() {
        return;
    }
    // Frames the writer added meanwhile (a checkpoint reports only the WAL it started with,
    // so always): copied with the store's writes held off, which leaves the WAL wholly copied
    // for the next write. Usually a few pages; nothing to copy costs no I/O. This thread is
    // not a tokio worker, so it may block on the lock.
    let guard = writer.blocking_lock();
    if guard.is_none() {
        return; // closed
    }
    let Some(progress) = checkpoint(conn, Mode::Passive) else {
        return;
    };
    if progress.copied < progress.frames && progress.frames > WAL_CAP_FRAMES {
        // Readers hold old frames and the WAL is large: wait for them (briefly).
        checkpoint(conn, Mode::Restart);
    }
    drop(guard);
}

/// The WAL after a checkpoint: its size and how much of it is in the database, in pages.
struct Progress {
    frames: i64,
    copied: i64,
}

/// Runs one checkpoint; `None` when it failed (logged: the next one tries again).
fn checkpoint(conn: &Connection, mode: Mode) -> Option<Progress> {
    let result = conn.query_row(mode.sql(), [], |row| {
        Ok((
            row.get::<_, i64>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, i64>(2)?,
        ))
    });
    match result {
        Ok((blocked, frames, copied)) => {
            tracing::trace!(?mode, blocked, frames, copied, "sqlite: wal checkpoint");
            Some(Progress { frames, copied })
        }
        Err(error) => {
            tracing::debug!(?mode, %error, "sqlite: wal checkpoint failed");
            None
        }
    }
}
