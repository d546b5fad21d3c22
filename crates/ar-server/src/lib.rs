//! HTTP face of the service (axum): routes, auth, SSE, wire conversion, and the composition
//! root that picks the concrete store, model client, tools and event plumbing.
//!
//! `Service::build(settings, addr)` followed by `serve(listener, shutdown)` is the whole
//! service; the binary only parses the command line and calls them. Tests bind `127.0.0.1:0`
//! and drive the same two calls.

pub mod agent_cli;
pub mod auth;
pub mod codex_auth;
pub mod compose;
pub mod connections;
pub mod convert;
pub mod demo;
pub mod durable;
pub mod error;
pub mod metrics;
pub mod openapi;
mod routes;
pub mod state;
pub mod studio_console;
pub mod studio_embed;
pub mod studio_runtime;
pub mod subscription_lane;

pub use ar_temporal::worker::WorkerRole;
pub use compose::{Service, ServiceOptions};
pub use routes::router;
