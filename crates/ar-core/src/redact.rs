//! Scrubbing a run's secrets out of what is persisted, streamed or logged for it.
//!
//! A run holds secrets (its model key, run credentials, tokens); an agent can still print one
//! (a CLI told to show its environment, a model echoing a prompt). Whatever the run records
//! passes through the run's [`Redactor`] first, so a secret value never reaches the store,
//! the live stream or the logs, whatever carried it there.

use serde_json::Value;

use crate::secret::Secret;
use crate::JsonMap;

/// What replaces a secret value.
pub const REDACTED: &str = "[redacted]";

/// Values this short are not scrubbed: they would match ordinary text ("none", "x").
const MIN_SECRET_LEN: usize = 6;

/// The secret values of one run; scrubs them from text and JSON.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

impl Redactor {
    /// Adds a secret (long enough to be told apart from ordinary text, not already known).
    pub fn add(&mut self, secret: &Secret) {
        let value = secret.expose().trim();
        if value.len() >= MIN_SECRET_LEN && !self.secrets.iter().any(|known| known == value) {
            self.secrets.push(value.to_string());
            // Longest first, so a secret containing another is replaced whole.
            self.secrets
                .sort_by_key(|known| std::cmp::Reverse(known.len()));
        }
    }

    /// Whether `secret` is already scrubbed (or too short to be).
    pub fn holds(&self, secret: &Secret) -> bool {
        let value = secret.expose().trim();
        value.len() < MIN_SECRET_LEN || self.secrets.iter().any(|known| known == value)
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Replaces every secret in `text`; true when something was replaced.
    pub fn scrub(&self, text: &mut String) -> bool {
        let mut changed = false;
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                *text = text.replace(secret.as_str(), REDACTED);
                changed = true;
            }
        }
        changed
    }

    /// Scrubs every string (and key) of a JSON value.
    pub fn scrub_json(&self, value: &mut Value) {
        match value {
            Value::String(text) => {
                self.scrub(text);
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.scrub_json(item)),
            Value::Object(map) => self.scrub_map(map),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Scrubs every key and value of a JSON object.
    pub fn scrub_map(&self, map: &mut JsonMap) {
        if self.is_empty() {
            return;
        }
        if map
            .keys()
            .any(|key| self.secrets.iter().any(|s| key.contains(s.as_str())))
        {
            let entries = std::mem::take(map);
            for (mut key, value) in entries {
                self.scrub(&mut key);
                map.insert(key, value);
            }
        }
        map.values_mut().for_each(|value| self.scrub_json(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_replaced_everywhere_and_short_values_are_not_secrets() {
        let mut redactor = Redactor::default();
        redactor.add(&Secret::new("sk-live-123456"));
        redactor.add(&Secret::new("none"));
        let mut text = "OPENAI_API_KEY=sk-live-123456 and again sk-live-123456".to_string();
        assert!(redactor.scrub(&mut text));
        assert_eq!(text, "OPENAI_API_KEY=[redacted] and again [redacted]");
        let mut value =
            serde_json::json!({"out": ["x sk-live-123456"], "sk-live-123456": 1, "n": "none"});
        redactor.scrub_json(&mut value);
        assert_eq!(
            value,
            serde_json::json!({"out": ["x [redacted]"], "[redacted]": 1, "n": "none"})
        );
        assert_eq!(format!("{redactor:?}"), "Redactor(1 secrets)");
    }

    #[test]
    fn a_secret_containing_another_is_replaced_whole() {
        let mut redactor = Redactor::default();
        redactor.add(&Secret::new("abcdef"));
        redactor.add(&Secret::new("abcdef-long-key"));
        let mut text = "k=abcdef-long-key".to_string();
        redactor.scrub(&mut text);
        assert_eq!(text, "k=[redacted]");
    }
}
