//! Query and path parameter helpers: `app_id` is required, ids are checked before lookup.

use std::collections::HashMap;

use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;

use crate::error::ApiError;

/// The query string as a map; a malformed query is a 400.
pub struct Params(pub HashMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Query(map) = Query::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map_err(|error| ApiError::bad_request(format!("invalid query string: {error}")))?;
        Ok(Params(map))
    }
}

impl Params {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .get(key)
            .map(|value| value.trim())
            .filter(|value| !value.is_empty())
    }

    /// `app_id` from the query; missing → `400 app_id is required`.
    pub fn app_id(&self) -> Result<String, ApiError> {
        let app_id = self
            .get("app_id")
            .ok_or_else(|| ApiError::bad_request("app_id is required"))?;
        ar_core::ids::validate_external_id("app_id", app_id).map_err(ApiError::bad_request)?;
        Ok(app_id.to_string())
    }
}

/// The first of `names` among the route's path parameters, checked for odd characters
/// (`field` names it in the error).
async fn path_id<S: Send + Sync>(
    parts: &mut Parts,
    state: &S,
    names: &[&str],
    field: &str,
) -> Result<String, ApiError> {
    let Path(map) = Path::<HashMap<String, String>>::from_request_parts(parts, state)
        .await
        .map_err(|error| ApiError::bad_request(format!("invalid path: {error}")))?;
    let id = names
        .iter()
        .find_map(|name| map.get(*name))
        .cloned()
        .unwrap_or_default();
    ar_core::ids::validate_external_id(field, &id).map_err(ApiError::bad_request)?;
    Ok(id)
}

/// A single path id, checked for odd characters.
pub struct RunPath(pub String);

impl<S: Send + Sync> FromRequestParts<S> for RunPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        path_id(parts, state, &["run_id", "agent_id"], "id")
            .await
            .map(RunPath)
    }
}

/// The `server_id` of a run MCP server route, checked for odd characters.
pub struct ServerPath(pub String);

impl<S: Send + Sync> FromRequestParts<S> for ServerPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        path_id(parts, state, &["server_id"], "server_id")
            .await
            .map(ServerPath)
    }
}
