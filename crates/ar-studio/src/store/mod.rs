//! Persistence of command rows and breakpoint sets, so a studio restart loses neither: the `StudioStore` trait and its records.

mod memory;
mod sqlite;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use memory::MemoryStore;
pub use sqlite::SqliteStore;

use crate::wire::{ApprovalDecision, Command, CommandState, Reason, SessionCommand};

/// A store failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("record encoding: {0}")]
    Encoding(#[from] serde_json::Error),
}

/// What a command row carries to the runtime.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "body", rename_all = "lowercase")]
// Values of this enum are built once per command and moved, never held in bulk arrays
// where the variant size difference would matter.
#[allow(clippy::large_enum_variant)]
pub enum CommandPayload {
    Run(Command),
    Approve(ApprovalDecision),
    Session(SessionCommand),
}

/// One command row as persisted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandRecord {
    pub command_id: String,
    pub runtime_id: String,
    pub seq: u64,
    pub payload: CommandPayload,
    pub public_id: String,
    pub state: CommandState,
    pub run_id: String,
    pub status: String,
    pub error: String,
    pub reason: Option<Reason>,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
}

/// One runtime's breakpoint set as persisted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakpointRecord {
    pub runtime_id: String,
    pub tools: Vec<String>,
    pub by: String,
    pub surface: String,
    pub set_at: Option<DateTime<Utc>>,
}

/// Everything a store holds, as loaded at start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoredState {
    pub commands: Vec<CommandRecord>,
    pub breakpoints: Vec<BreakpointRecord>,
}

/// One change to persist.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreOp {
    PutCommand(Box<CommandRecord>),
    DeleteCommand(String),
    PutBreakpoints(BreakpointRecord),
    DeleteBreakpoints(String),
}

/// Where the studio keeps command rows and breakpoint sets.
///
/// The studio writes behind: its registry changes under a lock and queues [`StoreOp`]s that a
/// background task applies in order, in batches.
#[async_trait]
pub trait StudioStore: Send + Sync + 'static {
    /// Everything stored.
    async fn load(&self) -> Result<StoredState, StoreError>;
    /// Applies `ops` in order.
    async fn apply(&self, ops: Vec<StoreOp>) -> Result<(), StoreError>;
}
