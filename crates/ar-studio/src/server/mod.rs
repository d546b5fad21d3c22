//! The studio server: the registry of runtimes and the command state machine, with its configuration and public API.

mod acks;
mod breakpoints;
mod enqueue;
mod persist;
mod prune;
mod queries;
mod register;
mod restore;
mod state;
mod streams;
mod timers;
mod views;

use std::sync::{Arc, Weak};
use std::time::Duration;

use ar_core::clock::{Clock, SystemClock};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};

use crate::error::StudioError;
use crate::store::StudioStore;
use crate::wire::{
    Ack, ApprovalDecision, CancelTarget, Command, CommandState, RegisterResponse, Registration,
    SessionCommand, BREAKPOINTS_SURFACE_API,
};

pub use acks::AckError;
pub use register::{commands_url, RegisterError};
pub use streams::StreamStart;

use persist::{run_persister, PersistMsg};
use state::State;

/// The studio's timers and bounds. Defaults are the protocol's.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// A queued command unacked this long is lost (30 s).
    pub ack_deadline: Duration,
    /// An accepted command with no word this long after its stream ended is lost (10 min).
    pub finish_deadline: Duration,
    /// Keep-alive cadence on a command stream (15 s).
    pub ping_every: Duration,
    /// How long terminal rows, run routes and dead runtimes with breakpoints are kept (24 h).
    pub retention: Duration,
    /// One frame's write deadline on a command stream (30 s).
    pub write_timeout: Duration,
    /// Frames one stream may hold before it is dropped as stalled (256).
    pub feed_size: usize,
    /// Command rows kept at most (10,000).
    pub max_commands: usize,
    /// Remembered manifests kept at most (64).
    pub max_manifests: usize,
    /// Registration body limit (8 MiB).
    pub register_limit: usize,
    /// Playground body limit (4 MiB).
    pub playground_limit: usize,
    /// How often the background sweep fires deadlines and prunes (1 s of real time).
    pub sweep_every: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            ack_deadline: Duration::from_secs(30),
            finish_deadline: Duration::from_secs(600),
            ping_every: Duration::from_secs(15),
            retention: Duration::from_secs(24 * 3600),
            write_timeout: Duration::from_secs(30),
            feed_size: 256,
            max_commands: 10_000,
            max_manifests: 64,
            register_limit: 8 << 20,
            playground_limit: 4 << 20,
            sweep_every: Duration::from_secs(1),
        }
    }
}

struct Shared {
    config: ServerConfig,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
}

/// The registry of connected runtimes and their commands. Cheap to clone; all clones share
/// one registry.
#[derive(Clone)]
pub struct StudioServer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for StudioServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StudioServer")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl StudioServer {
    /// A studio on the wall clock, in memory only.
    pub fn new(config: ServerConfig) -> Self {
        Self::with_clock(config, Arc::new(SystemClock))
    }

    /// A studio on `clock`, in memory only. Inside a tokio runtime it also starts the
    /// background sweep; outside one, deadlines fire on [`Self::sweep`] and on every call.
    pub fn with_clock(config: ServerConfig, clock: Arc<dyn Clock>) -> Self {
        let state = State::new(config.max_manifests);
        let server = Self {
            shared: Arc::new(Shared {
                config,
                clock,
                state: Mutex::new(state),
            }),
        };
        server.start_sweeper();
        server
    }

    /// A studio whose command rows and breakpoint sets persist in `store`, restored from it
    /// now: queued rows become lost (their stream died with the previous studio), accepted
    /// ones get a finish watch, breakpoint sets come back (`breakpoints_by: "store"`).
    pub async fn with_store(
        config: ServerConfig,
        clock: Arc<dyn Clock>,
        store: Arc<dyn StudioStore>,
    ) -> Result<Self, StudioError> {
        let stored = store.load().await?;
        let (tx, rx) = mpsc::unbounded_channel();
        let server = Self::with_clock(config, clock);
        {
            let now = server.now();
            let mut st = server.shared.state.lock();
            st.persist = Some(tx);
            st.restore(stored, &server.shared.config, now);
        }
        tokio::spawn(run_persister(store, rx));
        Ok(server)
    }

    fn start_sweeper(&self) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak: Weak<Shared> = Arc::downgrade(&self.shared);
        let every = self
            .shared
            .config
            .sweep_every
            .max(Duration::from_millis(10));
        handle.spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(shared) = weak.upgrade() else { break };
                let server = StudioServer { shared };
                if server.shared.state.lock().closed {
                    break;
                }
                server.sweep();
            }
        });
    }

    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.shared.clock.now()
    }

    /// Runs `f` on the registry after firing every due deadline.
    fn with_state<T>(
        &self,
        f: impl FnOnce(&mut State, &ServerConfig, chrono::DateTime<chrono::Utc>) -> T,
    ) -> T {
        let now = self.now();
        let mut st = self.shared.state.lock();
        st.expire_due(now);
        f(&mut st, &self.shared.config, now)
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.shared.config
    }

    /// The clock the studio reads.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.shared.clock)
    }

    /// Fires every due deadline and prunes, as of the clock's now.
    pub fn sweep(&self) {
        self.with_state(|st, cfg, now| st.prune(cfg, now));
    }

    /// Waits until every change made so far is in the store (immediately without one).
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        let sent = {
            let st = self.shared.state.lock();
            st.persist
                .as_ref()
                .is_some_and(|tx| tx.send(PersistMsg::Flush(done)).is_ok())
        };
        if sent {
            let _ = wait.await;
        }
    }

    /// Ends every open stream at once and refuses new streams, registrations and commands,
    /// then waits for the store to catch up.
    pub async fn shutdown(&self) {
        self.shared.state.lock().close_all();
        self.flush().await;
    }

    /// Like [`Self::shutdown`] without waiting for the store.
    pub fn close(&self) {
        self.shared.state.lock().close_all();
    }

    // ── the runtime link ───────────────────────────────────────────

    /// Records a registration (it may overwrite the previous one).
    pub fn register(&self, reg: Registration) -> Result<RegisterResponse, RegisterError> {
        self.with_state(|st, _, now| st.register(reg, now))
    }

    /// Opens (or replaces) the runtime's command stream.
    pub fn open_stream(
        &self,
        runtime_id: &str,
        last_event_id: Option<&str>,
    ) -> Result<StreamStart, StudioError> {
        self.with_state(|st, cfg, now| st.open_stream(runtime_id, last_event_id, cfg, now))
    }

    /// The disconnect sweep for the stream `feed_id` (nothing if it was replaced).
    pub fn stream_ended(&self, runtime_id: &str, feed_id: u64) {
        self.with_state(|st, cfg, now| st.stream_ended(runtime_id, feed_id, cfg, now));
    }

    /// Notes the runtime was just seen (a ping went out on its stream).
    pub fn touch(&self, runtime_id: &str) {
        self.with_state(|st, _, now| {
            if let Some(e) = st.runtimes.get_mut(runtime_id) {
                e.last_seen = now;
            }
        });
    }

    /// Applies a runtime's ack.
    pub fn ack(&self, ack: &Ack) -> Result<(), AckError> {
        self.with_state(|st, cfg, now| st.ack(ack, cfg, now))
    }

    // ── commands ───────────────────────────────────────────────────

    /// Hands `cmd` to the runtime's stream, minting its id when empty. Validates nothing
    /// about the command itself (the playground route does).
    pub fn enqueue(&self, runtime_id: &str, cmd: Command) -> Result<Command, StudioError> {
        self.with_state(|st, cfg, now| st.enqueue(runtime_id, cmd, cfg, now))
    }

    /// Forwards a decision on a parked call as an `approve` command.
    pub fn enqueue_approval(
        &self,
        runtime_id: &str,
        d: ApprovalDecision,
    ) -> Result<ApprovalDecision, StudioError> {
        self.with_state(|st, cfg, now| st.enqueue_approval(runtime_id, d, cfg, now))
    }

    /// Forwards a verb to one of the runtime's thread sessions as a `session` command.
    pub fn enqueue_session(
        &self,
        runtime_id: &str,
        sc: SessionCommand,
    ) -> Result<SessionCommand, StudioError> {
        self.with_state(|st, cfg, now| st.enqueue_session(runtime_id, sc, cfg, now))
    }

    /// Sends one user message into a run the runtime holds; best effort.
    pub fn steer(&self, runtime_id: &str, run_id: &str, message: &str) -> Result<(), StudioError> {
        self.with_state(|st, cfg, now| st.steer(runtime_id, run_id, message, cfg, now))
    }

    /// Sends a cancel frame for a command; best effort.
    pub fn cancel(&self, runtime_id: &str, command_id: &str) {
        self.with_state(|st, cfg, now| st.cancel(runtime_id, command_id, cfg, now));
    }

    /// Sends a cancel frame for a command still queued or accepted.
    pub fn cancel_command(&self, command_id: &str) -> Result<CancelTarget, StudioError> {
        self.with_state(|st, cfg, now| {
            let row = st
                .commands
                .get(command_id)
                .ok_or(StudioError::UnknownCommand)?;
            if !matches!(row.state, CommandState::Queued | CommandState::Accepted) {
                return Err(StudioError::RunFinished);
            }
            let target = CancelTarget {
                runtime_id: row.runtime.clone(),
                run_id: row.run_id.clone(),
                command_id: command_id.to_string(),
            };
            let frame = crate::frame::Frame::Cancel {
                command_id: command_id.to_string(),
            };
            st.deliver(&target.runtime_id, frame.encode(), cfg, now)?;
            Ok(target)
        })
    }

    /// Cancels a run through the command in flight for it.
    pub fn cancel_run(&self, run_id: &str) -> Result<CancelTarget, StudioError> {
        self.with_state(|st, cfg, now| st.cancel_run(run_id, cfg, now))
    }

    /// Stores and forwards a breakpoint set (set by the studio, no surface named).
    pub fn set_breakpoints(&self, runtime_id: &str, tools: &[String]) -> Result<(), StudioError> {
        self.set_breakpoints_from(runtime_id, tools, "")
    }

    /// Stores and forwards a breakpoint set, recording the surface that set it (e.g.
    /// [`BREAKPOINTS_SURFACE_API`]). Stored only when the frame reached a live stream.
    pub fn set_breakpoints_from(
        &self,
        runtime_id: &str,
        tools: &[String],
        surface: &str,
    ) -> Result<(), StudioError> {
        self.with_state(|st, cfg, now| st.set_breakpoints(runtime_id, tools, surface, cfg, now))
    }

    /// Drops a dead runtime from the registry.
    pub fn forget(&self, runtime_id: &str) -> Result<(), StudioError> {
        self.with_state(|st, _, _| {
            let entry = st
                .runtimes
                .get(runtime_id)
                .ok_or(StudioError::UnknownRuntime)?;
            if entry.feed.is_some() {
                return Err(StudioError::Connected);
            }
            let busy = st.commands.values().any(|r| {
                r.runtime == runtime_id
                    && matches!(r.state, CommandState::Queued | CommandState::Accepted)
            });
            if busy {
                return Err(StudioError::RuntimeBusy);
            }
            st.runtimes.remove(runtime_id);
            st.forget_breakpoints(runtime_id);
            Ok(())
        })
    }
}

/// The surface name the HTTP API records for breakpoint sets.
pub const API_SURFACE: &str = BREAKPOINTS_SURFACE_API;
