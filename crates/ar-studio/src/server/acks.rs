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
        let state = checked_state(ack)?;
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
        let (runtime, row_state) = (row.runtime.clone(), row.state);
        if !ack.run_id.is_empty() {
            let (public_id, fork) = (row.public_id.clone(), row.fork);
            self.learn_route(&ack.run_id, &runtime, &public_id, fork, now);
        }
        let id = ack.command_id.as_str();
        match (state, row_state) {
            (AckState::Accepted, CommandState::Queued) => {
                self.accept_queued(id, ack, &runtime, cfg, now)
            }
            (AckState::Accepted, CommandState::Accepted) => {
                self.heartbeat(id, ack, &runtime, cfg, now)
            }
            // Finished and rejected rows are settled; a repeated accepted is a no-op.
            (AckState::Accepted, _) => {}
            (AckState::Rejected, CommandState::Queued | CommandState::Lost) => {
                self.settle(id, ack, CommandState::Rejected, now)
            }
            (AckState::Rejected, _) => {}
            (AckState::Finished, _) => self.settle(id, ack, CommandState::Finished, now),
        }
        Ok(())
    }

    /// The runtime took a queued command: watch its heartbeats, or (when no sweep will) its
    /// finish.
    fn accept_queued(
        &mut self,
        id: &str,
        ack: &Ack,
        runtime: &str,
        cfg: &ServerConfig,
        now: DateTime<Utc>,
    ) {
        let entry = self.runtimes.get(runtime);
        let beat_ms = entry.map_or(0, |e| e.reg.heartbeat_ms);
        let connected = entry.is_some_and(|e| e.feed.is_some());
        self.set_watch(id, None);
        if let Some(row) = self.commands.get_mut(id) {
            row.state = CommandState::Accepted;
            row.run_id = ack.run_id.clone();
            row.updated = now;
        }
        if beat_ms > 0 {
            self.arm_beat(id, beat_ms, cfg, now);
        } else if !connected {
            // No sweep will arm the watch for this row: arm it now.
            self.arm_finish(
                id,
                cfg.finish_deadline,
                "accepted while the runtime was disconnected, no finish",
                now,
            );
        }
        self.save_row(id);
    }

    /// A repeated accepted ack is a heartbeat: the command is alive in the runtime's hands.
    fn heartbeat(
        &mut self,
        id: &str,
        ack: &Ack,
        runtime: &str,
        cfg: &ServerConfig,
        now: DateTime<Utc>,
    ) {
        let mut changed = false;
        let mut row_beat = None;
        if let Some(row) = self.commands.get_mut(id) {
            if row.run_id.is_empty() && !ack.run_id.is_empty() {
                // A fork's turn names its run only once it is in flight.
                row.run_id = ack.run_id.clone();
                row.updated = now;
                changed = true;
            }
            row_beat = row.watch.as_ref().and_then(|w| w.beat);
        }
        let beat = match row_beat {
            Some(b) => i64::try_from(b.as_millis()).unwrap_or(i64::MAX),
            None => self.runtimes.get(runtime).map_or(0, |e| e.reg.heartbeat_ms),
        };
        if beat > 0 {
            self.arm_beat(id, beat, cfg, now);
        }
        if changed {
            self.save_row(id);
        }
    }

    /// Ends the command as `Rejected` or `Finished` with the runtime's own outcome, which
    /// replaces whatever a timer guessed.
    fn settle(&mut self, id: &str, ack: &Ack, state: CommandState, now: DateTime<Utc>) {
        self.set_watch(id, None);
        if let Some(row) = self.commands.get_mut(id) {
            row.state = state;
            if state == CommandState::Finished {
                if !ack.run_id.is_empty() {
                    row.run_id = ack.run_id.clone();
                }
                row.status = ack.status.clone();
            }
            row.error = ack.error.clone();
            row.reason = ack.reason.as_ref().map(|r| Reason {
                kind: r.kind.clone(),
                message: ack.error.clone(),
                step: r.step,
                components: r.components.clone(),
            });
            row.updated = now;
        }
        self.save_row(id);
    }
}

/// The ack's state, once its fields are known to be well-formed.
fn checked_state(ack: &Ack) -> Result<AckState, AckError> {
    if ack.command_id.is_empty() {
        return Err(AckError::MissingCommand);
    }
    let state = AckState::parse(&ack.state).ok_or_else(|| AckError::BadState(ack.state.clone()))?;
    if !matches!(ack.status.as_str(), "" | "succeeded" | "failed") {
        return Err(AckError::BadStatus(ack.status.clone()));
    }
    Ok(state)
}
