//! Resolution of a run's skill references: built-ins first for key-only refs, then the app's
//! skill provider through the [`SkillLookup`] port; duplicates refused; each skill checked
//! against the runtime and the tools the run allows; the delivery role of each reference.

use ar_core::agent::SkillRef;
use ar_core::{JsonMap, TargetRef};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
use crate::definition::{clean_list, valid_key, SkillDefinition, SkillPolicy, SourceKind};

/// How a reference's skill reaches the model (`config.runtime_skill_role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillRole {
    /// No role given: compiled into the system prompt and also offered through the skill tools.
    Default,
    /// The host's prompt already carries the text: only the skill's policy applies.
    Instruction,
    /// Offered through `list_available_skills`, `search_available_skills`, `read_skill`.
    Available,
}

impl SkillRole {
    pub fn as_str(self) -> &'static str {
        match self {
            SkillRole::Default => "default",
            SkillRole::Instruction => "instruction",
            SkillRole::Available => "available",
        }
    }

    fn of(reference: &SkillRef) -> Result<SkillRole, ResolveError> {
        let role = reference
            .config
            .as_ref()
            .and_then(|config| config.get("runtime_skill_role"));
        match role {
            None | Some(serde_json::Value::Null) => Ok(SkillRole::Default),
            Some(serde_json::Value::String(role)) => match role.trim() {
                "" => Ok(SkillRole::Default),
                "instruction" => Ok(SkillRole::Instruction),
                "available" => Ok(SkillRole::Available),
                other => Err(ResolveError::BadRole(other.to_string())),
            },
            Some(other) => Err(ResolveError::BadRole(other.to_string())),
        }
    }
}

/// A resolved reference: its skill and how it is delivered.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedSkill {
    pub definition: SkillDefinition,
    pub role: SkillRole,
}

/// What a run's skills came to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolution {
    pub skills: Vec<ResolvedSkill>,
}

impl Resolution {
    /// Whether any reference named a role: then nothing is compiled into the prompt.
    pub fn explicit_roles(&self) -> bool {
        self.skills.iter().any(|s| s.role != SkillRole::Default)
    }

    /// The instructions compiled into the system prompt, in reference order.
    pub fn prompt_instructions(&self) -> String {
        let sections: Vec<String> = self
            .skills
            .iter()
            .filter(|s| s.role == SkillRole::Default)
            .map(|s| {
                format!(
                    "## Skill: {}\n\n{}",
                    s.definition.title, s.definition.instructions
                )
            })
            .collect();
        sections.join("\n\n")
    }

    /// The skills the skill tools offer.
    pub fn available(&self) -> impl Iterator<Item = &SkillDefinition> {
        self.skills
            .iter()
            .filter(|s| s.role != SkillRole::Instruction)
            .map(|s| &s.definition)
    }

    /// The merged policy of the skills that are policy-active (all but `available` ones).
    pub fn policy(&self) -> SkillPolicy {
        let mut policy = SkillPolicy::default();
        for skill in self
            .skills
            .iter()
            .filter(|s| s.role != SkillRole::Available)
        {
            policy.merge(&skill.definition.policy);
        }
        policy
    }

    /// Adds a repository's skills as available ones; a key already resolved wins.
    pub fn add_repository(&mut self, skills: Vec<SkillDefinition>) {
        for definition in skills {
            if self
                .skills
                .iter()
                .all(|s| s.definition.key != definition.key)
            {
                self.skills.push(ResolvedSkill {
                    definition,
                    role: SkillRole::Available,
                });
            }
        }
    }

    /// Checks every skill against the runtime kind and the tools the run may call.
    pub fn validate(
        &self,
        runtime_kind: &str,
        allowed_tools: &[String],
    ) -> Result<(), ResolveError> {
        let allowed: Vec<String> = allowed_tools
            .iter()
            .map(|t| ar_core::tool::canonical_tool_name(t))
            .collect();
        for skill in &self.skills {
            let d = &skill.definition;
            if !d.runtimes.is_empty() && !d.runtimes.iter().any(|r| r == runtime_kind) {
                return Err(ResolveError::Runtime {
                    key: d.key.clone(),
                    runtime: runtime_kind.to_string(),
                });
            }
            for tool in &d.required_tools {
                if !allowed.contains(&ar_core::tool::canonical_tool_name(tool)) {
                    return Err(ResolveError::MissingTool {
                        key: d.key.clone(),
                        tool: tool.clone(),
                    });
                }
            }
        }
        Ok(())
    }
}

/// Who is asking, sent with every lookup.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LookupRequest {
    pub app_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub agent_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub run_id: String,
    pub target: TargetRef,
    pub trigger: JsonMap,
    pub metadata: JsonMap,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub skill_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
}

/// A skill as the app's provider describes it (`WorkspaceSkill` of the SDKs; the Python SDK
/// writes its optional fields as `null`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct HostSkill {
    pub id: String,
    pub key: String,
    pub version_key: String,
    pub title: String,
    pub description: String,
    pub source_kind: String,
    pub instructions: String,
    pub required_tools: Vec<String>,
    pub supported_runtimes: Vec<String>,
    pub policy: HostPolicy,
    pub package_object_key: Option<String>,
    pub package_file_name: Option<String>,
    pub package_checksum: Option<String>,
    pub package_size: Option<i64>,
    pub is_archived: bool,
}

/// A provider skill's policy. Its `interaction_contracts` say how each interaction reaches the
/// runtime; this runtime offers the `tool_call` transport (the native interaction tools), so a
/// contract naming another transport is refused.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct HostPolicy {
    pub allow_implicit_invocation: Option<bool>,
    pub completion_requires_interaction_kinds: Vec<String>,
    pub interaction_contracts: Vec<serde_json::Value>,
}

/// A provider that could not answer (unreachable, error status, unreadable answer).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LookupError(pub String);

/// The apps' skill providers: `None` when the provider has no such skill.
#[async_trait]
pub trait SkillLookup: Send + Sync + 'static {
    /// Whether `app_id` has a skill provider here.
    fn serves(&self, app_id: &str) -> bool;
    async fn by_id(&self, request: &LookupRequest) -> Result<Option<HostSkill>, LookupError>;
    async fn active_by_key(
        &self,
        request: &LookupRequest,
    ) -> Result<Option<HostSkill>, LookupError>;
    /// The archive stored at `object_key` in the app's package store
    /// (`skill_provider.package_base_url`). A lookup without a package store refuses.
    async fn package(&self, app_id: &str, object_key: &str) -> Result<Vec<u8>, LookupError> {
        let _ = object_key;
        Err(LookupError(format!(
            "app {app_id:?} has no skill package store (skill_provider.package_base_url)"
        )))
    }
}

/// Why a run's skills cannot be used. Admission answers 400 with the message.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("skill key is required")]
    KeyRequired,
    #[error("unknown skill {0:?}")]
    Unknown(String),
    #[error("duplicate skill reference {0:?}")]
    Duplicate(String),
    #[error("workspace skill lookup is not configured")]
    NoProvider,
    #[error("workspace skill not found")]
    NotFound,
    #[error("workspace skill {0:?} version mismatch")]
    VersionMismatch(String),
    #[error("skill {key:?} does not support runtime {runtime:?}")]
    Runtime { key: String, runtime: String },
    #[error("skill {key:?} requires tool {tool:?}")]
    MissingTool { key: String, tool: String },
    #[error("invalid runtime_skill_role {0}: expected instruction or available")]
    BadRole(String),
    #[error("workspace skill {0:?} has an invalid key")]
    BadKey(String),
    #[error("workspace skill {0:?} has no instructions")]
    NoInstructions(String),
    #[error("workspace skill {key:?} package {object_key:?} cannot be used: {source}")]
    Package {
        key: String,
        object_key: String,
        #[source]
        source: crate::package::PackageError,
    },
    #[error("workspace skill {key:?} package {object_key:?} could not be fetched: {source}")]
    PackageFetch {
        key: String,
        object_key: String,
        #[source]
        source: LookupError,
    },
    #[error("workspace skill {key:?} asks for interaction transport {transport:?}; this runtime offers only tool_call")]
    Transport { key: String, transport: String },
    #[error("skill provider failed: {0}")]
    Provider(#[source] LookupError),
}

/// Resolves `refs` in order.
pub async fn resolve(
    catalog: &Catalog,
    lookup: Option<&dyn SkillLookup>,
    context: &LookupRequest,
    refs: &[SkillRef],
) -> Result<Resolution, ResolveError> {
    let lookup = lookup.filter(|lookup| lookup.serves(&context.app_id));
    let mut resolution = Resolution::default();
    let mut seen: Vec<String> = Vec::new();
    for reference in refs {
        let role = SkillRole::of(reference)?;
        let (definition, identity) = resolve_one(catalog, lookup, context, reference).await?;
        if seen.contains(&identity) {
            return Err(ResolveError::Duplicate(identity));
        }
        seen.push(identity);
        resolution.skills.push(ResolvedSkill { definition, role });
    }
    Ok(resolution)
}

async fn resolve_one(
    catalog: &Catalog,
    lookup: Option<&dyn SkillLookup>,
    context: &LookupRequest,
    reference: &SkillRef,
) -> Result<(SkillDefinition, String), ResolveError> {
    let skill_id = reference.skill_id.trim();
    let key = reference.key.trim();
    let pinned = first_non_empty(&reference.version_key, &reference.version);
    if !skill_id.is_empty() {
        let lookup = lookup.ok_or(ResolveError::NoProvider)?;
        let mut request = context.clone();
        request.skill_id = skill_id.to_string();
        let skill = lookup
            .by_id(&request)
            .await
            .map_err(ResolveError::Provider)?;
        let skill = skill
            .filter(|s| !s.is_archived)
            .ok_or(ResolveError::NotFound)?;
        let definition = host_skill(lookup, &context.app_id, skill, pinned).await?;
        let identity = format!("workspace:{}", definition.skill_id);
        return Ok((definition, identity));
    }
    if key.is_empty() {
        return Err(ResolveError::KeyRequired);
    }
    if let Some(definition) = catalog.get(key) {
        return Ok((definition.clone(), format!("builtin:{key}")));
    }
    let lookup = lookup.ok_or_else(|| ResolveError::Unknown(key.to_string()))?;
    let mut request = context.clone();
    request.key = key.to_string();
    let skill = lookup
        .active_by_key(&request)
        .await
        .map_err(ResolveError::Provider)?;
    let skill = skill
        .filter(|s| !s.is_archived)
        .ok_or_else(|| ResolveError::Unknown(key.to_string()))?;
    let definition = host_skill(lookup, &context.app_id, skill, pinned).await?;
    let identity = format!("workspace:{}", definition.skill_id);
    Ok((definition, identity))
}

fn first_non_empty<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.trim().is_empty() {
        b.trim()
    } else {
        a.trim()
    }
}

/// The first transport type other than `tool_call` named by the contracts
/// (`[{kind, schema, transports: {name: {type, …}}}]`).
pub(crate) fn foreign_transport(contracts: &[serde_json::Value]) -> Option<String> {
    contracts
        .iter()
        .filter_map(|contract| contract.get("transports")?.as_object())
        .flat_map(|transports| transports.values())
        .filter_map(|transport| transport.get("type")?.as_str())
        .map(str::trim)
        .find(|kind| !kind.is_empty() && *kind != "tool_call")
        .map(str::to_string)
}

/// A provider skill as a definition: its package fetched, verified and unpacked when it
/// names one (the package's `SKILL.md` then gives the instructions).
async fn host_skill(
    lookup: &dyn SkillLookup,
    app_id: &str,
    skill: HostSkill,
    pinned: &str,
) -> Result<SkillDefinition, ResolveError> {
    let key = skill.key.trim().to_string();
    if !valid_key(&key) {
        return Err(ResolveError::BadKey(key));
    }
    if !pinned.is_empty() && pinned != skill.version_key.trim() {
        return Err(ResolveError::VersionMismatch(key));
    }
    let object_key = skill
        .package_object_key
        .as_deref()
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_string);
    let Some(object_key) = object_key else {
        return host_definition(skill);
    };
    let bytes = lookup
        .package(app_id, &object_key)
        .await
        .map_err(|source| ResolveError::PackageFetch {
            key: key.clone(),
            object_key: object_key.clone(),
            source,
        })?;
    crate::package::definition(skill, &bytes).map_err(|source| ResolveError::Package {
        key,
        object_key,
        source,
    })
}

/// A provider skill without a package as a definition, checked.
pub(crate) fn host_definition(skill: HostSkill) -> Result<SkillDefinition, ResolveError> {
    let key = skill.key.trim().to_string();
    if skill.instructions.trim().is_empty() {
        return Err(ResolveError::NoInstructions(key));
    }
    if let Some(transport) = foreign_transport(&skill.policy.interaction_contracts) {
        return Err(ResolveError::Transport { key, transport });
    }
    let title = skill.title.trim();
    let mut kinds = clean_list(skill.policy.completion_requires_interaction_kinds);
    kinds.sort();
    Ok(SkillDefinition {
        title: if title.is_empty() {
            key.clone()
        } else {
            title.to_string()
        },
        description: skill.description.trim().to_string(),
        instructions: skill.instructions.trim().to_string(),
        required_tools: clean_list(skill.required_tools),
        runtimes: clean_list(skill.supported_runtimes),
        policy: SkillPolicy {
            allow_implicit_invocation: skill.policy.allow_implicit_invocation,
            completion_requires_interaction_kinds: kinds,
        },
        includes: Vec::new(),
        source: SourceKind::Workspace,
        skill_id: skill.id.trim().to_string(),
        version_key: skill.version_key.trim().to_string(),
        files: Default::default(),
        key,
    })
}

#[cfg(test)]
mod tests;
