//! Registration: validating a runtime's self-description, adopting or keeping its breakpoint set, remembering its manifest.

use std::collections::HashSet;

use chrono::{DateTime, Utc};

use crate::manifests::{registration_manifest, ManifestKey};
use crate::wire::{RegisterResponse, Registration, BREAKPOINTS_BY_RUNTIME};

use super::state::{BreakpointSet, RuntimeEntry, State};

/// Why a registration was refused (each a 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    #[error("register body: runtime_id is required")]
    MissingId,
    #[error("register body: runtime_id must be 1 to 256 printable characters")]
    BadId,
    #[error("register body: no agents")]
    NoAgents,
    #[error("register body: agent {0} has no name")]
    UnnamedAgent(usize),
    #[error("studio/runtime: shutting down")]
    ShuttingDown,
}

/// The commands URL a registration is answered with.
pub fn commands_url(runtime_id: &str) -> String {
    let escaped: String = url::form_urlencoded::byte_serialize(runtime_id.as_bytes()).collect();
    format!("/api/runtime/commands?runtime={escaped}")
}

pub(crate) fn validate(reg: &Registration) -> Result<(), RegisterError> {
    if reg.runtime_id.is_empty() {
        return Err(RegisterError::MissingId);
    }
    if reg.runtime_id.len() > 256 || reg.runtime_id.chars().any(char::is_control) {
        return Err(RegisterError::BadId);
    }
    if reg.agents.is_empty() {
        return Err(RegisterError::NoAgents);
    }
    if let Some(i) = reg.agents.iter().position(|a| a.name.is_empty()) {
        return Err(RegisterError::UnnamedAgent(i));
    }
    Ok(())
}

impl State {
    pub(crate) fn register(
        &mut self,
        reg: Registration,
        now: DateTime<Utc>,
    ) -> Result<RegisterResponse, RegisterError> {
        validate(&reg)?;
        if self.closed {
            return Err(RegisterError::ShuttingDown);
        }
        let id = reg.runtime_id.clone();
        let manifest = registration_manifest(&reg);
        let held: HashSet<ManifestKey> = self
            .runtimes
            .values()
            .filter(|e| e.feed.is_some())
            .filter_map(|e| e.manifest.clone())
            .collect();
        let manifest_key = manifest.map(|m| self.manifests.remember(m, now, &held));
        let adopt = |reg: &Registration| BreakpointSet {
            tools: reg.breakpoints.clone(),
            by: BREAKPOINTS_BY_RUNTIME.to_string(),
            surface: String::new(),
            set_at: Some(now),
        };
        let mut breakpoints_changed = false;
        match self.runtimes.get_mut(&id) {
            Some(entry) => {
                // The studio's set is the authority for a runtime it holds, unless the runtime
                // owns its set (set in the app's own code).
                if reg.breakpoints_own && entry.breakpoints.tools != reg.breakpoints {
                    entry.breakpoints = adopt(&reg);
                    breakpoints_changed = true;
                }
                entry.reg = reg;
                entry.last_seen = now;
                entry.restored = false;
                entry.manifest = manifest_key;
            }
            None => {
                // A runtime this studio does not hold: its set is the only copy there is.
                breakpoints_changed = true;
                let breakpoints = adopt(&reg);
                self.runtimes.insert(
                    id.clone(),
                    RuntimeEntry {
                        reg,
                        connected_since: now,
                        last_seen: now,
                        feed: None,
                        breakpoints,
                        manifest: manifest_key,
                        restored: false,
                    },
                );
            }
        }
        if breakpoints_changed {
            self.save_breakpoints(&id);
        }
        Ok(RegisterResponse {
            commands_url: commands_url(&id),
            runtime_id: id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_the_commands_url() {
        assert_eq!(
            commands_url("a b&c/d"),
            "/api/runtime/commands?runtime=a+b%26c%2Fd"
        );
    }
}
