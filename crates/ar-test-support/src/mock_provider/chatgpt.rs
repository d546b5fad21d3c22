//! The ChatGPT subscription backend's dialect of the Responses API (`POST
//! /backend-api/codex/responses`), as the service contract describes it and as public clients
//! of that backend report it: a bearer access token and the `ChatGPT-Account-ID` header, bodies
//! that are streamed (`stream: true`), never stored (`store: false`) and carry `instructions`,
//! and a 400 `{"detail": "Unsupported parameter: …"}` for what the backend refuses
//! (`max_output_tokens`, `previous_response_id`, sampling settings). Its streams are the
//! Responses events with keep-alives between them: comments, events without data and events
//! with an empty data line, which clients must skip.

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};

use super::sse::StreamParts;
use super::{json_response, WireFormat};

/// The account header the backend requires.
pub const ACCOUNT_HEADER: &str = "chatgpt-account-id";

/// Parameters the backend answers with "Unsupported parameter".
const UNSUPPORTED: &[&str] = &[
    "max_output_tokens",
    "max_tokens",
    "previous_response_id",
    "temperature",
    "top_p",
    "metadata",
];

/// The 400 (or 401) the backend gives a request it does not take, `None` when it takes it.
pub(crate) fn refusal(body: &Value, headers: &HeaderMap) -> Option<Response> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let bearer = header("authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .filter(|token| !token.trim().is_empty());
    if bearer.is_none() {
        return Some(detail(StatusCode::UNAUTHORIZED, "Unauthorized"));
    }
    if header(ACCOUNT_HEADER).is_none_or(|account| account.trim().is_empty()) {
        return Some(detail(
            StatusCode::BAD_REQUEST,
            "Missing ChatGPT-Account-ID header",
        ));
    }
    if let Some(key) = UNSUPPORTED.iter().find(|key| body.get(**key).is_some()) {
        return Some(detail(
            StatusCode::BAD_REQUEST,
            &format!("Unsupported parameter: {key}"),
        ));
    }
    if body.get("store").and_then(Value::as_bool) != Some(false) {
        return Some(detail(
            StatusCode::BAD_REQUEST,
            "Store must be set to false",
        ));
    }
    if body.get("stream").and_then(Value::as_bool) != Some(true) {
        return Some(detail(
            StatusCode::BAD_REQUEST,
            "Stream must be set to true",
        ));
    }
    let instructions = body.get("instructions").and_then(Value::as_str);
    if instructions.is_none_or(|text| text.trim().is_empty()) {
        return Some(detail(StatusCode::BAD_REQUEST, "Instructions are required"));
    }
    None
}

fn detail(status: StatusCode, message: &str) -> Response {
    json_response(status, &json!({ "detail": message }), WireFormat::Responses)
}

/// The stream with keep-alives before every event: a comment, an event without data and an
/// event whose data line is empty, in turn.
pub(crate) fn with_keepalives(parts: StreamParts) -> StreamParts {
    const KEEPALIVES: [&[u8]; 3] = [
        b": keepalive\n\n",
        b"event: keepalive\n\n",
        b"event: ping\ndata:\n\n",
    ];
    let mut turn = 0usize;
    let mut interleave = |frames: Vec<Bytes>| {
        let mut out = Vec::with_capacity(frames.len() * 2);
        for frame in frames {
            out.push(Bytes::from_static(KEEPALIVES[turn % KEEPALIVES.len()]));
            turn += 1;
            out.push(frame);
        }
        out
    };
    StreamParts {
        head: interleave(parts.head),
        content: interleave(parts.content),
        tail: interleave(parts.tail),
        error: interleave(parts.error),
    }
}
