//! The wire vocabulary of the runtime link and the studio API: JSON shapes shared by server and client.

mod ack;
mod command;
mod manifest_doc;
mod nullable;
mod reason;
mod registration;
mod views;

pub use ack::{Ack, AckReason, AckState, RunStatus};
pub use command::{
    ApprovalDecision, Breakpoints, CancelTarget, Command, Overrides, Params, RunCommand,
    SessionCommand, SourceSpec, SteerMessage, ToolChoice, TranscriptEdit, VERB_CANCEL, VERB_DECIDE,
    VERB_STEER,
};
pub use reason::{scripted_miss_reason, scripted_miss_text, Reason, REASON_SCRIPTED_MISS};
pub use registration::{
    AgentDefaults, AgentLimits, AgentRegistration, Budget, RegisterResponse, Registration,
};
pub use views::{
    AgentView, CommandState, CommandStatus, ManifestAgent, ManifestSource, RuntimeView, ToolView,
    BREAKPOINTS_BY_RUNTIME, BREAKPOINTS_BY_STORE, BREAKPOINTS_BY_STUDIO, BREAKPOINTS_SURFACE_API,
};
