//! The MCP client of run-scoped MCP servers: the port `ar_core::mcp::McpClient` over
//! streamable HTTP, built on the official Rust SDK (`rmcp`) with the workspace's reqwest.
//!
//! [`McpHttpClient::new`] takes the deployment's [`McpPolicy`] (plain HTTP, private networks,
//! allowed hosts, timeouts, the response cap). Each run keeps one session per server, opened
//! on first use and closed with `close_run`; a server that forgets a session gets a new one
//! and the request once more. Every destination is checked when it is connected to: the URL's
//! shape, the allowed hosts, and the addresses its name resolves to (see [`policy`]).

mod client;
mod errors;
mod http;
pub mod output;
mod peer;
pub mod policy;
pub mod provider;
mod resolve;
mod session;
mod sse;

pub use client::{ClientBuildError, McpHttpClient};
pub use policy::McpPolicy;
