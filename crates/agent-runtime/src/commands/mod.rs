//! One module per subcommand.

pub mod bench;
pub mod config;
pub mod exec;
pub mod mcp_bridge;
pub mod node;
pub mod remote;
pub mod serve;
pub mod studio;
pub mod worker;
