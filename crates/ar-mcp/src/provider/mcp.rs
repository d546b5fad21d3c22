//! What the two MCP provider transports (streamable HTTP and stdio) share: an MCP tool as a
//! [`ProviderTool`] (its annotations read as mutating and risk level) and the call's context
//! sent as the request's `_meta`.

use rmcp::model::{CallToolRequestParams, RequestMetaObject, Tool};
use serde_json::Value;

use super::ProviderTool;

/// The `_meta` key the call's context (`CommandExecutionContext` JSON) goes under.
pub(crate) const CONTEXT_META_KEY: &str = "agent-runtime/context";
/// The category of every MCP provider tool (MCP has none of its own).
const CATEGORY: &str = "mcp";

/// An advertised MCP tool as the catalogue reads it. A tool is mutating unless it says it is
/// read-only; its risk level follows the destructive hint, and is left to the catalogue when
/// a mutating tool gives none.
pub(crate) fn provider_tool(tool: Tool) -> ProviderTool {
    let read_only = tool
        .annotations
        .as_ref()
        .and_then(|hints| hints.read_only_hint)
        == Some(true);
    let risk_level = if read_only {
        Some("read")
    } else {
        match tool
            .annotations
            .as_ref()
            .and_then(|hints| hints.destructive_hint)
        {
            Some(true) => Some("destructive_mutation"),
            Some(false) => Some("routine_mutation"),
            None => None,
        }
    };
    ProviderTool {
        name: tool.name.trim().to_string(),
        description: tool
            .description
            .map(|text| text.trim().to_string())
            .unwrap_or_default(),
        category: CATEGORY.to_string(),
        input_schema: Value::Object((*tool.input_schema).clone()),
        mutating: !read_only,
        risk_level: risk_level.map(str::to_string),
        // MCP has no notion of target types: the tool serves every target.
        supported_target_types: Vec::new(),
    }
}

/// `params` carrying the call's context in `_meta` (nothing when the context is null).
pub(crate) fn with_context(
    mut params: CallToolRequestParams,
    meta: &Value,
) -> CallToolRequestParams {
    if meta.is_null() {
        return params;
    }
    params
        .meta
        .get_or_insert_with(RequestMetaObject::new)
        .insert(CONTEXT_META_KEY.to_string(), meta.clone());
    params
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{JsonObject, ToolAnnotations};
    use serde_json::json;

    fn tool(annotations: Option<ToolAnnotations>) -> Tool {
        let schema = match json!({"type": "object", "properties": {"a": {"type": "string"}}}) {
            Value::Object(map) => map,
            _ => JsonObject::new(),
        };
        let tool = Tool::new(" t ", " Does t. ", schema);
        match annotations {
            Some(hints) => tool.annotate(hints),
            None => tool,
        }
    }

    #[test]
    fn annotations_give_mutating_and_risk_level() {
        let cases = [
            (
                Some(ToolAnnotations::new().read_only(true)),
                false,
                Some("read"),
            ),
            (
                Some(ToolAnnotations::new().read_only(true).destructive(true)),
                false,
                Some("read"),
            ),
            (
                Some(ToolAnnotations::new().read_only(false).destructive(true)),
                true,
                Some("destructive_mutation"),
            ),
            (
                Some(ToolAnnotations::new().destructive(false)),
                true,
                Some("routine_mutation"),
            ),
            (Some(ToolAnnotations::new()), true, None),
            (None, true, None),
        ];
        for (hints, mutating, risk) in cases {
            let shown = format!("{hints:?}");
            let mapped = provider_tool(tool(hints));
            assert_eq!(mapped.mutating, mutating, "{shown}");
            assert_eq!(mapped.risk_level.as_deref(), risk, "{shown}");
            assert_eq!(mapped.name, "t");
            assert_eq!(mapped.description, "Does t.");
            assert_eq!(mapped.category, "mcp");
            assert_eq!(mapped.input_schema["properties"]["a"]["type"], "string");
        }
    }

    #[test]
    fn the_context_goes_under_its_meta_key() {
        let context = json!({"app": "a", "run": "r-1"});
        let params = with_context(CallToolRequestParams::new("t"), &context);
        let sent = serde_json::to_value(&params).expect("serializes");
        assert_eq!(sent["_meta"][CONTEXT_META_KEY], context);
        let bare = with_context(CallToolRequestParams::new("t"), &Value::Null);
        assert!(bare.meta.is_none());
    }
}
