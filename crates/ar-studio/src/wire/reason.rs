//! Typed reasons beside a command's error text, and the scripted-miss reason with its step and components.

use serde::{Deserialize, Serialize};

use super::nullable::or_default;

/// Kind of the reason a scripted replay found no recorded turn.
pub const REASON_SCRIPTED_MISS: &str = "scripted_miss";

const SCRIPTED_MISS_PREFIX: &str = "scripted: no recorded turn at step ";

/// Why a command ended the way it did, in a form a UI can act on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Reason {
    pub kind: String,
    pub message: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub step: i64,
    /// For a scripted miss: what differs from the recording (`input`, `tools`, `thinking`, ...).
    #[serde(skip_serializing_if = "Vec::is_empty", deserialize_with = "or_default")]
    pub components: Vec<String>,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// The error text a runtime writes for a scripted miss; [`Reason::of`] reads it back.
pub fn scripted_miss_text(step: i64, components: &[String]) -> String {
    if components.is_empty() {
        format!("{SCRIPTED_MISS_PREFIX}{step}")
    } else {
        format!(
            "{SCRIPTED_MISS_PREFIX}{step} (changed: {})",
            components.join(", ")
        )
    }
}

/// The reason of a scripted replay that found no recorded turn at `step`.
pub fn scripted_miss_reason(step: i64, components: &[String]) -> Reason {
    Reason {
        kind: REASON_SCRIPTED_MISS.to_string(),
        message: scripted_miss_text(step, components),
        step,
        components: components.to_vec(),
    }
}

impl Reason {
    /// Reads a typed reason out of an error text; `None` when the text carries none.
    pub fn of(err_text: &str) -> Option<Reason> {
        let at = err_text.find(SCRIPTED_MISS_PREFIX)?;
        let rest = &err_text[at + SCRIPTED_MISS_PREFIX.len()..];
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        let step: i64 = digits.parse().ok()?;
        let rest = &rest[digits.len()..];
        let components = rest
            .strip_prefix(" (changed: ")
            .and_then(|r| r.split_once(')'))
            .map(|(list, _)| {
                list.split(',')
                    .map(|c| c.trim().to_string())
                    .filter(|c| !c.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Some(Reason {
            kind: REASON_SCRIPTED_MISS.to_string(),
            message: err_text.to_string(),
            step,
            components,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripted_miss_round_trips_through_text() {
        let comps = vec!["input".to_string(), "tools".to_string()];
        let reason = scripted_miss_reason(3, &comps);
        let back = Reason::of(&reason.message);
        assert_eq!(back, Some(reason));
        let bare = Reason::of("step failed: scripted: no recorded turn at step 0");
        assert_eq!(bare.map(|r| (r.step, r.components.len())), Some((0, 0)));
        assert_eq!(Reason::of("model timeout"), None);
    }
}
