//! The ack a runtime posts about a command: accepted, rejected, or finished with the run's outcome.

use serde::{Deserialize, Serialize};

use super::nullable::or_default;

/// The `POST /api/runtime/acks` body.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Ack {
    pub command_id: String,
    /// `accepted`, `rejected` or `finished`; anything else is a 400.
    pub state: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub run_id: String,
    /// `succeeded` or `failed`, on a finished ack.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// A typed reason beside the error text (a rejection's cause, a scripted miss).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<AckReason>,
}

/// The typed reason an ack may carry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AckReason {
    pub kind: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub step: i64,
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "or_default")]
    pub components: Vec<String>,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// The ack states a runtime may post.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckState {
    Accepted,
    Rejected,
    Finished,
}

impl AckState {
    /// Parses the wire word.
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "accepted" => Some(Self::Accepted),
            "rejected" => Some(Self::Rejected),
            "finished" => Some(Self::Finished),
            _ => None,
        }
    }

    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Rejected => "rejected",
            Self::Finished => "finished",
        }
    }
}

/// A finished run's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    Succeeded,
    Failed,
}

impl RunStatus {
    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
        }
    }
}
