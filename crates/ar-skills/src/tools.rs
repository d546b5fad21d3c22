//! The skill tools of a run (`list_available_skills`, `search_available_skills`, `read_skill`),
//! answered from the run's available skills without I/O, and the `runtime_skill_manifest`
//! artifact that records what a turn was given.

use ar_core::tool::{ToolDefinition, ToolOutput};
use serde_json::{json, Value};

use crate::definition::{SkillDefinition, SkillPolicy};
use crate::resolve::Resolution;

pub const LIST_AVAILABLE_SKILLS: &str = "list_available_skills";
pub const SEARCH_AVAILABLE_SKILLS: &str = "search_available_skills";
pub const READ_SKILL: &str = "read_skill";
/// The artifact type of the manifest.
pub const MANIFEST_ARTIFACT: &str = "runtime_skill_manifest";

/// Most results of one search.
const MAX_SEARCH_RESULTS: usize = 20;

/// Whether `name` is one of the skill tools.
pub fn is_skill_tool(name: &str) -> bool {
    matches!(
        name,
        LIST_AVAILABLE_SKILLS | SEARCH_AVAILABLE_SKILLS | READ_SKILL
    )
}

/// The definitions of the three skill tools (reading, non-mutating).
pub fn tool_definitions() -> Vec<ToolDefinition> {
    let tool = |name: &str, description: &str, schema: Value| ToolDefinition {
        name: name.to_string(),
        description: description.to_string(),
        category: "skills".to_string(),
        input_schema: schema,
        mutating: false,
        risk_level: None,
        supported_target_types: Vec::new(),
    };
    vec![
        tool(
            LIST_AVAILABLE_SKILLS,
            "List the skills available to this run: key, title and description of each.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        ),
        tool(
            SEARCH_AVAILABLE_SKILLS,
            "Search the available skills by words in their key, title, description or text.",
            json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"], "additionalProperties": false}),
        ),
        tool(
            READ_SKILL,
            "Read the full instructions of one available skill, by key.",
            json!({"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"], "additionalProperties": false}),
        ),
    ]
}

/// A run's available skills, as the skill tools see them.
#[derive(Debug, Clone, Default)]
pub struct SkillTools {
    skills: Vec<SkillDefinition>,
}

impl SkillTools {
    pub fn new(resolution: &Resolution) -> Self {
        SkillTools {
            skills: resolution.available().cloned().collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// Answers a skill tool call; `None` when `name` is not a skill tool.
    pub fn call(&self, name: &str, input: &Value) -> Option<ToolOutput> {
        let text = |field: &str| {
            input
                .get(field)
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim()
        };
        Some(match name {
            LIST_AVAILABLE_SKILLS => self.listing(self.skills.iter()),
            SEARCH_AVAILABLE_SKILLS => match text("query") {
                "" => ToolOutput::error("search_available_skills needs a non-empty query"),
                query => self.search(query),
            },
            READ_SKILL => match text("key") {
                "" => ToolOutput::error("read_skill needs the key of an available skill"),
                key => self.read(key),
            },
            _ => return None,
        })
    }

    fn listing<'a>(&self, skills: impl Iterator<Item = &'a SkillDefinition>) -> ToolOutput {
        let entries: Vec<Value> = skills
            .map(|s| json!({"key": s.key, "title": s.title, "description": s.description, "source_kind": s.source.as_str()}))
            .collect();
        let value = json!({"skills": entries});
        ToolOutput {
            content: value.to_string(),
            structured: Some(value),
            is_error: false,
        }
    }

    /// Skills matching every word of `query`, case-insensitively.
    fn search(&self, query: &str) -> ToolOutput {
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        let matches = self.skills.iter().filter(|s| {
            let haystack = format!("{} {} {} {}", s.key, s.title, s.description, s.instructions)
                .to_lowercase();
            words.iter().all(|w| haystack.contains(w))
        });
        self.listing(matches.take(MAX_SEARCH_RESULTS))
    }

    fn read(&self, key: &str) -> ToolOutput {
        match self.skills.iter().find(|s| s.key == key) {
            Some(s) => ToolOutput::text(format!("# {}\n\n{}", s.title, s.instructions)),
            None => ToolOutput::error(format!(
                "no available skill {key:?}; call list_available_skills for the keys"
            )),
        }
    }
}

/// The `runtime_skill_manifest` of a turn: every skill with its role and source, the merged
/// policy, and the completion tools.
pub fn manifest(resolution: &Resolution, policy: &SkillPolicy, required_tools: &[String]) -> Value {
    let skills: Vec<Value> = resolution
        .skills
        .iter()
        .map(|s| {
            let d = &s.definition;
            json!({
                "key": d.key,
                "title": d.title,
                "source_kind": d.source.as_str(),
                "role": s.role.as_str(),
                "skill_id": d.skill_id,
                "version_key": d.version_key,
                "required_tools": d.required_tools,
            })
        })
        .collect();
    json!({
        "schema": "runtime_skill_manifest_v1",
        "skills": skills,
        "policy": policy,
        "completion_required_tools": required_tools,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::{ResolvedSkill, SkillRole};
    use crate::Catalog;

    fn tools() -> SkillTools {
        let skill = |key: &str| ResolvedSkill {
            definition: Catalog::built_in().get(key).unwrap().clone(),
            role: SkillRole::Available,
        };
        SkillTools::new(&Resolution {
            skills: vec![skill("code_builder"), skill("dependency_auditor")],
        })
    }

    #[test]
    fn list_search_and_read() {
        let tools = tools();
        let listed = tools.call(LIST_AVAILABLE_SKILLS, &json!({})).unwrap();
        assert_eq!(
            listed.structured.unwrap()["skills"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        let found = tools
            .call(SEARCH_AVAILABLE_SKILLS, &json!({"query": "LOCK files"}))
            .unwrap();
        let found = found.structured.unwrap();
        assert_eq!(found["skills"][0]["key"], "dependency_auditor");
        assert_eq!(found["skills"].as_array().unwrap().len(), 1);
        let read = tools
            .call(READ_SKILL, &json!({"key": "code_builder"}))
            .unwrap();
        assert!(read
            .content
            .starts_with("# Code Builder\n\nYou change code"));
        assert!(tools.call("read_file", &json!({})).is_none());
    }

    #[test]
    fn bad_calls_are_tool_errors() {
        let tools = tools();
        assert!(
            tools
                .call(READ_SKILL, &json!({"key": "ghost"}))
                .unwrap()
                .is_error
        );
        assert!(tools.call(READ_SKILL, &json!({})).unwrap().is_error);
        assert!(
            tools
                .call(SEARCH_AVAILABLE_SKILLS, &json!({"query": 3}))
                .unwrap()
                .is_error
        );
    }
}
