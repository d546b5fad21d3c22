//! The client's errors. [`Error::client_error`] keeps the Go SDK's `ClientError()` meaning: the
//! service answered 4xx, so sending the same request again will not help.

use ar_wire::ErrorBody;

/// The most of an error answer's body kept in [`HttpStatusError::body`] (the SDK's limit).
pub const MAX_ERROR_BODY: usize = 4096;

/// The service answered a status outside 2xx (the SDK's `HTTPStatusError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("agent runtime {method} {path} returned {status}: {body}")]
pub struct HttpStatusError {
    /// The request's method.
    pub method: String,
    /// The request's path (without the query).
    pub path: String,
    /// The status code.
    pub status: u16,
    /// The answer's body, trimmed, at most [`MAX_ERROR_BODY`] bytes.
    pub body: String,
}

impl HttpStatusError {
    /// A 4xx answer: the request itself was refused (the SDK's `ClientError()`).
    pub fn client_error(&self) -> bool {
        (400..500).contains(&self.status)
    }

    /// The contract's `{"error": …, "detail": …}` body, when the answer carried one.
    pub fn error_body(&self) -> Option<ErrorBody> {
        serde_json::from_str::<ErrorBody>(&self.body)
            .ok()
            .filter(|body| !body.error.is_empty())
    }

    /// The service's own message (`error`, with `detail` when given), else the raw body.
    pub fn message(&self) -> String {
        match self.error_body() {
            Some(ErrorBody {
                error,
                detail: Some(detail),
            }) => format!("{error}: {detail}"),
            Some(body) => body.error,
            None => self.body.clone(),
        }
    }
}

/// What a call of the client can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The client was configured with something unusable (an empty or relative base URL).
    #[error("agent runtime client: {0}")]
    Config(String),
    /// The service answered a status outside 2xx.
    #[error(transparent)]
    Status(#[from] HttpStatusError),
    /// The request did not get an answer (connection refused, reset, timed out).
    #[error("call agent runtime {method} {path}: {source}")]
    Transport {
        method: String,
        path: String,
        #[source]
        source: reqwest::Error,
    },
    /// The answer was not the JSON the contract promises.
    #[error("decode agent runtime response of {method} {path}: {source}")]
    Decode {
        method: String,
        path: String,
        #[source]
        source: serde_json::Error,
    },
    /// An SSE frame's data was not an event envelope.
    #[error("decode agent runtime SSE event of run {run_id}: {source}")]
    Event {
        run_id: String,
        #[source]
        source: serde_json::Error,
    },
    /// The event stream broke and reconnecting failed `attempts` times in a row.
    #[error(
        "the event stream of run {run_id} broke and {attempts} reconnections failed; last: {last}"
    )]
    StreamGaveUp {
        run_id: String,
        attempts: u32,
        last: String,
    },
    /// The event handler of [`crate::Client::stream_run_events`] returned an error.
    #[error("event handler: {0}")]
    Handler(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// The service refused the request with a 4xx (the Go SDK's `ClientError()`): retrying the
    /// same request will not help. Every other error may be transient.
    pub fn client_error(&self) -> bool {
        matches!(self, Error::Status(status) if status.client_error())
    }

    /// The status code, when the service answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Status(status) => Some(status.status),
            _ => None,
        }
    }

    /// The service's answer, when it answered outside 2xx.
    pub fn http_status(&self) -> Option<&HttpStatusError> {
        match self {
            Error::Status(status) => Some(status),
            _ => None,
        }
    }

    /// Whether a stream should reconnect after this error: no answer, a 5xx, 408 or 429.
    pub(crate) fn retryable(&self) -> bool {
        match self {
            Error::Transport { .. } => true,
            Error::Status(status) => matches!(status.status, 408 | 429 | 500..=599),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, body: &str) -> HttpStatusError {
        HttpStatusError {
            method: "GET".into(),
            path: "/v1/runs/r1".into(),
            status: code,
            body: body.into(),
        }
    }

    #[test]
    fn client_error_is_4xx_only() {
        assert!(status(400, "").client_error());
        assert!(status(404, "").client_error());
        assert!(status(499, "").client_error());
        assert!(!status(399, "").client_error());
        assert!(!status(500, "").client_error());
        assert!(Error::Status(status(409, "")).client_error());
        assert!(!Error::Status(status(503, "")).client_error());
        assert!(!Error::Config("x".into()).client_error());
    }

    #[test]
    fn display_and_message_follow_the_sdk() {
        let error = status(404, r#"{"error":"run not found"}"#);
        assert_eq!(
            error.to_string(),
            r#"agent runtime GET /v1/runs/r1 returned 404: {"error":"run not found"}"#
        );
        assert_eq!(error.message(), "run not found");
        let detailed = status(
            400,
            r#"{"error":"invalid request body","detail":"target.id is required"}"#,
        );
        assert_eq!(
            detailed.message(),
            "invalid request body: target.id is required"
        );
        assert_eq!(status(502, "bad gateway").message(), "bad gateway");
    }

    #[test]
    fn only_unanswered_5xx_408_429_are_retried() {
        assert!(Error::Status(status(503, "")).retryable());
        assert!(Error::Status(status(429, "")).retryable());
        assert!(!Error::Status(status(404, "")).retryable());
        assert!(!Error::Status(status(401, "")).retryable());
    }
}
