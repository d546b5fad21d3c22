//! A SQLite `StudioStore` (sqlx): one table of command rows, one of breakpoint sets, JSON bodies.

use std::str::FromStr;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use sqlx::Row;

use super::{BreakpointRecord, CommandRecord, StoreError, StoreOp, StoredState, StudioStore};

/// Keeps rows in a SQLite database.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

const SCHEMA: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS studio_commands (\
        command_id TEXT PRIMARY KEY NOT NULL, \
        seq INTEGER NOT NULL, \
        body TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS studio_breakpoints (\
        runtime_id TEXT PRIMARY KEY NOT NULL, \
        body TEXT NOT NULL)",
];

impl SqliteStore {
    /// Opens (creating if missing) the database at `target`: a `sqlite:` URL such as
    /// `sqlite::memory:`, or a file path.
    pub async fn open(target: &str) -> Result<Self, StoreError> {
        let options = if target.starts_with("sqlite:") {
            SqliteConnectOptions::from_str(target)?
        } else {
            SqliteConnectOptions::new().filename(target)
        }
        .create_if_missing(true);
        // One connection: an in-memory database lives per connection, and the studio writes
        // from a single task anyway.
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await?;
        for statement in SCHEMA {
            sqlx::query(statement).execute(&pool).await?;
        }
        Ok(Self { pool })
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

#[async_trait]
impl StudioStore for SqliteStore {
    async fn load(&self) -> Result<StoredState, StoreError> {
        let mut state = StoredState::default();
        let rows = sqlx::query("SELECT body FROM studio_commands ORDER BY seq")
            .fetch_all(&self.pool)
            .await?;
        for row in rows {
            let body: String = row.try_get("body")?;
            state
                .commands
                .push(serde_json::from_str::<CommandRecord>(&body)?);
        }
        let rows = sqlx::query("SELECT body FROM studio_breakpoints ORDER BY runtime_id")
            .fetch_all(&self.pool)
            .await?;
        for row in rows {
            let body: String = row.try_get("body")?;
            state
                .breakpoints
                .push(serde_json::from_str::<BreakpointRecord>(&body)?);
        }
        Ok(state)
    }

    async fn apply(&self, ops: Vec<StoreOp>) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        for op in ops {
            match op {
                StoreOp::PutCommand(rec) => {
                    let body = serde_json::to_string(&rec)?;
                    sqlx::query(
                        "INSERT INTO studio_commands (command_id, seq, body) VALUES (?, ?, ?) \
                         ON CONFLICT(command_id) DO UPDATE SET seq = excluded.seq, body = excluded.body",
                    )
                    .bind(&rec.command_id)
                    .bind(i64::try_from(rec.seq).unwrap_or(i64::MAX))
                    .bind(body)
                    .execute(&mut *tx)
                    .await?;
                }
                StoreOp::DeleteCommand(id) => {
                    sqlx::query("DELETE FROM studio_commands WHERE command_id = ?")
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                }
                StoreOp::PutBreakpoints(rec) => {
                    let body = serde_json::to_string(&rec)?;
                    sqlx::query(
                        "INSERT INTO studio_breakpoints (runtime_id, body) VALUES (?, ?) \
                         ON CONFLICT(runtime_id) DO UPDATE SET body = excluded.body",
                    )
                    .bind(&rec.runtime_id)
                    .bind(body)
                    .execute(&mut *tx)
                    .await?;
                }
                StoreOp::DeleteBreakpoints(id) => {
                    sqlx::query("DELETE FROM studio_breakpoints WHERE runtime_id = ?")
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }
        tx.commit().await?;
        Ok(())
    }
}
