//! The API's error body `{"error":{"code","message"}}`, its code set, and the mapping from typed errors to statuses.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

use crate::error::StudioError;
use crate::server::{AckError, RegisterError};

/// An API refusal: status, code (one of the reference's set) and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

#[derive(Serialize)]
struct Body<'a> {
    error: Inner<'a>,
}

#[derive(Serialize)]
struct Inner<'a> {
    code: &'a str,
    message: &'a str,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "bad_request", message)
    }
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            message,
        )
    }
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "unsupported", message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Body {
            error: Inner {
                code: self.code,
                message: &self.message,
            },
        };
        (self.status, Json(body)).into_response()
    }
}

impl From<StudioError> for ApiError {
    fn from(err: StudioError) -> Self {
        let message = err.to_string();
        match err {
            StudioError::UnknownRuntime | StudioError::UnknownCommand | StudioError::UnknownRun => {
                Self::not_found(message)
            }
            StudioError::NotConnected | StudioError::ShuttingDown => Self::unavailable(message),
            StudioError::DuplicateCommand
            | StudioError::RunFinished
            | StudioError::Connected
            | StudioError::RuntimeBusy => Self::conflict(message),
            StudioError::InvalidCommandId | StudioError::InvalidSessionCommand(_) => {
                Self::bad_request(message)
            }
            StudioError::Store(_) | StudioError::Io(_) => Self::internal(message),
        }
    }
}

impl From<AckError> for ApiError {
    fn from(err: AckError) -> Self {
        let message = err.to_string();
        match err {
            AckError::UnknownCommand(_) => Self::not_found(message),
            AckError::Lost { .. } => Self::conflict(message),
            AckError::MissingCommand | AckError::BadState(_) | AckError::BadStatus(_) => {
                Self::bad_request(message)
            }
        }
    }
}

impl From<RegisterError> for ApiError {
    fn from(err: RegisterError) -> Self {
        match err {
            RegisterError::ShuttingDown => Self::unavailable(err.to_string()),
            _ => Self::bad_request(err.to_string()),
        }
    }
}
