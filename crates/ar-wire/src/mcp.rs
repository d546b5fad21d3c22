//! Run-scoped remote MCP servers: attachment (`RunMCPServer`), tool policy, request-only credentials, rotation.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::agents::SkillRef;
use crate::de::nd;

/// Attaches an app-managed remote MCP server to one run. Only ever sent in `StartRunRequest`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RunMCPServer {
    /// Host server id, unique per run.
    #[serde(deserialize_with = "nd")]
    pub server_id: String,
    /// Server name used in tool aliases `mcp__{server_name}__{tool}`.
    #[serde(deserialize_with = "nd")]
    pub server_name: String,
    /// Must be `streamable_http`; see [`transport`].
    #[serde(deserialize_with = "nd")]
    pub transport: String,
    /// HTTPS endpoint without userinfo, query or fragment.
    #[serde(deserialize_with = "nd")]
    pub url: String,
    /// Exact host-authorized tool policy (always written).
    #[serde(deserialize_with = "nd")]
    pub tools: Vec<RunMCPTool>,
    /// Skills delivered with this server.
    #[serde(deserialize_with = "nd", skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<SkillRef>,
    /// Request-only credential; never returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credential: Option<RunMCPCredential>,
}

/// One authorized tool on a run MCP server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RunMCPTool {
    /// Tool name as advertised by the server.
    #[serde(deserialize_with = "nd")]
    pub name: String,
    /// `read` or `write`; see [`tool_access`].
    #[serde(deserialize_with = "nd")]
    pub access: String,
}

/// Request-only credential for one run MCP server. `Debug` redacts secrets.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct RunMCPCredential {
    /// `bearer_token` or `headers`; see [`credential_type`].
    #[serde(rename = "type", deserialize_with = "nd")]
    pub credential_type: String,
    /// Secret bearer token (for `bearer_token`).
    #[serde(deserialize_with = "nd", skip_serializing_if = "String::is_empty")]
    pub access_token: String,
    /// Secret headers (for `headers`); see [`FORBIDDEN_CREDENTIAL_HEADERS`].
    #[serde(deserialize_with = "nd", skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Checked before execution.
    #[serde(
        with = "crate::time::rfc3339_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub expires_at: Option<DateTime<Utc>>,
}

impl fmt::Debug for RunMCPCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: BTreeMap<&str, &str> = self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), crate::redact(v)))
            .collect();
        f.debug_struct("RunMCPCredential")
            .field("credential_type", &self.credential_type)
            .field("access_token", &crate::redact(&self.access_token))
            .field("headers", &headers)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// Body of `PUT /v1/runs/{id}/mcp-servers/{server_id}/credential`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct UpdateRunMCPCredentialRequest {
    /// Replacement credential.
    #[serde(deserialize_with = "nd")]
    pub credential: RunMCPCredential,
}

/// Acknowledges an MCP credential rotation without echoing secrets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct RunMCPCredentialUpdate {
    /// Run id.
    #[serde(deserialize_with = "nd")]
    pub run_id: String,
    /// Server id.
    #[serde(deserialize_with = "nd")]
    pub server_id: String,
    /// New expiry.
    #[serde(
        with = "crate::time::rfc3339_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub expires_at: Option<DateTime<Utc>>,
    /// When the rotation was stored.
    #[serde(with = "crate::time::rfc3339", default = "crate::time::go_zero")]
    pub updated_at: DateTime<Utc>,
}

wire_values! {
    /// `RunMCPServer.transport`.
    pub mod transport {
        /// MCP streamable HTTP (the only supported transport).
        STREAMABLE_HTTP = "streamable_http",
    }
}

wire_values! {
    /// `RunMCPCredential.type`.
    pub mod credential_type {
        /// `Authorization: Bearer <access_token>`.
        BEARER_TOKEN = "bearer_token",
        /// Arbitrary secret headers.
        HEADERS = "headers",
    }
}

wire_values! {
    /// `RunMCPTool.access`.
    pub mod tool_access {
        /// Non-mutating.
        READ = "read",
        /// Mutating (goes through the approval gate).
        WRITE = "write",
    }
}

pub use ar_core::mcp::{
    FORBIDDEN_CREDENTIAL_HEADERS, MAX_CREDENTIAL_BYTES, MAX_SERVERS_PER_RUN, MAX_TOOLS_PER_SERVER,
};

/// `provider` value in an MCP `authentication` interaction payload.
pub const AUTH_PROVIDER_MCP: &str = "mcp";
