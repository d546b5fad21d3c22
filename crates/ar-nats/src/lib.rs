//! The NATS JetStream event sink: persisted events published from the durable event log through a store cursor, transient deltas live and best effort.
//!
//! - [`NatsSink::connect`] opens the connection (reconnecting forever, in the background, so a
//!   NATS outage never stops the service), and makes sure the sink's store cursor exists before
//!   the service takes requests, so nothing committed from then on is missed.
//! - The publisher ([`publisher`]) tails the event log after that cursor: what this process
//!   commits is handed over by the bus ([`handoff`]), anything else is read from the log
//!   (`list_events_after_position`). It publishes each event to JetStream with `Nats-Msg-Id`,
//!   keeps a bounded window of publishes in flight (at most one event per run, so a run's
//!   events reach the stream in order even across a reconnect), and advances the cursor only
//!   past events JetStream acknowledged, in log order. A crash republishes what was not
//!   recorded; JetStream's duplicate window drops the copies.
//! - [`NatsSink::live_bus`] wraps the event bus: transient deltas (never persisted) go to a
//!   bounded queue, dropped and counted when it is full, and are published from there without
//!   acknowledgement. A run never waits for NATS.
//! - [`message`]: which subjects an event goes to (the v1 family for every app, the v2 family
//!   as well for v2 apps, each copy with its own message id) and its bodies, rendered by the
//!   server's envelope renderers.
//! - [`replicas`]: the replica link on NATS core subjects of its own (live events of the runs
//!   a replica owns, owner signals), sharing the sink's connection.
//! - [`stream`]: the stream the contract asks for, created or updated at startup.
//! - The connection and both publishers run on a thread of the sink's own (`thread`), so a
//!   saturated engine does not hold publishing back.

mod acks;
mod flight;
mod handoff;
pub mod live;
pub mod message;
pub mod publisher;
pub mod replicas;
pub mod stream;

mod sink;
mod thread;

pub use message::{Renderers, Routes};
pub use sink::{cursor_name, NatsError, NatsOptions, NatsSink, Stats, Tuning};
pub use thread::SINK_THREAD_NAME;
