//! Test support: the mock model provider server, the MCP test servers (an authenticating rmcp
//! server and the reference server-everything) and the HTTP harness of the service suites.
//! Dev and bench only.

pub mod mcp_everything;
#[cfg(feature = "mcp-server")]
pub mod mcp_server;
pub mod mock_provider;
#[cfg(feature = "service")]
pub mod service;
