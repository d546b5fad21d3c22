//! Per-run event fan-out (in-process bus), gap-free replay stitching, SSE framing and the durable callback outbox.
//!
//! - [`bus::Bus`]: the in-process [`ar_core::event::EventBus`]; one broadcast channel per run,
//!   created when someone subscribes and removed when the last subscriber leaves.
//! - [`replay::stream_run_events`]: a run's events after a cursor, stitched from the store and the
//!   bus without gaps or duplicates (subscribe first, then read the log, then skip what was read).
//! - [`sse`]: the run event stream's frames (sequence numbers as ids), heartbeat and resume cursor.
//! - [`outbox::CallbackDispatcher`]: at-least-once HTTP delivery of persisted events to app
//!   callbacks (and the legacy global one), with the events table as the outbox and a named
//!   cursor per callback ([`outbox::load_or_create_cursor`], shared with the NATS sink).
//! - [`link`]: the replica link's side in this process ([`link::Replicas`]: live events of the
//!   runs other replicas watch sent to them, theirs handed to the local bus, owner signals to
//!   the runs' owners, the runs watched here announced).
//! - [`log_sink::LoggingBus`]: the `log` event sink, writing each event's envelope to the log.

pub mod bus;
pub mod link;
pub mod log_sink;
pub mod outbox;
pub mod replay;
pub mod sse;

#[cfg(test)]
mod fake_store;

pub use bus::{Bus, RecvError, Subscription};
pub use link::{LinkedBus, Replicas};
pub use log_sink::LoggingBus;
pub use outbox::{
    load_or_create_cursor, AppFilter, CallbackDispatcher, CallbackTarget, DispatcherOptions,
    RenderFn, StartPosition,
};
pub use replay::{stream_run_events, stream_run_events_with, ReplayOptions, RunState};
