//! Domain of Agent Runtime: ids, agents, runs, the run state machine, events, interactions,
//! tool policy and the port traits every adapter implements.
//!
//! This crate does no I/O. Adapters (store, model providers, tools, event bus) live in their own
//! crates and implement the traits declared here; the engine only ever sees these traits. The
//! trade-off: record types here are plain data (not the wire contract), so the server converts
//! them explicitly to and from `ar-wire`.

pub mod agent;
pub mod agent_cli;
pub mod budget;
pub mod clock;
pub mod durable;
pub mod enums;
pub mod event;
pub mod host;
pub mod ids;
pub mod json;
pub mod mcp;
pub mod model;
pub mod records;
pub mod redact;
pub mod replica;
pub mod run;
pub mod secret;
pub mod store;
pub mod studio;
pub mod tool;
pub mod trace;
pub mod usage;
pub mod workspace;

pub use agent::Agent;
pub use enums::*;
pub use event::{EventKind, RunEvent, StoredEvent};
pub use run::{
    EngineState, LastResume, Run, RunAction, RunInput, RunModel, RunState, TargetRef,
    TransitionError, TurnPolicy, WorkspaceState,
};
pub use usage::Usage;

/// An error and its chain of causes on one line (`outer: cause: root`), for logs.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// JSON object used for opaque host-supplied maps (metadata, trigger, payloads).
pub type JsonMap = serde_json::Map<String, serde_json::Value>;
