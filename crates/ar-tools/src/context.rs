//! Target context from the host: the HTTP context-endpoint client and the per-app router with the static fallback.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ar_config::AppConfig;
use ar_core::host::{ContextError, ContextProvider, ContextRequest, StaticContext, TargetContext};
use ar_core::secret::Secret;
use async_trait::async_trait;

use crate::http::{self, ToolsError};

/// Default timeout of one context request.
pub const DEFAULT_CONTEXT_TIMEOUT: Duration = Duration::from_secs(10);

/// Calls an app's `context_endpoint`: `POST` with bearer token, body
/// `{app_id, run_id, agent_id, target, trigger, metadata}`, answer `{target, summary, data}`.
#[derive(Clone)]
pub struct HttpContextProvider {
    client: reqwest::Client,
    url: String,
    token: Option<Secret>,
    timeout: Duration,
}

impl std::fmt::Debug for HttpContextProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpContextProvider")
            .field("token", &self.token)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl HttpContextProvider {
    /// A provider with its own client and the 10 s timeout.
    pub fn new(url: impl Into<String>, token: Option<Secret>) -> Result<Self, ToolsError> {
        Ok(HttpContextProvider::with_client(
            http::client()?,
            url,
            token,
        ))
    }

    /// A provider sharing `client` (which should not follow redirects).
    pub fn with_client(
        client: reqwest::Client,
        url: impl Into<String>,
        token: Option<Secret>,
    ) -> Self {
        HttpContextProvider {
            client,
            url: url.into(),
            token,
            timeout: DEFAULT_CONTEXT_TIMEOUT,
        }
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

#[async_trait]
impl ContextProvider for HttpContextProvider {
    async fn resolve(&self, request: &ContextRequest) -> Result<TargetContext, ContextError> {
        let body = ar_wire::host::TargetContextRequest {
            app_id: request.app_id.clone(),
            run_id: request.run_id.clone(),
            agent_id: request.agent_id.clone(),
            target: http::wire_target(&request.target),
            trigger: request.trigger.clone().unwrap_or_default(),
            metadata: request.metadata.clone().unwrap_or_default(),
        };
        let mut call = http::traced(self.client.post(&self.url))
            .timeout(self.timeout)
            .json(&body);
        if let Some(token) = &self.token {
            call = call.bearer_auth(token.expose());
        }
        let response = call.send().await.map_err(|err| ContextError::Unreachable {
            detail: http::describe(&err),
            cause: Box::new(err.without_url()),
        })?;
        let status = response.status();
        let bytes = http::read_limited(response)
            .await
            .map_err(|err| ContextError::BadAnswer { cause: err.into() })?;
        if !status.is_success() {
            let detail = http::snippet(&bytes);
            return Err(ContextError::Status {
                status: status.as_u16(),
                detail: if detail.is_empty() {
                    detail
                } else {
                    format!(": {detail}")
                },
            });
        }
        let answer: ar_wire::host::TargetContext =
            serde_json::from_slice(&bytes).map_err(|err| ContextError::BadAnswer {
                cause: Box::new(err),
            })?;
        // A host that answers without a target keeps the one the run asked about.
        let target = if answer.target.target_type.is_empty() && answer.target.id.is_empty() {
            request.target.clone()
        } else {
            http::domain_target(answer.target)
        };
        Ok(TargetContext {
            target,
            summary: answer.summary,
            data: answer.data,
        })
    }
}

/// Picks each app's context provider; apps without a `context_endpoint` get [`StaticContext`].
#[derive(Clone, Default)]
pub struct ContextRouter {
    providers: HashMap<String, Arc<dyn ContextProvider>>,
}

impl std::fmt::Debug for ContextRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut apps: Vec<_> = self.providers.keys().collect();
        apps.sort();
        f.debug_struct("ContextRouter")
            .field("apps_with_endpoint", &apps)
            .finish()
    }
}

impl ContextRouter {
    /// A router where every app uses the static fallback.
    pub fn new() -> Self {
        ContextRouter::default()
    }

    /// One [`HttpContextProvider`] per app with a `context_endpoint`, sharing one client.
    pub fn from_app_config(config: &AppConfig) -> Result<Self, ToolsError> {
        let client = http::client()?;
        let mut router = ContextRouter::new();
        for (app_id, app) in &config.apps {
            if let Some(endpoint) = &app.context {
                let provider = HttpContextProvider::with_client(
                    client.clone(),
                    endpoint.url.as_str(),
                    endpoint.token.clone(),
                );
                router.insert(app_id, Arc::new(provider));
            }
        }
        Ok(router)
    }

    /// Sets (or replaces) an app's provider.
    pub fn insert(&mut self, app_id: &str, provider: Arc<dyn ContextProvider>) {
        self.providers.insert(app_id.to_string(), provider);
    }

    /// The provider used for `app_id`.
    pub fn provider_for(&self, app_id: &str) -> Arc<dyn ContextProvider> {
        match self.providers.get(app_id) {
            Some(provider) => provider.clone(),
            None => Arc::new(StaticContext),
        }
    }

    /// Whether the app has its own provider (rather than the static fallback).
    pub fn has_endpoint(&self, app_id: &str) -> bool {
        self.providers.contains_key(app_id)
    }
}

#[async_trait]
impl ContextProvider for ContextRouter {
    async fn resolve(&self, request: &ContextRequest) -> Result<TargetContext, ContextError> {
        match self.providers.get(&request.app_id) {
            Some(provider) => provider.resolve(request).await,
            None => StaticContext.resolve(request).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use ar_core::{JsonMap, TargetRef};
    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::post;
    use axum::{Json, Router};
    use serde_json::{json, Value};

    use super::*;

    /// Authorization header and JSON body of one request.
    type Request = (Option<String>, Value);

    #[derive(Clone, Default)]
    struct Seen {
        requests: Arc<Mutex<Vec<Request>>>,
    }

    async fn context(
        State(seen): State<Seen>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> (StatusCode, Json<Value>) {
        let auth = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        seen.requests.lock().unwrap().push((auth, body.clone()));
        match body["target"]["id"].as_str() {
            Some("missing") => (
                StatusCode::NOT_FOUND,
                Json(json!({"error": "no such ticket"})),
            ),
            Some("slow") => {
                tokio::time::sleep(Duration::from_secs(2)).await;
                (StatusCode::OK, Json(json!({})))
            }
            Some("bare") => (StatusCode::OK, Json(json!({"summary": "just a summary"}))),
            _ => (
                StatusCode::OK,
                Json(json!({
                    "target": {"type": "ticket", "id": body["target"]["id"], "display": {"title": "Fix it"}},
                    "summary": "Ticket about a bug",
                    "data": {"priority": "high"}
                })),
            ),
        }
    }

    async fn server() -> (String, Seen) {
        let seen = Seen::default();
        let app = Router::new()
            .route("/context", post(context))
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (format!("http://{addr}/context"), seen)
    }

    fn request(app_id: &str, target_id: &str) -> ContextRequest {
        let mut trigger = JsonMap::new();
        trigger.insert("source".into(), "webhook".into());
        ContextRequest {
            app_id: app_id.into(),
            run_id: "run_1".into(),
            agent_id: "agt_1".into(),
            target: TargetRef {
                target_type: "ticket".into(),
                id: target_id.into(),
                display: None,
                metadata: None,
            },
            trigger: Some(trigger),
            metadata: None,
        }
    }

    #[tokio::test]
    async fn posts_the_request_with_bearer_and_maps_the_answer() {
        let (url, seen) = server().await;
        let provider = HttpContextProvider::new(url, Some(Secret::new("ctx-token"))).unwrap();
        let answer = provider.resolve(&request("app", "T-1")).await.unwrap();
        assert_eq!(answer.summary, "Ticket about a bug");
        assert_eq!(answer.target.display.as_ref().unwrap().title, "Fix it");
        assert_eq!(answer.data["priority"], "high");
        let (auth, body) = seen.requests.lock().unwrap()[0].clone();
        assert_eq!(auth.as_deref(), Some("Bearer ctx-token"));
        assert_eq!(
            body,
            json!({
                "app_id": "app", "run_id": "run_1", "agent_id": "agt_1",
                "target": {"type": "ticket", "id": "T-1"},
                "trigger": {"source": "webhook"}
            })
        );
    }

    #[tokio::test]
    async fn answer_without_target_keeps_the_requested_one() {
        let (url, _) = server().await;
        let provider = HttpContextProvider::new(url, None).unwrap();
        let answer = provider.resolve(&request("app", "bare")).await.unwrap();
        assert_eq!(answer.target.id, "bare");
        assert_eq!(answer.summary, "just a summary");
    }

    #[tokio::test]
    async fn non_2xx_is_an_error_with_status() {
        let (url, _) = server().await;
        let provider = HttpContextProvider::new(url, None).unwrap();
        let err = provider
            .resolve(&request("app", "missing"))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("HTTP 404") && err.to_string().contains("no such ticket"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn timeout_and_unreachable_are_errors() {
        let (url, _) = server().await;
        let provider = HttpContextProvider::new(url, None)
            .unwrap()
            .with_timeout(Duration::from_millis(200));
        let err = provider.resolve(&request("app", "slow")).await.unwrap_err();
        assert!(err.to_string().contains("timed out"), "{err}");

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead = format!(
            "http://{}/context?token=q-secret",
            listener.local_addr().unwrap()
        );
        drop(listener);
        let err = HttpContextProvider::new(dead, None)
            .unwrap()
            .resolve(&request("app", "x"))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("unreachable") && !err.to_string().contains("q-secret"),
            "{err}"
        );
        // The HTTP client's error is the source, and it carries no URL either.
        let cause = std::error::Error::source(&err).expect("the transport error is kept");
        let transport = cause
            .downcast_ref::<reqwest::Error>()
            .expect("a reqwest error");
        assert!(
            transport.is_connect() && transport.url().is_none(),
            "{transport:?}"
        );
    }

    #[tokio::test]
    async fn router_uses_the_app_endpoint_or_static() {
        let (url, seen) = server().await;
        let config = AppConfig::parse(
            &format!("apps: [{{app_id: with, context_endpoint: '{url}', context_token: t}}, {{app_id: without}}]"),
            &|_| None,
        )
        .unwrap();
        let router = ContextRouter::from_app_config(&config).unwrap();
        assert!(router.has_endpoint("with") && !router.has_endpoint("without"));
        let answer = router.resolve(&request("with", "T-2")).await.unwrap();
        assert_eq!(answer.summary, "Ticket about a bug");
        let fallback = router.resolve(&request("without", "T-3")).await.unwrap();
        assert_eq!(fallback.summary, "");
        assert_eq!(fallback.target.id, "T-3");
        let unknown = router
            .provider_for("nobody")
            .resolve(&request("nobody", "T-4"))
            .await
            .unwrap();
        assert_eq!(unknown.target.id, "T-4");
        assert_eq!(seen.requests.lock().unwrap().len(), 1);
    }
}
