//! ChatGPT device sign-in for a host app, without a Codex process (the Go SDK's
//! `chatgptauth`): start a device login, poll it (one call at a time, never before the stored
//! interval, given up after 15 minutes), exchange the approved code, and refresh. The host
//! stores the session and the token encrypted, serializes the polls of one login and the
//! refreshes of one connection, and sends only the access token to the runtime (provider
//! `openai_chatgpt`). Tokens and sessions never show in `Debug` or in errors.

use std::time::Duration;

use base64::Engine as _;
use chrono::{DateTime, Utc};
use reqwest::Url;
use serde::{Deserialize, Serialize};

/// The OAuth client id of the Codex CLI, which the issuer knows.
pub const DEFAULT_CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";
/// The issuer unless configured.
pub const DEFAULT_ISSUER: &str = "https://auth.openai.com";
/// How long a device login lasts.
pub const LOGIN_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// The most of an answer read.
const MAX_RESPONSE: usize = 64 << 10;

/// A step failed; `code` says what to do (`expired`, `authorization_failed`,
/// `reconnect_required`, `account_changed`, `request_failed`, …).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ChatGPT authentication: {code}")]
pub struct AuthError {
    pub code: &'static str,
    pub status: Option<u16>,
}

impl AuthError {
    fn new(code: &'static str) -> Self {
        Self { code, status: None }
    }

    fn with_status(code: &'static str, status: u16) -> Self {
        Self {
            code,
            status: Some(status),
        }
    }
}

/// How the client is set up.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The issuer ([`DEFAULT_ISSUER`] when empty).
    pub issuer: String,
    /// The client id ([`DEFAULT_CLIENT_ID`] when empty).
    pub client_id: String,
    /// Plain `http` to `127.0.0.1` or `localhost` (tests and local stand-ins only).
    pub allow_local_http: bool,
}

/// A device login in progress: show `verification_url` and `user_code` to the person, store
/// the session (encrypted) and save it again after every poll.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceSession {
    pub verification_url: String,
    pub user_code: String,
    pub device_auth_id: String,
    pub interval_seconds: u64,
    pub expires_at: DateTime<Utc>,
    pub next_poll_at: DateTime<Utc>,
}

impl std::fmt::Debug for DeviceSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[private device session]")
    }
}

/// The tokens of a signed-in account. Keep the refresh token in the host, encrypted.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Token {
    pub access_token: String,
    pub refresh_token: String,
    pub account_id: String,
    pub expires_at: DateTime<Utc>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted ChatGPT token]")
    }
}

/// What one poll gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PollResult {
    /// Not signed in yet (or polled too early): save the session and poll after `next_poll_at`.
    Pending,
    /// Signed in.
    Token(Token),
}

/// The device sign-in client of one issuer.
#[derive(Debug, Clone)]
pub struct Client {
    issuer: String,
    client_id: String,
    http: reqwest::Client,
}

impl Client {
    pub fn new(config: Config) -> Result<Client, AuthError> {
        let invalid = AuthError::new("invalid_issuer");
        let issuer = match config.issuer.trim().trim_end_matches('/') {
            "" => DEFAULT_ISSUER.to_string(),
            given => given.to_string(),
        };
        let url = Url::parse(&issuer).map_err(|_| invalid.clone())?;
        let local = matches!(url.host_str(), Some("127.0.0.1" | "localhost"));
        let scheme_ok =
            url.scheme() == "https" || (config.allow_local_http && url.scheme() == "http" && local);
        if !scheme_ok
            || url.host_str().is_none()
            || !url.username().is_empty()
            || url.query().is_some()
            || url.fragment().is_some()
        {
            return Err(invalid);
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|_| AuthError::new("request_failed"))?;
        let client_id = match config.client_id.trim() {
            "" => DEFAULT_CLIENT_ID.to_string(),
            given => given.to_string(),
        };
        Ok(Client {
            issuer,
            client_id,
            http,
        })
    }

    /// Asks the issuer for a user code.
    pub async fn start_device_login(&self) -> Result<DeviceSession, AuthError> {
        let body = serde_json::json!({"client_id": self.client_id});
        let (status, raw) = self
            .post(
                self.http_post("/api/accounts/deviceauth/usercode")
                    .json(&body),
            )
            .await?;
        if status != 200 {
            let code = if status == 404 {
                "device_login_disabled"
            } else {
                "login_unavailable"
            };
            return Err(AuthError::with_status(code, status));
        }
        #[derive(Deserialize)]
        struct Answer {
            #[serde(default)]
            device_auth_id: String,
            #[serde(default)]
            user_code: String,
            #[serde(default)]
            usercode: String,
            #[serde(default)]
            interval: serde_json::Value,
        }
        let answer: Answer =
            serde_json::from_slice(&raw).map_err(|_| AuthError::new("invalid_response"))?;
        let user_code = if answer.user_code.is_empty() {
            answer.usercode
        } else {
            answer.user_code
        };
        if answer.device_auth_id.is_empty() || user_code.is_empty() {
            return Err(AuthError::new("invalid_response"));
        }
        let interval = match &answer.interval {
            serde_json::Value::Number(n) => n.as_u64(),
            serde_json::Value::String(s) => s.trim().parse().ok(),
            _ => None,
        };
        let interval = clamp_interval(interval.unwrap_or(5));
        let now = Utc::now();
        Ok(DeviceSession {
            verification_url: format!("{}/codex/device", self.issuer),
            user_code,
            device_auth_id: answer.device_auth_id,
            interval_seconds: interval,
            expires_at: now + chrono::Duration::from_std(LOGIN_LIFETIME).unwrap_or_default(),
            next_poll_at: now + chrono::Duration::seconds(interval as i64),
        })
    }

    /// Polls once (not before `next_poll_at`: then it answers pending without a request),
    /// and exchanges an approved code. Updates `session` (next poll, a longer interval after
    /// 429): save it after every call.
    pub async fn poll_device_login(
        &self,
        session: &mut DeviceSession,
    ) -> Result<PollResult, AuthError> {
        if session.device_auth_id.is_empty() || session.user_code.is_empty() {
            return Err(AuthError::new("invalid_session"));
        }
        let now = Utc::now();
        if session.expires_at <= now {
            return Err(AuthError::new("expired"));
        }
        if session.next_poll_at > now {
            return Ok(PollResult::Pending);
        }
        let interval = clamp_interval(session.interval_seconds);
        session.next_poll_at = now + chrono::Duration::seconds(interval as i64);
        let body = serde_json::json!({"device_auth_id": session.device_auth_id, "user_code": session.user_code});
        let path = "/api/accounts/deviceauth/token";
        let (status, raw) = self.post(self.http_post(path).json(&body)).await?;
        let error = serde_json::from_slice::<serde_json::Value>(&raw)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string));
        if matches!(error.as_deref(), Some("access_denied" | "expired_token")) {
            return Err(AuthError::with_status("authorization_failed", status));
        }
        match status {
            403 | 404 => return Ok(PollResult::Pending),
            429 => {
                session.interval_seconds = (interval + 5).min(60);
                session.next_poll_at =
                    now + chrono::Duration::seconds(session.interval_seconds as i64);
                return Ok(PollResult::Pending);
            }
            200 => {}
            other => return Err(AuthError::with_status("authorization_failed", other)),
        }
        #[derive(Deserialize)]
        struct Code {
            #[serde(default)]
            authorization_code: String,
            #[serde(default)]
            code_verifier: String,
        }
        let code: Code =
            serde_json::from_slice(&raw).map_err(|_| AuthError::new("invalid_response"))?;
        if code.authorization_code.is_empty() || code.code_verifier.is_empty() {
            return Err(AuthError::new("invalid_response"));
        }
        let redirect = format!("{}/deviceauth/callback", self.issuer);
        let form = vec![
            ("grant_type", "authorization_code".to_string()),
            ("code", code.authorization_code),
            ("code_verifier", code.code_verifier),
            ("redirect_uri", redirect),
        ];
        Ok(PollResult::Token(self.exchange(form, "").await?))
    }

    /// New tokens for `old`'s refresh token; refused when the account behind them changed.
    pub async fn refresh(&self, old: &Token) -> Result<Token, AuthError> {
        if old.refresh_token.is_empty() {
            return Err(AuthError::new("reconnect_required"));
        }
        let form = vec![
            ("grant_type", "refresh_token".to_string()),
            ("refresh_token", old.refresh_token.clone()),
        ];
        let next = self.exchange(form, &old.refresh_token).await?;
        if !old.account_id.is_empty() && old.account_id != next.account_id {
            return Err(AuthError::new("account_changed"));
        }
        Ok(next)
    }

    async fn exchange(
        &self,
        mut form: Vec<(&'static str, String)>,
        previous_refresh: &str,
    ) -> Result<Token, AuthError> {
        form.push(("client_id", self.client_id.clone()));
        let (status, raw) = self
            .post(self.http_post("/oauth/token").form(&form))
            .await?;
        if status != 200 {
            let code = if matches!(status, 400 | 401 | 403) {
                "reconnect_required"
            } else {
                "refresh_unavailable"
            };
            return Err(AuthError::with_status(code, status));
        }
        #[derive(Deserialize)]
        struct Answer {
            #[serde(default)]
            access_token: String,
            #[serde(default)]
            refresh_token: String,
            #[serde(default)]
            expires_in: i64,
        }
        let answer: Answer =
            serde_json::from_slice(&raw).map_err(|_| AuthError::new("invalid_response"))?;
        if answer.access_token.is_empty()
            || answer.expires_in <= 0
            || answer.expires_in > 366 * 86_400
        {
            return Err(AuthError::new("invalid_response"));
        }
        let refresh_token = if answer.refresh_token.is_empty() {
            previous_refresh.to_string()
        } else {
            answer.refresh_token
        };
        if refresh_token.is_empty() {
            return Err(AuthError::new("invalid_response"));
        }
        let account_id = account_id(&answer.access_token)?;
        Ok(Token {
            access_token: answer.access_token,
            refresh_token,
            account_id,
            expires_at: Utc::now() + chrono::Duration::seconds(answer.expires_in),
        })
    }

    fn http_post(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.post(format!("{}{path}", self.issuer))
    }

    /// Sends; the status and at most 64 KiB of the answer.
    async fn post(&self, request: reqwest::RequestBuilder) -> Result<(u16, Vec<u8>), AuthError> {
        let mut response = request
            .send()
            .await
            .map_err(|_| AuthError::new("request_failed"))?;
        let status = response.status().as_u16();
        let mut raw = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|_| AuthError::with_status("invalid_response", status))?
        {
            raw.extend_from_slice(&chunk);
            if raw.len() > MAX_RESPONSE {
                return Err(AuthError::with_status("invalid_response", status));
            }
        }
        Ok((status, raw))
    }
}

fn clamp_interval(seconds: u64) -> u64 {
    seconds.clamp(1, 60)
}

/// The ChatGPT account an access token from the trusted token endpoint is for (routing
/// metadata read from its claims; not a verification of the token).
pub fn account_id(token: &str) -> Result<String, AuthError> {
    let invalid = AuthError::new("invalid_token");
    let mut parts = token.split('.');
    let (Some(_), Some(claims), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid);
    };
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(claims.trim_end_matches('='))
        .map_err(|_| invalid.clone())?;
    let claims: serde_json::Value = serde_json::from_slice(&raw).map_err(|_| invalid)?;
    claims["https://api.openai.com/auth"]["chatgpt_account_id"]
        .as_str()
        .filter(|id| !id.is_empty())
        .map(str::to_string)
        .ok_or(AuthError::new("missing_account"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_ids_come_from_the_auth_claim() {
        let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(r#"{"https://api.openai.com/auth":{"chatgpt_account_id":"acct_9"}}"#);
        assert_eq!(account_id(&format!("h.{claims}.s")).unwrap(), "acct_9");
        assert_eq!(account_id("h.e30.s").unwrap_err().code, "missing_account");
        assert_eq!(account_id("not-a-jwt").unwrap_err().code, "invalid_token");
    }

    #[test]
    fn debug_hides_sessions_and_tokens() {
        let token = Token {
            access_token: "at-secret".into(),
            refresh_token: "rt-secret".into(),
            account_id: "acct".into(),
            expires_at: Utc::now(),
        };
        assert_eq!(format!("{token:?}"), "[redacted ChatGPT token]");
        assert_eq!(
            format!("{:?}", PollResult::Token(token)),
            "Token([redacted ChatGPT token])"
        );
    }

    #[test]
    fn the_issuer_must_be_https_unless_local_is_allowed() {
        let config = |issuer: &str, local| Config {
            issuer: issuer.into(),
            allow_local_http: local,
            ..Default::default()
        };
        assert!(Client::new(config("", false)).is_ok());
        assert!(Client::new(config("http://auth.example", true)).is_err());
        assert!(Client::new(config("http://127.0.0.1:9", false)).is_err());
        assert!(Client::new(config("http://127.0.0.1:9", true)).is_ok());
        assert!(Client::new(config("https://auth.example/?q=1", false)).is_err());
    }
}
