//! ar-client against real peers: a real NATS JetStream (the consumer reading the real service's events, `service.rs`, and its retry, drop, durable and crash semantics, `semantics.rs`), a local OAuth authorization server (`mcp_oauth.rs`) and the sign-in issuer's stand-in (`chatgpt_auth.rs`).

mod chatgpt_auth;
mod mcp_oauth;
mod running;
mod semantics;
mod service;
