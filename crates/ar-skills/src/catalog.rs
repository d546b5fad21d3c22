//! The built-in skills: `skills/<key>/SKILL.md`, embedded with `include_str!`, parsed once.
//! A preset (`includes` in its front matter) is expanded here: its text, then each included
//! skill's, with their required tools and policies merged in.

use std::sync::OnceLock;

use crate::definition::{parse_skill_md, SkillDefinition, SkillError, SourceKind};

macro_rules! embedded {
    ($($key:literal),* $(,)?) => {
        &[$(($key, include_str!(concat!("../skills/", $key, "/SKILL.md")))),*]
    };
}

/// Every built-in `SKILL.md`, by directory name.
const EMBEDDED: &[(&str, &str)] = embedded!(
    "approval_protocol",
    "code_builder",
    "review_agent",
    "dependency_auditor",
    "security_triage",
    "task_planner_context",
    "general_agent_behavior",
    "api_doc_writing",
    "docs_information_architecture",
    "external_help_doc_writing",
    "release_to_docs_update",
    "support_gap_to_docs",
    "competitive_intelligence_digest",
    "epic_planner",
    "task_planner",
    "documentation_agent",
);

/// A set of skill definitions by key, sorted.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    skills: Vec<SkillDefinition>,
}

impl Catalog {
    /// The embedded built-ins. Their parsing is checked by this crate's tests, so a failure
    /// here is a build defect: it is logged and the catalogue is empty, which refuses every
    /// built-in reference clearly instead of panicking.
    pub fn built_in() -> &'static Catalog {
        static BUILT_IN: OnceLock<Catalog> = OnceLock::new();
        BUILT_IN.get_or_init(|| match Catalog::from_sources(EMBEDDED) {
            Ok(catalog) => catalog,
            Err(error) => {
                tracing::error!(%error, "built-in skills unusable; none are offered");
                Catalog::default()
            }
        })
    }

    /// Parses `(directory, SKILL.md)` pairs; the directory must match the skill's name.
    pub fn from_sources(sources: &[(&str, &str)]) -> Result<Catalog, SkillError> {
        let mut skills = Vec::with_capacity(sources.len());
        for (dir, text) in sources {
            let origin = format!("skills/{dir}/SKILL.md");
            let skill = parse_skill_md(text, &origin, SourceKind::BuiltIn)?;
            if skill.key != *dir {
                return Err(SkillError::BadName {
                    origin,
                    name: skill.key,
                });
            }
            skills.push(skill);
        }
        skills.sort_by(|a, b| a.key.cmp(&b.key));
        let expanded = skills
            .iter()
            .map(|skill| expand_preset(skill, &skills))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Catalog { skills: expanded })
    }

    pub fn get(&self, key: &str) -> Option<&SkillDefinition> {
        self.skills
            .binary_search_by(|skill| skill.key.as_str().cmp(key))
            .ok()
            .map(|at| &self.skills[at])
    }

    /// All skills, sorted by key.
    pub fn skills(&self) -> &[SkillDefinition] {
        &self.skills
    }
}

/// A preset with its included skills folded in (other skills unchanged).
fn expand_preset(
    preset: &SkillDefinition,
    all: &[SkillDefinition],
) -> Result<SkillDefinition, SkillError> {
    let mut out = preset.clone();
    for key in &preset.includes {
        let Some(included) = all.iter().find(|skill| &skill.key == key) else {
            return Err(SkillError::UnknownInclude {
                origin: format!("skills/{}/SKILL.md", preset.key),
                key: key.clone(),
            });
        };
        out.instructions.push_str("\n\n");
        out.instructions.push_str(&included.instructions);
        for tool in &included.required_tools {
            if !out.required_tools.contains(tool) {
                out.required_tools.push(tool.clone());
            }
        }
        if out.runtimes.is_empty() {
            out.runtimes = included.runtimes.clone();
        } else if !included.runtimes.is_empty() {
            out.runtimes.retain(|kind| included.runtimes.contains(kind));
        }
        out.policy.merge(&included.policy);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_parses_and_the_contract_keys_are_there() {
        let catalog = Catalog::from_sources(EMBEDDED).unwrap();
        assert_eq!(catalog.skills().len(), EMBEDDED.len());
        for key in [
            "approval_protocol",
            "code_builder",
            "review_agent",
            "dependency_auditor",
            "epic_planner",
            "task_planner",
            "documentation_agent",
            "security_triage",
            "task_planner_context",
            "general_agent_behavior",
        ] {
            assert!(Catalog::built_in().get(key).is_some(), "{key}");
        }
        assert!(Catalog::built_in().get("nope").is_none());
    }

    #[test]
    fn presets_fold_in_their_skills() {
        let preset = Catalog::built_in().get("task_planner").unwrap();
        let approval = Catalog::built_in().get("approval_protocol").unwrap();
        assert!(preset.instructions.starts_with("You are Task Planner."));
        assert!(preset.instructions.contains(&approval.instructions));
        assert!(preset
            .required_tools
            .contains(&"request_approval".to_string()));
        assert_eq!(
            preset.policy.completion_requires_interaction_kinds,
            ["approval_request"]
        );
        assert_eq!(preset.runtimes, ["native_sdk"]);
    }

    #[test]
    fn a_preset_of_an_unknown_skill_or_a_misnamed_directory_is_refused() {
        let preset = "---\nname: p\ndescription: d\nincludes: [ghost]\n---\nbody";
        let error = Catalog::from_sources(&[("p", preset)]).unwrap_err();
        assert!(
            error.to_string().contains("unknown skill \"ghost\""),
            "{error}"
        );
        let error = Catalog::from_sources(&[("q", preset)]).unwrap_err();
        assert!(error.to_string().contains("skill name \"p\""), "{error}");
    }
}
