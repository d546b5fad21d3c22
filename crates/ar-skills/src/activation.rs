//! Phase-aware activation (the original's `SelectNativeActiveSkills`): for the planner and
//! documentation presets, the run metadata's `preset_key` (or `preset`) with its
//! `planning_stage` (or `execution_stage`, `stage`) and the run's target type decide which of
//! the phase-selectable built-in skills are active this turn. The others are demoted to
//! `available`: out of the prompt and the policy, still readable through the skill tools.
//! Host, repository and other built-in skills are never demoted; without a recognised
//! preset and stage nothing changes.

use ar_core::JsonMap;

use crate::definition::SourceKind;
use crate::resolve::{Resolution, SkillRole};

/// The built-in skills whose activation depends on the phase.
const PHASE_SELECTABLE: &[&str] = &[
    "approval_protocol",
    "task_planner_context",
    "docs_information_architecture",
    "external_help_doc_writing",
    "api_doc_writing",
    "release_to_docs_update",
    "support_gap_to_docs",
];

/// The phase of a turn.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Phase {
    pub preset_key: String,
    pub target_type: String,
    pub planning_stage: String,
}

impl Phase {
    /// The phase the host put in the run's metadata.
    pub fn from_metadata(metadata: &JsonMap, target_type: &str) -> Phase {
        let first = |keys: &[&str]| {
            keys.iter()
                .filter_map(|key| metadata.get(*key)?.as_str())
                .map(str::trim)
                .find(|value| !value.is_empty())
                .unwrap_or_default()
                .to_string()
        };
        Phase {
            preset_key: first(&["preset_key", "preset"]),
            target_type: target_type.trim().to_string(),
            planning_stage: first(&["planning_stage", "execution_stage", "stage"]),
        }
    }

    /// The phase-selectable skills active in this phase; `None`: no selection applies.
    fn active(&self) -> Option<Vec<&'static str>> {
        let stage = self.planning_stage.as_str();
        match (self.preset_key.as_str(), self.target_type.as_str()) {
            ("epic_planner", "epic") if matches!(stage, "draft_spec" | "plan_tasks") => {
                Some(vec!["approval_protocol"])
            }
            ("task_planner", "task") if stage == "task_plan_doc" => {
                Some(vec!["approval_protocol", "task_planner_context"])
            }
            ("documentation_agent", target) => Some(documentation_active(target)),
            _ => None,
        }
    }
}

/// The documentation skills for a target type (the original's table, for the skills this
/// catalogue has).
fn documentation_active(target_type: &str) -> Vec<&'static str> {
    let mut active = vec!["docs_information_architecture"];
    active.extend_from_slice(match target_type {
        "document" => &[],
        "support_conversation" | "support_coverage_gap" => {
            &["support_gap_to_docs", "external_help_doc_writing"][..]
        }
        "repository" | "task" | "epic" => &["release_to_docs_update"],
        _ => &[
            "external_help_doc_writing",
            "api_doc_writing",
            "release_to_docs_update",
            "support_gap_to_docs",
        ],
    });
    active
}

impl Resolution {
    /// Demotes the phase-selectable built-ins this phase does not use; returns their keys.
    pub fn activate(&mut self, phase: &Phase) -> Vec<String> {
        let Some(active) = phase.active() else {
            return Vec::new();
        };
        let mut demoted = Vec::new();
        for skill in &mut self.skills {
            let d = &skill.definition;
            let selectable =
                d.source == SourceKind::BuiltIn && PHASE_SELECTABLE.contains(&d.key.as_str());
            if selectable && skill.role != SkillRole::Available && !active.contains(&d.key.as_str())
            {
                skill.role = SkillRole::Available;
                demoted.push(d.key.clone());
            }
        }
        demoted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::ResolvedSkill;
    use crate::Catalog;

    fn resolution(keys: &[&str]) -> Resolution {
        let skills = keys
            .iter()
            .map(|key| ResolvedSkill {
                definition: Catalog::built_in().get(key).unwrap().clone(),
                role: SkillRole::Default,
            })
            .collect();
        Resolution { skills }
    }

    fn metadata(pairs: &[(&str, &str)]) -> JsonMap {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
            .collect()
    }

    #[test]
    fn the_task_planning_phase_keeps_its_skills_and_the_epic_phase_drops_context() {
        let keys = [
            "approval_protocol",
            "task_planner_context",
            "general_agent_behavior",
        ];
        let mut task = resolution(&keys);
        let phase = Phase::from_metadata(
            &metadata(&[
                ("preset_key", "task_planner"),
                ("planning_stage", "task_plan_doc"),
            ]),
            "task",
        );
        assert!(task.activate(&phase).is_empty());

        let mut epic = resolution(&keys);
        let phase = Phase::from_metadata(
            &metadata(&[("preset", "epic_planner"), ("stage", "draft_spec")]),
            "epic",
        );
        assert_eq!(epic.activate(&phase), ["task_planner_context"]);
        assert!(!epic.prompt_instructions().contains("Task Planner Context"));
        assert!(epic
            .prompt_instructions()
            .contains("## Skill: Approval Protocol"));
        assert!(
            epic.available().any(|s| s.key == "task_planner_context"),
            "still readable"
        );
    }

    #[test]
    fn documentation_targets_choose_their_skills_and_no_phase_changes_nothing() {
        let keys = [
            "docs_information_architecture",
            "api_doc_writing",
            "support_gap_to_docs",
        ];
        let mut support = resolution(&keys);
        let phase = Phase::from_metadata(
            &metadata(&[("preset_key", "documentation_agent")]),
            "support_conversation",
        );
        assert_eq!(support.activate(&phase), ["api_doc_writing"]);

        let mut plain = resolution(&keys);
        assert!(plain
            .activate(&Phase::from_metadata(&JsonMap::new(), "task"))
            .is_empty());
        let unknown_stage = Phase::from_metadata(
            &metadata(&[("preset_key", "epic_planner"), ("planning_stage", "later")]),
            "epic",
        );
        assert!(plain.activate(&unknown_stage).is_empty());
    }
}
