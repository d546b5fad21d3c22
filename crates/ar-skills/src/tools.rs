//! The skill tools of a run (`list_available_skills`, `search_available_skills`, `read_skill`),
//! answered from the run's available skills without I/O, and the `runtime_skill_manifest`
//! artifact that records what a turn was given.

use ar_core::tool::{ToolDefinition, ToolOutput};
use serde_json::{json, Value};

use crate::definition::{SkillDefinition, SkillPolicy};
use crate::resolve::Resolution;
use crate::stage::{read_staged, Staged};

pub const LIST_AVAILABLE_SKILLS: &str = "list_available_skills";
pub const SEARCH_AVAILABLE_SKILLS: &str = "search_available_skills";
pub const READ_SKILL: &str = "read_skill";
/// The artifact type of the manifest.
pub const MANIFEST_ARTIFACT: &str = "runtime_skill_manifest";

/// Most results of one search.
const MAX_SEARCH_RESULTS: usize = 20;
/// Largest staged file `read_skill` returns.
pub const MAX_RESOURCE_BYTES: u64 = 256 * 1024;

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
            "Read the full instructions of one available skill, by key; with `path`, one of the skill's staged files (relative to the skill's directory, as listed by reading the skill).",
            json!({"type": "object", "properties": {"key": {"type": "string"}, "path": {"type": "string"}}, "required": ["key"], "additionalProperties": false}),
        ),
    ]
}

/// A run's available skills, as the skill tools see them.
#[derive(Debug, Clone, Default)]
pub struct SkillTools {
    skills: Vec<SkillDefinition>,
    staged: Option<Staged>,
}

impl SkillTools {
    pub fn new(resolution: &Resolution) -> Self {
        SkillTools {
            skills: resolution.available().cloned().collect(),
            staged: None,
        }
    }

    /// The skills these tools offer (what staging writes).
    pub fn skills(&self) -> &[SkillDefinition] {
        &self.skills
    }

    /// Where the skills were staged: `read_skill` then reads their files from there.
    pub fn with_staging(mut self, staged: Staged) -> Self {
        self.staged = Some(staged);
        self
    }

    pub fn staged(&self) -> Option<&Staged> {
        self.staged.as_ref()
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
                key => match text("path") {
                    "" => self.read(key),
                    path => self.read_file(key, path),
                },
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

    fn find(&self, key: &str) -> Result<&SkillDefinition, ToolOutput> {
        self.skills.iter().find(|s| s.key == key).ok_or_else(|| {
            ToolOutput::error(format!(
                "no available skill {key:?}; call list_available_skills for the keys"
            ))
        })
    }

    /// The skill's instructions, and the files staged with it beyond its `SKILL.md`.
    fn read(&self, key: &str) -> ToolOutput {
        let skill = match self.find(key) {
            Ok(skill) => skill,
            Err(error) => return error,
        };
        let mut text = format!("# {}\n\n{}", skill.title, skill.instructions);
        let files: Vec<&str> = self
            .staged
            .iter()
            .flat_map(|staged| staged.skills.iter().filter(|s| s.key == key))
            .flat_map(|s| s.files.iter().map(String::as_str))
            .filter(|path| *path != "SKILL.md")
            .collect();
        if let (false, Some(staged)) = (files.is_empty(), &self.staged) {
            let dir = staged.root.join(key);
            text.push_str(&format!(
                "\n\nFiles of this skill (read one with read_skill and its path; staged at {}):\n- {}",
                dir.display(),
                files.join("\n- ")
            ));
        }
        ToolOutput::text(text)
    }

    /// One staged file of a skill, read beneath the skill's directory.
    fn read_file(&self, key: &str, path: &str) -> ToolOutput {
        if let Err(error) = self.find(key) {
            return error;
        }
        let Some(staged) = &self.staged else {
            return ToolOutput::error("this run's skills have no staged files");
        };
        match read_staged(&staged.root.join(key), path, MAX_RESOURCE_BYTES) {
            Ok(bytes) => ToolOutput::text(String::from_utf8_lossy(&bytes).into_owned()),
            Err(reason) => ToolOutput::error(format!("read_skill {key:?}: {reason}")),
        }
    }
}

/// What a turn's manifest records beyond the resolution.
#[derive(Debug, Default)]
pub struct ManifestExtras<'a> {
    pub staged: Option<&'a Staged>,
    /// Repository `SKILL.md` files that could not be used, and why.
    pub repository_problems: &'a [String],
}

/// The `runtime_skill_manifest` of a turn: every skill with its role and source, the merged
/// policy, the completion tools, where the skills were staged (each skill's files) and the
/// repository skills that could not be used.
pub fn manifest(
    resolution: &Resolution,
    policy: &SkillPolicy,
    required_tools: &[String],
    extras: &ManifestExtras<'_>,
) -> Value {
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
                "packaged": !d.files.is_empty(),
            })
        })
        .collect();
    let staging = extras.staged.map(|staged| {
        let skills: Vec<Value> = staged
            .skills
            .iter()
            .map(|s| json!({"key": s.key, "dir": staged.root.join(&s.key), "files": s.files}))
            .collect();
        json!({"root": staged.root, "kind": staged.kind.as_str(), "skills": skills})
    });
    json!({
        "schema": "runtime_skill_manifest_v1",
        "skills": skills,
        "policy": policy,
        "completion_required_tools": required_tools,
        "staging": staging,
        "repository_problems": extras.repository_problems,
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
