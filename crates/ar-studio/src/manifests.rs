//! Manifest memory: each registration's agents hashed (sha256) per agent and as one document, at most 64 kept.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::json_indent::indent_into;
use crate::wire::{ManifestAgent, ManifestSource, Registration};

/// Identifies a remembered manifest: (service, document hash).
pub(crate) type ManifestKey = (String, String);

#[derive(Deserialize)]
struct Doc<'a> {
    #[serde(default)]
    weft: i64,
    #[serde(default, borrow)]
    agents: Vec<&'a RawValue>,
}

/// Builds a registration's manifest source; `None` when no agent's manifest reads.
pub(crate) fn registration_manifest(reg: &Registration) -> Option<ManifestSource> {
    let mut version = 1;
    let mut agents = Vec::new();
    for (i, agent) in reg.agents.iter().enumerate() {
        let Ok(doc) = serde_json::from_str::<Doc<'_>>(&agent.manifest) else {
            continue;
        };
        let Some(entry) = doc.agents.first() else {
            continue;
        };
        if i == 0 && doc.weft != 0 {
            version = doc.weft;
        }
        agents.push(ManifestAgent {
            name: agent.name.clone(),
            manifest_hash: hex::encode(Sha256::digest(agent.manifest.as_bytes())),
            entry: (*entry).to_owned(),
        });
    }
    if agents.is_empty() {
        return None;
    }
    Some(ManifestSource {
        service: reg.service.clone(),
        manifest_hash: document_hash(version, &agents),
        live: false,
        registered_at: DateTime::<Utc>::MIN_UTC,
        runtime_id: reg.runtime_id.clone(),
        agents,
        version,
    })
}

/// sha256 of `{"weft":v,"agents":[…]}` pretty-printed with two-space indents plus a newline.
fn document_hash(version: i64, agents: &[ManifestAgent]) -> String {
    let mut doc = String::new();
    doc.push_str("{\n  \"weft\": ");
    doc.push_str(&version.to_string());
    doc.push_str(",\n  \"agents\": [");
    for (i, agent) in agents.iter().enumerate() {
        if i > 0 {
            doc.push(',');
        }
        doc.push_str("\n    ");
        indent_into(&mut doc, agent.entry.get(), 2, "  ");
    }
    doc.push_str("\n  ]\n}\n");
    hex::encode(Sha256::digest(doc.as_bytes()))
}

/// The remembered manifests.
#[derive(Debug, Default)]
pub(crate) struct ManifestMemory {
    entries: HashMap<ManifestKey, ManifestSource>,
    cap: usize,
}

impl ManifestMemory {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            entries: HashMap::new(),
            cap,
        }
    }

    /// Stores `src` as registered at `at`; past the cap, forgets the oldest one not in `held`.
    pub(crate) fn remember(
        &mut self,
        mut src: ManifestSource,
        at: DateTime<Utc>,
        held: &HashSet<ManifestKey>,
    ) -> ManifestKey {
        let key = (src.service.clone(), src.manifest_hash.clone());
        src.registered_at = at;
        self.entries.insert(key.clone(), src);
        while self.entries.len() > self.cap {
            let oldest = self
                .entries
                .iter()
                .filter(|(k, _)| **k != key && !held.contains(*k))
                .min_by_key(|(_, m)| m.registered_at)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => {
                    self.entries.remove(&k);
                }
                None => break,
            }
        }
        key
    }

    /// Live ones first, then newest registered, then service and hash.
    pub(crate) fn list(&self, live: &HashSet<ManifestKey>) -> Vec<ManifestSource> {
        let mut out: Vec<ManifestSource> = self
            .entries
            .iter()
            .map(|(k, m)| {
                let mut m = m.clone();
                m.live = live.contains(k);
                m
            })
            .collect();
        out.sort_by(|a, b| {
            b.live
                .cmp(&a.live)
                .then(b.registered_at.cmp(&a.registered_at))
                .then(a.service.cmp(&b.service))
                .then(a.manifest_hash.cmp(&b.manifest_hash))
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::AgentRegistration;

    fn reg(service: &str, manifest: &str) -> Registration {
        Registration {
            runtime_id: "r".into(),
            service: service.into(),
            agents: vec![AgentRegistration {
                name: "a".into(),
                manifest: manifest.into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn hashes_the_pretty_document() {
        let src = registration_manifest(&reg(
            "s",
            r#"{"weft":1,"agents":[{"name":"a","tools":[]}]}"#,
        ));
        let src = src.expect("manifest reads");
        let expected = "{\n  \"weft\": 1,\n  \"agents\": [\n    {\n      \"name\": \"a\",\n      \"tools\": []\n    }\n  ]\n}\n";
        assert_eq!(
            src.manifest_hash,
            hex::encode(Sha256::digest(expected.as_bytes()))
        );
        assert_eq!(src.agents[0].manifest_hash.len(), 64);
        assert!(registration_manifest(&reg("s", "not json")).is_none());
    }

    #[test]
    fn keeps_at_most_cap_and_never_evicts_held() {
        let mut mem = ManifestMemory::new(2);
        let t0 = Utc::now();
        let mut keys = Vec::new();
        for i in 0..3 {
            let m = format!(r#"{{"weft":1,"agents":[{{"name":"a{i}"}}]}}"#);
            let src = registration_manifest(&reg("s", &m)).expect("reads");
            let held: HashSet<ManifestKey> = keys.first().cloned().into_iter().collect();
            keys.push(mem.remember(src, t0 + chrono::Duration::seconds(i), &held));
        }
        let listed = mem.list(&HashSet::new());
        assert_eq!(listed.len(), 2);
        assert!(listed.iter().any(|m| m.manifest_hash == keys[0].1));
        assert!(!listed.iter().any(|m| m.manifest_hash == keys[1].1));
    }
}
