//! [`McpHttpClient`], the port [`McpClient`] over streamable HTTP: one session per run and
//! server, opened on first use, reused, opened anew once when its connection is gone, closed
//! with the run; every request bounded by the policy's timeouts.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ar_core::mcp::{McpClient, McpEndpoint, McpError, McpToolInfo};
use ar_core::tool::ToolOutput;
use async_trait::async_trait;
use rmcp::model::{CallToolRequestParams, ListToolsResult, PaginatedRequestParams};
use rmcp::service::ServiceError;

use crate::errors;
use crate::output::tool_output;
use crate::policy::McpPolicy;
use crate::resolve::PolicyResolver;
use crate::session::{seconds, Session};

/// The most pages of a tool list followed (a server that never stops paging is refused).
const MAX_TOOL_PAGES: usize = 100;

/// The HTTP client could not be built (its TLS backend failed to start).
#[derive(Debug, thiserror::Error)]
#[error("cannot build the MCP HTTP client")]
pub struct ClientBuildError(#[source] reqwest::Error);

type SessionKey = (String, String);
/// A run's session with a server, opened by the first request that needs it (the lock makes
/// concurrent first requests wait for one handshake).
type SessionSlot = tokio::sync::Mutex<Option<Arc<Session>>>;

/// The streamable HTTP MCP client of run-scoped servers.
pub struct McpHttpClient {
    policy: McpPolicy,
    http: reqwest::Client,
    sessions: parking_lot::Mutex<HashMap<SessionKey, Arc<SessionSlot>>>,
}

impl std::fmt::Debug for McpHttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHttpClient")
            .field("policy", &self.policy)
            .field("sessions", &self.sessions.lock().len())
            .finish()
    }
}

impl McpHttpClient {
    /// A client enforcing `policy`. Redirects are never followed, no proxy is used (a proxy
    /// would resolve names where the policy cannot see the addresses), and every name is
    /// resolved through the policy.
    pub fn new(policy: McpPolicy) -> Result<Self, ClientBuildError> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(policy.connect_timeout)
            .dns_resolver(Arc::new(PolicyResolver::new(policy.clone())))
            .user_agent(concat!("agent-runtime-mcp/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(ClientBuildError)?;
        Ok(McpHttpClient {
            policy,
            http,
            sessions: parking_lot::Mutex::new(HashMap::new()),
        })
    }

    pub fn policy(&self) -> &McpPolicy {
        &self.policy
    }

    /// The open session for the endpoint, opened now if there is none.
    async fn session(&self, endpoint: &McpEndpoint) -> Result<Arc<Session>, McpError> {
        let key = (endpoint.run_id.clone(), endpoint.server_id.clone());
        let slot = self.sessions.lock().entry(key).or_default().clone();
        let mut open = slot.lock().await;
        if let Some(session) = open.as_ref() {
            // A session whose worker stopped (a fatal transport error) is replaced before
            // a request is sent, so no request is ever sent twice.
            if session.url == endpoint.url && !session.peer.is_transport_closed() {
                session.set_credential(endpoint)?;
                return Ok(session.clone());
            }
            session.close().await;
        }
        let session = Arc::new(Session::open(&self.http, &self.policy, endpoint).await?);
        *open = Some(session.clone());
        Ok(session)
    }

    async fn list_page(
        &self,
        endpoint: &McpEndpoint,
        cursor: Option<String>,
    ) -> Result<ListToolsResult, McpError> {
        let session = self.session(endpoint).await?;
        let params =
            cursor.map(|cursor| PaginatedRequestParams::default().with_cursor(Some(cursor)));
        self.bounded(session.peer.list_tools(params))
            .await?
            .map_err(|err| errors::from_service(&err, "listing the tools"))
    }

    async fn call_once(
        &self,
        endpoint: &McpEndpoint,
        params: CallToolRequestParams,
    ) -> Result<ToolOutput, McpError> {
        let session = self.session(endpoint).await?;
        let tool = params.name.to_string();
        match self.bounded(session.peer.call_tool(params)).await? {
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

    /// `request` bounded by the call timeout.
    async fn bounded<T>(
        &self,
        request: impl std::future::Future<Output = T>,
    ) -> Result<T, McpError> {
        let limit: Duration = self.policy.call_timeout;
        tokio::time::timeout(limit, request).await.map_err(|_| {
            McpError::Timeout(format!(
                "the MCP server did not answer within {}",
                seconds(limit)
            ))
        })
    }
}

#[async_trait]
impl McpClient for McpHttpClient {
    async fn list_tools(&self, endpoint: &McpEndpoint) -> Result<Vec<McpToolInfo>, McpError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_TOOL_PAGES {
            let page = self.list_page(endpoint, cursor.clone()).await?;
            tools.extend(page.tools.into_iter().map(|tool| {
                McpToolInfo {
                    name: tool.name.to_string(),
                    description: tool
                        .description
                        .map(|text| text.to_string())
                        .unwrap_or_default(),
                    input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
                }
            }));
            match page.next_cursor {
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

    async fn call_tool(
        &self,
        endpoint: &McpEndpoint,
        tool: &str,
        arguments: serde_json::Value,
    ) -> Result<ToolOutput, McpError> {
        let arguments = match arguments {
            serde_json::Value::Object(map) => Some(map),
            serde_json::Value::Null => None,
            _ => {
                return Ok(ToolOutput::error(format!(
                    "the arguments of the MCP tool {tool} must be a JSON object"
                )))
            }
        };
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = arguments;
        self.call_once(endpoint, params).await
    }

    async fn close_run(&self, run_id: &str) {
        let slots: Vec<Arc<SessionSlot>> = {
            let mut sessions = self.sessions.lock();
            let keys: Vec<SessionKey> = sessions
                .keys()
                .filter(|(run, _)| run == run_id)
                .cloned()
                .collect();
            keys.iter().filter_map(|key| sessions.remove(key)).collect()
        };
        for slot in slots {
            let session = slot.lock().await.take();
            if let Some(session) = session {
                session.close().await;
            }
        }
    }
}
