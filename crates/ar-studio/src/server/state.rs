//! The registry's state behind its lock: runtimes, command rows, deadline index, run routes, and the store queue.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use crate::ids::IdMinter;
use crate::manifests::{ManifestKey, ManifestMemory};
use crate::store::{BreakpointRecord, CommandPayload, CommandRecord, StoreOp};
use crate::wire::{CommandState, CommandStatus, Reason, Registration, RunCommand};

use super::persist::PersistMsg;

/// One registered runtime.
#[derive(Debug)]
pub(crate) struct RuntimeEntry {
    pub(crate) reg: Registration,
    pub(crate) connected_since: DateTime<Utc>,
    pub(crate) last_seen: DateTime<Utc>,
    pub(crate) feed: Option<Feed>,
    pub(crate) breakpoints: BreakpointSet,
    pub(crate) manifest: Option<ManifestKey>,
    /// Known from the store only; cleared by the next registration.
    pub(crate) restored: bool,
}

/// A live command stream's sending side.
#[derive(Debug)]
pub(crate) struct Feed {
    pub(crate) id: u64,
    pub(crate) tx: mpsc::Sender<Bytes>,
}

/// A runtime's breakpoint set and where it came from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct BreakpointSet {
    pub(crate) tools: Vec<String>,
    pub(crate) by: String,
    pub(crate) surface: String,
    pub(crate) set_at: Option<DateTime<Utc>>,
}

/// What a timer does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatchKind {
    /// A queued row goes lost if still unacked.
    Ack,
    /// An accepted row goes lost if still unfinished.
    Finish,
}

/// One armed deadline.
#[derive(Debug, Clone)]
pub(crate) struct Watch {
    pub(crate) at: DateTime<Utc>,
    pub(crate) kind: WatchKind,
    pub(crate) why: String,
    /// The heartbeat cadence the finish watch was armed for; `None`: a sweep's watch.
    pub(crate) beat: Option<Duration>,
}

/// One command's lifecycle row.
#[derive(Debug, Clone)]
pub(crate) struct CommandRow {
    pub(crate) id: String,
    pub(crate) runtime: String,
    pub(crate) seq: u64,
    pub(crate) payload: CommandPayload,
    pub(crate) public_id: String,
    pub(crate) fork: bool,
    pub(crate) state: CommandState,
    pub(crate) run_id: String,
    pub(crate) status: String,
    pub(crate) error: String,
    pub(crate) reason: Option<Reason>,
    pub(crate) created: DateTime<Utc>,
    pub(crate) updated: DateTime<Utc>,
    pub(crate) watch: Option<Watch>,
}

impl CommandRow {
    pub(crate) fn view(&self) -> CommandStatus {
        let error = (!self.error.is_empty()).then(|| self.error.clone());
        let reason = self.reason.clone().or_else(|| Reason::of(&self.error));
        CommandStatus {
            command_id: self.id.clone(),
            state: self.state,
            run_id: self.run_id.clone(),
            status: self.status.clone(),
            error,
            created: self.created,
            updated: self.updated,
            reason,
        }
    }

    pub(crate) fn record(&self) -> CommandRecord {
        CommandRecord {
            command_id: self.id.clone(),
            runtime_id: self.runtime.clone(),
            seq: self.seq,
            payload: self.payload.clone(),
            public_id: self.public_id.clone(),
            state: self.state,
            run_id: self.run_id.clone(),
            status: self.status.clone(),
            error: self.error.clone(),
            reason: self.reason.clone(),
            created: self.created,
            updated: self.updated,
        }
    }
}

/// What the studio learned about a run from the acks that named it.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunRoute {
    pub(crate) runtime: String,
    pub(crate) public_id: String,
    pub(crate) fork: bool,
    pub(crate) seen: Option<DateTime<Utc>>,
    pub(crate) commands: Vec<RunCommand>,
}

/// The whole registry.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) runtimes: HashMap<String, RuntimeEntry>,
    pub(crate) commands: HashMap<String, CommandRow>,
    pub(crate) by_seq: BTreeMap<u64, String>,
    pub(crate) deadlines: BTreeSet<(DateTime<Utc>, u64)>,
    pub(crate) runs: HashMap<String, RunRoute>,
    pub(crate) manifests: ManifestMemory,
    pub(crate) next_seq: u64,
    pub(crate) next_feed: u64,
    pub(crate) minter: IdMinter,
    pub(crate) persist: Option<mpsc::UnboundedSender<PersistMsg>>,
    pub(crate) closed: bool,
}

impl State {
    pub(crate) fn new(max_manifests: usize) -> Self {
        Self {
            runtimes: HashMap::new(),
            commands: HashMap::new(),
            by_seq: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            runs: HashMap::new(),
            manifests: ManifestMemory::new(max_manifests),
            next_seq: 0,
            next_feed: 0,
            minter: IdMinter::new(),
            persist: None,
            closed: false,
        }
    }

    fn queue(&self, op: StoreOp) {
        if let Some(tx) = &self.persist {
            // A closed channel means the persister ended with the studio; nothing to keep.
            let _ = tx.send(PersistMsg::Op(op));
        }
    }

    /// Queues the row's current form for the store.
    pub(crate) fn save_row(&self, id: &str) {
        if self.persist.is_none() {
            return;
        }
        if let Some(row) = self.commands.get(id) {
            self.queue(StoreOp::PutCommand(Box::new(row.record())));
        }
    }

    /// Queues the runtime's breakpoint set for the store.
    pub(crate) fn save_breakpoints(&self, runtime_id: &str) {
        if let Some(entry) = self.runtimes.get(runtime_id) {
            let set = &entry.breakpoints;
            self.queue(StoreOp::PutBreakpoints(BreakpointRecord {
                runtime_id: runtime_id.to_string(),
                tools: set.tools.clone(),
                by: set.by.clone(),
                surface: set.surface.clone(),
                set_at: set.set_at,
            }));
        }
    }

    pub(crate) fn forget_breakpoints(&self, runtime_id: &str) {
        self.queue(StoreOp::DeleteBreakpoints(runtime_id.to_string()));
    }

    /// Inserts a new row (its seq must be fresh) and queues it for the store.
    pub(crate) fn insert_row(&mut self, row: CommandRow) {
        let id = row.id.clone();
        self.by_seq.insert(row.seq, id.clone());
        self.commands.insert(id.clone(), row);
        self.save_row(&id);
    }

    /// Removes a row with its deadline and queues the delete.
    pub(crate) fn remove_row(&mut self, id: &str) {
        if let Some(row) = self.commands.remove(id) {
            self.by_seq.remove(&row.seq);
            if let Some(w) = &row.watch {
                self.deadlines.remove(&(w.at, row.seq));
            }
            self.queue(StoreOp::DeleteCommand(id.to_string()));
        }
    }

    /// The next command sequence number.
    pub(crate) fn take_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Learns which runtime runs `run_id` from a command that named it, `seen` at `at` (the
    /// route's last sighting never moves back).
    pub(crate) fn learn_route(
        &mut self,
        run_id: &str,
        runtime: &str,
        public_id: &str,
        fork: bool,
        at: DateTime<Utc>,
    ) {
        let route = self.runs.entry(run_id.to_string()).or_default();
        route.runtime = runtime.to_string();
        route.seen = Some(route.seen.map_or(at, |seen| seen.max(at)));
        if !public_id.is_empty() {
            route.public_id = public_id.to_string();
        }
        route.fork |= fork;
    }

    /// Records a command addressed to a run, for `commands_on`.
    pub(crate) fn note_run_command(&mut self, run_id: &str, cmd: RunCommand) {
        if let Some(route) = self.runs.get_mut(run_id) {
            route.commands.push(cmd);
        }
    }
}
