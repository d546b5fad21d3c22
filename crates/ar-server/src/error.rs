//! The API error type (status + `{"error": "…"}` body) and a JSON body extractor whose every
//! rejection is a clear 4xx in that same shape.

use ar_engine::EngineError;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

/// An error answer. Internal details are logged, never sent.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// What exactly was wrong, where `message` is the contract's fixed phrase.
    pub detail: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            detail: None,
        }
    }

    /// A 400 with the original's fixed body message and our own account of the problem.
    pub fn invalid_body(detail: impl Into<String>) -> Self {
        ApiError {
            detail: Some(detail.into()),
            ..ApiError::bad_request(ar_wire::error::messages::INVALID_REQUEST_BODY)
        }
    }

    /// The same error with another fixed message (the model-credential route names its body
    /// differently).
    pub fn with_message(self, message: &str) -> Self {
        ApiError {
            message: message.to_string(),
            ..self
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
        let body = ar_wire::ErrorBody {
            error: self.message,
            detail: self.detail,
        };
        let body = serde_json::to_vec(&body).unwrap_or_default();
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
            // The original answers every engine error of a mutation with 400, an unknown run or
            // agent included; reads that find nothing say 404 themselves (`routes::runs::load`).
            EngineError::NotFound(message) => ApiError::bad_request(message),
            EngineError::ShuttingDown => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "runtime is shutting down")
            }
            EngineError::NotReady(reason) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, reason),
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

/// Limit of every request body (the contract's 1 MiB of `POST /v1/runs`, applied to all).
pub const DEFAULT_BODY_LIMIT: usize = ar_wire::runs::MAX_START_RUN_BODY_BYTES;

/// A JSON body, the one way a route reads one: size-limited, decoded by
/// [`ar_wire::decode::from_slice`] (a struct only from a JSON object, at every depth; nothing
/// after the value). Every failure is the original's 400 `invalid request body`, with a
/// `detail` naming the problem; an empty body is one (as in the original).
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
            .map_err(body_rejection)?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::invalid_body("the request body is empty"));
        }
        decode(&bytes).map(ApiJson)
    }
}

/// The body of a route the original reads no body for (approve, cancel, pause): nothing, or a
/// JSON object decoded as `T` (our optional fields, such as approve's `external_actor_id`).
pub struct OptionalJson<T>(pub T);

impl<S, T> FromRequest<S> for OptionalJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Default,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(body_rejection)?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(T::default()));
        }
        decode(&bytes).map(OptionalJson)
    }
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    ar_wire::decode::from_slice(bytes).map_err(|error| ApiError::invalid_body(error.to_string()))
}

/// The body of a route that takes none: nothing, or a JSON object whose fields are ignored (as
/// Go ignores such a body). Any other body is refused like a wrong body of any route.
#[derive(Debug, Default, serde::Deserialize)]
pub struct NoBody {}

/// The answer when a body could not be read: too large, too slow, or cut off.
fn body_rejection(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        // The original reads through a size-limited reader and fails the decode: a 400.
        return ApiError::invalid_body("the request body is larger than the route's limit");
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&rejection);
    while let Some(error) = cause {
        if error.is::<tower_http::timeout::TimeoutError>() {
            return ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "request body was not received in time",
            );
        }
        cause = error.source();
    }
    ApiError::invalid_body(format!("could not read the request body: {rejection}"))
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
