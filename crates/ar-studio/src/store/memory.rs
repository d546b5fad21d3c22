//! An in-memory `StudioStore`: survives a studio rebuilt around the same store value, for tests and embedding.

use std::collections::BTreeMap;

use async_trait::async_trait;
use parking_lot::Mutex;

use super::{BreakpointRecord, CommandRecord, StoreError, StoreOp, StoredState, StudioStore};

/// Keeps rows in process memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Tables>,
}

#[derive(Debug, Default)]
struct Tables {
    commands: BTreeMap<String, CommandRecord>,
    breakpoints: BTreeMap<String, BreakpointRecord>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl StudioStore for MemoryStore {
    async fn load(&self) -> Result<StoredState, StoreError> {
        let t = self.inner.lock();
        let mut commands: Vec<CommandRecord> = t.commands.values().cloned().collect();
        commands.sort_by_key(|c| c.seq);
        Ok(StoredState {
            commands,
            breakpoints: t.breakpoints.values().cloned().collect(),
        })
    }

    async fn apply(&self, ops: Vec<StoreOp>) -> Result<(), StoreError> {
        let mut t = self.inner.lock();
        for op in ops {
            match op {
                StoreOp::PutCommand(rec) => {
                    t.commands.insert(rec.command_id.clone(), *rec);
                }
                StoreOp::DeleteCommand(id) => {
                    t.commands.remove(&id);
                }
                StoreOp::PutBreakpoints(rec) => {
                    t.breakpoints.insert(rec.runtime_id.clone(), rec);
                }
                StoreOp::DeleteBreakpoints(id) => {
                    t.breakpoints.remove(&id);
                }
            }
        }
        Ok(())
    }
}
