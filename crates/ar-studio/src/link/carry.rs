//! Carrying one tracked command at most once: admission bound, check, budget, accepted ack, heartbeats, execution, finished ack.

use std::sync::Arc;

use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::wire::Ack;

use super::acker::AckAnswer;
use super::budget::REASON_BUDGET_EXCEEDED;
use super::handler::{Outcome, Rejection, Work};
use super::stats::bump;
use super::Link;

impl Link {
    /// Rejects a tracked frame that could not be read (once per id).
    pub(super) fn refuse_unread(self: &Arc<Self>, id: &str, why: String) {
        if !crate::ids::valid_command_id(id) || !self.seen.lock().insert(id) {
            return;
        }
        let link = Arc::clone(self);
        let id = id.to_string();
        self.tracker.spawn(async move {
            link.reject(&id, Rejection::with_kind(why, "bad_frame"))
                .await;
        });
    }

    async fn reject(&self, id: &str, rejection: Rejection) {
        let ack = Ack {
            command_id: id.to_string(),
            state: "rejected".to_string(),
            error: rejection.message,
            reason: rejection.reason,
            ..Ack::default()
        };
        self.acker.post(&ack, 3).await;
        bump(&self.counters.rejected);
    }

    /// Admits a tracked command at most once.
    pub(super) fn take(self: &Arc<Self>, work: Work) {
        let id = work.command_id().to_string();
        if !self.seen.lock().insert(&id) {
            bump(&self.counters.duplicates);
            return;
        }
        *self.cursor.lock() = Some(id.clone());
        let link = Arc::clone(self);
        let Ok(permit) = Arc::clone(&self.admitted).try_acquire_owned() else {
            let max = self.config.max_admitted;
            self.tracker.spawn(async move {
                let why = format!("runtime busy: {max} commands already admitted");
                link.reject(&id, Rejection::with_kind(why, "busy")).await;
            });
            return;
        };
        let cancel = self.stop.child_token();
        self.inflight.lock().insert(id, cancel.clone());
        self.tracker.spawn(link.carry(work, permit, cancel));
    }

    /// Checks, acks, runs and finishes one command.
    async fn carry(
        self: Arc<Self>,
        work: Work,
        permit: OwnedSemaphorePermit,
        cancel: CancellationToken,
    ) {
        let id = work.command_id().to_string();
        self.carry_inner(&id, work, cancel).await;
        self.inflight.lock().remove(&id);
        drop(permit);
    }

    async fn carry_inner(self: &Arc<Self>, id: &str, work: Work, cancel: CancellationToken) {
        let admission = match self.handler.admit(&work).await {
            Ok(a) => a,
            Err(rejection) => return self.reject(id, rejection).await,
        };
        let experiment = match &work {
            Work::Run(c) => c.experiment_id.clone(),
            _ => String::new(),
        };
        let caps = *self.caps.lock();
        if let Err(why) = self.budgets.reserve(&experiment, caps) {
            return self
                .reject(id, Rejection::with_kind(why, REASON_BUDGET_EXCEEDED))
                .await;
        }
        let accepted = Ack {
            command_id: id.to_string(),
            state: "accepted".to_string(),
            run_id: admission.run_id.clone(),
            ..Ack::default()
        };
        match self.acker.post(&accepted, 3).await {
            AckAnswer::Ok => bump(&self.counters.accepted),
            AckAnswer::Conflict => {
                // Marked lost before the ack landed: the user may have re-issued it.
                bump(&self.counters.conflicts);
                return;
            }
            AckAnswer::Refused(_) | AckAnswer::Unreachable => return,
        }
        let beating = CancellationToken::new();
        let beat = self.heartbeat(accepted, beating.clone());
        let run = async {
            let slot = tokio::select! {
                p = Arc::clone(&self.running).acquire_owned() => p.ok(),
                _ = cancel.cancelled() => None,
            };
            match slot {
                Some(_slot) if !cancel.is_cancelled() => {
                    self.handler
                        .execute(work, admission.clone(), cancel.clone())
                        .await
                }
                _ => Outcome::failed("canceled before it started"),
            }
        };
        let outcome = run.await;
        beating.cancel();
        if let Some(beat) = beat {
            let _ = beat.await;
        }
        self.budgets.charge(&experiment, outcome.tokens);
        let run_id = if outcome.run_id.is_empty() {
            admission.run_id
        } else {
            outcome.run_id
        };
        let finished = Ack {
            command_id: id.to_string(),
            state: "finished".to_string(),
            run_id,
            status: outcome.status.as_str().to_string(),
            error: outcome.error,
            reason: outcome.reason,
        };
        self.acker.post(&finished, 3).await;
        bump(&self.counters.finished);
    }

    /// Re-posts `accepted` every heartbeat until `stop` fires.
    fn heartbeat(self: &Arc<Self>, ack: Ack, stop: CancellationToken) -> Option<JoinHandle<()>> {
        let every = self.config.heartbeat;
        if every.is_zero() {
            return None;
        }
        let link = Arc::clone(self);
        Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tick.tick() => {
                        link.acker.post(&ack, 1).await;
                        bump(&link.counters.heartbeats);
                    }
                }
            }
        }))
    }
}
