//! The link client, the runtime side of the protocol: register → stream → ack, with reconnects, at-most-once, heartbeats and bounded admission.

mod acker;
mod backoff;
mod budget;
mod carry;
mod config;
mod handler;
mod seen;
mod stats;

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::frame::Frame;
use crate::wire::{Budget, RegisterResponse};

pub use acker::AckAnswer;
pub use backoff::Backoff;
pub use budget::REASON_BUDGET_EXCEEDED;
pub use config::{LinkConfig, LinkError};
pub use handler::{Admission, CommandHandler, Outcome, Rejection, Work};
pub use seen::SeenSet;
pub use stats::LinkStats;

use acker::Acker;
use budget::Budgets;
use stats::{bump, Counters};

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
    /// Starts linking to the studio in the background, on the current tokio runtime.
    pub fn start(
        config: LinkConfig,
        handler: Arc<dyn CommandHandler>,
    ) -> Result<LinkHandle, LinkError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| LinkError::NoRuntime)?;
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
        let task = runtime.spawn(Arc::clone(&link).connect_loop());
        Ok(LinkHandle { link, task })
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
    pub async fn stop(mut self) {
        self.link.stop.cancel();
        let _ = (&mut self.task).await;
        self.link.tracker.close();
        self.link.tracker.wait().await;
    }
}

impl Drop for LinkHandle {
    /// A dropped handle stops the link (without waiting for its commands).
    fn drop(&mut self) {
        self.link.stop.cancel();
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
        let mut reader = ar_sse::Decoder::with_max_frame(self.config.max_frame);
        let mut body = resp.bytes_stream();
        loop {
            let next = tokio::time::timeout(self.config.idle_timeout, body.next()).await;
            let chunk = match next {
                Err(_) => return Err(LinkError::Idle),
                Ok(None) => return Ok(()),
                Ok(Some(chunk)) => chunk?,
            };
            reader.push(&chunk);
            while let Some(ev) = reader.next_event() {
                Arc::clone(&self).dispatch(ev).await;
            }
        }
    }

    async fn dispatch(self: Arc<Self>, ev: ar_sse::Event) {
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
}
