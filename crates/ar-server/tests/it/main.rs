//! In-process HTTP tests of the service: a real server on 127.0.0.1:0 with a real store,
//! driven over HTTP with the SDK's request and response shapes, against the mock model provider.
//! The harness is `ar_test_support::service`, shared with agent-runtime's end-to-end tests.

mod admission;
mod bad_input;
mod budgets;
mod cli_agents;
mod connections;
mod context_window;
mod credential_refresh;
mod events;
mod gateway_token;
mod host_tools;
mod lifecycle;
mod mcp;
mod mcp_providers;
mod metrics;
mod native_loop;
mod nats;
mod nul;
mod openapi;
mod parity;
mod providers;
mod recovery;
mod skills;
mod studio;
mod studio_browser;
