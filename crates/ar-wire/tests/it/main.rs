//! Integration tests of the wire contract: fixture round-trips, omitempty, time format, strictness, redaction.

mod consts;
mod event_shapes;
mod omitempty;
mod redaction;
mod roundtrip;
mod strict;
mod time;

use std::path::PathBuf;

use serde_json::Value;

/// Directory holding the JSON fixtures.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
}

/// Reads one fixture as text.
pub fn fixture(name: &str) -> String {
    let path = fixtures_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Reads one fixture as a JSON value.
pub fn fixture_value(name: &str) -> Value {
    serde_json::from_str(&fixture(name)).unwrap_or_else(|e| panic!("parse {name}: {e}"))
}
