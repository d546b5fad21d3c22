//! Long-lived PostgreSQL connections checked out of a sqlx pool once and reused ("lanes").
//!
//! sqlx's pool pings every connection when it is returned (one more round trip per operation)
//! and spawns a task to do so. A store makes a few operations per step of every run, so it
//! keeps its connections instead: each lane holds one pooled connection for the life of the
//! store, behind a mutex, and a semaphore hands out free lanes. The pool still creates (and
//! configures, through its connect options and `after_connect`) every connection; a lane whose
//! connection broke drops it and takes a fresh one from the pool on next use.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ar_core::store::{StoreError, StoreResult};
use sqlx::pool::PoolConnection;
use sqlx::{Connection, Database, Pool};
use tokio::sync::{Mutex, OwnedMutexGuard, OwnedSemaphorePermit, Semaphore};

use crate::error::db;

pub(crate) struct Lanes<DB: Database> {
    pool: Pool<DB>,
    slots: Vec<Arc<Mutex<Slot<DB>>>>,
    free: Arc<Semaphore>,
    next: AtomicUsize,
    /// A connection idle longer than this is pinged before use (network databases only).
    ping_after: Option<Duration>,
}

struct Slot<DB: Database> {
    conn: Option<PoolConnection<DB>>,
    last_used: Instant,
}

/// One lane, checked out.
pub(crate) struct Lane<DB: Database> {
    slot: OwnedMutexGuard<Slot<DB>>,
    _permit: OwnedSemaphorePermit,
    /// The connection failed in a way that makes it unusable; it is dropped with the lane.
    broken: bool,
}

/// Errors after which a connection is not worth keeping.
fn is_broken(error: &sqlx::Error) -> bool {
    matches!(
        error,
        sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::PoolClosed
    )
}

impl<DB: Database> Lanes<DB> {
    pub fn new(pool: Pool<DB>, lanes: usize, ping_after: Option<Duration>) -> Self {
        let lanes = lanes.max(1);
        Lanes {
            pool,
            slots: (0..lanes)
                .map(|_| {
                    Arc::new(Mutex::new(Slot {
                        conn: None,
                        last_used: Instant::now(),
                    }))
                })
                .collect(),
            free: Arc::new(Semaphore::new(lanes)),
            next: AtomicUsize::new(0),
            ping_after,
        }
    }

    pub fn pool(&self) -> &Pool<DB> {
        &self.pool
    }

    /// Checks out a free lane, waiting for one when all are busy.
    pub async fn get(&self, context: &'static str) -> StoreResult<Lane<DB>> {
        let permit = Arc::clone(&self.free)
            .acquire_owned()
            .await
            .map_err(|_| StoreError::backend_msg(format!("{context}: store is closed")))?;
        // Every holder of a slot holds a permit, so with a permit in hand a slot is free.
        // The scan prefers the lowest free lane: a sequential caller keeps using one warm
        // connection (its statements prepared) and the others are only used under
        // concurrency.
        let count = self.slots.len();
        let mut slot = None;
        for offset in 0..count {
            if let Ok(guard) = Arc::clone(&self.slots[offset]).try_lock_owned() {
                slot = Some(guard);
                break;
            }
        }
        let mut slot = match slot {
            Some(slot) => slot,
            // Unreachable by the permit accounting above; waiting keeps it correct anyway.
            None => {
                let index = self.next.fetch_add(1, Ordering::Relaxed) % count;
                Arc::clone(&self.slots[index]).lock_owned().await
            }
        };
        let idle = slot.last_used.elapsed();
        if let (Some(limit), Some(conn)) = (self.ping_after, slot.conn.as_mut()) {
            if idle > limit && conn.ping().await.is_err() {
                slot.conn = None;
            }
        }
        if slot.conn.is_none() {
            slot.conn = Some(self.pool.acquire().await.map_err(db(context))?);
        }
        Ok(Lane {
            slot,
            _permit: permit,
            broken: false,
        })
    }

    /// Returns every connection to the pool and closes it.
    pub async fn close(&self) {
        self.free.close();
        for slot in &self.slots {
            slot.lock().await.conn = None;
        }
        self.pool.close().await;
    }
}

impl<DB: Database> Drop for Lanes<DB> {
    fn drop(&mut self) {
        // A pooled connection goes back to its pool through a spawned task, which needs a
        // runtime. Outside one (a store dropped after its runtime), detach the connections
        // instead so dropping never panics; each then closes on its own.
        if tokio::runtime::Handle::try_current().is_ok() {
            return;
        }
        for slot in &self.slots {
            if let Ok(mut slot) = slot.try_lock() {
                if let Some(conn) = slot.conn.take() {
                    drop(conn.detach());
                }
            }
        }
    }
}

impl<DB: Database> Lane<DB> {
    /// The lane's connection.
    pub fn conn(&mut self) -> &mut DB::Connection {
        match self.slot.conn.as_mut() {
            Some(conn) => conn,
            // `Lanes::get` fills the slot before handing the lane out, and the slot is only
            // emptied when the lane is dropped.
            None => unreachable!("a checked-out lane always holds a connection"),
        }
    }

    /// Maps a database error; when the error means the connection is unusable, the
    /// connection is dropped with the lane and the next user gets a fresh one.
    pub fn fail(&mut self, context: &'static str, error: sqlx::Error) -> StoreError {
        if is_broken(&error) {
            self.broken = true;
        }
        db(context)(error)
    }
}

impl<DB: Database> Drop for Lane<DB> {
    fn drop(&mut self) {
        self.slot.last_used = Instant::now();
        if self.broken {
            self.slot.conn = None;
        }
    }
}
