//! The `agent-runtime` binary: parses the command line and hands off to the library crates.
fn main() {}
