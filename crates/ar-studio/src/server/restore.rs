//! Rebuilding the registry from the store after a studio restart: rows, run routes, deadlines, breakpoint sets.

use chrono::{DateTime, Utc};

use crate::store::{BreakpointRecord, CommandPayload, CommandRecord, StoredState};
use crate::wire::{CommandState, Registration, RunCommand, BREAKPOINTS_BY_STORE, VERB_DECIDE};

use super::state::{BreakpointSet, CommandRow, RuntimeEntry, State};
use super::ServerConfig;

impl State {
    pub(crate) fn restore(&mut self, stored: StoredState, cfg: &ServerConfig, now: DateTime<Utc>) {
        for rec in stored.commands {
            self.restore_command(rec, cfg, now);
        }
        for rec in stored.breakpoints {
            self.restore_breakpoints(rec, now);
        }
    }

    /// Puts a stored command back, with its run route, and settles what the restart broke.
    fn restore_command(&mut self, rec: CommandRecord, cfg: &ServerConfig, now: DateTime<Utc>) {
        let fork = matches!(&rec.payload, CommandPayload::Run(c) if c.thread == "fork");
        self.next_seq = self.next_seq.max(rec.seq);
        let id = rec.command_id.clone();
        if !rec.run_id.is_empty() {
            self.learn_route(
                &rec.run_id,
                &rec.runtime_id,
                &rec.public_id,
                fork,
                rec.updated,
            );
        }
        if let Some((run_id, cmd)) = addressed_command(&rec) {
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

    /// A runtime known only by its stored breakpoint set, until it registers again.
    fn restore_breakpoints(&mut self, rec: BreakpointRecord, now: DateTime<Utc>) {
        self.runtimes.insert(
            rec.runtime_id.clone(),
            RuntimeEntry {
                reg: Registration {
                    runtime_id: rec.runtime_id,
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

/// Decisions and session verbs list on the run they address (`commands_on`).
fn addressed_command(rec: &CommandRecord) -> Option<(String, RunCommand)> {
    let (run_id, verb, call_id, decision) = match &rec.payload {
        CommandPayload::Approve(d) => (&d.run_id, VERB_DECIDE, &d.call_id, &d.decision),
        CommandPayload::Session(sc) if !sc.run_id.is_empty() => {
            (&sc.run_id, sc.verb.as_str(), &sc.call_id, &sc.decision)
        }
        _ => return None,
    };
    Some((
        run_id.clone(),
        RunCommand {
            verb: verb.to_string(),
            command_id: rec.command_id.clone(),
            call_id: call_id.clone(),
            decision: decision.clone(),
            public_id: rec.public_id.clone(),
        },
    ))
}
