//! The client side of the Agent Runtime service for host applications: [`nats`], the durable JetStream consumer of the runtime's events (the HTTP client joins it later).

pub mod nats;
