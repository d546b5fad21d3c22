//! Seed 003: the studio control plane, runtime registry, command state machine, SSE command stream, acks and the link client.
//!
//! - [`StudioServer`]: the registry of runtimes and the command state machine (the seed's
//!   `RuntimeServer`), on an injectable [`Clock`], persisting through a [`StudioStore`].
//! - [`http::router`]: the axum routes under `/api/` (the runtime link and the people API).
//! - [`link::LinkClient`]: the runtime side of the protocol, driving a [`link::CommandHandler`].
//! - [`serve_studio`]: the standalone `agent-runtime studio` server.
//! - [`bench::run_bench`]: the studio benchmark.

pub mod bench;
pub mod clock;
pub mod error;
pub mod frame;
pub mod http;
pub mod ids;
mod json_indent;
pub mod link;
mod manifests;
mod serve;
pub mod server;
pub mod store;
pub mod wire;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::StudioError;
pub use frame::Frame;
pub use ids::valid_command_id;
pub use serve::{
    serve_studio, DeadlineIo, DeadlineListener, StudioConfig, DEFAULT_STUDIO_ADDR, STUDIO_ADDR_ENV,
};
pub use server::{ServerConfig, StudioServer};
pub use store::{MemoryStore, SqliteStore, StudioStore};
