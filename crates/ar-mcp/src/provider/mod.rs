//! Connections to an app's deployment-owned MCP providers (`apps[].mcp_providers`): the
//! simple JSON API (`http`: `GET {url}/tools`, `POST {url}/call`), MCP over streamable HTTP,
//! and MCP over the stdio of a local process. One [`ProviderConnection`] per provider, shared
//! by every run of the app; the catalogue above it (refresh, naming, health) is `ar-tools`'.

mod http_api;
mod mcp;
mod stdio;
mod streamable;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use ar_core::mcp::McpError;
use ar_core::secret::Secret;
use ar_core::tool::ToolOutput;
use async_trait::async_trait;
use url::Url;

pub use http_api::HttpApiProvider;
pub use stdio::StdioProvider;
pub use streamable::StreamableHttpProvider;

/// The default bound on one provider request (a listing or a call).
pub const DEFAULT_PROVIDER_TIMEOUT: Duration = Duration::from_secs(300);

/// How the runtime reaches one provider.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderSpec {
    /// The simple JSON API of the original SDKs' provider routers.
    HttpApi { url: Url, token: Option<Secret> },
    /// MCP JSON-RPC over streamable HTTP.
    StreamableHttp { url: Url, token: Option<Secret> },
    /// MCP JSON-RPC over the stdio of a local process (started on first use, started again
    /// when it has exited, killed with its process group when the connection closes).
    Stdio {
        command: String,
        args: Vec<String>,
        /// Environment added to the process's allow-listed one (values may be credentials).
        env: BTreeMap<String, Secret>,
        workdir: PathBuf,
    },
}

/// A tool a provider advertises, as it advertises it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderTool {
    pub name: String,
    pub description: String,
    /// Empty when the provider gives none.
    pub category: String,
    /// A JSON Schema object (`{"type":"object","properties":{}}` when the provider gives none).
    pub input_schema: serde_json::Value,
    pub mutating: bool,
    /// The provider's risk level string, if any (`read`, `routine_mutation`, …); the catalogue
    /// parses it.
    pub risk_level: Option<String>,
    /// Target types the tool serves (empty = all).
    pub supported_target_types: Vec<String>,
}

/// One open connection to a provider.
#[async_trait]
pub trait ProviderConnection: Send + Sync + std::fmt::Debug + 'static {
    /// Every tool the provider advertises (all pages).
    async fn list_tools(&self) -> Result<Vec<ProviderTool>, McpError>;
    /// Calls `tool` (its name as the provider advertises it). `meta` is the call's context
    /// (`CommandExecutionContext` JSON: app, run, agent, actor, workspace, target); the `http`
    /// transport sends it, the MCP transports send it as the request's `_meta`. A tool that
    /// reports an error is an `is_error` output, not an `Err`. The output is bounded like a
    /// run MCP result (`crate::output::MAX_OUTPUT_BYTES`).
    async fn call_tool(
        &self,
        tool: &str,
        input: serde_json::Value,
        meta: &serde_json::Value,
    ) -> Result<ToolOutput, McpError>;
    /// Ends the session (and the process of a stdio provider).
    async fn close(&self);
}

/// Opens (lazily: nothing is connected before the first request) a connection for `spec`,
/// with `timeout` bounding every request.
pub fn connect(
    spec: ProviderSpec,
    timeout: Duration,
) -> Result<Box<dyn ProviderConnection>, McpError> {
    Ok(match spec {
        ProviderSpec::HttpApi { url, token } => {
            Box::new(HttpApiProvider::new(url, token, timeout)?)
        }
        ProviderSpec::StreamableHttp { url, token } => {
            Box::new(StreamableHttpProvider::new(url, token, timeout)?)
        }
        ProviderSpec::Stdio {
            command,
            args,
            env,
            workdir,
        } => Box::new(StdioProvider::new(command, args, env, workdir, timeout)),
    })
}
