//! The MCP server side of the bridge: one JSON-RPC message in, at most one answer out.
//! `initialize`, `ping`, `tools/list` and `tools/call` are served (the tools through the run
//! tool gateway); notifications and the client's own responses get no answer.

use ar_wire::{Tool, ToolCallResult};
use serde_json::{json, Map, Value};

use super::gateway::RunTools;

/// The version answered when the client asks for one this bridge does not know.
pub const DEFAULT_PROTOCOL_VERSION: &str = "2024-11-05";
/// Versions whose `tools` methods this bridge serves unchanged.
const PROTOCOL_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18"];

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
/// The gateway failed: unreachable, refused (an unknown tool, a run no longer active) or
/// answered something unreadable.
pub const GATEWAY_ERROR: i64 = -32000;

/// A JSON-RPC error answer.
#[derive(Debug, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError {
            code,
            message: message.into(),
        }
    }
}

/// The error answer to a message whose body could not be read as JSON.
pub fn parse_error(reason: &str) -> Value {
    error_answer(
        Value::Null,
        RpcError::new(PARSE_ERROR, format!("parse error: {reason}")),
    )
}

/// The answer to one message body, or `None` when it needs none.
pub async fn answer(body: &[u8], tools: &impl RunTools) -> Option<Value> {
    let message: Value = match serde_json::from_slice(body) {
        Ok(message) => message,
        Err(error) => return Some(parse_error(&error.to_string())),
    };
    let Some(message) = message.as_object() else {
        let error = RpcError::new(INVALID_REQUEST, "expected one JSON-RPC request object");
        return Some(error_answer(Value::Null, error));
    };
    let id = message.get("id").cloned();
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        // A response to a request of ours (the bridge sends none) or nonsense.
        if message.contains_key("result") || message.contains_key("error") {
            return None;
        }
        let error = RpcError::new(INVALID_REQUEST, "a request needs a \"method\"");
        return Some(error_answer(id.unwrap_or(Value::Null), error));
    };
    // Notifications (no id) are never answered, whatever their method.
    let id = id?;
    let params = message.get("params").unwrap_or(&Value::Null);
    let outcome = match method {
        "initialize" => Ok(initialize(params)),
        "ping" => Ok(json!({})),
        "tools/list" => list_tools(tools).await,
        "tools/call" => call_tool(params, tools).await,
        other => Err(RpcError::new(
            METHOD_NOT_FOUND,
            format!("method not found: {other}"),
        )),
    };
    Some(match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => error_answer(id, error),
    })
}

fn error_answer(id: Value, error: RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": error.code, "message": error.message}})
}

fn initialize(params: &Value) -> Value {
    let asked = params["protocolVersion"].as_str().unwrap_or_default();
    let version = PROTOCOL_VERSIONS
        .iter()
        .find(|known| **known == asked)
        .copied()
        .unwrap_or(DEFAULT_PROTOCOL_VERSION);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "agent-runtime-mcp-bridge", "version": env!("CARGO_PKG_VERSION")},
    })
}

async fn list_tools(tools: &impl RunTools) -> Result<Value, RpcError> {
    let listed = tools.list().await.map_err(gateway_error)?;
    let tools: Vec<Value> = listed.iter().map(mcp_tool).collect();
    Ok(json!({"tools": tools}))
}

/// MCP requires an object schema; a tool declared without one takes any object.
fn mcp_tool(tool: &Tool) -> Value {
    let schema = match &tool.input_schema {
        Value::Object(schema) => Value::Object(schema.clone()),
        _ => json!({"type": "object"}),
    };
    json!({"name": tool.name, "description": tool.description, "inputSchema": schema})
}

async fn call_tool(params: &Value, tools: &impl RunTools) -> Result<Value, RpcError> {
    let name = params["name"]
        .as_str()
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .ok_or_else(|| {
            RpcError::new(INVALID_PARAMS, "tools/call needs params.name, a tool name")
        })?;
    let input = match &params["arguments"] {
        Value::Null => Value::Object(Map::new()),
        Value::Object(arguments) => Value::Object(arguments.clone()),
        _ => {
            return Err(RpcError::new(
                INVALID_PARAMS,
                "tools/call params.arguments must be an object",
            ))
        }
    };
    let result = tools.call(name, input).await.map_err(gateway_error)?;
    Ok(call_result(name, result))
}

fn gateway_error(error: super::gateway::GatewayError) -> RpcError {
    RpcError::new(GATEWAY_ERROR, error.describe())
}

/// The gateway's result as an MCP tool result. A call waiting for approval is no error: the
/// agent is told it did not run yet and why, so it stops instead of retrying.
fn call_result(name: &str, result: ToolCallResult) -> Value {
    if result.approval_required {
        let text = format!(
            "Approval pending: {name} has not run yet. A person must approve this call \
             (interaction {}); the run pauses until they answer. Do not call it again; end \
             your turn.",
            result.interaction_id
        );
        return json!({"content": [{"type": "text", "text": text}]});
    }
    let content: Vec<Value> = result
        .content
        .into_iter()
        .map(|item| {
            let kind = if item.item_type.is_empty() {
                "text".to_owned()
            } else {
                item.item_type
            };
            json!({"type": kind, "text": item.text})
        })
        .collect();
    let mut answer = json!({"content": content});
    if result.is_error {
        answer["isError"] = Value::Bool(true);
    }
    answer
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use ar_wire::ContentItem;

    use super::super::gateway::GatewayError;
    use super::*;

    /// A gateway with one read tool `echo` and one gated tool `close`; other names are refused
    /// as the service refuses them.
    #[derive(Default)]
    struct Fake {
        calls: Mutex<Vec<(String, Value)>>,
    }

    impl RunTools for Fake {
        async fn list(&self) -> Result<Vec<Tool>, GatewayError> {
            Ok(vec![
                Tool {
                    name: "echo".into(),
                    description: "Echo".into(),
                    input_schema: json!({"type": "object", "properties": {}}),
                    ..Tool::default()
                },
                Tool {
                    name: "close".into(),
                    input_schema: Value::Null,
                    ..Tool::default()
                },
            ])
        }

        async fn call(&self, name: &str, input: Value) -> Result<ToolCallResult, GatewayError> {
            self.calls
                .lock()
                .unwrap()
                .push((name.into(), input.clone()));
            match name {
                "echo" => Ok(ToolCallResult {
                    content: vec![ContentItem::text(input.to_string())],
                    ..ToolCallResult::default()
                }),
                "close" => Ok(ToolCallResult {
                    content: vec![ContentItem::text("approval required before running close")],
                    approval_required: true,
                    interaction_id: "int_1".into(),
                    ..ToolCallResult::default()
                }),
                _ => Err(GatewayError::Refused {
                    status: 400,
                    message: format!("tool {name:?} is not available to this run"),
                }),
            }
        }
    }

    async fn ask(request: Value) -> Option<Value> {
        answer(request.to_string().as_bytes(), &Fake::default()).await
    }

    #[tokio::test]
    async fn initialize_answers_a_known_version_else_the_default() {
        let known = ask(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-03-26"}}))
        .await
        .unwrap();
        assert_eq!(known["result"]["protocolVersion"], "2025-03-26");
        assert!(known["result"]["capabilities"]["tools"].is_object());
        let unknown = ask(json!({"jsonrpc": "2.0", "id": "a", "method": "initialize",
            "params": {"protocolVersion": "1999-01-01"}}))
        .await
        .unwrap();
        assert_eq!(unknown["id"], "a");
        assert_eq!(
            unknown["result"]["protocolVersion"],
            DEFAULT_PROTOCOL_VERSION
        );
    }

    #[tokio::test]
    async fn tools_are_listed_with_object_schemas() {
        let listed = ask(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
            .await
            .unwrap();
        assert_eq!(
            listed["result"]["tools"],
            json!([
                {"name": "echo", "description": "Echo", "inputSchema": {"type": "object", "properties": {}}},
                {"name": "close", "description": "", "inputSchema": {"type": "object"}}
            ])
        );
    }

    #[tokio::test]
    async fn calls_go_through_the_gateway() {
        let fake = Fake::default();
        let request = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"x": 1}}});
        let done = answer(request.to_string().as_bytes(), &fake).await.unwrap();
        assert_eq!(
            done["result"],
            json!({"content": [{"type": "text", "text": "{\"x\":1}"}]})
        );
        let request = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "echo"}});
        answer(request.to_string().as_bytes(), &fake).await.unwrap();
        assert_eq!(fake.calls.lock().unwrap()[1].1, json!({}));
    }

    #[tokio::test]
    async fn a_gated_call_is_a_result_saying_approval_is_pending() {
        let gated = ask(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "close", "arguments": {}}}))
        .await
        .unwrap();
        let text = gated["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.starts_with("Approval pending") && text.contains("int_1"),
            "{text}"
        );
        assert!(gated["result"].get("isError").is_none());
    }

    #[tokio::test]
    async fn errors_carry_their_codes() {
        let code = |answer: Option<Value>| answer.unwrap()["error"]["code"].as_i64().unwrap();
        let refused = ask(json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
            "params": {"name": "drop_database"}}))
        .await;
        assert_eq!(code(refused.clone()), GATEWAY_ERROR);
        assert!(refused.unwrap()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not available"));
        let no_name = ask(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {}}));
        assert_eq!(code(no_name.await), INVALID_PARAMS);
        let bad_arguments = ask(json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
            "params": {"name": "echo", "arguments": [1]}}));
        assert_eq!(code(bad_arguments.await), INVALID_PARAMS);
        let unknown = ask(json!({"jsonrpc": "2.0", "id": 9, "method": "resources/list"}));
        assert_eq!(code(unknown.await), METHOD_NOT_FOUND);
        let parse = answer(b"{nope", &Fake::default()).await.unwrap();
        assert_eq!(parse["error"]["code"], PARSE_ERROR);
        assert_eq!(parse["id"], Value::Null);
        assert_eq!(code(ask(json!([1])).await), INVALID_REQUEST);
    }

    #[tokio::test]
    async fn notifications_and_responses_get_no_answer() {
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert!(ask(initialized).await.is_none());
        assert!(ask(json!({"jsonrpc": "2.0", "method": "tools/call"}))
            .await
            .is_none());
        assert!(ask(json!({"jsonrpc": "2.0", "id": 1, "result": {}}))
            .await
            .is_none());
    }
}
