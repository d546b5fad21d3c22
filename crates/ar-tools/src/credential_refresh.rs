//! The apps' `model_credential_callback` over HTTP: `POST {url}` with the SDK's
//! `ModelCredentialRefreshRequest` and the app's bearer token, 15 s at most, no redirects; a 200
//! answer of exactly `{"credential": {...}}` (at most 64 KiB) is the replacement.

use std::collections::HashMap;
use std::time::Duration;

use ar_config::AppConfig;
use ar_core::host::{CredentialRefreshRequest, CredentialRefresher, RefreshError, RefreshReason};
use ar_core::secret::Secret;
use ar_wire::host::refresh_reason;
use async_trait::async_trait;
use serde_json::Value;

use crate::http::{self, ToolsError};

/// Timeout of one refresh.
const REFRESH_TIMEOUT: Duration = Duration::from_secs(15);
/// Largest answer read (a credential is small).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

#[derive(Clone)]
struct Callback {
    url: String,
    token: Option<Secret>,
}

/// Every app's refresh callback, sharing one client that follows no redirects.
#[derive(Clone)]
pub struct HttpCredentialRefresher {
    client: reqwest::Client,
    callbacks: HashMap<String, Callback>,
}

impl std::fmt::Debug for HttpCredentialRefresher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut apps: Vec<_> = self.callbacks.keys().collect();
        apps.sort();
        f.debug_struct("HttpCredentialRefresher")
            .field("apps", &apps)
            .finish_non_exhaustive()
    }
}

impl HttpCredentialRefresher {
    /// The callbacks of the apps that configure one; `None` when no app does.
    pub fn from_app_config(config: &AppConfig) -> Result<Option<Self>, ToolsError> {
        let callbacks: HashMap<String, Callback> = config
            .apps
            .iter()
            .filter_map(|(app_id, app)| {
                let callback = app.model_credential_callback.as_ref()?;
                let url = callback.url.as_str().to_string();
                Some((
                    app_id.clone(),
                    Callback {
                        url,
                        token: callback.token.clone(),
                    },
                ))
            })
            .collect();
        if callbacks.is_empty() {
            return Ok(None);
        }
        Ok(Some(HttpCredentialRefresher {
            client: http::client()?,
            callbacks,
        }))
    }
}

fn wire_request(request: &CredentialRefreshRequest) -> ar_wire::ModelCredentialRefreshRequest {
    ar_wire::ModelCredentialRefreshRequest {
        credential_fingerprint: request.credential_fingerprint.clone(),
        app_id: request.app_id.clone(),
        run_id: request.run_id.clone(),
        host_run_id: request.host_run_id.clone(),
        connection_id: request.connection_id.clone(),
        provider: request.provider.clone(),
        account_id: request.account_id.clone(),
        reason: match request.reason {
            RefreshReason::Expired => refresh_reason::EXPIRED,
            RefreshReason::Unauthorized => refresh_reason::UNAUTHORIZED,
        }
        .to_string(),
    }
}

/// The credential of an answer that is exactly `{"credential": {...}}`.
fn credential_of(bytes: &[u8]) -> Result<Value, RefreshError> {
    let bad = |why: &str| RefreshError::BadAnswer(why.to_string());
    let value: Value = serde_json::from_slice(bytes).map_err(|_| bad("not JSON"))?;
    let object = value.as_object().ok_or_else(|| bad("not a JSON object"))?;
    if object.len() != 1 {
        return Err(bad("expected exactly {\"credential\": {...}}"));
    }
    match object.get("credential") {
        Some(credential @ Value::Object(_)) => Ok(credential.clone()),
        _ => Err(bad("expected exactly {\"credential\": {...}}")),
    }
}

#[async_trait]
impl CredentialRefresher for HttpCredentialRefresher {
    fn has_callback(&self, app_id: &str) -> bool {
        self.callbacks.contains_key(app_id)
    }

    async fn refresh(&self, request: &CredentialRefreshRequest) -> Result<Value, RefreshError> {
        let callback = self
            .callbacks
            .get(&request.app_id)
            .ok_or(RefreshError::NoCallback)?;
        let mut call = self
            .client
            .post(&callback.url)
            .timeout(REFRESH_TIMEOUT)
            .json(&wire_request(request));
        if let Some(token) = &callback.token {
            call = call.bearer_auth(token.expose());
        }
        let response = call
            .send()
            .await
            .map_err(|err| RefreshError::Unreachable(http::describe(&err)))?;
        if response.status() != reqwest::StatusCode::OK {
            return Err(RefreshError::Status(response.status().as_u16()));
        }
        if response
            .content_length()
            .is_some_and(|len| len > MAX_ANSWER_BYTES as u64)
        {
            return Err(RefreshError::BadAnswer("answer too large".into()));
        }
        let bytes = http::read_limited(response)
            .await
            .map_err(|err| RefreshError::BadAnswer(err.to_string()))?;
        if bytes.len() > MAX_ANSWER_BYTES {
            return Err(RefreshError::BadAnswer("answer too large".into()));
        }
        credential_of(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_lone_credential_object_is_an_answer() {
        assert!(credential_of(br#"{"credential": {"type": "api_key", "api_key": "k"}}"#).is_ok());
        for bad in [
            &br#"{"credential": {"type": "api_key"}, "extra": 1}"#[..],
            br#"{"type": "api_key", "api_key": "k"}"#,
            br#"{"credential": "k"}"#,
            b"[]",
            b"nope",
        ] {
            assert!(
                credential_of(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
