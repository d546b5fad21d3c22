//! One MCP session with one server for one run ([`Session`]): rmcp's client over
//! [`SessionHttp`], opened with the MCP handshake, re-initialised by rmcp when the server
//! forgets it, ended with a DELETE when closed.

use std::sync::Arc;
use std::time::Duration;

use ar_core::mcp::{McpEndpoint, McpError};
use parking_lot::RwLock;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{serve_client, ClientInitializeError, Peer, RunningService};
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use rmcp::RoleClient;

use crate::errors;
use crate::http::{CredentialHeaders, SessionHttp};
use crate::policy::McpPolicy;

/// How often a broken SSE answer is resumed before the request fails.
const SSE_RESUMES: usize = 2;

/// An open session.
pub(crate) struct Session {
    /// The URL it was opened for (a changed URL opens a new session).
    pub(crate) url: String,
    pub(crate) peer: Peer<RoleClient>,
    credential: Arc<RwLock<CredentialHeaders>>,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, ClientConfig>>>,
}

impl Session {
    /// Checks the URL, then opens a session with the MCP handshake (`initialize` and the
    /// `initialized` notification), bounded by the connect timeout.
    pub(crate) async fn open(
        http: &reqwest::Client,
        policy: &McpPolicy,
        endpoint: &McpEndpoint,
    ) -> Result<Session, McpError> {
        policy.check_url(&endpoint.url)?;
        let credential = Arc::new(RwLock::new(CredentialHeaders::from_endpoint(
            &endpoint.headers,
        )?));
        let client = SessionHttp {
            http: http.clone(),
            credential: credential.clone(),
            max_response_bytes: policy.max_response_bytes,
        };
        let transport =
            StreamableHttpClientTransport::with_client(client, transport_config(endpoint, policy));
        let handshake = serve_client(client_info(), transport);
        let service = tokio::time::timeout(policy.connect_timeout, handshake)
            .await
            .map_err(|_| {
                McpError::Timeout(format!(
                    "the MCP handshake with {} did not finish within {}",
                    endpoint.url,
                    seconds(policy.connect_timeout)
                ))
            })?
            .map_err(handshake_error)?;
        Ok(Session {
            url: endpoint.url.clone(),
            peer: service.peer().clone(),
            credential,
            service: tokio::sync::Mutex::new(Some(service)),
        })
    }

    /// Takes the endpoint's current credential for the requests to come.
    pub(crate) fn set_credential(&self, endpoint: &McpEndpoint) -> Result<(), McpError> {
        *self.credential.write() = CredentialHeaders::from_endpoint(&endpoint.headers)?;
        Ok(())
    }

    /// Ends the session: rmcp's worker sends the DELETE (bounded to a few seconds) as it stops.
    pub(crate) async fn close(&self) {
        let service = self.service.lock().await.take();
        if let Some(service) = service {
            if let Err(err) = service.cancel().await {
                tracing::debug!(url = %self.url, "closing an MCP session failed: {err}");
            }
        }
    }
}

fn transport_config(
    endpoint: &McpEndpoint,
    policy: &McpPolicy,
) -> StreamableHttpClientTransportConfig {
    let mut retry = ExponentialBackoff::default();
    retry.max_times = Some(SSE_RESUMES);
    retry.max_delay = Some(Duration::from_secs(2));
    let mut config = StreamableHttpClientTransportConfig::with_uri(endpoint.url.as_str())
        .reinit_on_expired_session(true)
        .max_json_response_size(policy.max_response_bytes)
        .max_sse_event_size(policy.max_response_bytes)
        .session_recovery_timeout(policy.connect_timeout);
    config.retry_config = Arc::new(retry);
    config
}

/// Who the runtime says it is in the MCP handshake (it offers no client capabilities).
pub(crate) fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("agent-runtime", env!("CARGO_PKG_VERSION")),
    )
}

/// What a failed MCP handshake means.
pub(crate) fn handshake_error(err: ClientInitializeError) -> McpError {
    match err {
        ClientInitializeError::TransportError { error, context } => {
            errors::from_transport(&error, &format!("MCP handshake ({context})"))
        }
        ClientInitializeError::JsonRpcError(error) => errors::from_error_answer(&error)
            .unwrap_or_else(|| {
                McpError::Protocol(format!(
                    "the server refused the MCP handshake: {} ({})",
                    error.message, error.code.0
                ))
            }),
        ClientInitializeError::ConnectionClosed(context) => McpError::Transport(format!(
            "the connection closed during the MCP handshake ({context})"
        )),
        other => McpError::Protocol(format!("the MCP handshake failed: {other}")),
    }
}

pub(crate) fn seconds(duration: Duration) -> String {
    format!("{:.1} s", duration.as_secs_f64())
}
