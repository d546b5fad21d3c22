//! Benchmarks of the workspace tools (`agent-runtime bench tools`, `cargo bench -p ar-workspace`).
