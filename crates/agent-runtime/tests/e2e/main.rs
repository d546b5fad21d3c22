//! End-to-end tests of the real `agent-runtime` binary: each test starts it as a child process
//! (loopback only, a private data directory, nothing inherited from the caller's environment)
//! and drives it over HTTP with the Go SDK's request and response shapes, against the mock model
//! provider running in the test process.

mod shapes;

/// The binary under test, built by cargo for this integration test.
pub const BIN: &str = env!("CARGO_BIN_EXE_agent-runtime");

mod callbacks;
mod chatgpt;
mod cli_bridge;
mod cli_runs;
mod cli_workspaces;
mod client;
mod codex_auth;
mod config_cli;
mod demo;
mod durability;
mod durable;
mod egress;
mod embedded;
mod fleet;
mod fuzz;
mod live_replicas;
mod long_runs;
mod mcp_bridge;
mod nats;
mod newcomer;
mod postgres;
mod replicas;
mod sdk_flow;
mod secrets;
mod skills;
mod studio;
mod subscription_lane;
mod traces;
mod workspaces;
