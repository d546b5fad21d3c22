//! ar-client against a real NATS JetStream: the consumer reading the real service's events (`service.rs`) and its retry, drop, durable and crash semantics on a stream of the test's own (`semantics.rs`).

mod running;
mod semantics;
mod service;
