//! The policy a studio command sets on a run it starts: engine, side effects, breakpoints and
//! narrowed limits (seed 003's experiment runs, forks and replays).

use serde::{Deserialize, Serialize};

use crate::enums::contract_enum;

contract_enum!(
    /// Whether a studio run calls the model or replays recorded turns at zero tokens.
    StudioEngine, "engine" {
        Live => "live",
        Scripted => "scripted",
    }
);

contract_enum!(
    /// What a studio run does with a mutating tool call.
    SideEffects, "side_effects" {
        /// Answer with the recorded result of the source run.
        Substitute => "substitute",
        /// Park the call for a person.
        Park => "park",
        /// Run the tools opted in (`allow`) for real; park the rest.
        Allow => "allow",
    }
);

/// How a studio command shapes the run it starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StudioPolicy {
    pub command_id: String,
    /// The recorded run this one re-runs (empty: a fresh run).
    pub source_run_id: String,
    pub from_step: i64,
    pub engine: StudioEngine,
    pub side_effects: SideEffects,
    /// Tools whose calls park for a person (the runtime's breakpoints plus the command's).
    pub park_on: Vec<String>,
    /// Mutating tools opted in to run for real under [`SideEffects::Allow`].
    pub allow: Vec<String>,
    /// The instructions (system prompt) override; empty keeps the agent's.
    pub instructions: String,
    /// A narrowed step limit; 0 keeps the runtime's.
    pub max_steps: i64,
    pub experiment_id: String,
    pub actor: String,
}

impl Default for StudioPolicy {
    fn default() -> Self {
        StudioPolicy {
            command_id: String::new(),
            source_run_id: String::new(),
            from_step: 0,
            engine: StudioEngine::Live,
            side_effects: SideEffects::Substitute,
            park_on: Vec::new(),
            allow: Vec::new(),
            instructions: String::new(),
            max_steps: 0,
            experiment_id: String::new(),
            actor: String::new(),
        }
    }
}

impl StudioPolicy {
    pub fn scripted(&self) -> bool {
        self.engine == StudioEngine::Scripted
    }
}
