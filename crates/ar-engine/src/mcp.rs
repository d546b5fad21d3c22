//! Run-scoped MCP servers in the engine: admission's checks of `mcp_servers` (the contract's
//! rules, each refusal a 400 naming the field), their credentials sealed with the run, and the
//! endpoint a call goes to (the sealed credential opened into headers).

use std::collections::HashSet;

use ar_core::mcp::{
    credential_secret_kind, McpAccess, McpEndpoint, McpError, McpServer, McpToolGrant, McpToolInfo,
};
use ar_core::secret::Secret;
use ar_core::store::SecretChange;
use ar_core::tool::{ToolDefinition, ToolOutput};
use ar_core::Run;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use ar_core::event::{PauseAuthentication, RunEvent, RunPaused};
use ar_core::records::interaction_kind;
use ar_core::PauseReason;

use crate::engine::{Decide, Engine};
use crate::error::{EngineError, EngineResult};
use crate::records::{interaction, mark_paused_with};
use crate::sealer::Sealer;
use crate::transcript::LoopState;

use ar_core::mcp::{
    FORBIDDEN_CREDENTIAL_HEADERS, MAX_CREDENTIAL_BYTES, MAX_SERVERS_PER_RUN as MAX_SERVERS,
    MAX_TOOLS_PER_SERVER as MAX_TOOLS,
};

/// The original's answer to a credential rotation on an ended run.
const MCP_RUN_TERMINAL: &str = "agent run is terminal";

/// One `mcp_servers` entry of a start-run request (after wire decoding).
#[derive(Debug, Clone, Default)]
pub struct McpServerRequest {
    pub server_id: String,
    pub server_name: String,
    pub transport: String,
    pub url: String,
    /// `(name, access)` as sent.
    pub tools: Vec<(String, String)>,
    pub credential: Option<McpCredentialRequest>,
    /// Skills delivered with the server.
    pub skills: Vec<ar_core::agent::SkillRef>,
}

/// A server credential as sent (write-only: never returned, logged or evented).
#[derive(Debug, Clone, Default)]
pub struct McpCredentialRequest {
    /// `bearer_token` or `headers`.
    pub credential_type: String,
    pub access_token: Secret,
    pub headers: Vec<(String, Secret)>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// What is sealed for a server: the headers to send, and until when.
#[derive(Serialize, Deserialize)]
struct SealedCredential {
    headers: Vec<(String, String)>,
    #[serde(default)]
    expires_at: Option<DateTime<Utc>>,
}

/// How run MCP is configured on this runtime (admission checks `allow_http`; the MCP client
/// enforces the rest at connect time; capabilities report them all).
#[derive(Debug, Clone, Default)]
pub struct McpSettings {
    /// Plain-HTTP server URLs are accepted (`AGENT_RUNTIME_MCP_ALLOW_HTTP`).
    pub allow_http: bool,
    /// Private and loopback destinations are accepted.
    pub allow_private_networks: bool,
    /// The only hosts allowed (exact or `*.suffix`); empty: any.
    pub allowed_hosts: Vec<String>,
}

fn invalid(at: &str, problem: impl std::fmt::Display) -> EngineError {
    EngineError::invalid(format!("{at}: {problem}"))
}

fn matches_pattern(value: &str, extra: &[char]) -> bool {
    let mut chars = value.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || extra.contains(&c))
}

/// Checks every server of a start-run request in order; the first problem is a 400 naming
/// the field. Returns the servers as the run keeps them.
pub(crate) fn check_servers(
    requests: &[McpServerRequest],
    settings: &McpSettings,
    now: DateTime<Utc>,
) -> EngineResult<Vec<McpServer>> {
    if requests.len() > MAX_SERVERS {
        return Err(EngineError::invalid(format!(
            "mcp_servers: at most {MAX_SERVERS} servers per run"
        )));
    }
    let mut ids = HashSet::new();
    let mut aliases = HashSet::new();
    let mut servers = Vec::with_capacity(requests.len());
    for (index, request) in requests.iter().enumerate() {
        let at = format!("mcp_servers[{index}]");
        let server = check_server(&at, request, settings, now)?;
        if !ids.insert(server.server_id.clone()) {
            return Err(invalid(
                &format!("{at}.server_id"),
                format!("duplicate server_id {:?}", server.server_id),
            ));
        }
        for grant in &server.tools {
            if !aliases.insert(server.alias(&grant.name)) {
                return Err(invalid(
                    &format!("{at}.tools"),
                    format!(
                        "tool alias {} is not unique in the run",
                        server.alias(&grant.name)
                    ),
                ));
            }
        }
        servers.push(server);
    }
    Ok(servers)
}

fn check_server(
    at: &str,
    request: &McpServerRequest,
    settings: &McpSettings,
    now: DateTime<Utc>,
) -> EngineResult<McpServer> {
    let server_id = request.server_id.trim();
    if server_id.is_empty()
        || server_id.len() > 128
        || !matches_pattern(server_id, &['_', '.', ':', '-'])
    {
        return Err(invalid(
            &format!("{at}.server_id"),
            "must be 1 to 128 characters matching ^[A-Za-z0-9][A-Za-z0-9_.:-]*$",
        ));
    }
    let server_name = request.server_name.trim();
    if server_name.is_empty()
        || server_name.len() > 64
        || !matches_pattern(server_name, &['_', '-'])
    {
        return Err(invalid(
            &format!("{at}.server_name"),
            "must be 1 to 64 characters matching ^[A-Za-z0-9][A-Za-z0-9_-]*$",
        ));
    }
    if request.transport.trim() != "streamable_http" {
        return Err(invalid(
            &format!("{at}.transport"),
            format!("must be streamable_http, not {:?}", request.transport),
        ));
    }
    let url = check_url(&format!("{at}.url"), request.url.trim(), settings)?;
    let tools = check_tools(&format!("{at}.tools"), &request.tools)?;
    if let Some(credential) = &request.credential {
        sealed_form(&format!("{at}.credential"), credential, now)?;
    }
    Ok(McpServer {
        server_id: server_id.to_string(),
        server_name: server_name.to_string(),
        url,
        tools,
        has_credential: request.credential.is_some(),
        skills: request.skills.clone(),
    })
}

/// The server URL in the form the contract requires (see [`ar_core::mcp::check_server_url`]).
fn check_url(at: &str, raw: &str, settings: &McpSettings) -> EngineResult<String> {
    ar_core::mcp::check_server_url(raw, settings.allow_http)
        .map(|url| url.to_string())
        .map_err(|problem| invalid(at, problem))
}

fn check_tools(at: &str, tools: &[(String, String)]) -> EngineResult<Vec<McpToolGrant>> {
    if tools.is_empty() || tools.len() > MAX_TOOLS {
        return Err(invalid(at, format!("must name 1 to {MAX_TOOLS} tools")));
    }
    let mut seen = HashSet::new();
    let mut grants = Vec::with_capacity(tools.len());
    for (index, (name, access)) in tools.iter().enumerate() {
        let at = format!("{at}[{index}]");
        let name = name.trim();
        if name.is_empty() || name.len() > 128 || !matches_pattern(name, &['_', '.', '-']) {
            return Err(invalid(
                &format!("{at}.name"),
                "must be 1 to 128 characters matching ^[A-Za-z0-9][A-Za-z0-9_.-]*$",
            ));
        }
        if !seen.insert(name.to_string()) {
            return Err(invalid(
                &format!("{at}.name"),
                format!("duplicate tool {name:?}"),
            ));
        }
        let access = McpAccess::parse(access.trim()).ok_or_else(|| {
            invalid(
                &format!("{at}.access"),
                format!("must be read or write, not {access:?}"),
            )
        })?;
        grants.push(McpToolGrant {
            name: name.to_string(),
            access,
        });
    }
    Ok(grants)
}

/// The credential as it is sealed: the headers it sends, checked against the contract.
fn sealed_form(
    at: &str,
    credential: &McpCredentialRequest,
    now: DateTime<Utc>,
) -> EngineResult<SealedCredential> {
    if credential.expires_at.is_some_and(|expires| expires <= now) {
        return Err(invalid(&format!("{at}.expires_at"), "is in the past"));
    }
    let headers = match credential.credential_type.trim() {
        "bearer_token" if credential.access_token.expose().trim().is_empty() => {
            return Err(invalid(
                &format!("{at}.access_token"),
                "is required for type bearer_token",
            ))
        }
        "bearer_token" => vec![(
            "Authorization".to_string(),
            format!("Bearer {}", credential.access_token.expose().trim()),
        )],
        "headers" => credential_headers(at, &credential.headers)?,
        other => {
            return Err(invalid(
                &format!("{at}.type"),
                format!("must be bearer_token or headers, not {other:?}"),
            ))
        }
    };
    let sealed = SealedCredential {
        headers,
        expires_at: credential.expires_at,
    };
    let size = serde_json::to_vec(&sealed).map_or(usize::MAX, |bytes| bytes.len());
    if size > MAX_CREDENTIAL_BYTES {
        return Err(invalid(at, format!("is over {MAX_CREDENTIAL_BYTES} bytes")));
    }
    Ok(sealed)
}

fn credential_headers(
    at: &str,
    headers: &[(String, Secret)],
) -> EngineResult<Vec<(String, String)>> {
    if headers.is_empty() {
        return Err(invalid(
            &format!("{at}.headers"),
            "are required for type headers",
        ));
    }
    let mut out = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        let name = name.trim();
        let valid_name = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !valid_name {
            return Err(invalid(
                &format!("{at}.headers"),
                format!("{name:?} is not a header name"),
            ));
        }
        if FORBIDDEN_CREDENTIAL_HEADERS
            .iter()
            .any(|forbidden| forbidden.eq_ignore_ascii_case(name))
        {
            return Err(invalid(
                &format!("{at}.headers"),
                format!("{name} may not be set by a credential"),
            ));
        }
        if value
            .expose()
            .bytes()
            .any(|b| b == b'\r' || b == b'\n' || b == 0)
        {
            return Err(invalid(
                &format!("{at}.headers"),
                format!("the value of {name} is not a header value"),
            ));
        }
        out.push((name.to_string(), value.expose().to_string()));
    }
    Ok(out)
}

/// The sealed credentials of `requests` for run `run_id` of `app_id` (in the servers' order).
pub(crate) fn seal_credentials(
    sealer: &Sealer,
    (app_id, run_id): (&str, &str),
    requests: &[McpServerRequest],
    now: DateTime<Utc>,
) -> EngineResult<Vec<SecretChange>> {
    let mut changes = Vec::new();
    for (index, request) in requests.iter().enumerate() {
        let Some(credential) = &request.credential else {
            continue;
        };
        let at = format!("mcp_servers[{index}].credential");
        let sealed = sealed_form(&at, credential, now)?;
        changes.push(seal_one(
            sealer,
            (app_id, run_id),
            request.server_id.trim(),
            &sealed,
        )?);
    }
    Ok(changes)
}

fn seal_one(
    sealer: &Sealer,
    (app_id, run_id): (&str, &str),
    server_id: &str,
    sealed: &SealedCredential,
) -> EngineResult<SecretChange> {
    let kind = credential_secret_kind(server_id);
    let plaintext = serde_json::to_vec(sealed)
        .map_err(|error| EngineError::internal("encoding an MCP credential", error))?;
    let ciphertext = sealer
        .seal(app_id, run_id, &kind, &plaintext)
        .map_err(|error| EngineError::internal("sealing an MCP credential", error))?;
    Ok(SecretChange::Put { kind, ciphertext })
}

/// Why a server cannot be reached as the run's credential stands.
#[derive(Debug)]
pub(crate) enum EndpointProblem {
    /// The credential is gone or expired: the run pauses for authentication.
    Authentication(String),
    /// Our fault (no key, unreadable credential).
    Internal(String),
}

impl Engine {
    /// The endpoint a call to `server` goes to, with its credential opened into headers.
    pub(crate) async fn mcp_endpoint(
        &self,
        run: &Run,
        server: &McpServer,
    ) -> Result<McpEndpoint, EndpointProblem> {
        let mut endpoint = McpEndpoint {
            run_id: run.id.clone(),
            server_id: server.server_id.clone(),
            url: server.url.clone(),
            headers: Vec::new(),
        };
        if !server.has_credential {
            return Ok(endpoint);
        }
        let kind = credential_secret_kind(&server.server_id);
        let sealed = self
            .deps()
            .store
            .get_secret(&run.id, &kind)
            .await
            .map_err(|error| EndpointProblem::Internal(error.to_string()))?
            .ok_or_else(|| {
                EndpointProblem::Authentication("the server's credential was removed".to_string())
            })?;
        let sealer = self.deps().mcp_sealer.as_ref().ok_or_else(|| {
            EndpointProblem::Internal("MCP credentials cannot be opened: no encryption key".into())
        })?;
        let plaintext = sealer
            .open(&run.app_id, &run.id, &kind, &sealed)
            .map_err(|error| EndpointProblem::Internal(error.to_string()))?;
        let credential: SealedCredential = serde_json::from_slice(&plaintext).map_err(|_| {
            EndpointProblem::Internal("stored MCP credential is unreadable".to_string())
        })?;
        if credential
            .expires_at
            .is_some_and(|expires| expires <= self.now())
        {
            return Err(EndpointProblem::Authentication(
                "the server's credential expired".to_string(),
            ));
        }
        endpoint.headers = credential
            .headers
            .into_iter()
            .map(|(name, value)| (name, Secret::new(value)))
            .collect();
        // A server that echoes its credential must not put it in the run's records.
        for (_, value) in &endpoint.headers {
            self.hold_run_secret(&run.id, value);
            if let Some(token) = value.expose().strip_prefix("Bearer ") {
                self.hold_run_secret(&run.id, &Secret::new(token));
            }
        }
        Ok(endpoint)
    }
}

/// What discovering a run's MCP tools came to.
pub(crate) enum Discovery {
    /// One definition per granted tool, named by its alias.
    Tools(Vec<ToolDefinition>),
    /// A server refused the credential, or it expired: the run pauses for authentication.
    NeedsAuthentication { server: McpServer, reason: String },
    /// A server cannot serve the run (unreachable, refused, a granted tool not advertised).
    Failed(String),
}

/// Why one MCP call did not produce a tool output.
pub(crate) enum CallProblem {
    /// The credential was refused or expired: the call waits for a new one.
    Authentication { server: McpServer, reason: String },
}

/// The definition the model sees for a granted tool the server advertises.
fn definition(server: &McpServer, grant: &McpToolGrant, info: &McpToolInfo) -> ToolDefinition {
    ToolDefinition {
        name: server.alias(&grant.name),
        description: info.description.clone(),
        category: "mcp".to_string(),
        input_schema: info.input_schema.clone(),
        mutating: grant.access == McpAccess::Write,
        risk_level: None,
        supported_target_types: Vec::new(),
    }
}

impl Engine {
    /// The tools the run's MCP servers add: every granted tool, checked against what its server
    /// advertises.
    pub(crate) async fn discover_mcp_tools(&self, run: &Run) -> Discovery {
        let servers = &run.input.mcp_servers;
        let Some(client) = self.deps().mcp.as_ref().filter(|_| !servers.is_empty()) else {
            return Discovery::Tools(Vec::new());
        };
        let mut tools = Vec::new();
        for server in servers {
            let endpoint = match self.mcp_endpoint(run, server).await {
                Ok(endpoint) => endpoint,
                Err(EndpointProblem::Authentication(reason)) => {
                    let server = server.clone();
                    return Discovery::NeedsAuthentication { server, reason };
                }
                Err(EndpointProblem::Internal(reason)) => return Discovery::Failed(reason),
            };
            let advertised = match client.list_tools(&endpoint).await {
                Ok(advertised) => advertised,
                Err(McpError::Unauthorized(reason)) => {
                    let server = server.clone();
                    return Discovery::NeedsAuthentication { server, reason };
                }
                Err(error) => {
                    return Discovery::Failed(format!(
                        "mcp server {} could not list its tools: {error}",
                        server.server_id
                    ))
                }
            };
            for grant in &server.tools {
                let Some(info) = advertised.iter().find(|info| info.name == grant.name) else {
                    return Discovery::Failed(format!(
                        "mcp server {} does not advertise tool {:?}",
                        server.server_id, grant.name
                    ));
                };
                tools.push(definition(server, grant, info));
            }
        }
        Discovery::Tools(tools)
    }

    /// Calls `alias` on the run's MCP server that grants it; `None` when no server of the run
    /// grants it (the tool is not an MCP tool). Transport and protocol failures come back as
    /// error outputs the model can read.
    pub(crate) async fn call_mcp_tool(
        &self,
        run: &Run,
        alias: &str,
        input: serde_json::Value,
    ) -> Option<Result<ToolOutput, CallProblem>> {
        let (server, grant) = run
            .input
            .mcp_servers
            .iter()
            .find_map(|server| server.grant_of(alias).map(|grant| (server, grant)))?;
        let Some(client) = self.deps().mcp.as_ref() else {
            return Some(Ok(ToolOutput::error(
                "run-scoped MCP is not configured here",
            )));
        };
        let auth = |reason: String| CallProblem::Authentication {
            server: server.clone(),
            reason,
        };
        let endpoint = match self.mcp_endpoint(run, server).await {
            Ok(endpoint) => endpoint,
            Err(EndpointProblem::Authentication(reason)) => return Some(Err(auth(reason))),
            Err(EndpointProblem::Internal(reason)) => return Some(Ok(ToolOutput::error(reason))),
        };
        Some(
            match client.call_tool(&endpoint, &grant.name, input).await {
                Ok(output) => Ok(output),
                Err(McpError::Unauthorized(reason)) => Err(auth(reason)),
                Err(error) => Ok(ToolOutput::error(error.to_string())),
            },
        )
    }
}

impl Engine {
    /// Pauses the run until the host rotates `server`'s credential: an `authentication`
    /// interaction `{provider: "mcp", server_id, server_name, reason}` and `run.paused` with
    /// the same, at a checkpoint of `state`.
    pub(crate) async fn pause_for_mcp_authentication(
        &self,
        run: &mut Run,
        state: &LoopState,
        server: &McpServer,
        reason: &str,
    ) -> EngineResult<()> {
        let now = self.now();
        let checkpoint = self.checkpoint(run, state);
        let authentication = PauseAuthentication {
            provider: "mcp".to_string(),
            server_id: server.server_id.clone(),
            server_name: server.server_name.clone(),
            reason: reason.to_string(),
        };
        self.commit_step(run, |run, change| {
            let payload = serde_json::json!({
                "provider": "mcp",
                "server_id": server.server_id,
                "server_name": server.server_name,
                "reason": reason,
            });
            change.interactions.push(interaction(
                run,
                interaction_kind::AUTHENTICATION,
                "MCP server authentication required",
                reason,
                payload,
                now,
            ));
            let mut paused = RunPaused::because(PauseReason::Authentication);
            paused.authentication = Some(authentication.clone());
            mark_paused_with(run, change, paused)?;
            change.checkpoint = Some(checkpoint.clone());
            Ok(())
        })
        .await?;
        Ok(())
    }
}

impl Engine {
    /// Whether runs may attach MCP servers here (a client and a credential key exist).
    pub fn run_mcp_supported(&self) -> bool {
        self.deps().mcp.is_some() && self.deps().mcp_sealer.is_some()
    }

    /// `PUT /v1/runs/{id}/mcp-servers/{server_id}/credential` (with the original's messages):
    /// seals a replacement credential
    /// for an attached server and emits `run.mcp_credential_updated` (never the secret).
    /// Returns the run as committed and the credential's expiry.
    pub async fn update_mcp_credential(
        &self,
        app_id: &str,
        run_id: &str,
        server_id: &str,
        credential: McpCredentialRequest,
    ) -> EngineResult<(Run, Option<DateTime<Utc>>)> {
        let run = self.load_run(app_id, run_id).await?;
        if run.is_terminal() {
            return Err(EngineError::invalid(MCP_RUN_TERMINAL));
        }
        if !run
            .input
            .mcp_servers
            .iter()
            .any(|s| s.server_id == server_id)
        {
            return Err(EngineError::invalid("run MCP server not found"));
        }
        let sealer = self.deps().mcp_sealer.clone().ok_or_else(|| {
            EngineError::invalid("run-scoped MCP credentials are not configured on this runtime")
        })?;
        let sealed = sealed_form("credential", &credential, self.now())?;
        let secret = seal_one(&sealer, (app_id, run_id), server_id, &sealed)?;
        let expires_at = credential.expires_at;
        let (run, _, ()) = self
            .transact(app_id, run_id, Some(run), |run, change| {
                if run.is_terminal() {
                    return Err(EngineError::invalid(MCP_RUN_TERMINAL));
                }
                for server in &mut run.input.mcp_servers {
                    if server.server_id == server_id {
                        server.has_credential = true;
                    }
                }
                change.secrets.push(secret.clone());
                change.events.push(RunEvent::RunMcpCredentialUpdated(
                    ar_core::event::RunMcpCredentialUpdated {
                        server_id: server_id.to_string(),
                        expires_at,
                    },
                ));
                Ok(Decide::Commit(()))
            })
            .await?;
        Ok((run, expires_at))
    }
}

#[cfg(test)]
mod tests;
