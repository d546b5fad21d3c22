//! Acks: moving a command row through accepted, rejected and finished; late acks win over timers; learning run routes.

use chrono::{DateTime, Utc};

use crate::wire::{Ack, AckState, CommandState, Reason};

use super::state::State;
use super::ServerConfig;

/// Why an ack was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    /// 400.
    #[error("ack body: command_id is required")]
    MissingCommand,
    /// 400.
    #[error("ack body: unknown state {0:?}")]
    BadState(String),
    /// 400.
    #[error("ack body: unknown status {0:?}")]
    BadStatus(String),
    /// 404.
    #[error("unknown command {0}")]
    UnknownCommand(String),
    /// 409: the command was marked lost, so it must not run.
    #[error("command {id} was marked lost before this accepted ack ({why}): it must not run")]
    Lost { id: String, why: String },
}

impl State {
    pub(crate) fn ack(
        &mut self,
        ack: &Ack,
        cfg: &ServerConfig,
        now: DateTime<Utc>,
    ) -> Result<(), AckError> {
        if ack.command_id.is_empty() {
            return Err(AckError::MissingCommand);
        }
        let state =
            AckState::parse(&ack.state).ok_or_else(|| AckError::BadState(ack.state.clone()))?;
        if !matches!(ack.status.as_str(), "" | "succeeded" | "failed") {
            return Err(AckError::BadStatus(ack.status.clone()));
        }
        let row = self
            .commands
            .get(&ack.command_id)
            .ok_or_else(|| AckError::UnknownCommand(ack.command_id.clone()))?;
        if state == AckState::Accepted && row.state == CommandState::Lost {
            // The user may already have re-issued it: reviving it could run it twice.
            return Err(AckError::Lost {
                id: ack.command_id.clone(),
                why: row.error.clone(),
            });
        }
        let (runtime, public_id, fork, row_state) = (
            row.runtime.clone(),
            row.public_id.clone(),
            row.fork,
            row.state,
        );
        let id = ack.command_id.clone();
        if !ack.run_id.is_empty() {
            let route = self.runs.entry(ack.run_id.clone()).or_default();
            route.runtime = runtime.clone();
            route.seen = Some(now);
            if !public_id.is_empty() {
                route.public_id = public_id;
            }
            route.fork |= fork;
        }
        let beat_ms = self
            .runtimes
            .get(&runtime)
            .map(|e| e.reg.heartbeat_ms)
            .unwrap_or(0);
        let connected = self
            .runtimes
            .get(&runtime)
            .is_some_and(|e| e.feed.is_some());
        let ack_reason = ack.reason.as_ref().map(|r| Reason {
            kind: r.kind.clone(),
            message: ack.error.clone(),
            step: r.step,
            components: r.components.clone(),
        });
        match state {
            AckState::Accepted => match row_state {
                CommandState::Queued => {
                    self.set_watch(&id, None);
                    if let Some(row) = self.commands.get_mut(&id) {
                        row.state = CommandState::Accepted;
                        row.run_id = ack.run_id.clone();
                        row.updated = now;
                    }
                    if beat_ms > 0 {
                        self.arm_beat(&id, beat_ms, cfg, now);
                    } else if !connected {
                        // No sweep will arm the watch for this row: arm it now.
                        self.arm_finish(
                            &id,
                            cfg.finish_deadline,
                            "accepted while the runtime was disconnected, no finish",
                            now,
                        );
                    }
                    self.save_row(&id);
                }
                CommandState::Accepted => {
                    let mut changed = false;
                    let mut row_beat = None;
                    if let Some(row) = self.commands.get_mut(&id) {
                        if row.run_id.is_empty() && !ack.run_id.is_empty() {
                            // A fork's turn names its run only once it is in flight.
                            row.run_id = ack.run_id.clone();
                            row.updated = now;
                            changed = true;
                        }
                        row_beat = row.watch.as_ref().and_then(|w| w.beat);
                    }
                    let beat = row_beat
                        .map(|b| i64::try_from(b.as_millis()).unwrap_or(i64::MAX))
                        .unwrap_or(beat_ms);
                    if beat > 0 {
                        // A heartbeat: the command is alive in the runtime's hands.
                        self.arm_beat(&id, beat, cfg, now);
                    }
                    if changed {
                        self.save_row(&id);
                    }
                }
                // Finished and rejected rows are settled; a repeated accepted is a no-op.
                _ => {}
            },
            AckState::Rejected => {
                if matches!(row_state, CommandState::Queued | CommandState::Lost) {
                    self.set_watch(&id, None);
                    if let Some(row) = self.commands.get_mut(&id) {
                        row.state = CommandState::Rejected;
                        row.error = ack.error.clone();
                        row.reason = ack_reason;
                        row.updated = now;
                    }
                    self.save_row(&id);
                }
            }
            AckState::Finished => {
                self.set_watch(&id, None);
                if let Some(row) = self.commands.get_mut(&id) {
                    row.state = CommandState::Finished;
                    if !ack.run_id.is_empty() {
                        row.run_id = ack.run_id.clone();
                    }
                    row.status = ack.status.clone();
                    // The run's own outcome replaces whatever a timer guessed.
                    row.error = ack.error.clone();
                    row.reason = ack_reason;
                    row.updated = now;
                }
                self.save_row(&id);
            }
        }
        Ok(())
    }
}
