//! The `streamable_http` provider transport: MCP over streamable HTTP to a provider the
//! operator configured, through the run client ([`McpHttpClient`]) with one fixed endpoint,
//! so the provider gets the same single long-lived session (opened on first request, reused,
//! opened anew once when its connection is gone), the same HTTP handling and the same result
//! bounds as a run's MCP server.

use std::time::Duration;

use ar_core::mcp::{McpClient, McpEndpoint, McpError};
use ar_core::secret::Secret;
use ar_core::tool::ToolOutput;
use async_trait::async_trait;
use serde_json::Value;
use url::Url;

use super::mcp::{provider_tool, with_context};
use super::{ProviderConnection, ProviderTool};
use crate::http::CredentialHeaders;
use crate::{peer, McpHttpClient, McpPolicy};

/// The run id of a provider's endpoint in its own client (the client holds only this one).
const PROVIDER_SESSION: &str = "app-provider";

/// A provider speaking MCP over streamable HTTP.
pub struct StreamableHttpProvider {
    client: McpHttpClient,
    endpoint: McpEndpoint,
}

impl std::fmt::Debug for StreamableHttpProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamableHttpProvider")
            .field("url", &self.endpoint.url)
            .field(
                "token",
                &(!self.endpoint.headers.is_empty()).then_some("[redacted]"),
            )
            .field("client", &self.client)
            .finish()
    }
}

impl StreamableHttpProvider {
    /// A provider at `url`, sent `Authorization: Bearer <token>` when there is a token. The
    /// operator configured it, so plain HTTP and private or loopback addresses are allowed;
    /// redirects are still never followed (one would hand the token to wherever it points).
    /// `timeout` bounds every request; the handshake has the connect timeout.
    pub fn new(url: Url, token: Option<Secret>, timeout: Duration) -> Result<Self, McpError> {
        let mut policy = McpPolicy::new(true, true, Vec::new());
        policy.call_timeout = timeout;
        policy.check_url(url.as_str())?;
        let headers = match token {
            Some(token) => vec![(
                "Authorization".to_string(),
                Secret::new(format!("Bearer {}", token.expose())),
            )],
            None => Vec::new(),
        };
        // Checked now, so a token that is no header value fails the configuration, not a call.
        CredentialHeaders::from_endpoint(&headers)?;
        let client = McpHttpClient::new(policy).map_err(|err| {
            let cause = std::error::Error::source(&err)
                .map(|cause| format!(": {cause}"))
                .unwrap_or_default();
            McpError::Transport(format!("{err}{cause}"))
        })?;
        Ok(StreamableHttpProvider {
            client,
            endpoint: McpEndpoint {
                run_id: PROVIDER_SESSION.to_string(),
                server_id: url.to_string(),
                url: url.to_string(),
                headers,
            },
        })
    }
}

#[async_trait]
impl ProviderConnection for StreamableHttpProvider {
    async fn list_tools(&self) -> Result<Vec<ProviderTool>, McpError> {
        let tools = self.client.list_all_tools(&self.endpoint).await?;
        Ok(tools.into_iter().map(provider_tool).collect())
    }

    async fn call_tool(
        &self,
        tool: &str,
        input: Value,
        meta: &Value,
    ) -> Result<ToolOutput, McpError> {
        match peer::call_params(tool, input) {
            Ok(params) => {
                self.client
                    .call_with(&self.endpoint, with_context(params, meta))
                    .await
            }
            Err(refused) => Ok(refused),
        }
    }

    async fn close(&self) {
        self.client.close_run(PROVIDER_SESSION).await;
    }
}
