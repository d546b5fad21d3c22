//! The apps' skill providers over HTTP: `POST {base_url}/by-id` and `/active-by-key` with the
//! SDKs' lookup body and the app's bearer token; 204 or 404 means the provider has no such
//! skill; the answer is the skill object, bare or as `{"skill": {...}}`. Packages come from
//! `GET {package_base_url}/objects/{escaped key}` with the app's `package_token` (the original's
//! `HTTPPackageStore`): the key is one escaped path segment, so it cannot leave the configured
//! base, and the body is capped at the package limit.

use std::collections::HashMap;
use std::time::Duration;

use ar_config::AppConfig;
use ar_core::secret::Secret;
use ar_skills::resolve::{HostSkill, LookupError, LookupRequest, SkillLookup};
use async_trait::async_trait;
use serde_json::Value;

use crate::http::{self, ToolsError};

/// Timeout of one lookup.
pub const DEFAULT_SKILL_TIMEOUT: Duration = Duration::from_secs(10);
/// Timeout of one package download (the original's store client waits 30 s).
pub const PACKAGE_TIMEOUT: Duration = Duration::from_secs(30);

/// One app's provider.
#[derive(Clone)]
struct Provider {
    base_url: String,
    token: Option<Secret>,
    package_base_url: Option<url::Url>,
    package_token: Option<Secret>,
}

/// Every app's skill provider, sharing one client that follows no redirects.
#[derive(Clone)]
pub struct HttpSkillProviders {
    client: reqwest::Client,
    providers: HashMap<String, Provider>,
    timeout: Duration,
}

impl std::fmt::Debug for HttpSkillProviders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut apps: Vec<_> = self.providers.keys().collect();
        apps.sort();
        f.debug_struct("HttpSkillProviders")
            .field("apps", &apps)
            .finish_non_exhaustive()
    }
}

impl HttpSkillProviders {
    /// The providers of the apps that configure one; `None` when no app does.
    pub fn from_app_config(config: &AppConfig) -> Result<Option<Self>, ToolsError> {
        let providers: HashMap<String, Provider> = config
            .apps
            .iter()
            .filter_map(|(app_id, app)| {
                let provider = app.skill_provider.as_ref()?;
                let base_url = provider.base_url.as_str().trim_end_matches('/').to_string();
                let token = provider.token.clone();
                let package_base_url = provider.package_base_url.clone();
                let package_token = provider.package_token.clone();
                Some((
                    app_id.clone(),
                    Provider {
                        base_url,
                        token,
                        package_base_url,
                        package_token,
                    },
                ))
            })
            .collect();
        if providers.is_empty() {
            return Ok(None);
        }
        Ok(Some(HttpSkillProviders {
            client: http::client()?,
            providers,
            timeout: DEFAULT_SKILL_TIMEOUT,
        }))
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    async fn lookup(
        &self,
        path: &str,
        request: &LookupRequest,
    ) -> Result<Option<HostSkill>, LookupError> {
        let Some(provider) = self.providers.get(&request.app_id) else {
            return Ok(None);
        };
        let mut call = self
            .client
            .post(format!("{}/{path}", provider.base_url))
            .timeout(self.timeout)
            .json(request);
        if let Some(token) = &provider.token {
            call = call.bearer_auth(token.expose());
        }
        let response = call
            .send()
            .await
            .map_err(|err| LookupError(format!("{path}: {}", http::describe(&err))))?;
        let status = response.status();
        if status == reqwest::StatusCode::NO_CONTENT || status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let bytes = http::read_limited(response)
            .await
            .map_err(|err| LookupError(format!("{path}: {err}")))?;
        if !status.is_success() {
            let detail = http::snippet(&bytes);
            return Err(LookupError(format!(
                "{path} returned HTTP {}: {detail}",
                status.as_u16()
            )));
        }
        decode(&bytes)
            .map(Some)
            .map_err(|err| LookupError(format!("{path}: {err}")))
    }
}

/// `{base}/objects/{key}`, the key escaped as one path segment (`/` becomes `%2F`).
fn object_url(base: &url::Url, object_key: &str) -> Result<url::Url, LookupError> {
    let mut url = base.clone();
    url.path_segments_mut()
        .map_err(|()| LookupError("package_base_url cannot take a path".to_string()))?
        .pop_if_empty()
        .push("objects")
        .push(object_key);
    Ok(url)
}

impl HttpSkillProviders {
    async fn fetch_package(&self, app_id: &str, object_key: &str) -> Result<Vec<u8>, LookupError> {
        let provider = self.providers.get(app_id);
        let Some((provider, base)) =
            provider.and_then(|p| p.package_base_url.as_ref().map(|base| (p, base)))
        else {
            return Err(LookupError(format!(
                "app {app_id:?} has no skill package store (skill_provider.package_base_url)"
            )));
        };
        let mut call = self
            .client
            .get(object_url(base, object_key)?)
            .timeout(PACKAGE_TIMEOUT.max(self.timeout));
        if let Some(token) = &provider.package_token {
            call = call.bearer_auth(token.expose());
        }
        let response = call.send().await.map_err(|err| {
            LookupError(format!(
                "GET objects/{object_key}: {}",
                http::describe(&err)
            ))
        })?;
        let status = response.status();
        let bytes = http::read_limited(response)
            .await
            .map_err(|err| LookupError(format!("GET objects/{object_key}: {err}")))?;
        if !status.is_success() {
            return Err(LookupError(format!(
                "GET objects/{object_key} returned HTTP {}: {}",
                status.as_u16(),
                http::snippet(&bytes)
            )));
        }
        Ok(bytes)
    }
}

/// The skill of an answer, bare or wrapped in `{"skill": …}`.
fn decode(bytes: &[u8]) -> Result<HostSkill, String> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|err| format!("answer is not JSON: {err}"))?;
    let skill = match value.get("skill") {
        Some(inner @ Value::Object(_)) if value.get("key").is_none() => inner.clone(),
        _ => value,
    };
    if !skill.is_object() {
        return Err("answer is not a skill object".to_string());
    }
    serde_json::from_value(skill).map_err(|err| format!("answer is not a skill: {err}"))
}

#[async_trait]
impl SkillLookup for HttpSkillProviders {
    fn serves(&self, app_id: &str) -> bool {
        self.providers.contains_key(app_id)
    }

    async fn by_id(&self, request: &LookupRequest) -> Result<Option<HostSkill>, LookupError> {
        self.lookup("by-id", request).await
    }

    async fn active_by_key(
        &self,
        request: &LookupRequest,
    ) -> Result<Option<HostSkill>, LookupError> {
        self.lookup("active-by-key", request).await
    }

    async fn package(&self, app_id: &str, object_key: &str) -> Result<Vec<u8>, LookupError> {
        self.fetch_package(app_id, object_key).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_decode_bare_or_wrapped_and_garbage_is_an_error() {
        let bare = br#"{"id":"s1","key":"k","version_key":"v","instructions":"x"}"#;
        assert_eq!(decode(bare).unwrap().key, "k");
        let wrapped = br#"{"skill":{"id":"s1","key":"k2","instructions":"x"}}"#;
        assert_eq!(decode(wrapped).unwrap().key, "k2");
        assert!(decode(b"<html>").unwrap_err().contains("not JSON"));
        assert!(decode(b"[1]").unwrap_err().contains("not a skill object"));
        assert!(decode(br#"{"key": 5}"#)
            .unwrap_err()
            .contains("not a skill"));
    }

    #[test]
    fn object_keys_are_one_escaped_segment_under_the_base() {
        let base = url::Url::parse("https://host.example/skills/packages/").unwrap();
        let url = object_url(&base, "ws 1/../pkg.zip").unwrap();
        assert_eq!(
            url.as_str(),
            "https://host.example/skills/packages/objects/ws%201%2F..%2Fpkg.zip"
        );
        let bare = url::Url::parse("https://host.example").unwrap();
        assert_eq!(
            object_url(&bare, "a").unwrap().as_str(),
            "https://host.example/objects/a"
        );
    }
}
