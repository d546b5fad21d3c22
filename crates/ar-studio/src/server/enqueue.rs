//! Handing commands to a runtime: run, approve and session commands (tracked rows), steer and cancel frames.

use chrono::{DateTime, Utc};

use crate::error::StudioError;
use crate::frame::Frame;
use crate::ids::valid_command_id;
use crate::store::CommandPayload;
use crate::wire::{
    ApprovalDecision, CancelTarget, Command, CommandState, RunCommand, SessionCommand,
    SteerMessage, VERB_CANCEL, VERB_DECIDE, VERB_STEER,
};

use super::state::{CommandRow, State};
use super::streams::frame_of;
use super::ServerConfig;

/// A row about to be tracked.
struct NewRow {
    id: String,
    payload: CommandPayload,
    public_id: String,
    fork: bool,
}

impl State {
    /// Checks the runtime and the command id (minting one when empty) before a row is made.
    fn admit_id(
        &mut self,
        runtime_id: &str,
        id: &mut String,
        now: DateTime<Utc>,
    ) -> Result<(), StudioError> {
        if self.closed {
            return Err(StudioError::ShuttingDown);
        }
        let entry = self
            .runtimes
            .get(runtime_id)
            .ok_or(StudioError::UnknownRuntime)?;
        if id.is_empty() {
            *id = self.minter.mint(now);
        } else if !valid_command_id(id) {
            return Err(StudioError::InvalidCommandId);
        }
        if self.commands.contains_key(id.as_str()) {
            return Err(StudioError::DuplicateCommand);
        }
        if entry.feed.is_none() {
            return Err(StudioError::NotConnected);
        }
        Ok(())
    }

    /// Makes the row, hands its frame to the feed, and arms the ack timer.
    fn track(&mut self, runtime_id: &str, new: NewRow, cfg: &ServerConfig, now: DateTime<Utc>) {
        let NewRow {
            id,
            payload,
            public_id,
            fork,
        } = new;
        let seq = self.take_seq();
        let frame = frame_of(&payload).encode();
        self.insert_row(CommandRow {
            id: id.clone(),
            runtime: runtime_id.to_string(),
            seq,
            payload,
            public_id,
            fork,
            state: CommandState::Queued,
            run_id: String::new(),
            status: String::new(),
            error: String::new(),
            reason: None,
            created: now,
            updated: now,
            watch: None,
        });
        // A full feed drops the stream; the row stays queued and the reconnect's backlog
        // re-sends it, so the enqueue itself succeeded.
        let _ = self.deliver(runtime_id, frame, cfg, now);
        self.arm_ack(&id, cfg, now);
        if self.commands.len() > cfg.max_commands {
            self.cap_rows(cfg.max_commands);
        }
    }

    pub(crate) fn enqueue(
        &mut self,
        runtime_id: &str,
        mut cmd: Command,
        cfg: &ServerConfig,
        now: DateTime<Utc>,
    ) -> Result<Command, StudioError> {
        self.admit_id(runtime_id, &mut cmd.command_id, now)?;
        let fork = cmd.thread == "fork";
        self.track(
            runtime_id,
            NewRow {
                id: cmd.command_id.clone(),
                payload: CommandPayload::Run(cmd.clone()),
                public_id: cmd.public_id.clone(),
                fork,
            },
            cfg,
            now,
        );
        Ok(cmd)
    }

    pub(crate) fn enqueue_approval(
        &mut self,
        runtime_id: &str,
        mut d: ApprovalDecision,
        cfg: &ServerConfig,
        now: DateTime<Utc>,
    ) -> Result<ApprovalDecision, StudioError> {
        self.admit_id(runtime_id, &mut d.command_id, now)?;
        let route = self.runs.get(&d.run_id);
        if d.public_id.is_empty() {
            d.public_id = route.map(|r| r.public_id.clone()).unwrap_or_default();
        }
        // A decision on a fork run resumes the fork's session: a fork command too.
        let fork = route.is_some_and(|r| r.fork);
        self.note_run_command(
            &d.run_id,
            RunCommand {
                verb: VERB_DECIDE.to_string(),
                command_id: d.command_id.clone(),
                call_id: d.call_id.clone(),
                decision: d.decision.clone(),
                public_id: d.public_id.clone(),
            },
        );
        self.track(
            runtime_id,
            NewRow {
                id: d.command_id.clone(),
                payload: CommandPayload::Approve(d.clone()),
                public_id: d.public_id.clone(),
                fork,
            },
            cfg,
            now,
        );
        Ok(d)
    }

    pub(crate) fn enqueue_session(
        &mut self,
        runtime_id: &str,
        mut sc: SessionCommand,
        cfg: &ServerConfig,
        now: DateTime<Utc>,
    ) -> Result<SessionCommand, StudioError> {
        if sc.session_id.is_empty() {
            return Err(StudioError::InvalidSessionCommand("session_id is required"));
        }
        if ![VERB_DECIDE, VERB_STEER, VERB_CANCEL].contains(&sc.verb.as_str()) {
            return Err(StudioError::InvalidSessionCommand(
                "verb must be decide, steer or cancel",
            ));
        }
        self.admit_id(runtime_id, &mut sc.command_id, now)?;
        if !sc.run_id.is_empty() {
            self.note_run_command(
                &sc.run_id,
                RunCommand {
                    verb: sc.verb.clone(),
                    command_id: sc.command_id.clone(),
                    call_id: sc.call_id.clone(),
                    decision: sc.decision.clone(),
                    public_id: sc.public_id.clone(),
                },
            );
        }
        self.track(
            runtime_id,
            NewRow {
                id: sc.command_id.clone(),
                payload: CommandPayload::Session(sc.clone()),
                public_id: sc.public_id.clone(),
                fork: false,
            },
            cfg,
            now,
        );
        Ok(sc)
    }

    pub(crate) fn steer(
        &mut self,
        runtime_id: &str,
        run_id: &str,
        message: &str,
        cfg: &ServerConfig,
        now: DateTime<Utc>,
    ) -> Result<(), StudioError> {
        if self.closed {
            return Err(StudioError::ShuttingDown);
        }
        let id = self.minter.mint(now);
        let frame = Frame::Steer {
            id: id.clone(),
            steer: SteerMessage {
                run_id: run_id.to_string(),
                message: message.to_string(),
            },
        };
        self.deliver(runtime_id, frame.encode(), cfg, now)?;
        let public_id = self
            .runs
            .get(run_id)
            .map(|r| r.public_id.clone())
            .unwrap_or_default();
        self.note_run_command(
            run_id,
            RunCommand {
                verb: VERB_STEER.to_string(),
                command_id: id,
                public_id,
                ..RunCommand::default()
            },
        );
        Ok(())
    }

    /// Sends a cancel frame for a command; best effort.
    pub(crate) fn cancel(
        &mut self,
        runtime_id: &str,
        command_id: &str,
        cfg: &ServerConfig,
        now: DateTime<Utc>,
    ) {
        if !valid_command_id(command_id) {
            return;
        }
        let frame = Frame::Cancel {
            command_id: command_id.to_string(),
        };
        let _ = self.deliver(runtime_id, frame.encode(), cfg, now);
    }

    /// Cancels the run through the command that started it.
    pub(crate) fn cancel_run(
        &mut self,
        run_id: &str,
        cfg: &ServerConfig,
        now: DateTime<Utc>,
    ) -> Result<CancelTarget, StudioError> {
        let route = self.runs.get(run_id).ok_or(StudioError::UnknownRun)?;
        let runtime_id = route.runtime.clone();
        let public_id = route.public_id.clone();
        // The command in flight for the run: the one that started it, or the latest decision
        // that resumed it.
        let in_flight = self
            .by_seq
            .values()
            .rev()
            .filter_map(|id| self.commands.get(id))
            .find(|row| {
                row.run_id == run_id
                    && matches!(row.state, CommandState::Queued | CommandState::Accepted)
            })
            .map(|row| row.id.clone())
            .ok_or(StudioError::RunFinished)?;
        let frame = Frame::Cancel {
            command_id: in_flight.clone(),
        };
        self.deliver(&runtime_id, frame.encode(), cfg, now)?;
        self.note_run_command(
            run_id,
            RunCommand {
                verb: VERB_CANCEL.to_string(),
                command_id: in_flight.clone(),
                public_id,
                ..RunCommand::default()
            },
        );
        Ok(CancelTarget {
            runtime_id,
            run_id: run_id.to_string(),
            command_id: in_flight,
        })
    }
}
