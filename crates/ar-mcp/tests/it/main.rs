//! ar-mcp against real MCP servers: the reference `server-everything` (node, over streamable
//! HTTP and as a stdio provider), the authenticating rmcp server of ar-test-support, and raw
//! sockets that misbehave.

mod auth;
mod bad;
mod everything;
mod policy;
mod provider_stdio;
mod provider_streamable;
mod support;
