//! The API error type (status + `{"error": "…"}` body) and a JSON body extractor whose every
//! rejection is a clear 4xx in that same shape.

use ar_engine::EngineError;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

/// An error answer. Internal details are logged, never sent.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    pub fn internal() -> Self {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&ar_wire::ErrorBody::new(self.message)).unwrap_or_default();
        (
            self.status,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    }
}

impl From<EngineError> for ApiError {
    fn from(error: EngineError) -> Self {
        match error {
            EngineError::Invalid(message) => ApiError::bad_request(message),
            EngineError::NotFound(message) => ApiError::not_found(message),
            EngineError::ShuttingDown => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "runtime is shutting down")
            }
            EngineError::Transition(error) => ApiError::bad_request(error.to_string()),
            // The host is down or answered garbage: a bad gateway, named so the host can see
            // which of its endpoints failed.
            EngineError::Host(error) => ApiError::new(StatusCode::BAD_GATEWAY, error.to_string()),
            error @ EngineError::Internal { .. } => {
                tracing::error!(error = %ar_core::error_chain(&error), "internal error");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
            }
            EngineError::Store(error) => {
                tracing::error!(error = %ar_core::error_chain(&error), "store error");
                ApiError::internal()
            }
        }
    }
}

impl From<ar_core::store::StoreError> for ApiError {
    fn from(error: ar_core::store::StoreError) -> Self {
        ApiError::from(EngineError::Store(error))
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// Default request body limit.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// A JSON body: size-limited, parsed with serde, every failure a 400/413 naming the problem.
/// An empty body decodes as `{}` (so bodiless POSTs of the SDK work).
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "request body is too large")
                } else {
                    ApiError::bad_request(format!("could not read request body: {rejection}"))
                }
            })?;
        let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        let mut deserializer = serde_json::Deserializer::from_slice(text);
        let value = T::deserialize(&mut deserializer)
            .map_err(|error| ApiError::bad_request(format!("invalid request body: {error}")))?;
        deserializer.end().map_err(|_| {
            ApiError::bad_request("invalid request body: trailing data after the JSON value")
        })?;
        Ok(ApiJson(value))
    }
}

/// A JSON answer with a status.
pub fn json<T: serde::Serialize>(status: StatusCode, value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => (
            status,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Err(error) => {
            tracing::error!(%error, "response serialization failed");
            ApiError::internal().into_response()
        }
    }
}
