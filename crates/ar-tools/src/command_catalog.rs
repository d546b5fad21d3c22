//! The original's host command catalogue: the tools a `command_provider` without a `commands`
//! list offers, each mapped to the `command_name` sent to `POST {base_url}/execute`.
//!
//! The data is `command_catalog.json`, embedded and parsed once. Names, command names,
//! categories, input schemas, mutating flags and risk levels are those the original registers
//! (its `sharedCommandTools` and risk table, the effective level written out per tool);
//! descriptions, also those inside schemas, are our own. Sub-schemas several tools share are
//! written once under `shared` and referenced as `{"$shared": "<name>"}`.

use std::collections::HashSet;
use std::sync::OnceLock;

use ar_core::tool::ToolDefinition;
use ar_core::{JsonMap, RiskLevel};
use serde_json::Value;

const CATALOG_JSON: &str = include_str!("command_catalog.json");

/// Key of a reference to a shared sub-schema.
const SHARED_REF: &str = "$shared";

/// One host command of a catalogue: the tool the model sees and the name the host executes.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogCommand {
    /// Sent as `command_name` to the provider (e.g. `pm.create_task`).
    pub command_name: String,
    /// The tool (named by its alias, e.g. `create_task`).
    pub definition: ToolDefinition,
}

/// Why the embedded catalogue is unusable (a defect of the data file, caught by its unit test).
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum CatalogError {
    #[error("the command catalogue is not valid JSON: {0}")]
    Json(String),
    #[error("command catalogue entry {index}: {reason}")]
    Entry { index: usize, reason: String },
    #[error("command catalogue: {0} is listed twice")]
    Duplicate(String),
}

/// The original's catalogue, in its registration order.
pub fn builtin() -> Result<&'static [CatalogCommand], CatalogError> {
    static CATALOG: OnceLock<Result<Vec<CatalogCommand>, CatalogError>> = OnceLock::new();
    CATALOG
        .get_or_init(|| parse(CATALOG_JSON))
        .as_deref()
        .map_err(Clone::clone)
}

fn parse(text: &str) -> Result<Vec<CatalogCommand>, CatalogError> {
    let root: Value = serde_json::from_str(text).map_err(|e| CatalogError::Json(e.to_string()))?;
    let shared = root
        .get("shared")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let entries = root
        .get("commands")
        .and_then(Value::as_array)
        .ok_or_else(|| CatalogError::Json("no `commands` array".into()))?;
    let commands = entries
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            command(entry, &shared).map_err(|reason| CatalogError::Entry { index, reason })
        })
        .collect::<Result<Vec<_>, _>>()?;
    validate(&commands)?;
    Ok(commands)
}

fn command(entry: &Value, shared: &JsonMap) -> Result<CatalogCommand, String> {
    let text = |key: &str| {
        entry
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .map(str::to_string)
            .ok_or_else(|| format!("`{key}` must be a non-empty string"))
    };
    let mutating = entry
        .get("mutating")
        .and_then(Value::as_bool)
        .ok_or("`mutating` must be a boolean")?;
    let risk_level = RiskLevel::parse(&text("risk_level")?).map_err(|e| e.to_string())?;
    let schema = entry
        .get("input_schema")
        .ok_or("`input_schema` is missing")?;
    let definition = ToolDefinition {
        name: text("name")?,
        description: text("description")?,
        category: text("category")?,
        input_schema: expand(schema, shared)?,
        mutating,
        risk_level: Some(risk_level),
        supported_target_types: Vec::new(),
    };
    Ok(CatalogCommand {
        command_name: text("command_name")?,
        definition,
    })
}

/// The schema with every `{"$shared": name}` replaced by the shared sub-schema.
fn expand(value: &Value, shared: &JsonMap) -> Result<Value, String> {
    match value {
        Value::Object(map) if map.contains_key(SHARED_REF) => {
            let name = map[SHARED_REF].as_str().unwrap_or_default();
            match (map.len(), shared.get(name)) {
                (1, Some(schema)) => expand(schema, shared),
                _ => Err(format!("bad shared schema reference {value}")),
            }
        }
        Value::Object(map) => map
            .iter()
            .map(|(key, item)| Ok((key.clone(), expand(item, shared)?)))
            .collect::<Result<JsonMap, String>>()
            .map(Value::Object),
        Value::Array(items) => items
            .iter()
            .map(|item| expand(item, shared))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

/// Each entry an object schema whose risk level agrees with its flag; names and command names
/// unique.
fn validate(commands: &[CatalogCommand]) -> Result<(), CatalogError> {
    let mut names = HashSet::new();
    let mut command_names = HashSet::new();
    for (index, command) in commands.iter().enumerate() {
        let tool = &command.definition;
        let entry = |reason: &str| CatalogError::Entry {
            index,
            reason: format!("{}: {reason}", tool.name),
        };
        if tool.input_schema.get("type").and_then(Value::as_str) != Some("object")
            || !tool.input_schema["properties"].is_object()
        {
            return Err(entry(
                "the input schema must be an object schema with properties",
            ));
        }
        let read = tool.risk_level == Some(RiskLevel::Read);
        if read == tool.mutating {
            return Err(entry("risk level read if and only if not mutating"));
        }
        if !names.insert(tool.name.as_str()) {
            return Err(CatalogError::Duplicate(tool.name.clone()));
        }
        if !command_names.insert(command.command_name.as_str()) {
            return Err(CatalogError::Duplicate(command.command_name.clone()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn find(name: &str) -> &'static CatalogCommand {
        builtin()
            .unwrap()
            .iter()
            .find(|c| c.definition.name == name)
            .unwrap_or_else(|| panic!("{name} is in the catalogue"))
    }

    #[test]
    fn the_embedded_catalogue_is_valid() {
        let catalog = builtin().unwrap();
        assert_eq!(catalog.len(), 53);
        let json = catalog
            .iter()
            .map(|c| c.definition.input_schema.to_string())
            .collect::<String>();
        assert!(
            !json.contains(SHARED_REF),
            "every shared reference expanded"
        );
        for command in catalog {
            let tool = &command.definition;
            assert!(
                crate::control::names::GET_CONTEXT != tool.name
                    && !crate::control::names::is_runtime_control(&tool.name),
                "{} would shadow a runtime tool",
                tool.name
            );
            let (domain, _) = command.command_name.split_once('.').unwrap();
            assert!(!domain.is_empty() && !tool.description.is_empty());
            assert_eq!(tool.effective_risk(), tool.risk_level.unwrap());
        }
    }

    #[test]
    fn risk_levels_follow_the_original_table() {
        let risk = |name: &str| find(name).definition.effective_risk();
        assert_eq!(risk("create_task"), RiskLevel::RoutineMutation);
        assert_eq!(risk("cancel_agent_run"), RiskLevel::RoutineMutation);
        assert_eq!(risk("send_support_reply"), RiskLevel::SensitiveMutation);
        // Mutating and absent from the original's table: sensitive.
        assert_eq!(risk("approve_epic_spec"), RiskLevel::SensitiveMutation);
        assert_eq!(risk("publish_prd_draft"), RiskLevel::SensitiveMutation);
        assert_eq!(
            risk("run_epic_delivery_pipeline"),
            RiskLevel::DestructiveMutation
        );
        assert_eq!(risk("list_tasks"), RiskLevel::Read);
        let count = |level| {
            builtin()
                .unwrap()
                .iter()
                .filter(|c| c.definition.effective_risk() == level)
                .count()
        };
        assert_eq!(count(RiskLevel::Read), 20);
        assert_eq!(count(RiskLevel::RoutineMutation), 24);
        assert_eq!(count(RiskLevel::SensitiveMutation), 8);
        assert_eq!(count(RiskLevel::DestructiveMutation), 1);
    }

    #[test]
    fn shared_schemas_are_expanded_in_place() {
        let batch = &find("create_task_batch").definition.input_schema;
        let task = &batch["properties"]["tasks"]["items"];
        assert_eq!(task, &batch["properties"]["proposed_tasks"]["items"]);
        assert_eq!(task["required"], json!(["name", "description"]));
        assert_eq!(
            task["properties"]["implementation_brief"]["properties"]["files_to_modify"]["items"]
                ["properties"]["action"]["enum"],
            json!(["create", "modify", "delete"])
        );
        let plan = &find("start_agent_plan").definition.input_schema;
        assert_eq!(
            plan["properties"]["steps"]["items"]["properties"]["target"]["properties"]["id"]
                ["type"],
            "string"
        );
    }

    #[test]
    fn a_broken_catalogue_is_a_typed_error() {
        let one = |entry: Value| json!({"commands": [entry]}).to_string();
        let good = json!({"command_name": "x.y", "name": "y", "category": "X", "description": "d",
            "mutating": false, "risk_level": "read", "input_schema": {"type": "object", "properties": {}}});
        assert_eq!(parse(&one(good.clone())).unwrap().len(), 1);
        let mut array = good.clone();
        array["input_schema"] = json!({"type": "array"});
        assert!(matches!(
            parse(&one(array)),
            Err(CatalogError::Entry { .. })
        ));
        let mut mutating_read = good.clone();
        mutating_read["mutating"] = json!(true);
        assert!(parse(&one(mutating_read)).is_err());
        let mut dangling = good.clone();
        dangling["input_schema"] = json!({"$shared": "nowhere"});
        assert!(parse(&one(dangling)).is_err());
        let twice = json!({"commands": [good, good]}).to_string();
        assert_eq!(parse(&twice), Err(CatalogError::Duplicate("y".into())));
        assert!(matches!(parse("{"), Err(CatalogError::Json(_))));
    }
}
