//! Run engine: admission, run state machine, native agent loop, pause/approve/resume, cancel,
//! checkpoints, ownership and recovery.
//!
//! The engine talks only to `ar-core` ports (store, model client, tool host, context provider,
//! event bus, clock). It does not know which database, model vendor or tool transport it drives.
//! Every state change of a run goes through [`Engine::transact`](engine::Engine): a closure is
//! applied to the freshest run row and committed with an optimistic version check, so changes
//! from API requests and from the run's owner task serialize without a global lock, across
//! processes too. Each executing run has exactly one owner task, holding a lease in the store.

mod admission;
mod agents;
mod cli_loop;
pub mod codex_auth;
pub mod config;
mod context;
mod credential_refresh;
mod credential_replace;
pub mod durable;
mod engine;
pub mod error;
mod gate;
mod lifecycle;
mod limits;
pub mod mcp;
mod model_credential;
pub mod model_route;
mod native;
mod owner;
mod records;
pub mod sealer;
mod skills;
pub mod studio;
pub mod studio_replay;
mod subscription;
pub mod transcript;
pub mod window;
mod workspace;

pub use admission::{StartRun, TurnPolicyRequest};
pub use agents::AgentInput;
pub use config::{AppPolicy, ApprovedEndpoint, EngineConfig, ProviderDefaults};
pub use engine::{Engine, EngineDeps};
pub use error::{EngineError, EngineResult};
pub use gate::GatewayResult;
pub use lifecycle::{NewArtifact, ResumeRun};
pub use model_route::RunCredential;
pub use studio::{
    RunSeed, StudioDecision, StudioPolicy, StudioRunError, StudioRunSpec, TranscriptEdit,
};

/// Names of the tools the engine executes itself.
pub mod control_tools {
    pub const GET_CONTEXT: &str = "get_context";
    pub const UPDATE_PLAN: &str = "update_plan";
    pub const REQUEST_USER_INPUT: &str = "request_user_input";
    pub const REQUEST_APPROVAL: &str = "request_approval";
    pub const REQUEST_REVIEW_CHECKPOINT: &str = "request_review_checkpoint";
    pub const FINISH_TURN: &str = "finish_turn";

    /// Tools that park the run for a person.
    pub fn pauses(name: &str) -> bool {
        matches!(
            name,
            REQUEST_USER_INPUT | REQUEST_APPROVAL | REQUEST_REVIEW_CHECKPOINT
        )
    }

    /// Whether an outside agent may call `name` through the run tool gateway: not the tools
    /// that steer the engine's own loop (pausing it, ending its turn, its plan).
    pub fn gateway_callable(name: &str) -> bool {
        !pauses(name) && name != FINISH_TURN && name != UPDATE_PLAN
    }
}
