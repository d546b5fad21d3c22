//! A skill's definition and the `SKILL.md` parser: YAML front matter between `---` lines, the
//! Markdown body as the instructions.

use serde::{Deserialize, Serialize};

/// Where a skill came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// Embedded in the runtime.
    BuiltIn,
    /// The app's skill provider (the original calls these workspace skills).
    Workspace,
    /// A repository's `.agents/skills` directory.
    Repository,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::BuiltIn => "built_in",
            SourceKind::Workspace => "workspace",
            SourceKind::Repository => "repository",
        }
    }
}

/// What a skill asks of the runtime.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillPolicy {
    /// `false`: the model may use the skill only when the task asks for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_implicit_invocation: Option<bool>,
    /// The run may complete only after one of these interactions happened (one corrective turn).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub completion_requires_interaction_kinds: Vec<String>,
}

impl SkillPolicy {
    /// Merges `other` in: `allow_implicit_invocation: false` wins, interaction kinds unite.
    pub fn merge(&mut self, other: &SkillPolicy) {
        self.allow_implicit_invocation = match (
            self.allow_implicit_invocation,
            other.allow_implicit_invocation,
        ) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), _) | (_, Some(true)) => Some(true),
            (None, None) => None,
        };
        for kind in &other.completion_requires_interaction_kinds {
            if !self.completion_requires_interaction_kinds.contains(kind) {
                self.completion_requires_interaction_kinds
                    .push(kind.clone());
            }
        }
        self.completion_requires_interaction_kinds.sort();
    }
}

/// One skill, whatever its source.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillDefinition {
    pub key: String,
    pub title: String,
    pub description: String,
    /// The Markdown the model reads.
    pub instructions: String,
    /// Tools the agent must allow for the skill to work.
    pub required_tools: Vec<String>,
    /// Runtime kinds the skill supports (empty: all).
    pub runtimes: Vec<String>,
    pub policy: SkillPolicy,
    /// Presets: the skills bundled after the preset's own text.
    pub includes: Vec<String>,
    pub source: SourceKind,
    /// The provider's id and version (host skills only).
    pub skill_id: String,
    pub version_key: String,
    /// The files of the skill's package (`SKILL.md` and its resources), relative paths; empty
    /// for a skill without a package. Shared: a run's resolution is cloned per turn.
    pub files: std::sync::Arc<Vec<SkillFile>>,
}

/// One file of a skill package, its path relative to the skill's root (`/`-separated, checked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFile {
    pub path: String,
    pub content: Vec<u8>,
}

/// A `SKILL.md` that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error("{origin}: SKILL.md must start with a front matter block between `---` lines")]
    NoFrontMatter { origin: String },
    #[error("{origin}: invalid front matter: {source}")]
    FrontMatter {
        origin: String,
        #[source]
        source: serde_yaml::Error,
    },
    #[error("{origin}: front matter `{field}` is required")]
    Missing { origin: String, field: &'static str },
    #[error("{origin}: skill name {name:?} must be 1-128 characters of letters, digits, `_`, `-`, `.`, starting with a letter or digit")]
    BadName { origin: String, name: String },
    #[error("{origin}: the skill has no instructions")]
    NoInstructions { origin: String },
    #[error("{origin}: preset includes unknown skill {key:?}")]
    UnknownInclude { origin: String, key: String },
    #[error("{origin}: cannot be read: {source}")]
    Io {
        origin: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}: larger than {limit} bytes")]
    TooLarge { origin: String, limit: usize },
}

#[derive(Deserialize)]
struct FrontMatter {
    name: Option<String>,
    title: Option<String>,
    description: Option<String>,
    #[serde(default)]
    runtimes: Vec<String>,
    #[serde(default)]
    required_tools: Vec<String>,
    #[serde(default)]
    policy: SkillPolicy,
    #[serde(default)]
    includes: Vec<String>,
    /// The original's packages put these under `metadata` (`supported_runtimes` for `runtimes`).
    #[serde(default)]
    metadata: Option<FrontMatterMetadata>,
}

#[derive(Deserialize, Default)]
struct FrontMatterMetadata {
    title: Option<String>,
    #[serde(default)]
    required_tools: Vec<String>,
    #[serde(default)]
    supported_runtimes: Vec<String>,
}

/// Whether `key` is a usable skill key.
pub fn valid_key(key: &str) -> bool {
    let mut chars = key.chars();
    key.len() <= 128
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// Splits `---\n<yaml>\n---\n<body>`; `None` without a front matter block.
fn split_front_matter(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text.strip_prefix("---")?.trim_start_matches([' ', '\t']);
    let rest = rest
        .strip_prefix("\r\n")
        .or_else(|| rest.strip_prefix('\n'))?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

/// Parses a `SKILL.md`. `origin` names the file in errors.
pub fn parse_skill_md(
    text: &str,
    origin: &str,
    source: SourceKind,
) -> Result<SkillDefinition, SkillError> {
    let origin = origin.to_string();
    let Some((yaml, body)) = split_front_matter(text) else {
        return Err(SkillError::NoFrontMatter { origin });
    };
    let front: FrontMatter =
        serde_yaml::from_str(yaml).map_err(|source| SkillError::FrontMatter {
            origin: origin.clone(),
            source,
        })?;
    let key = front.name.map(|n| n.trim().to_string()).unwrap_or_default();
    if key.is_empty() {
        return Err(SkillError::Missing {
            origin,
            field: "name",
        });
    }
    if !valid_key(&key) {
        return Err(SkillError::BadName { origin, name: key });
    }
    let description = front.description.unwrap_or_default().trim().to_string();
    if description.is_empty() {
        return Err(SkillError::Missing {
            origin,
            field: "description",
        });
    }
    let instructions = body.trim().to_string();
    if instructions.is_empty() {
        return Err(SkillError::NoInstructions { origin });
    }
    let metadata = front.metadata.unwrap_or_default();
    let or_metadata =
        |own: Vec<String>, other: Vec<String>| clean_list(if own.is_empty() { other } else { own });
    Ok(SkillDefinition {
        title: front
            .title
            .or(metadata.title)
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| key.clone()),
        key,
        description,
        instructions,
        required_tools: or_metadata(front.required_tools, metadata.required_tools),
        runtimes: or_metadata(front.runtimes, metadata.supported_runtimes),
        policy: front.policy,
        includes: clean_list(front.includes),
        source,
        skill_id: String::new(),
        version_key: String::new(),
        files: Default::default(),
    })
}

/// Trimmed, without blanks or duplicates, order kept.
pub(crate) fn clean_list(values: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(values.len());
    for value in values {
        let value = value.trim().to_string();
        if !value.is_empty() && !out.contains(&value) {
            out.push(value);
        }
    }
    out
}

#[cfg(test)]
mod tests;
