//! ar-mcp against real MCP servers: the reference `server-everything` (node), the
//! authenticating rmcp server of ar-test-support, and raw sockets that misbehave.

mod auth;
mod bad;
mod everything;
mod policy;
mod support;
