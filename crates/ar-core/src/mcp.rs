//! Run-scoped MCP servers: what a run keeps of each attached server (secret-free), the tool
//! names the model sees, and the port to an MCP client ([`McpClient`]).
//!
//! A host attaches remote MCP servers to one run (`mcp_servers` of start-run). The run stores
//! the server's id, name, URL and the tools the host authorized, with their access; the
//! credential is sealed apart from the run and handed to the client only for a call.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::secret::Secret;
use crate::tool::ToolOutput;

/// What a tool may do, as the host authorized it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpAccess {
    /// Non-mutating: runs without approval, in parallel with other reads.
    Read,
    /// Mutating: goes through the approval gate.
    Write,
}

impl McpAccess {
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "read" => Some(McpAccess::Read),
            "write" => Some(McpAccess::Write),
            _ => None,
        }
    }
}

/// One tool of a server the host authorized for the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpToolGrant {
    /// The tool's name as the server advertises it.
    pub name: String,
    pub access: McpAccess,
}

/// A remote MCP server attached to a run (no secrets: the credential is sealed apart).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpServer {
    pub server_id: String,
    pub server_name: String,
    pub url: String,
    pub tools: Vec<McpToolGrant>,
    /// Whether the host sent a credential (sealed under the run's secrets).
    #[serde(default)]
    pub has_credential: bool,
    /// Skills delivered with the server (resolved with the run's own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<crate::agent::SkillRef>,
}

impl McpServer {
    /// The name the model sees for `tool` of this server.
    pub fn alias(&self, tool: &str) -> String {
        tool_alias(&self.server_name, tool)
    }

    /// The granted tool behind an alias of this server.
    pub fn grant_of(&self, alias: &str) -> Option<&McpToolGrant> {
        self.tools
            .iter()
            .find(|grant| self.alias(&grant.name) == alias)
    }
}

/// Most MCP servers on one run.
pub const MAX_SERVERS_PER_RUN: usize = 16;
/// Most tools one run MCP server may grant.
pub const MAX_TOOLS_PER_SERVER: usize = 128;
/// Largest serialized run MCP credential, in bytes.
pub const MAX_CREDENTIAL_BYTES: usize = 64 * 1024;
/// Header names a `headers` credential may not set (compare case-insensitively).
pub const FORBIDDEN_CREDENTIAL_HEADERS: &[&str] = &[
    "Host",
    "Content-Length",
    "Mcp-Session-Id",
    "Mcp-Protocol-Version",
    "Origin",
];

/// Prefix of every run MCP tool alias.
pub const ALIAS_PREFIX: &str = "mcp__";

/// `mcp__{server_name}__{tool}`, each part sanitised: characters other than ASCII letters,
/// digits, `_` and `-` become `_`.
pub fn tool_alias(server_name: &str, tool: &str) -> String {
    format!(
        "{ALIAS_PREFIX}{}__{}",
        sanitize_name_part(server_name),
        sanitize_name_part(tool)
    )
}

/// A part of a tool name as models take it: characters other than ASCII letters, digits, `_`
/// and `-` become `_`.
pub fn sanitize_name_part(part: &str) -> String {
    part.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The form a run MCP server URL must have: absolute, `https` (or `http` when
/// `allow_http`), with a host and without user info, query or fragment. Admission and the
/// client at connect time both check it; the error text says which rule failed.
pub fn check_server_url(raw: &str, allow_http: bool) -> Result<url::Url, String> {
    let url =
        url::Url::parse(raw).map_err(|error| format!("the server URL is not valid: {error}"))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_http => {}
        "http" => {
            return Err(
                "plain http is not allowed (AGENT_RUNTIME_MCP_ALLOW_HTTP is off): use https".into(),
            )
        }
        other => return Err(format!("the URL scheme {other:?} is not http(s)")),
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("the server URL has no host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("the server URL must not carry user info".into());
    }
    if url.query().is_some() {
        return Err("the server URL must not carry a query".into());
    }
    if url.fragment().is_some() {
        return Err("the server URL must not carry a fragment".into());
    }
    Ok(url)
}

/// The sealed-secret kind under which a server's credential is stored with its run.
pub fn credential_secret_kind(server_id: &str) -> String {
    format!("mcp_credential:{server_id}")
}

/// Where and as whom one call goes: the server, and the headers its credential adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpEndpoint {
    pub run_id: String,
    pub server_id: String,
    pub url: String,
    /// `Authorization: Bearer …` or the credential's own headers (values are secrets).
    pub headers: Vec<(String, Secret)>,
}

/// A tool a server advertises.
#[derive(Debug, Clone, PartialEq)]
pub struct McpToolInfo {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// Why an MCP request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// The server refused the credential (401/403): the run pauses for authentication.
    #[error("MCP server refused the credential: {0}")]
    Unauthorized(String),
    /// The destination is not allowed (private network, plain HTTP, host not allowed,
    /// redirect to another host).
    #[error("MCP destination refused: {0}")]
    Refused(String),
    /// The server did not answer in time.
    #[error("MCP server timed out: {0}")]
    Timeout(String),
    /// The connection or the HTTP exchange failed.
    #[error("MCP transport error: {0}")]
    Transport(String),
    /// The server answered something that is not valid MCP (or over the size cap).
    #[error("MCP protocol error: {0}")]
    Protocol(String),
}

/// An MCP client: one session per run and server, opened on first use, reused across calls,
/// re-initialised when the server forgets it, and closed with the run.
#[async_trait]
pub trait McpClient: Send + Sync + 'static {
    /// The tools the server advertises.
    async fn list_tools(&self, endpoint: &McpEndpoint) -> Result<Vec<McpToolInfo>, McpError>;
    /// Calls one tool. A tool that reports an error is an `is_error` output, not an `Err`.
    async fn call_tool(
        &self,
        endpoint: &McpEndpoint,
        tool: &str,
        arguments: serde_json::Value,
    ) -> Result<ToolOutput, McpError>;
    /// Closes every session of the run (its owner stopped).
    async fn close_run(&self, run_id: &str);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_are_sanitised() {
        assert_eq!(tool_alias("docs", "search"), "mcp__docs__search");
        assert_eq!(tool_alias("my-docs", "get.page"), "mcp__my-docs__get_page");
        assert_eq!(tool_alias("a", "x:y/z"), "mcp__a__x_y_z");
    }

    #[test]
    fn a_grant_is_found_by_its_alias() {
        let server = McpServer {
            server_id: "srv".into(),
            server_name: "docs".into(),
            url: "https://mcp.example.com/mcp".into(),
            tools: vec![McpToolGrant {
                name: "get.page".into(),
                access: McpAccess::Write,
            }],
            skills: Vec::new(),
            has_credential: false,
        };
        let grant = server.grant_of("mcp__docs__get_page").expect("grant");
        assert_eq!(grant.access, McpAccess::Write);
        assert!(server.grant_of("mcp__docs__other").is_none());
    }
}
