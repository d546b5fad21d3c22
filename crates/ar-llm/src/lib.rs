//! Model providers behind the domain `ModelClient` trait: OpenAI Chat Completions, OpenAI
//! Responses and Anthropic Messages, all streaming, with bounded pre-stream retries.
//!
//! Layout: [`client`] owns the HTTP call, retry loop and SSE read loop; each wire format lives
//! in its own module under `providers/` (request body, endpoint, auth, stream parser), so adding
//! a format means adding a module and a [`WireApi`] variant. [`LlmClient`] picks the format
//! from `ModelRoute::provider` (see [`WireApi::for_provider`]).
//!
//! [`demo`] is the built-in demo model of `agent-runtime serve --demo`: no vendor, no HTTP, a
//! deterministic stand-in labelled as such in every text it writes.
//!
//! Retry rule: 429, 408/409 and 5xx answers and connect failures are retried with exponential
//! backoff (or the server's `Retry-After`/`retry-after-ms`), at most `RetryPolicy::max_retries`
//! times, and only before any byte of the response stream is consumed. A stream that breaks
//! later is reported as `ModelError::Transport`, never replayed. Cancelling is dropping the
//! future, which drops the connection.

pub mod client;
pub mod demo;
pub mod error;
mod providers;
pub mod retry;

pub use client::{LlmClient, LlmClientConfig, WireApi};
pub use demo::DemoModel;
pub use error::LlmError;
pub use retry::RetryPolicy;
