//! What an rmcp failure means for the port: every error rmcp returns mapped to an
//! [`McpError`], the transport's own errors found again inside rmcp's boxed ones.

use ar_core::mcp::McpError;
use rmcp::model::ErrorData;
use rmcp::service::ServiceError;
use rmcp::transport::DynamicTransportError;

use crate::http::HttpError;
use crate::sse;

/// The `data` key rmcp's transport puts on the error answer it makes when an SSE answer ended
/// before the response (the connection dropped).
const TRANSPORT_CLOSED_KEY: &str = "io.modelcontextprotocol/transportClosed";

/// The failure of a request sent on an open session.
pub(crate) fn from_service(err: &ServiceError, doing: &str) -> McpError {
    match err {
        ServiceError::TransportSend(error) => from_transport(error, doing),
        ServiceError::TransportClosed => {
            McpError::Transport(format!("{doing}: the session's connection closed"))
        }
        ServiceError::Timeout { timeout } => {
            McpError::Timeout(format!("{doing}: no answer within {timeout:?}"))
        }
        ServiceError::McpError(error) => from_error_answer(error).unwrap_or_else(|| {
            McpError::Protocol(format!(
                "{doing}: the server answered with error {}: {}",
                error.code.0, error.message
            ))
        }),
        ServiceError::UnexpectedResponse => {
            McpError::Protocol(format!("{doing}: the server's answer is of another kind"))
        }
        other => McpError::Transport(format!("{doing}: {other}")),
    }
}

/// An error answer made by this crate or by rmcp's transport (not sent by the server).
pub(crate) fn from_error_answer(error: &ErrorData) -> Option<McpError> {
    if let Some(fault) = sse::fault_of(error) {
        return Some(fault);
    }
    let closed = error
        .data
        .as_ref()
        .and_then(|data| data.get(TRANSPORT_CLOSED_KEY))
        .is_some();
    closed.then(|| McpError::Transport(error.message.to_string()))
}

pub(crate) fn from_transport(error: &DynamicTransportError, doing: &str) -> McpError {
    let Some(error) = error.error.downcast_ref::<HttpError>() else {
        return McpError::Transport(format!("{doing}: {error}"));
    };
    match error {
        HttpError::Client(mcp) => mcp.clone(),
        HttpError::SessionExpired => McpError::Protocol(format!(
            "{doing}: the server forgot the session again after it was opened anew"
        )),
        HttpError::SessionRecoveryTimeout | HttpError::ControlRequestTimeout => {
            McpError::Timeout(format!("{doing}: {error}"))
        }
        HttpError::AuthRequired(_) | HttpError::InsufficientScope(_) => {
            McpError::Unauthorized(format!("{doing}: {error}"))
        }
        HttpError::Sse(_)
        | HttpError::Deserialize(_)
        | HttpError::UnexpectedEndOfStream
        | HttpError::UnexpectedServerResponse(_)
        | HttpError::ResponseBodyTooLarge { .. }
        | HttpError::UnexpectedContentType(_)
        | HttpError::MissingSessionIdInResponse
        | HttpError::ReinitializationFailed(_) => McpError::Protocol(format!("{doing}: {error}")),
        other => McpError::Transport(format!("{doing}: {other}")),
    }
}
