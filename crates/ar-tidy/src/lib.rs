//! Repository rules checked by `cargo test -p ar-tidy`: the crate dependency direction of
//! ARCHITECTURE.md, a `//!` doc at the top of every Rust file, and process spawning only in
//! `ar-process`. The crate has no code of its own; its test is the product.
