//! Service-token authentication: `Authorization: Bearer <token>`, checked by [`Secret::matches`].

use ar_core::secret::{bearer_token, Secret};
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use crate::error::ApiError;
use crate::state::AppState;

/// Whether the request's `Authorization` header carries `expected` as its bearer token.
pub(crate) fn bearer_matches(request: &Request, expected: &Secret) -> bool {
    request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(bearer_token)
        .is_some_and(|given| expected.matches(given))
}

pub async fn require_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    if let Some(expected) = &state.service_token {
        if !bearer_matches(&request, expected) {
            return Err(ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized"));
        }
    }
    Ok(next.run(request).await)
}
