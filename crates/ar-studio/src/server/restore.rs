//! Rebuilding the registry from the store after a studio restart: rows, run routes, deadlines, breakpoint sets.

use chrono::{DateTime, Utc};

use crate::store::{CommandPayload, StoredState};
use crate::wire::{CommandState, Registration, RunCommand, BREAKPOINTS_BY_STORE, VERB_DECIDE};

use super::state::{BreakpointSet, CommandRow, RuntimeEntry, State};
use super::ServerConfig;

impl State {
    pub(crate) fn restore(&mut self, stored: StoredState, cfg: &ServerConfig, now: DateTime<Utc>) {
        for rec in stored.commands {
            let fork = matches!(&rec.payload, CommandPayload::Run(c) if c.thread == "fork");
            self.next_seq = self.next_seq.max(rec.seq);
            let id = rec.command_id.clone();
            if !rec.run_id.is_empty() {
                let route = self.runs.entry(rec.run_id.clone()).or_default();
                route.runtime = rec.runtime_id.clone();
                route.seen = Some(route.seen.map_or(rec.updated, |s| s.max(rec.updated)));
                if !rec.public_id.is_empty() {
                    route.public_id = rec.public_id.clone();
                }
                route.fork |= fork;
            }
            // Decisions and session verbs list on the run they address (`commands_on`).
            let addressed = match &rec.payload {
                CommandPayload::Approve(d) => Some((
                    d.run_id.clone(),
                    RunCommand {
                        verb: VERB_DECIDE.to_string(),
                        command_id: id.clone(),
                        call_id: d.call_id.clone(),
                        decision: d.decision.clone(),
                        public_id: rec.public_id.clone(),
                    },
                )),
                CommandPayload::Session(sc) if !sc.run_id.is_empty() => Some((
                    sc.run_id.clone(),
                    RunCommand {
                        verb: sc.verb.clone(),
                        command_id: id.clone(),
                        call_id: sc.call_id.clone(),
                        decision: sc.decision.clone(),
                        public_id: rec.public_id.clone(),
                    },
                )),
                _ => None,
            };
            if let Some((run_id, cmd)) = addressed {
                self.note_run_command(&run_id, cmd);
            }
            let state = rec.state;
            self.by_seq.insert(rec.seq, id.clone());
            self.commands.insert(
                id.clone(),
                CommandRow {
                    id: id.clone(),
                    runtime: rec.runtime_id,
                    seq: rec.seq,
                    payload: rec.payload,
                    public_id: rec.public_id,
                    fork,
                    state,
                    run_id: rec.run_id,
                    status: rec.status,
                    error: rec.error,
                    reason: rec.reason,
                    created: rec.created,
                    updated: rec.updated,
                    watch: None,
                },
            );
            match state {
                // Its stream died with the previous studio before any ack.
                CommandState::Queued => self.terminate(
                    &id,
                    CommandState::Lost,
                    "studio restarted before the ack",
                    now,
                ),
                // A finish may still land; watch it like a disconnect.
                CommandState::Accepted => {
                    self.arm_finish(&id, cfg.finish_deadline, "studio restarted, no finish", now)
                }
                _ => {}
            }
        }
        for rec in stored.breakpoints {
            self.runtimes.insert(
                rec.runtime_id.clone(),
                RuntimeEntry {
                    reg: Registration {
                        runtime_id: rec.runtime_id.clone(),
                        ..Registration::default()
                    },
                    connected_since: now,
                    last_seen: now,
                    feed: None,
                    breakpoints: BreakpointSet {
                        tools: rec.tools,
                        by: BREAKPOINTS_BY_STORE.to_string(),
                        surface: rec.surface,
                        set_at: rec.set_at,
                    },
                    manifest: None,
                    restored: true,
                },
            );
        }
    }
}
