//! [`McpHttpClient`], the port [`McpClient`] over streamable HTTP: one session per run and
//! server, opened on first use, reused, opened anew once when its connection is gone, closed
//! with the run; every request bounded by the policy's timeouts.

use std::collections::HashMap;
use std::sync::Arc;

use ar_core::mcp::{McpClient, McpEndpoint, McpError, McpToolInfo};
use ar_core::tool::ToolOutput;
use async_trait::async_trait;
use rmcp::model::{CallToolRequestParams, Tool};

use crate::peer;
use crate::policy::McpPolicy;
use crate::resolve::PolicyResolver;
use crate::session::Session;

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

    /// Every tool the endpoint's server advertises (all pages), as rmcp reads them.
    pub(crate) async fn list_all_tools(
        &self,
        endpoint: &McpEndpoint,
    ) -> Result<Vec<Tool>, McpError> {
        peer::all_tools(|cursor| async move {
            let session = self.session(endpoint).await?;
            peer::list_page(&session.peer, cursor, self.policy.call_timeout).await
        })
        .await
    }

    /// Sends one `tools/call` on the endpoint's session.
    pub(crate) async fn call_with(
        &self,
        endpoint: &McpEndpoint,
        params: CallToolRequestParams,
    ) -> Result<ToolOutput, McpError> {
        let session = self.session(endpoint).await?;
        peer::call(&session.peer, params, self.policy.call_timeout).await
    }
}

#[async_trait]
impl McpClient for McpHttpClient {
    async fn list_tools(&self, endpoint: &McpEndpoint) -> Result<Vec<McpToolInfo>, McpError> {
        let tools = self.list_all_tools(endpoint).await?;
        Ok(tools
            .into_iter()
            .map(|tool| McpToolInfo {
                name: tool.name.to_string(),
                description: tool
                    .description
                    .map(|text| text.to_string())
                    .unwrap_or_default(),
                input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
            })
            .collect())
    }

    async fn call_tool(
        &self,
        endpoint: &McpEndpoint,
        tool: &str,
        arguments: serde_json::Value,
    ) -> Result<ToolOutput, McpError> {
        match peer::call_params(tool, arguments) {
            Ok(params) => self.call_with(endpoint, params).await,
            Err(refused) => Ok(refused),
        }
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
