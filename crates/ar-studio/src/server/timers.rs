//! The command lifecycle's deadlines on the injectable clock: ack watch, finish watch, heartbeat watch, expiry.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::clock::later;
use crate::wire::CommandState;

use super::state::{State, Watch, WatchKind};
use super::ServerConfig;

impl State {
    /// Replaces the row's deadline (or clears it with `None`).
    pub(crate) fn set_watch(&mut self, id: &str, watch: Option<Watch>) {
        let Some(row) = self.commands.get_mut(id) else {
            return;
        };
        if let Some(old) = row.watch.take() {
            self.deadlines.remove(&(old.at, row.seq));
        }
        if let Some(w) = watch {
            self.deadlines.insert((w.at, row.seq));
            row.watch = Some(w);
        }
    }

    /// Starts the unacked timer on a queued row.
    pub(crate) fn arm_ack(&mut self, id: &str, cfg: &ServerConfig, now: DateTime<Utc>) {
        if cfg.ack_deadline.is_zero() {
            return;
        }
        self.set_watch(
            id,
            Some(Watch {
                at: later(now, cfg.ack_deadline),
                kind: WatchKind::Ack,
                why: "no ack in time".to_string(),
                beat: None,
            }),
        );
    }

    /// Starts a finish watch on an accepted row; a finish watch already armed keeps its
    /// (earlier) deadline.
    pub(crate) fn arm_finish(&mut self, id: &str, d: Duration, why: &str, now: DateTime<Utc>) {
        let Some(row) = self.commands.get(id) else {
            return;
        };
        if d.is_zero() || matches!(&row.watch, Some(w) if w.kind == WatchKind::Finish) {
            return;
        }
        self.set_watch(
            id,
            Some(Watch {
                at: later(now, d),
                kind: WatchKind::Finish,
                why: why.to_string(),
                beat: None,
            }),
        );
    }

    /// Starts the heartbeat watch of an accepted row: `max(finish, 3 × beat)`, the beat taken at
    /// most the finish deadline.
    pub(crate) fn arm_beat(
        &mut self,
        id: &str,
        beat_ms: i64,
        cfg: &ServerConfig,
        now: DateTime<Utc>,
    ) {
        let finish = cfg.finish_deadline;
        if beat_ms <= 0 || finish.is_zero() {
            return;
        }
        let beat = Duration::from_millis(u64::try_from(beat_ms).unwrap_or(u64::MAX)).min(finish);
        let d = finish.max(beat.saturating_mul(3));
        self.set_watch(
            id,
            Some(Watch {
                at: later(now, d),
                kind: WatchKind::Finish,
                why: format!(
                    "accepted, but no finish and no heartbeat from the runtime in {}s",
                    d.as_secs()
                ),
                beat: Some(beat),
            }),
        );
    }

    /// Moves a row to a terminal state with a reason, stopping its deadline.
    pub(crate) fn terminate(
        &mut self,
        id: &str,
        state: CommandState,
        why: &str,
        now: DateTime<Utc>,
    ) {
        self.set_watch(id, None);
        if let Some(row) = self.commands.get_mut(id) {
            row.state = state;
            row.error = why.to_string();
            row.reason = None;
            row.updated = now;
        }
        self.save_row(id);
    }

    /// Fires every deadline at or before `now`.
    pub(crate) fn expire_due(&mut self, now: DateTime<Utc>) {
        while let Some(&(at, seq)) = self.deadlines.first() {
            if at > now {
                break;
            }
            self.deadlines.remove(&(at, seq));
            let Some(id) = self.by_seq.get(&seq).cloned() else {
                continue;
            };
            let Some(row) = self.commands.get_mut(&id) else {
                continue;
            };
            let Some(watch) = row.watch.take() else {
                continue;
            };
            let fires = match watch.kind {
                WatchKind::Ack => row.state == CommandState::Queued,
                WatchKind::Finish => row.state == CommandState::Accepted,
            };
            if fires {
                self.terminate(&id, CommandState::Lost, &watch.why, now);
            }
        }
    }
}
