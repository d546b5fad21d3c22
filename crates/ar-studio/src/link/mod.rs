//! The link client, the runtime side of the protocol: register → stream → ack, with reconnects, at-most-once, heartbeats and bounded admission.

mod acker;
mod backoff;
mod budget;
mod handler;
mod seen;
mod sse_reader;
mod stats;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::frame::Frame;
use crate::wire::{Ack, Budget, RegisterResponse};

pub use acker::AckAnswer;
pub use backoff::Backoff;
pub use budget::REASON_BUDGET_EXCEEDED;
pub use handler::{Admission, CommandHandler, Outcome, Rejection, Work};
pub use seen::SeenSet;
pub use sse_reader::{RawEvent, SseReader};
pub use stats::LinkStats;

use acker::Acker;
use budget::Budgets;
use stats::{bump, Counters};

/// How a runtime links to a studio.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// The studio's base URL, e.g. `http://127.0.0.1:8092`.
    pub studio_url: String,
    /// The studio's bearer token, for a hosted studio.
    pub token: Option<String>,
    /// Commands executing at once (16).
    pub max_running: usize,
    /// Commands held (waiting or executing) at once; past it new ones are rejected (256).
    pub max_admitted: usize,
    /// Newest command ids remembered for at-most-once (4096).
    pub seen_capacity: usize,
    /// Cadence of `accepted` re-posts while a command is held (10 s); zero: none.
    pub heartbeat: Duration,
    /// Reconnect backoff floor (0.5 s) and ceiling (30 s).
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// One ack's timeout (10 s).
    pub ack_timeout: Duration,
    /// A stream silent this long is taken as dead (60 s; the studio pings every 15 s).
    pub idle_timeout: Duration,
    /// Frames larger than this are acked `rejected` (8 MiB).
    pub max_frame: usize,
}

impl LinkConfig {
    /// Defaults for a studio at `studio_url`.
    pub fn new(studio_url: impl Into<String>) -> Self {
        Self {
            studio_url: studio_url.into().trim_end_matches('/').to_string(),
            token: None,
            max_running: 16,
            max_admitted: 256,
            seen_capacity: 4096,
            heartbeat: Duration::from_secs(10),
            backoff_min: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            ack_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_frame: 8 << 20,
        }
    }
}

/// Why one connection attempt ended.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("studio link: http: {0}")]
    Http(#[from] reqwest::Error),
    #[error("studio link: {what} answered {status}")]
    Status { what: &'static str, status: u16 },
    #[error("studio link: the stream went silent")]
    Idle,
}

struct Link {
    config: LinkConfig,
    handler: Arc<dyn CommandHandler>,
    http: reqwest::Client,
    acker: Acker,
    stop: CancellationToken,
    tracker: TaskTracker,
    seen: Mutex<SeenSet>,
    cursor: Mutex<Option<String>>,
    inflight: Mutex<HashMap<String, CancellationToken>>,
    admitted: Arc<Semaphore>,
    running: Arc<Semaphore>,
    budgets: Budgets,
    caps: Mutex<Budget>,
    counters: Counters,
}

/// Starts link clients.
#[derive(Debug, Clone, Copy)]
pub struct LinkClient;

impl LinkClient {
    /// Starts linking to the studio in the background.
    pub fn start(config: LinkConfig, handler: Arc<dyn CommandHandler>) -> LinkHandle {
        let http = reqwest::Client::builder()
            .tcp_nodelay(true)
            .build()
            .unwrap_or_default();
        let acker = Acker {
            http: http.clone(),
            url: format!("{}/api/runtime/acks", config.studio_url),
            token: config.token.clone(),
            timeout: config.ack_timeout,
        };
        let link = Arc::new(Link {
            seen: Mutex::new(SeenSet::new(config.seen_capacity)),
            admitted: Arc::new(Semaphore::new(config.max_admitted.max(1))),
            running: Arc::new(Semaphore::new(config.max_running.max(1))),
            config,
            handler,
            http,
            acker,
            stop: CancellationToken::new(),
            tracker: TaskTracker::new(),
            cursor: Mutex::new(None),
            inflight: Mutex::new(HashMap::new()),
            budgets: Budgets::default(),
            caps: Mutex::new(Budget::default()),
            counters: Counters::default(),
        });
        let task = tokio::spawn(Arc::clone(&link).connect_loop());
        LinkHandle { link, task }
    }
}

/// A running link client.
pub struct LinkHandle {
    link: Arc<Link>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for LinkHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkHandle")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl LinkHandle {
    /// The client's counters now.
    pub fn stats(&self) -> LinkStats {
        self.link.counters.snapshot()
    }

    /// The resume cursor: the newest command id seen.
    pub fn cursor(&self) -> Option<String> {
        self.link.cursor.lock().clone()
    }

    /// Stops linking: cancels the commands this client started and waits for them.
    pub async fn stop(self) {
        self.link.stop.cancel();
        let _ = self.task.await;
        self.link.tracker.close();
        self.link.tracker.wait().await;
    }
}

impl Link {
    async fn connect_loop(self: Arc<Self>) {
        let mut backoff = Backoff::new(self.config.backoff_min, self.config.backoff_max);
        loop {
            let attempt = tokio::select! {
                _ = self.stop.cancelled() => break,
                r = Arc::clone(&self).session() => r,
            };
            match attempt {
                Ok(()) => backoff.reset(),
                Err(err) => tracing::debug!(error = %err, "studio link: connection ended"),
            }
            let delay = backoff.next_delay();
            tokio::select! {
                _ = self.stop.cancelled() => break,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    fn authed(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.config.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    /// One connection: register, open the stream, read it to its end.
    async fn session(self: Arc<Self>) -> Result<(), LinkError> {
        let base = &self.config.studio_url;
        let mut reg = self.handler.registration().await;
        if reg.heartbeat_ms == 0 {
            reg.heartbeat_ms = i64::try_from(self.config.heartbeat.as_millis()).unwrap_or(i64::MAX);
        }
        if reg.studio_url.is_empty() {
            reg.studio_url = base.clone();
        }
        *self.caps.lock() = reg.budget;
        let resp = self
            .authed(self.http.post(format!("{base}/api/runtime/register")))
            .json(&reg)
            .timeout(self.config.ack_timeout)
            .send()
            .await?;
        if !resp.status().is_success() {
            return Err(LinkError::Status {
                what: "register",
                status: resp.status().as_u16(),
            });
        }
        let answer: RegisterResponse = resp.json().await?;
        bump(&self.counters.registrations);
        let mut req = self
            .authed(self.http.get(format!("{base}{}", answer.commands_url)))
            .header("accept", "text/event-stream");
        let cursor = self.cursor.lock().clone();
        if let Some(last) = cursor {
            req = req.header("last-event-id", last);
        }
        let resp = req.send().await?;
        if !resp.status().is_success() {
            return Err(LinkError::Status {
                what: "commands stream",
                status: resp.status().as_u16(),
            });
        }
        bump(&self.counters.streams_opened);
        let mut reader = SseReader::new(self.config.max_frame);
        let mut body = resp.bytes_stream();
        loop {
            let next = tokio::time::timeout(self.config.idle_timeout, body.next()).await;
            let chunk = match next {
                Err(_) => return Err(LinkError::Idle),
                Ok(None) => return Ok(()),
                Ok(Some(chunk)) => chunk?,
            };
            for ev in reader.push(&chunk) {
                Arc::clone(&self).dispatch(ev).await;
            }
        }
    }

    async fn dispatch(self: Arc<Self>, ev: RawEvent) {
        let tracked = matches!(ev.event.as_str(), "run" | "approve" | "session");
        if ev.oversized {
            if let (true, Some(id)) = (tracked, ev.id.as_deref()) {
                self.refuse_unread(id, format!("frame over {} bytes", self.config.max_frame));
            }
            return;
        }
        let frame = match Frame::decode(&ev.event, ev.id.as_deref(), &ev.data) {
            Ok(f) => f,
            Err(err) => {
                if let (true, Some(id)) = (tracked, ev.id.as_deref()) {
                    self.refuse_unread(id, format!("bad frame: {err}"));
                }
                return;
            }
        };
        match frame {
            Frame::Ping => bump(&self.counters.pings),
            Frame::Breakpoints { tools, .. } => {
                bump(&self.counters.breakpoints);
                self.handler.breakpoints(tools).await;
            }
            Frame::Steer { steer, .. } => {
                bump(&self.counters.steers);
                let handler = Arc::clone(&self.handler);
                self.tracker
                    .spawn(async move { handler.steer(steer).await });
            }
            Frame::Cancel { command_id } => {
                bump(&self.counters.cancels);
                if let Some(token) = self.inflight.lock().get(&command_id) {
                    token.cancel();
                }
            }
            Frame::Run(c) => {
                bump(&self.counters.runs);
                self.take(Work::Run(c));
            }
            Frame::Approve(d) => {
                bump(&self.counters.approvals);
                self.take(Work::Approve(d));
            }
            Frame::Session(s) => {
                bump(&self.counters.sessions);
                self.take(Work::Session(s));
            }
        }
    }

    /// Rejects a tracked frame that could not be read (once per id).
    fn refuse_unread(self: &Arc<Self>, id: &str, why: String) {
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
    fn take(self: &Arc<Self>, work: Work) {
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
