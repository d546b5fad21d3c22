//! run_command
