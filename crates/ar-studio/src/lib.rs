//! Seed 003: the studio control plane, runtime registry, command state machine, SSE command stream, acks and the link client.
//!
//! - [`StudioServer`]: the registry of runtimes and the command state machine (the seed's
//!   `RuntimeServer`), on an injectable [`Clock`], persisting through a [`StudioStore`].
//! - [`http::router`]: the axum routes under `/api/` (the runtime link and the people API),
//!   or [`http::link_routes`] / [`http::api_routes`] to mount them behind your own guard.
//! - [`link::LinkClient`]: the runtime side of the protocol, driving a [`link::CommandHandler`].
//! - [`serve_studio`]: the standalone `agent-runtime studio` server, with the console at `/studio`.
//! - [`console::routes`]: the console (one page, one script, one stylesheet; offline).
//! - [`bench::run_bench`]: the studio benchmark.
//!
//! Embedding, in outline:
//!
//! ```text
//! let studio = StudioServer::with_store(ServerConfig::default(), Arc::new(SystemClock),
//!                                       Arc::new(SqliteStore::open("studio.db").await?)).await?;
//! let app = your_router.merge(http::router(studio.clone(), RouterOptions { token, runs }));
//! // a runtime (this process or another) links to it:
//! let link = LinkClient::start(LinkConfig::new("http://127.0.0.1:8092"), Arc::new(my_handler))?;
//! // on shutdown: studio.shutdown().await; link.stop().await;
//! ```
//!
//! Wire notes: frames are `id: …` (when the frame has an id), `event: …`, `data: …` and a
//! blank line, as [`Frame::encode`] writes them. Besides the reference's `run cancel approve
//! breakpoints steer ping`, commands addressed to a runtime's thread sessions
//! ([`StudioServer::enqueue_session`]) travel as `event: session` with the command id as id.

pub mod bench;
mod clock;
pub mod console;
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

/// The studio's timers read this clock (the domain's, so tests share one manual clock).
pub use ar_core::clock::{Clock, ManualClock, SystemClock};
pub use error::StudioError;
pub use frame::Frame;
pub use ids::valid_command_id;
pub use serve::{
    serve_studio, DeadlineIo, DeadlineListener, StudioConfig, DEFAULT_STUDIO_ADDR, STUDIO_ADDR_ENV,
};
pub use server::{ServerConfig, StudioServer};
pub use store::{MemoryStore, SqliteStore, StudioStore};
