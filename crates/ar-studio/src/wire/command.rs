//! Command payloads carried on the stream: run commands, approval decisions, session verbs, steer, breakpoints.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::nullable::or_default;

/// Verb of a decision (approve/deny/resolve) on a run's parked call.
pub const VERB_DECIDE: &str = "decide";
/// Verb of a steer message into a run.
pub const VERB_STEER: &str = "steer";
/// Verb of a cancel of a run.
pub const VERB_CANCEL: &str = "cancel";

/// One `event: run` frame's data: an experiment run the runtime should start.
///
/// The runtime it was enqueued to is server bookkeeping and stays off the wire.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Command {
    pub command_id: String,
    pub agent: String,
    pub source: Option<SourceSpec>,
    pub input: Option<String>,
    pub overrides: Overrides,
    #[serde(deserialize_with = "or_default")]
    pub transcript_edits: Vec<TranscriptEdit>,
    /// `live` (default) or `scripted`.
    pub engine: String,
    /// `substitute` (default), `park` or `allow`.
    pub side_effects: String,
    /// `ephemeral` (default) or `fork`.
    pub thread: String,
    pub experiment_id: String,
    pub actor: String,
    pub public_id: String,
}

/// The run to re-run, and the step to re-run it from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SourceSpec {
    pub run_id: String,
    pub from_step: i64,
}

/// An experiment's changes; each one may only narrow or leave things unchanged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Overrides {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub instructions: String,
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "or_default")]
    pub tools_enabled: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// `off`, `low`, `medium` or `high`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub thinking: String,
    /// `max_steps`, `parallelism`, `temperature`.
    #[serde(
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "or_default"
    )]
    pub options: BTreeMap<String, f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub params: Option<Params>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "or_default")]
    pub park_on: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "or_default")]
    pub only_tools: Vec<String>,
}

/// Sampling overrides beside `options.temperature`; absent fields keep the agent's own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Params {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "or_default")]
    pub stop: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
}

/// A tool choice: mode `auto`, `any`, `none` or `named` (with the tool's name).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolChoice {
    pub mode: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// An edit of the kept prefix before a re-run from `from_step`.
///
/// `kind` is `tool_result`, `reply`, `user`, `tool_args` or `insert`; absent, the fields decide.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TranscriptEdit {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    pub step: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tool_result: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub call_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    #[serde(skip_serializing_if = "is_zero")]
    pub index: i64,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// One `event: approve` frame's data: a human decision on one parked call of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApprovalDecision {
    pub command_id: String,
    pub run_id: String,
    pub call_id: String,
    /// `approve`, `deny` or `resolve`.
    pub decision: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub content: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub actor: String,
    /// The public id the run is scoped to: server bookkeeping, never on the wire.
    #[serde(skip)]
    pub public_id: String,
}

/// One `event: session` frame's data: a verb addressed to one of the runtime's durable thread
/// sessions (a decision on a parked call, a steer, a cancel).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionCommand {
    pub command_id: String,
    /// [`VERB_DECIDE`], [`VERB_STEER`] or [`VERB_CANCEL`].
    pub verb: String,
    pub session_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub run_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub call_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub decision: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub content: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub actor: String,
    /// Server bookkeeping, never on the wire.
    #[serde(skip)]
    pub public_id: String,
}

/// One `event: steer` frame's data: a user message into a run the runtime started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SteerMessage {
    pub run_id: String,
    pub message: String,
}

/// One `event: breakpoints` frame's data: the tools every run the runtime starts parks on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Breakpoints {
    #[serde(deserialize_with = "or_default")]
    pub tools: Vec<String>,
}

/// A command addressed to a run (a decision, steer or cancel), as `CommandsOn` lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCommand {
    pub verb: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub command_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub call_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub decision: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub public_id: String,
}

/// Where a run's cancel went.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelTarget {
    pub runtime_id: String,
    pub run_id: String,
    pub command_id: String,
}
