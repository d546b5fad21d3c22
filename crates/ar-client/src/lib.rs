//! The client side of the Agent Runtime service for host applications: [`Client`], the typed
//! HTTP client of the `/v1` and `/v2` API with the resuming event stream, and [`nats`], the
//! durable JetStream consumer of the runtime's events.

pub mod chatgptauth;
mod http;
pub mod mcpauth;
pub mod nats;

pub use http::{
    Client, ClientBuilder, Error, EventStream, HttpStatusError, RunSearch, StreamItem,
    StreamOptions, DEFAULT_TIMEOUT, MAX_ERROR_BODY,
};

/// How a secret shows in `Debug`: `[redacted]`, or `""` when it is empty (unset stays visible).
pub(crate) fn redacted(secret: &str) -> &'static str {
    if secret.is_empty() {
        ""
    } else {
        ar_wire::REDACTED
    }
}
