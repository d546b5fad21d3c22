//! Definitions (name, description, JSON schema, mutating, risk) of `get_context` and the runtime-control tools the engine executes itself.

use ar_core::tool::ToolDefinition;
use ar_core::RiskLevel;
use serde_json::{json, Value};

/// Names of the tools defined here.
pub mod names {
    pub const GET_CONTEXT: &str = "get_context";
    pub const UPDATE_PLAN: &str = "update_plan";
    pub const REQUEST_USER_INPUT: &str = "request_user_input";
    pub const REQUEST_APPROVAL: &str = "request_approval";
    pub const REQUEST_REVIEW_CHECKPOINT: &str = "request_review_checkpoint";
    pub const FINISH_TURN: &str = "finish_turn";

    /// Runtime-control tools (executed by the engine, never by a `ToolHost`).
    pub const RUNTIME_CONTROL: &[&str] = &[
        UPDATE_PLAN,
        REQUEST_USER_INPUT,
        REQUEST_APPROVAL,
        REQUEST_REVIEW_CHECKPOINT,
        FINISH_TURN,
    ];

    /// Whether the engine handles this (canonical) tool name itself.
    pub fn is_runtime_control(name: &str) -> bool {
        RUNTIME_CONTROL.contains(&name)
    }
}

/// Category of the built-in context tool.
pub const CATEGORY_CONTEXT: &str = "context";
/// Category of the runtime-control tools.
pub const CATEGORY_RUNTIME: &str = "runtime";

fn tool(
    name: &str,
    category: &str,
    description: &str,
    schema: Value,
    mutating: bool,
    risk: RiskLevel,
) -> ToolDefinition {
    ToolDefinition {
        name: name.to_string(),
        description: description.to_string(),
        category: category.to_string(),
        input_schema: schema,
        mutating,
        risk_level: Some(risk),
        supported_target_types: Vec::new(),
    }
}

/// `get_context`: the run's target and the context summary the host supplied.
pub fn get_context_tool() -> ToolDefinition {
    tool(
        names::GET_CONTEXT,
        CATEGORY_CONTEXT,
        "Return the run's target (type, id, display, metadata) and the context summary the host application supplied for it.",
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        false,
        RiskLevel::Read,
    )
}

/// Fields shared by `request_approval` and `request_review_checkpoint`.
fn approval_properties() -> serde_json::Map<String, Value> {
    let properties = json!({
        "title": {"type": "string", "description": "Short title of what needs approval."},
        "phase": {"type": "string", "description": "Stage of the work this approval belongs to (for example planning or execution)."},
        "preview_panel_key": {"type": "string", "description": "Key of the host UI panel that previews the proposal."},
        "summary": {"type": "string", "description": "What will happen once approved, in a few sentences."},
        "action": {"type": "object", "description": "Machine-readable description of the proposed action.", "additionalProperties": true}
    });
    match properties {
        Value::Object(map) => map,
        // `json!` of an object literal is always an object.
        _ => serde_json::Map::new(),
    }
}

/// The runtime-control tools, as offered to the model. The engine executes them itself; only
/// `finish_turn` is offered without being allowlisted (for explicit-completion runs).
pub fn runtime_control_tools() -> Vec<ToolDefinition> {
    // Built once: every run's tool list starts from them.
    static TOOLS: std::sync::LazyLock<Vec<ToolDefinition>> =
        std::sync::LazyLock::new(build_runtime_control_tools);
    TOOLS.clone()
}

fn build_runtime_control_tools() -> Vec<ToolDefinition> {
    vec![
        update_plan_tool(),
        request_user_input_tool(),
        request_approval_tool(),
        request_review_checkpoint_tool(),
        finish_turn_tool(),
    ]
}

/// `update_plan`: publish or revise the run's plan, without pausing.
fn update_plan_tool() -> ToolDefinition {
    tool(
        names::UPDATE_PLAN,
        CATEGORY_RUNTIME,
        "Publish or revise the step-by-step plan for this run. Does not pause the run.",
        json!({
            "type": "object",
            "properties": {
                "explanation": {"type": "string", "description": "Why the plan is (re)stated."},
                "plan": {
                    "type": "array",
                    "description": "Ordered steps.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "step": {"type": "string"},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                        },
                        "required": ["step", "status"]
                    }
                },
                "metadata": {"type": "object", "additionalProperties": true}
            },
            "required": ["plan"]
        }),
        false,
        RiskLevel::Read,
    )
}

/// `request_user_input`: questions for the user; pauses the run.
fn request_user_input_tool() -> ToolDefinition {
    tool(
        names::REQUEST_USER_INPUT,
        CATEGORY_RUNTIME,
        "Ask the user one or more questions and pause the run until they answer.",
        json!({
            "type": "object",
            "properties": {
                "questions": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string", "description": "Stable id of the question, used to match the answer."},
                            "header": {"type": "string", "description": "Short label shown above the question."},
                            "question": {"type": "string"},
                            "isOther": {"type": "boolean", "description": "Allow a free-text answer besides the options."},
                            "isSecret": {"type": "boolean", "description": "The answer is sensitive and must not be echoed."},
                            "options": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "properties": {
                                        "label": {"type": "string"},
                                        "description": {"type": "string"}
                                    },
                                    "required": ["label"]
                                }
                            }
                        },
                        "required": ["id", "question"]
                    }
                }
            },
            "required": ["questions"]
        }),
        true,
        RiskLevel::RoutineMutation,
    )
}

/// `request_approval`: a proposal for a person to approve; pauses the run.
fn request_approval_tool() -> ToolDefinition {
    tool(
        names::REQUEST_APPROVAL,
        CATEGORY_RUNTIME,
        "Ask a person to approve a proposal and pause the run until they approve or request changes.",
        json!({"type": "object", "properties": approval_properties(), "required": ["title"]}),
        true,
        RiskLevel::RoutineMutation,
    )
}

/// `request_review_checkpoint`: an approval carrying review findings and a verdict.
fn request_review_checkpoint_tool() -> ToolDefinition {
    let mut properties = approval_properties();
    properties.insert(
        "findings".to_string(),
        json!({
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "title": {"type": "string"},
                    "body": {"type": "string"},
                    "priority": {"type": "integer", "minimum": 0, "maximum": 3, "description": "0 = most urgent."},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                    "code_location": {
                        "type": "object",
                        "properties": {
                            "absolute_file_path": {"type": "string"},
                            "line_range": {
                                "type": "object",
                                "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}}
                            }
                        },
                        "additionalProperties": true
                    }
                },
                "required": ["title", "body"]
            }
        }),
    );
    properties.insert("overall_correctness".to_string(), json!({"type": "string"}));
    properties.insert("overall_explanation".to_string(), json!({"type": "string"}));
    properties.insert(
        "overall_confidence_score".to_string(),
        json!({"type": "number", "minimum": 0, "maximum": 1}),
    );
    tool(
        names::REQUEST_REVIEW_CHECKPOINT,
        CATEGORY_RUNTIME,
        "Present review findings and an overall verdict to a person and pause the run until they approve or request changes.",
        json!({"type": "object", "properties": properties, "required": ["title"]}),
        true,
        RiskLevel::RoutineMutation,
    )
}

/// `finish_turn`: declares the turn done (or blocked).
fn finish_turn_tool() -> ToolDefinition {
    tool(
        names::FINISH_TURN,
        CATEGORY_RUNTIME,
        "Declare the turn finished. Must be the only tool call in its response. Use outcome \"blocked\" with a blocker when the work cannot be completed.",
        json!({
            "type": "object",
            "properties": {
                "outcome": {"type": "string", "enum": ["completed", "blocked"]},
                "summary": {"type": "string", "description": "What was done."},
                "blocker": {"type": "string", "description": "Required when outcome is blocked: what prevents completion."}
            },
            "required": ["outcome", "summary"]
        }),
        false,
        RiskLevel::Read,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_control_catalog() {
        let tools = runtime_control_tools();
        let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, names::RUNTIME_CONTROL);
        for tool in &tools {
            assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
            assert!(!tool.description.is_empty());
        }
        let by_name = |name: &str| tools.iter().find(|t| t.name == name).unwrap().clone();
        assert!(!by_name("update_plan").mutating);
        assert!(!by_name("finish_turn").mutating);
        assert_eq!(by_name("finish_turn").effective_risk(), RiskLevel::Read);
        for pausing in [
            "request_user_input",
            "request_approval",
            "request_review_checkpoint",
        ] {
            let tool = by_name(pausing);
            assert!(tool.mutating, "{pausing}");
            assert_eq!(
                tool.effective_risk(),
                RiskLevel::RoutineMutation,
                "{pausing}"
            );
        }
        assert_eq!(
            by_name("request_review_checkpoint").input_schema["properties"]["findings"]["items"]
                ["required"],
            json!(["title", "body"])
        );
        assert_eq!(
            by_name("request_approval").input_schema["required"],
            json!(["title"])
        );
        assert!(
            names::is_runtime_control("finish_turn") && !names::is_runtime_control("get_context")
        );
    }
}
