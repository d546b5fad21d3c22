//! The host side of OAuth for remote MCP servers a host attaches to runs (the Go SDK's
//! `mcpauth`): discovery of the server's protected-resource and authorization-server metadata,
//! dynamic client registration, the authorization request with PKCE S256, the code exchange,
//! the refresh, and [`hash_state`] for storing the state. The host keeps what is its own: the
//! browser routes, the binding of a flow to its user and workspace, encrypted storage of the
//! verifier and refresh token, and the lock around a refresh.
//!
//! Every URL the flow meets must be `https` on the resource's host or an allowed host
//! (`exact` or `*.suffix`); a name is resolved by the client's own resolver, which hands the
//! connection only public addresses (loopback only with [`Options::insecure_localhost`], for
//! development and tests); redirects stay on one host, three at most. Errors say which step
//! failed and never carry a remote body, header or secret.

mod flow;
mod net;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

pub use flow::{Client, Options, TokenEndpoint};
pub use net::UrlValidator;

/// The most of a remote answer read.
const MAX_RESPONSE: usize = 1 << 20;
/// The longest URL accepted.
const MAX_URL: usize = 4096;
/// The longest client id accepted.
const MAX_CLIENT_ID: usize = 4096;
/// The longest client secret, refresh or access token accepted.
const MAX_SECRET: usize = 64 << 10;
/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// RFC 9728 protected-resource metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProtectedResourceMetadata {
    pub resource: String,
    pub authorization_servers: Vec<String>,
    pub scopes_supported: Vec<String>,
}

/// RFC 8414 authorization-server metadata (the fields the flow uses).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AuthorizationServerMetadata {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    /// Empty when the server offers none (or offers one on a host that is not allowed).
    pub registration_endpoint: String,
    pub scopes_supported: Vec<String>,
    pub code_challenge_methods_supported: Vec<String>,
    pub token_endpoint_auth_methods_supported: Vec<String>,
}

/// What discovery found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Configuration {
    pub resource: ProtectedResourceMetadata,
    pub authorization: AuthorizationServerMetadata,
}

/// A client registered dynamically (RFC 7591). The secret never shows in `Debug`.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClientRegistration {
    pub client_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub client_secret: String,
    /// `none`, `client_secret_basic` or `client_secret_post`.
    pub token_endpoint_auth_method: String,
}

impl std::fmt::Debug for ClientRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientRegistration")
            .field("client_id", &self.client_id)
            .field("client_secret", &crate::redacted(&self.client_secret))
            .field(
                "token_endpoint_auth_method",
                &self.token_endpoint_auth_method,
            )
            .finish()
    }
}

/// Tokens from the token endpoint. Neither token shows in `Debug`; send only the access
/// token to the runtime and keep the refresh token, encrypted, in the host.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Token {
    pub access_token: String,
    pub refresh_token: String,
    pub token_type: String,
    pub expires_in: i64,
    pub scope: String,
    /// Now plus `expires_in`, when the server said.
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("access_token", &crate::redacted(&self.access_token))
            .field("refresh_token", &crate::redacted(&self.refresh_token))
            .field("token_type", &self.token_type)
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish()
    }
}

/// Where to send the person, and what to keep until the callback: store
/// [`hash_state`]`(state)` and the verifier (encrypted) with the user, workspace and server
/// the flow is for, and consume them once at the callback.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthorizationRequest {
    pub url: String,
    pub state: String,
    pub verifier: String,
}

impl std::fmt::Debug for AuthorizationRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorizationRequest")
            .field("url", &"[contains the state]")
            .field("state", &ar_wire::REDACTED)
            .field("verifier", &ar_wire::REDACTED)
            .finish()
    }
}

/// A step of the flow failed: which one, the HTTP status when the server answered, and a
/// stable code (`metadata_unavailable`, `issuer_mismatch`, `pkce_s256_required`,
/// `registration_invalid`, `token_rejected`, …). Never a remote body or a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MCP OAuth {operation} failed{}{}", status_text(*.status), code_text(.code))]
pub struct RemoteError {
    pub operation: &'static str,
    pub status: Option<u16>,
    pub code: &'static str,
}

fn status_text(status: Option<u16>) -> String {
    status
        .map(|s| format!(" with HTTP {s}"))
        .unwrap_or_default()
}

fn code_text(code: &str) -> String {
    if code.is_empty() {
        String::new()
    } else {
        format!(" ({code})")
    }
}

impl RemoteError {
    fn new(operation: &'static str, code: &'static str) -> Self {
        Self {
            operation,
            status: None,
            code,
        }
    }

    /// Whether the server answered `status` (the SDK's `IsStatus`).
    pub fn is_status(&self, status: u16) -> bool {
        self.status == Some(status)
    }
}

/// The SHA-256 of an authorization request's state, hex: what a host stores to find the flow
/// at the callback without keeping the state itself.
pub fn hash_state(state: &str) -> String {
    hex::encode(sha2::Sha256::digest(state.as_bytes()))
}

/// The PKCE S256 challenge of `verifier`: base64url (no padding) of its SHA-256.
pub fn code_challenge(verifier: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_hash_and_challenge_are_the_standard_ones() {
        assert_eq!(
            hash_state("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        // RFC 7636, appendix B.
        assert_eq!(
            code_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn secrets_stay_out_of_debug() {
        let token = Token {
            access_token: "at-secret".into(),
            refresh_token: "rt-secret".into(),
            ..Default::default()
        };
        let registration = ClientRegistration {
            client_id: "c".into(),
            client_secret: "cs-secret".into(),
            ..Default::default()
        };
        let text = format!("{token:?} {registration:?}");
        assert!(!text.contains("secret\""), "{text}");
        assert!(
            !text.contains("at-secret")
                && !text.contains("rt-secret")
                && !text.contains("cs-secret")
        );
    }
}
