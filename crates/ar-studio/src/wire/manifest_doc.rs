//! Reading the one-agent manifest document an agent registers: tools, schemas, model, instructions.

use serde::Deserialize;
use serde_json::value::RawValue;

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ManifestDoc {
    #[serde(default)]
    pub(crate) agents: Vec<ManifestAgentDoc>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ManifestAgentDoc {
    #[serde(default)]
    pub(crate) instructions: String,
    #[serde(default)]
    pub(crate) model: ManifestModelDoc,
    #[serde(default)]
    pub(crate) tools: Vec<ManifestToolDoc>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ManifestModelDoc {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) provider: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ManifestToolDoc {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) input_schema: Option<Box<RawValue>>,
    #[serde(default)]
    pub(crate) approval: bool,
    #[serde(default)]
    pub(crate) require_approval: bool,
}

/// The first agent of a manifest document, if it reads.
pub(crate) fn first_agent(manifest: &str) -> Option<ManifestAgentDoc> {
    let doc: ManifestDoc = serde_json::from_str(manifest).ok()?;
    doc.agents.into_iter().next()
}
