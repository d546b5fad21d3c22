//! Test-only in-memory `Store` with just the event log and outbox cursors; every other method fails.

use ar_core::EventKind;
use std::collections::HashMap;
use std::sync::Mutex;

use ar_core::agent::Agent;
use ar_core::event::StoredEvent;
use ar_core::records::{Artifact, Interaction, Message, ToolCallRecord};
use ar_core::run::Run;
use ar_core::store::{
    Checkpoint, Committed, CreateRun, RunChange, RunSearch, Store, StoreError, StoreResult,
};
use ar_core::JsonMap;
use async_trait::async_trait;
use chrono::{DateTime, Utc};

#[derive(Default)]
struct State {
    events: Vec<StoredEvent>,
    sequences: HashMap<String, i64>,
    cursors: HashMap<String, i64>,
}

/// The event log and cursors of a store, in memory.
#[derive(Default)]
pub struct FakeStore {
    state: Mutex<State>,
}

fn unsupported<T>() -> StoreResult<T> {
    Err(StoreError::backend_msg("not supported by the test store"))
}

impl FakeStore {
    /// Appends an event with the next position and per-run sequence, and returns it.
    pub fn append(&self, app_id: &str, run_id: &str, kind: EventKind) -> StoredEvent {
        let mut state = self.state.lock().unwrap();
        let sequence = state.sequences.entry(run_id.to_string()).or_insert(0);
        *sequence += 1;
        let sequence_no = *sequence;
        let position = state.events.len() as i64 + 1;
        let mut data = JsonMap::new();
        data.insert("n".into(), position.into());
        let event = StoredEvent {
            position,
            event_id: format!("evt_{position}"),
            app_id: app_id.to_string(),
            run_id: run_id.to_string(),
            host_run_id: String::new(),
            sequence_no,
            kind,
            data: data.into(),
            created_at: Utc::now(),
        };
        state.events.push(event.clone());
        event
    }

    pub fn cursor(&self, name: &str) -> Option<i64> {
        self.state.lock().unwrap().cursors.get(name).copied()
    }
}

#[async_trait]
impl Store for FakeStore {
    fn driver(&self) -> &'static str {
        "fake"
    }
    fn in_memory(&self) -> bool {
        true
    }
    async fn ping(&self) -> StoreResult<()> {
        Ok(())
    }
    async fn put_agent(&self, _: &Agent) -> StoreResult<bool> {
        unsupported()
    }
    async fn get_agent(&self, _: &str, _: &str) -> StoreResult<Option<Agent>> {
        unsupported()
    }
    async fn list_agents(&self, _: &str) -> StoreResult<Vec<Agent>> {
        unsupported()
    }
    async fn create_run(&self, _: RunChange) -> StoreResult<CreateRun> {
        unsupported()
    }
    async fn get_run(&self, _: &str, _: &str) -> StoreResult<Option<Run>> {
        unsupported()
    }
    async fn get_run_by_host_run_id(&self, _: &str, _: &str) -> StoreResult<Option<Run>> {
        unsupported()
    }
    async fn list_runs(&self, _: &str) -> StoreResult<Vec<Run>> {
        unsupported()
    }
    async fn search_runs(&self, _: &RunSearch) -> StoreResult<(Vec<Run>, i64)> {
        unsupported()
    }
    async fn count_runs_by_status(&self) -> StoreResult<Vec<(ar_core::RunStatus, i64)>> {
        unsupported()
    }
    async fn commit(&self, _: RunChange) -> StoreResult<Committed> {
        unsupported()
    }
    async fn list_messages(&self, _: &str, _: &str) -> StoreResult<Vec<Message>> {
        unsupported()
    }
    async fn list_artifacts(&self, _: &str, _: &str) -> StoreResult<Vec<Artifact>> {
        unsupported()
    }
    async fn list_interactions(&self, _: &str, _: &str) -> StoreResult<Vec<Interaction>> {
        unsupported()
    }
    async fn list_tool_calls(&self, _: &str, _: &str) -> StoreResult<Vec<ToolCallRecord>> {
        unsupported()
    }
    async fn list_events_after(
        &self,
        app_id: &str,
        run_id: &str,
        after: i64,
        limit: Option<i64>,
    ) -> StoreResult<Vec<StoredEvent>> {
        let state = self.state.lock().unwrap();
        let matching = state
            .events
            .iter()
            .filter(|e| e.app_id == app_id && e.run_id == run_id && e.sequence_no > after)
            .cloned();
        Ok(match limit {
            Some(limit) => matching.take(limit as usize).collect(),
            None => matching.collect(),
        })
    }
    async fn list_events_after_position(
        &self,
        after: i64,
        limit: i64,
    ) -> StoreResult<Vec<StoredEvent>> {
        let state = self.state.lock().unwrap();
        Ok(state
            .events
            .iter()
            .filter(|e| e.position > after)
            .take(limit as usize)
            .cloned()
            .collect())
    }
    async fn latest_checkpoint(&self, _: &str) -> StoreResult<Option<Checkpoint>> {
        unsupported()
    }
    async fn checkpoint_at(&self, _: &str, _: i64) -> StoreResult<Option<Checkpoint>> {
        unsupported()
    }
    async fn get_secret(&self, _: &str, _: &str) -> StoreResult<Option<Vec<u8>>> {
        unsupported()
    }
    async fn put_app_secret(&self, _: &str, _: &str, _: &[u8]) -> StoreResult<()> {
        unsupported()
    }
    async fn get_app_secret(&self, _: &str, _: &str) -> StoreResult<Option<Vec<u8>>> {
        unsupported()
    }
    async fn try_acquire_lease(
        &self,
        _: &str,
        _: &str,
        _: DateTime<Utc>,
        _: DateTime<Utc>,
    ) -> StoreResult<bool> {
        unsupported()
    }
    async fn renew_leases(&self, _: &str, _: DateTime<Utc>) -> StoreResult<u64> {
        unsupported()
    }
    async fn release_lease(&self, _: &str, _: &str) -> StoreResult<()> {
        unsupported()
    }
    async fn list_orphaned_runs(&self, _: DateTime<Utc>, _: i64) -> StoreResult<Vec<Run>> {
        unsupported()
    }
    async fn list_stale_durable_runs(&self, _: DateTime<Utc>, _: i64) -> StoreResult<Vec<Run>> {
        unsupported()
    }
    async fn list_runs_leased_by(&self, _: &str) -> StoreResult<Vec<Run>> {
        unsupported()
    }
    async fn get_cursor(&self, name: &str) -> StoreResult<Option<i64>> {
        Ok(self.state.lock().unwrap().cursors.get(name).copied())
    }
    async fn advance_cursor(&self, name: &str, from: Option<i64>, to: i64) -> StoreResult<bool> {
        let mut state = self.state.lock().unwrap();
        let current = state.cursors.get(name).copied();
        if current != from {
            return Ok(false);
        }
        state.cursors.insert(name.to_string(), to);
        Ok(true)
    }
}
