//! One module per subcommand.

pub mod bench;
pub mod config;
pub mod serve;
pub mod studio;
