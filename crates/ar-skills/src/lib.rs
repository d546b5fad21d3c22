//! Skills: the built-in catalogue, `SKILL.md` parsing, the resolution of a run's skill
//! references (built-ins, the app's skill provider, a repository's `.agents/skills`), the
//! policy they and `execution_config` impose, and the skill tools of a run.
//!
//! - [`definition`]: a skill's typed definition and the `SKILL.md` parser.
//! - [`catalog`]: the built-in skills embedded in the binary, presets expanded.
//! - [`resolve`]: `SkillRef`s to a [`Resolution`], through the [`SkillLookup`] port for host
//!   skills, validated against the runtime and the allowed tools.
//! - [`policy`]: the merged skill policy and the agent's `execution_config` policy.
//! - [`repository`]: discovery of a repository's `.agents/skills`.
//! - [`tools`]: `list_available_skills`, `search_available_skills`, `read_skill` and the
//!   `runtime_skill_manifest` artifact.
//!
//! No I/O but the repository walk (the HTTP provider lives in `ar-tools`).

pub mod activation;
pub mod catalog;
pub mod definition;
pub mod package;
pub mod policy;
pub mod repository;
pub mod resolve;
pub mod stage;
pub mod tools;

pub use catalog::Catalog;
pub use definition::{SkillDefinition, SkillError, SkillPolicy, SourceKind};
pub use policy::{ExecutionPolicy, PolicyError};
pub use resolve::{
    HostSkill, LookupError, LookupRequest, Resolution, ResolveError, ResolvedSkill, SkillLookup,
    SkillRole,
};
pub use tools::SkillTools;
