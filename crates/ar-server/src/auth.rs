//! Authentication: `Authorization: Bearer <token>`, checked by [`Secret::matches`] against the
//! service token, and, for one route only, against a run's tool-gateway token.
//!
//! A CLI run's MCP bridge never holds the service token: each CLI turn mints a token of its
//! own, of which the run keeps the SHA-256 (`EngineState::tool_gateway_token_sha256`). That
//! token opens `GET` and `POST /v1/runs/{run_id}/tools?app_id=…` of that run of that app while
//! it is not terminal, and nothing else. The service token is checked first, without any store
//! read; the run is read only for a request on a run's tools that the service token did not
//! open.

use ar_core::secret::{bearer_token, digest_matches, Secret};
use axum::extract::{OriginalUri, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use crate::error::ApiError;
use crate::state::AppState;

/// How every run tool-gateway token begins (the engine mints them so): any other token on a
/// run's tools costs no store read.
const RUN_TOKEN_PREFIX: &str = "art_run_";

/// The bearer token of the request's `Authorization` header.
fn given_token(request: &Request) -> Option<&str> {
    request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(bearer_token)
}

/// Whether the request's `Authorization` header carries `expected` as its bearer token.
pub(crate) fn bearer_matches(request: &Request, expected: &Secret) -> bool {
    given_token(request).is_some_and(|given| expected.matches(given))
}

pub async fn require_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if let Some(expected) = &state.service_token {
        if !bearer_matches(&request, expected) {
            let claim = run_token_claim(&request);
            if !run_token_opens(&state, claim).await {
                return Err(ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized"));
            }
        }
    }
    Ok(next.run(request).await)
}

/// A run tool-gateway token a request presents, and the app and run whose tools it asks for.
struct RunTokenClaim {
    token: Secret,
    app_id: String,
    run_id: String,
}

/// The claim of a request on a run's tools with a run token; `None` for any other request.
fn run_token_claim(request: &Request) -> Option<RunTokenClaim> {
    let token = given_token(request).filter(|token| token.starts_with(RUN_TOKEN_PREFIX))?;
    // Nested routers see their path without the prefix; the whole path is kept aside.
    let uri = request
        .extensions()
        .get::<OriginalUri>()
        .map_or(request.uri(), |original| &original.0);
    let (app_id, run_id) = run_tools_target(request.method(), uri.path(), uri.query())?;
    Some(RunTokenClaim {
        token: Secret::new(token),
        app_id,
        run_id,
    })
}

/// Whether `claim` presents its run's current gateway token (taken from the request before
/// any await: the request itself is not `Sync`).
async fn run_token_opens(state: &AppState, claim: Option<RunTokenClaim>) -> bool {
    let Some(claim) = claim else {
        return false;
    };
    match state.store.get_run(&claim.app_id, &claim.run_id).await {
        Ok(Some(run)) => {
            !run.is_terminal()
                && run
                    .engine
                    .tool_gateway_token_sha256
                    .as_deref()
                    .is_some_and(|digest| digest_matches(digest, claim.token.expose()))
        }
        Ok(None) => false,
        Err(error) => {
            let run_id = &claim.run_id;
            tracing::warn!(%run_id, %error, "could not read the run to check its gateway token");
            false
        }
    }
}

/// The app and run of `GET`/`POST /v1/runs/{run_id}/tools?app_id=…`; `None` for any other
/// method, path, or a query without `app_id` (the last one counts, as for the handler).
fn run_tools_target(method: &Method, path: &str, query: Option<&str>) -> Option<(String, String)> {
    if method != Method::GET && method != Method::POST {
        return None;
    }
    let mut segments = path.strip_prefix('/')?.split('/');
    let run_id = match (
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
    ) {
        (Some("v1"), Some("runs"), Some(run_id), Some("tools"), None) if !run_id.is_empty() => {
            run_id
        }
        _ => return None,
    };
    let app_id = url::form_urlencoded::parse(query?.as_bytes())
        .filter(|(name, _)| name == "app_id")
        .map(|(_, value)| value.trim().to_string())
        .last()
        .filter(|app_id| !app_id.is_empty())?;
    Some((app_id, run_id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(method: Method, path: &str, query: Option<&str>) -> Option<(String, String)> {
        run_tools_target(&method, path, query)
    }

    #[test]
    fn only_a_runs_tools_route_is_a_target() {
        let tools = Some(("app".to_string(), "run_1".to_string()));
        assert_eq!(
            target(Method::GET, "/v1/runs/run_1/tools", Some("app_id=app")),
            tools
        );
        assert_eq!(
            target(Method::POST, "/v1/runs/run_1/tools", Some("x=1&app_id=app")),
            tools
        );
        for (method, path) in [
            (Method::PUT, "/v1/runs/run_1/tools"),
            (Method::DELETE, "/v1/runs/run_1/tools"),
            (Method::GET, "/v1/runs/run_1"),
            (Method::GET, "/v1/runs/run_1/tool-calls"),
            (Method::GET, "/v1/runs/run_1/tools/extra"),
            (Method::GET, "/internal/runs/run_1/tools"),
            (Method::GET, "/v2/runs/run_1/tools"),
            (Method::GET, "/v1/runs//tools"),
            (Method::POST, "/v1/runs"),
            (Method::GET, "v1/runs/run_1/tools"),
        ] {
            assert_eq!(
                target(method.clone(), path, Some("app_id=app")),
                None,
                "{method} {path}"
            );
        }
    }

    #[test]
    fn the_app_comes_from_the_query() {
        let path = "/v1/runs/run_1/tools";
        assert_eq!(target(Method::GET, path, None), None);
        assert_eq!(target(Method::GET, path, Some("app_id=")), None);
        assert_eq!(target(Method::GET, path, Some("other=app")), None);
        assert_eq!(
            target(Method::GET, path, Some("app_id=a&app_id=my+app")),
            Some(("my app".to_string(), "run_1".to_string()))
        );
    }
}
