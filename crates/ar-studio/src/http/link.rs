//! The runtime-link routes: register, the SSE command stream, and acks.

use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use crate::server::StudioServer;
use crate::wire::{Ack, Registration};

use super::body::read_json;
use super::error::ApiError;
use super::sse::CommandStream;

/// `POST /api/runtime/register`.
pub(crate) async fn register(
    State(server): State<StudioServer>,
    req: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let limit = server.config().register_limit;
    let reg: Registration = read_json(&parts.headers, body, limit, "register body").await?;
    let answer = server.register(reg)?;
    Ok(Json(answer).into_response())
}

#[derive(Deserialize)]
pub(crate) struct StreamQuery {
    #[serde(default)]
    runtime: String,
}

/// `GET /api/runtime/commands?runtime=<id>`: the long-lived SSE command stream.
pub(crate) async fn commands(
    State(server): State<StudioServer>,
    method: Method,
    Query(q): Query<StreamQuery>,
    headers: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    // Opening the stream takes the runtime's feed, so only a real GET may (HEAD too is refused).
    if method != Method::GET {
        let mut resp =
            ApiError::method_not_allowed("the commands stream is GET only").into_response();
        resp.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET"));
        return Ok(resp);
    }
    if q.runtime.is_empty() {
        return Err(ApiError::bad_request(
            "the commands stream needs ?runtime=<id>",
        ));
    }
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let start = server
        .open_stream(&q.runtime, last.as_deref())
        .map_err(|e| match e {
            crate::StudioError::UnknownRuntime => {
                ApiError::not_found(format!("unknown runtime {}", q.runtime))
            }
            other => ApiError::from(other),
        })?;
    let ping_every = server.config().ping_every;
    let stream = CommandStream::new(server, q.runtime, start, ping_every);
    let mut resp = Response::new(Body::from_stream(stream));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(resp)
}

/// `POST /api/runtime/acks`.
pub(crate) async fn acks(
    State(server): State<StudioServer>,
    req: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let ack: Ack = read_json(&parts.headers, body, 1 << 20, "ack body").await?;
    server.ack(&ack)?;
    Ok(StatusCode::OK.into_response())
}
