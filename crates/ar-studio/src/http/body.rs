//! Reading a JSON request body under a byte limit: 413 over it, 400 when it does not decode.

use axum::body::Body;
use axum::http::{header, HeaderMap};
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// Reads and decodes `body`, refusing more than `limit` bytes.
pub(crate) async fn read_json<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    what: &str,
) -> Result<T, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = || ApiError::too_large(format!("{what}: body over {limit} bytes"));
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let bytes = axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| too_large())?;
    ar_core::json::from_slice(&bytes).map_err(|e| ApiError::bad_request(format!("{what}: {e}")))
}
