//! The flow's steps: discovery, registration, the authorization request, exchange, refresh.

use std::sync::Arc;

use base64::Engine as _;
use rand::RngCore as _;
use reqwest::{header, Url};
use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::net::{parse_url, redirect_policy, Policy, Resolver, UrlValidator};
use super::*;

/// How a [`Client`] is set up (the SDK's options).
#[derive(Clone, Default)]
pub struct Options {
    /// Hosts the flow may reach besides the resource's: exact names or `*.suffix`.
    pub allowed_hosts: Vec<String>,
    /// Plain `http` to loopback names and addresses: local development and tests only.
    pub insecure_localhost: bool,
    /// The application's own check of every URL, after the rules above (an egress policy).
    pub validator: Option<UrlValidator>,
}

/// The OAuth side of one remote MCP server (its resource URL).
#[derive(Clone)]
pub struct Client {
    resource: Url,
    policy: Policy,
    http: reqwest::Client,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("mcpauth::Client")
            .field("resource", &self.resource.as_str())
            .field("allowed_hosts", &self.policy.allowed)
            .finish()
    }
}

/// The token endpoint and the registered client a token request goes with. The secret never
/// shows in `Debug`.
#[derive(Clone, Default)]
pub struct TokenEndpoint {
    pub url: String,
    pub client_id: String,
    pub client_secret: String,
    /// `none` (or empty), `client_secret_basic` or `client_secret_post`.
    pub auth_method: String,
    /// The resource the token is for (RFC 8707).
    pub resource: String,
}

impl std::fmt::Debug for TokenEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenEndpoint")
            .field("url", &self.url)
            .field("client_id", &self.client_id)
            .field("client_secret", &crate::redacted(&self.client_secret))
            .field("auth_method", &self.auth_method)
            .field("resource", &self.resource)
            .finish()
    }
}

const CLIENT_AUTH_METHODS: [&str; 4] = ["", "none", "client_secret_basic", "client_secret_post"];

impl Client {
    /// The client of the MCP server at `resource_url` (`https`, no query).
    pub fn new(resource_url: &str, options: Options) -> Result<Client, RemoteError> {
        let invalid = RemoteError::new("resource validation", "resource_invalid");
        let resource = parse_url(resource_url, options.insecure_localhost)
            .filter(|url| url.query().is_none())
            .ok_or(invalid.clone())?;
        let mut allowed = vec![resource.host_str().unwrap_or_default().to_ascii_lowercase()];
        allowed.extend(
            options
                .allowed_hosts
                .iter()
                .map(|host| host.trim().trim_end_matches('.').to_ascii_lowercase()),
        );
        let policy = Policy {
            allowed,
            allow_local: options.insecure_localhost,
            validator: options.validator,
        };
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(TIMEOUT)
            .dns_resolver(Arc::new(Resolver {
                allow_local: options.insecure_localhost,
            }))
            .redirect(redirect_policy(policy.clone()))
            .build()
            .map_err(|_| invalid)?;
        Ok(Client {
            resource,
            policy,
            http,
        })
    }

    /// The resource URL.
    pub fn resource_url(&self) -> &str {
        self.resource.as_str()
    }

    /// Whether the flow may go to `raw`.
    pub fn validate_url(&self, raw: &str) -> bool {
        self.policy.check(raw).is_some()
    }

    /// Finds the resource's authorization server: the metadata URL of the resource's 401
    /// challenge, else the well-known protected-resource documents (path-specific first); then
    /// the server's RFC 8414 metadata (else its OpenID configuration), whose issuer must be the
    /// one named and which must offer S256 when it lists challenge methods.
    pub async fn discover(&self) -> Result<Configuration, RemoteError> {
        let mut resource = self.protected_resource().await?;
        if resource.resource.is_empty() {
            resource.resource = self.resource_url().to_string();
        }
        if !self.validate_url(&resource.resource) {
            return Err(RemoteError::new("resource validation", "metadata_invalid"));
        }
        let issuer = resource.authorization_servers[0].trim().to_string();
        let issuer_url = self.policy.check(&issuer).ok_or(RemoteError::new(
            "authorization-server validation",
            "metadata_invalid",
        ))?;
        let mut authorization = self.authorization_server(&issuer_url).await?;
        if authorization.issuer.is_empty() || !same_issuer(&issuer, &authorization.issuer) {
            return Err(RemoteError::new(
                "authorization-server discovery",
                "issuer_mismatch",
            ));
        }
        if !authorization.registration_endpoint.is_empty()
            && !self.validate_url(&authorization.registration_endpoint)
        {
            authorization.registration_endpoint.clear();
        }
        let methods = &authorization.code_challenge_methods_supported;
        if !methods.is_empty() && !methods.iter().any(|m| m.eq_ignore_ascii_case("S256")) {
            return Err(RemoteError::new("PKCE validation", "pkce_s256_required"));
        }
        Ok(Configuration {
            resource,
            authorization,
        })
    }

    async fn protected_resource(&self) -> Result<ProtectedResourceMetadata, RemoteError> {
        let mut candidates = Vec::new();
        if let Some(challenge) = self.challenge_metadata_url().await {
            candidates.push(challenge);
        }
        candidates.push(well_known(&self.resource, "oauth-protected-resource", true));
        candidates.push(well_known(
            &self.resource,
            "oauth-protected-resource",
            false,
        ));
        candidates.dedup();
        for candidate in candidates {
            if !self.validate_url(&candidate) {
                continue;
            }
            if let Ok(found) = self.get_json::<ProtectedResourceMetadata>(&candidate).await {
                if !found.authorization_servers.is_empty() {
                    return Ok(found);
                }
            }
        }
        Err(RemoteError::new(
            "protected-resource discovery",
            "metadata_unavailable",
        ))
    }

    async fn authorization_server(
        &self,
        issuer: &Url,
    ) -> Result<AuthorizationServerMetadata, RemoteError> {
        for kind in ["oauth-authorization-server", "openid-configuration"] {
            let candidate = well_known(issuer, kind, true);
            if !self.validate_url(&candidate) {
                continue;
            }
            if let Ok(found) = self
                .get_json::<AuthorizationServerMetadata>(&candidate)
                .await
            {
                if self.validate_url(&found.authorization_endpoint)
                    && self.validate_url(&found.token_endpoint)
                {
                    return Ok(found);
                }
            }
        }
        Err(RemoteError::new(
            "authorization-server discovery",
            "metadata_unavailable",
        ))
    }

    /// The `resource_metadata` of the `WWW-Authenticate` challenge the resource answers with.
    async fn challenge_metadata_url(&self) -> Option<String> {
        let response = self
            .http
            .get(self.resource.clone())
            .header(header::ACCEPT, "application/json, text/event-stream")
            .send()
            .await
            .ok()?;
        let challenge = response
            .headers()
            .get(header::WWW_AUTHENTICATE)?
            .to_str()
            .ok()?;
        let lower = challenge.to_ascii_lowercase();
        let start = lower.find("resource_metadata=\"")? + "resource_metadata=\"".len();
        let end = start + challenge[start..].find('"')?;
        Some(challenge[start..end].to_string())
    }

    /// Registers a public client (RFC 7591) for `redirect_uri` at `endpoint`.
    pub async fn register(
        &self,
        endpoint: &str,
        redirect_uri: &str,
    ) -> Result<ClientRegistration, RemoteError> {
        const STEP: &str = "dynamic client registration";
        let endpoint = self
            .policy
            .check(endpoint)
            .ok_or(RemoteError::new(STEP, "registration_unavailable"))?;
        if parse_url(redirect_uri, self.policy.allow_local).is_none() {
            return Err(RemoteError::new(STEP, "redirect_uri_invalid"));
        }
        let body = serde_json::json!({
            "client_name": "Agent Runtime host app",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        });
        let request = self.http.post(endpoint).json(&body);
        let mut registration: ClientRegistration = self.send_json(STEP, request).await?;
        registration.client_id = registration.client_id.trim().to_string();
        registration.token_endpoint_auth_method =
            registration.token_endpoint_auth_method.trim().to_string();
        if registration.token_endpoint_auth_method.is_empty() {
            registration.token_endpoint_auth_method = "none".into();
        }
        if registration.client_id.is_empty()
            || registration.client_id.len() > MAX_CLIENT_ID
            || registration.client_secret.len() > MAX_SECRET
        {
            return Err(RemoteError::new(STEP, "registration_invalid"));
        }
        if !CLIENT_AUTH_METHODS.contains(&registration.token_endpoint_auth_method.as_str()) {
            return Err(RemoteError::new(STEP, "client_auth_unsupported"));
        }
        if registration.token_endpoint_auth_method != "none"
            && registration.client_secret.is_empty()
        {
            return Err(RemoteError::new(STEP, "registration_invalid"));
        }
        Ok(registration)
    }

    /// The authorization URL with a fresh state and PKCE S256 verifier, for the resource.
    pub fn new_authorization_request(
        &self,
        configuration: &Configuration,
        client_id: &str,
        redirect_uri: &str,
        scopes: &[String],
    ) -> Result<AuthorizationRequest, RemoteError> {
        const STEP: &str = "authorization request";
        let mut url = self
            .policy
            .check(&configuration.authorization.authorization_endpoint)
            .ok_or(RemoteError::new(STEP, "metadata_invalid"))?;
        let client_id = client_id.trim();
        if client_id.is_empty() || client_id.len() > MAX_CLIENT_ID {
            return Err(RemoteError::new(STEP, "client_id_invalid"));
        }
        if parse_url(redirect_uri, self.policy.allow_local).is_none() {
            return Err(RemoteError::new(STEP, "redirect_uri_invalid"));
        }
        let resource = match configuration.resource.resource.trim() {
            "" => self.resource_url().to_string(),
            given => given.to_string(),
        };
        if !self.validate_url(&resource) {
            return Err(RemoteError::new(STEP, "resource_invalid"));
        }
        let scopes_ok = scopes
            .iter()
            .all(|s| !s.is_empty() && !s.contains(char::is_whitespace) && !s.contains('\0'))
            && scopes.iter().map(String::len).sum::<usize>() <= 32 << 10;
        if !scopes_ok {
            return Err(RemoteError::new(STEP, "scope_invalid"));
        }
        let (state, verifier) = (random_secret(32), random_secret(64));
        {
            let mut query = url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", client_id)
                .append_pair("redirect_uri", redirect_uri)
                .append_pair("state", &state)
                .append_pair("code_challenge", &code_challenge(&verifier))
                .append_pair("code_challenge_method", "S256")
                .append_pair("resource", &resource);
            if !scopes.is_empty() {
                query.append_pair("scope", &scopes.join(" "));
            }
        }
        Ok(AuthorizationRequest {
            url: url.to_string(),
            state,
            verifier,
        })
    }

    /// Exchanges the callback's code (with the stored verifier) for tokens.
    pub async fn exchange_code(
        &self,
        endpoint: &TokenEndpoint,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
    ) -> Result<Token, RemoteError> {
        const STEP: &str = "authorization code validation";
        let verifier_ok = (43..=128).contains(&verifier.len())
            && verifier
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
        if code.trim().is_empty() || !verifier_ok {
            return Err(RemoteError::new(STEP, "callback_invalid"));
        }
        if parse_url(redirect_uri, self.policy.allow_local).is_none() {
            return Err(RemoteError::new(STEP, "redirect_uri_invalid"));
        }
        let form = vec![
            ("grant_type", "authorization_code".to_string()),
            ("code", code.to_string()),
            ("redirect_uri", redirect_uri.to_string()),
            ("code_verifier", verifier.to_string()),
        ];
        self.token_request(endpoint, form).await
    }

    /// Trades a refresh token for new tokens (persist a rotated refresh token at once).
    pub async fn refresh(
        &self,
        endpoint: &TokenEndpoint,
        refresh_token: &str,
    ) -> Result<Token, RemoteError> {
        if refresh_token.trim().is_empty() || refresh_token.len() > MAX_SECRET {
            return Err(RemoteError::new(
                "refresh token validation",
                "refresh_token_invalid",
            ));
        }
        let form = vec![
            ("grant_type", "refresh_token".to_string()),
            ("refresh_token", refresh_token.to_string()),
        ];
        self.token_request(endpoint, form).await
    }

    async fn token_request(
        &self,
        endpoint: &TokenEndpoint,
        mut form: Vec<(&'static str, String)>,
    ) -> Result<Token, RemoteError> {
        let client_id = endpoint.client_id.trim();
        let method = endpoint.auth_method.trim();
        let url = self.policy.check(&endpoint.url);
        let valid = !client_id.is_empty()
            && client_id.len() <= MAX_CLIENT_ID
            && endpoint.client_secret.len() <= MAX_SECRET
            && self.validate_url(&endpoint.resource)
            && CLIENT_AUTH_METHODS.contains(&method);
        let Some(url) = url.filter(|_| valid) else {
            return Err(RemoteError::new(
                "token endpoint validation",
                "metadata_invalid",
            ));
        };
        if !matches!(method, "" | "none") && endpoint.client_secret.is_empty() {
            return Err(RemoteError::new(
                "token endpoint validation",
                "client_secret_required",
            ));
        }
        form.push(("client_id", client_id.to_string()));
        form.push(("resource", endpoint.resource.clone()));
        if method == "client_secret_post" {
            form.push(("client_secret", endpoint.client_secret.clone()));
        }
        let mut request = self.http.post(url).form(&form);
        if method == "client_secret_basic" {
            request = request.basic_auth(client_id, Some(&endpoint.client_secret));
        }
        let raw: RawToken = self
            .send_json("token request", request)
            .await
            .map_err(|error| match error.status {
                Some(_) => RemoteError {
                    code: "token_rejected",
                    ..error
                },
                None => error,
            })?;
        raw.into_token()
    }

    async fn get_json<T: DeserializeOwned>(&self, url: &str) -> Result<T, RemoteError> {
        self.send_json("metadata discovery", self.http.get(url))
            .await
    }

    /// Sends, checks the status, reads at most 1 MiB and decodes it.
    async fn send_json<T: DeserializeOwned>(
        &self,
        operation: &'static str,
        request: reqwest::RequestBuilder,
    ) -> Result<T, RemoteError> {
        let failed = |code| RemoteError::new(operation, code);
        let mut response = request
            .header(header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|_| failed("unreachable"))?;
        if !response.status().is_success() {
            return Err(RemoteError {
                operation,
                status: Some(response.status().as_u16()),
                code: "rejected",
            });
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|_| failed("unreadable"))? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_RESPONSE {
                return Err(failed("response_too_large"));
            }
        }
        serde_json::from_slice(&body).map_err(|_| failed("response_invalid"))
    }
}

/// The token endpoint's answer before it is checked.
#[derive(Deserialize)]
struct RawToken {
    #[serde(default)]
    access_token: String,
    #[serde(default)]
    refresh_token: String,
    #[serde(default)]
    token_type: String,
    #[serde(default)]
    expires_in: i64,
    #[serde(default)]
    scope: String,
}

impl RawToken {
    fn into_token(self) -> Result<Token, RemoteError> {
        if self.access_token.is_empty()
            || self.access_token.len() > MAX_SECRET
            || self.refresh_token.len() > MAX_SECRET
        {
            return Err(RemoteError::new("token response", "token_invalid"));
        }
        if !self.token_type.is_empty() && !self.token_type.eq_ignore_ascii_case("bearer") {
            return Err(RemoteError::new("token response", "token_type_unsupported"));
        }
        let expires_at = (self.expires_in > 0)
            .then(|| chrono::Utc::now() + chrono::Duration::seconds(self.expires_in));
        Ok(Token {
            access_token: self.access_token,
            refresh_token: self.refresh_token,
            token_type: self.token_type,
            expires_in: self.expires_in,
            scope: self.scope,
            expires_at,
        })
    }
}

/// `/.well-known/{kind}` at the URL's origin, with its path appended when `with_path`.
fn well_known(url: &Url, kind: &str, with_path: bool) -> String {
    let mut out = url.clone();
    let path = url.path().trim_matches('/');
    let suffix = if with_path && !path.is_empty() {
        format!("/{path}")
    } else {
        String::new()
    };
    out.set_path(&format!("/.well-known/{kind}{suffix}"));
    out.set_query(None);
    out.set_fragment(None);
    out.to_string()
}

/// The same scheme, host and path (a trailing `/` aside), no query or fragment.
fn same_issuer(expected: &str, actual: &str) -> bool {
    match (Url::parse(expected.trim()), Url::parse(actual.trim())) {
        (Ok(a), Ok(b)) => {
            a.query().is_none()
                && b.query().is_none()
                && a.fragment().is_none()
                && b.fragment().is_none()
                && a.scheme().eq_ignore_ascii_case(b.scheme())
                && a.host_str().map(str::to_ascii_lowercase)
                    == b.host_str().map(str::to_ascii_lowercase)
                && a.port_or_known_default() == b.port_or_known_default()
                && a.path().trim_end_matches('/') == b.path().trim_end_matches('/')
        }
        _ => false,
    }
}

/// `bytes` random bytes, base64url without padding.
fn random_secret(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    rand::thread_rng().fill_bytes(&mut buffer);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buffer)
}
