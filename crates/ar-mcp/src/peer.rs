//! The requests every MCP transport of this crate sends on an open rmcp session, whatever
//! carries it (streamable HTTP or a process's stdio): a bounded page of the tool list, the
//! whole list across pages, and a tool call whose server-side error answer is the tool's
//! failure rather than the client's.

use std::future::Future;
use std::time::Duration;

use ar_core::mcp::McpError;
use ar_core::tool::ToolOutput;
use rmcp::model::{CallToolRequestParams, ListToolsResult, PaginatedRequestParams, Tool};
use rmcp::service::{Peer, ServiceError};
use rmcp::RoleClient;

use crate::errors;
use crate::output::tool_output;
use crate::session::seconds;

/// The most pages of a tool list followed (a server that never stops paging is refused).
pub(crate) const MAX_TOOL_PAGES: usize = 100;

/// `request` bounded by `limit`.
pub(crate) async fn bounded<T>(
    limit: Duration,
    request: impl Future<Output = T>,
) -> Result<T, McpError> {
    tokio::time::timeout(limit, request).await.map_err(|_| {
        McpError::Timeout(format!(
            "the MCP server did not answer within {}",
            seconds(limit)
        ))
    })
}

/// One page of the tool list (`cursor`: the page after the one that gave it).
pub(crate) async fn list_page(
    peer: &Peer<RoleClient>,
    cursor: Option<String>,
    limit: Duration,
) -> Result<ListToolsResult, McpError> {
    let params = cursor.map(|cursor| PaginatedRequestParams::default().with_cursor(Some(cursor)));
    bounded(limit, peer.list_tools(params))
        .await?
        .map_err(|err| errors::from_service(&err, "listing the tools"))
}

/// Every tool, following the pages `page` fetches until one has no next cursor.
pub(crate) async fn all_tools<Page, Fetch>(mut page: Fetch) -> Result<Vec<Tool>, McpError>
where
    Fetch: FnMut(Option<String>) -> Page,
    Page: Future<Output = Result<ListToolsResult, McpError>>,
{
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_TOOL_PAGES {
        let listed = page(cursor.clone()).await?;
        tools.extend(listed.tools);
        match listed.next_cursor {
            Some(next) if cursor.as_ref() == Some(&next) => {
                return Err(McpError::Protocol(format!(
                    "the tool list repeats the page cursor {next:?}"
                )))
            }
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
    Err(McpError::Protocol(format!(
        "the tool list has more than {MAX_TOOL_PAGES} pages"
    )))
}

/// The request calling `tool` with `arguments` (an object, or null for none); any other
/// JSON is the tool's failure, told to the model without a request.
pub(crate) fn call_params(
    tool: &str,
    arguments: serde_json::Value,
) -> Result<CallToolRequestParams, ToolOutput> {
    let arguments = match arguments {
        serde_json::Value::Object(map) => Some(map),
        serde_json::Value::Null => None,
        _ => {
            return Err(ToolOutput::error(format!(
                "the arguments of the MCP tool {tool} must be a JSON object"
            )))
        }
    };
    let mut params = CallToolRequestParams::new(tool.to_string());
    params.arguments = arguments;
    Ok(params)
}

/// Calls the tool, bounded by `limit`.
pub(crate) async fn call(
    peer: &Peer<RoleClient>,
    params: CallToolRequestParams,
    limit: Duration,
) -> Result<ToolOutput, McpError> {
    let tool = params.name.to_string();
    match bounded(limit, peer.call_tool(params)).await? {
        Ok(result) => Ok(tool_output(result)),
        // The server's own error answer (an unknown tool, invalid arguments) is the
        // tool's failure: the model reads it and may correct the call.
        Err(ServiceError::McpError(error)) if errors::from_error_answer(&error).is_none() => {
            Ok(ToolOutput::error(format!(
                "MCP error {} from tool {tool}: {}",
                error.code.0, error.message
            )))
        }
        Err(err) => Err(errors::from_service(
            &err,
            &format!("calling the tool {tool}"),
        )),
    }
}
