//! rmcp's streamable HTTP transport over the workspace's reqwest ([`SessionHttp`]): the POST of
//! each message (a JSON or an SSE answer, `202 Accepted`, the session id header), the GET that
//! resumes an SSE answer, the DELETE that ends a session, and the mapping of every HTTP outcome
//! to [`McpError`] (401/403 unauthorized, 404 session expired, redirects refused, the size cap).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use ar_core::mcp::McpError;
use ar_core::secret::Secret;
use futures::stream::BoxStream;
use futures::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use parking_lot::RwLock;
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::Sse;

use crate::resolve::AddressRefused;
use crate::sse;

const SESSION_ID: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";
const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";
/// How much of an error body is read for its diagnostic.
const DIAGNOSTIC_BYTES: usize = 64 * 1024;
/// How much of a diagnostic is shown.
const DIAGNOSTIC_CHARS: usize = 300;
/// Headers the transport sets itself; a credential may not set them.
const RESERVED: &[&str] = &[
    "accept",
    "content-type",
    "content-length",
    "host",
    "transfer-encoding",
    SESSION_ID,
    "mcp-protocol-version",
    LAST_EVENT_ID,
];

pub(crate) type HttpError = StreamableHttpError<McpError>;

/// The headers a run's credential adds to every request of a session. Replaced on every call,
/// so a rotated credential applies to the open session. `Debug` shows only their names.
#[derive(Default, Clone)]
pub(crate) struct CredentialHeaders(Vec<(HeaderName, HeaderValue)>);

impl fmt::Debug for CredentialHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(name, _)| format!("{name}: [redacted]")))
            .finish()
    }
}

impl CredentialHeaders {
    /// The endpoint's headers as HTTP headers, marked sensitive.
    pub(crate) fn from_endpoint(headers: &[(String, Secret)]) -> Result<Self, McpError> {
        let mut out = Vec::with_capacity(headers.len());
        for (name, value) in headers {
            let bad = |what: &str| McpError::Refused(format!("credential header {name:?}: {what}"));
            let name = HeaderName::try_from(name.as_str()).map_err(|_| bad("not a header name"))?;
            if RESERVED.contains(&name.as_str()) {
                return Err(bad("reserved for the MCP transport"));
            }
            let mut value = HeaderValue::from_str(value.expose())
                .map_err(|_| bad("the value is not a valid header value"))?;
            value.set_sensitive(true);
            out.push((name, value));
        }
        Ok(CredentialHeaders(out))
    }
}

/// One session's HTTP side: the shared client (its resolver enforces the address policy),
/// the session's credential headers and the response cap.
#[derive(Clone)]
pub(crate) struct SessionHttp {
    pub(crate) http: reqwest::Client,
    pub(crate) credential: Arc<RwLock<CredentialHeaders>>,
    pub(crate) max_response_bytes: usize,
}

impl fmt::Debug for SessionHttp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionHttp")
            .field("credential", &*self.credential.read())
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

impl SessionHttp {
    fn request(
        &self,
        method: Method,
        uri: &str,
        session_id: Option<&str>,
        auth_header: Option<String>,
        transport_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<reqwest::RequestBuilder, HttpError> {
        let mut headers = HeaderMap::with_capacity(transport_headers.len() + 4);
        headers.extend(transport_headers);
        for (name, value) in self.credential.read().0.iter() {
            headers.insert(name.clone(), value.clone());
        }
        if let Some(session_id) = session_id {
            let value = HeaderValue::from_str(session_id)
                .map_err(|_| protocol("the server's session id is not a valid header value"))?;
            headers.insert(HeaderName::from_static(SESSION_ID), value);
        }
        let mut builder = self.http.request(method, uri).headers(headers);
        if let Some(token) = auth_header {
            builder = builder.bearer_auth(token);
        }
        Ok(builder)
    }
}

impl StreamableHttpClient for SessionHttp {
    type Error = McpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let request_id = match &message {
            JsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        let body = serde_json::to_vec(&message)
            .map_err(|err| protocol(&format!("cannot encode the request: {err}")))?;
        let response = self
            .request(
                Method::POST,
                &uri,
                session_id.as_deref(),
                auth_header,
                custom_headers,
            )?
            .header(ACCEPT, format!("{JSON}, {EVENT_STREAM}"))
            .header(CONTENT_TYPE, JSON)
            .body(body)
            .send()
            .await
            .map_err(|err| HttpError::Client(send_error(&err)))?;
        let response = check_status(response, session_id.is_some()).await?;
        if response.status() == StatusCode::ACCEPTED {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        let new_session = header_text(response.headers(), SESSION_ID);
        match media_type(response.headers()).as_deref() {
            Some(EVENT_STREAM) => Ok(StreamableHttpPostResponse::Sse(
                sse::events(response.bytes_stream(), self.max_response_bytes, request_id),
                new_session,
            )),
            Some(JSON) => {
                let body = read_capped(response, self.max_response_bytes).await?;
                if body.is_empty() && request_id.is_none() {
                    return Ok(StreamableHttpPostResponse::Accepted);
                }
                Ok(StreamableHttpPostResponse::Json(
                    parse_message(&body)?,
                    new_session,
                ))
            }
            // A notification needs no answer: a 200 with any body accepts it.
            _ if request_id.is_none() => Ok(StreamableHttpPostResponse::Accepted),
            other => Err(protocol(&format!(
                "the server answered with content type {:?}, not JSON or SSE",
                other.unwrap_or("none")
            ))),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        let response = self
            .request(
                Method::DELETE,
                &uri,
                Some(&session_id),
                auth_header,
                custom_headers,
            )?
            .send()
            .await
            .map_err(|err| HttpError::Client(send_error(&err)))?;
        let status = response.status();
        // 405: the server does not end sessions on request; 404: it has forgotten it already.
        if status.is_success()
            || status == StatusCode::METHOD_NOT_ALLOWED
            || status == StatusCode::NOT_FOUND
        {
            return Ok(());
        }
        Err(HttpError::Client(McpError::Transport(format!(
            "ending the session answered HTTP {status}"
        ))))
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        // Without a last event id this is the session's standalone stream, for messages the
        // server starts itself (notifications, sampling requests). The runtime answers none
        // of them, so it opens none: a connection and a task per session saved.
        let Some(last_event_id) = last_event_id else {
            return Err(HttpError::ServerDoesNotSupportSse);
        };
        let response = self
            .request(
                Method::GET,
                &uri,
                session_id.as_deref(),
                auth_header,
                custom_headers,
            )?
            .header(ACCEPT, EVENT_STREAM)
            .header(LAST_EVENT_ID, last_event_id)
            .send()
            .await
            .map_err(|err| HttpError::Client(send_error(&err)))?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(HttpError::ServerDoesNotSupportSse);
        }
        let response = check_status(response, session_id.is_some()).await?;
        if media_type(response.headers()).as_deref() != Some(EVENT_STREAM) {
            return Err(protocol("the resumed stream is not an SSE stream"));
        }
        Ok(sse::events(
            response.bytes_stream(),
            self.max_response_bytes,
            None,
        ))
    }
}

/// Passes a success on; turns every other answer into the error it means.
async fn check_status(
    response: reqwest::Response,
    session_attached: bool,
) -> Result<reqwest::Response, HttpError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    if status.is_redirection() {
        let target = header_text(response.headers(), LOCATION.as_str()).unwrap_or_default();
        return Err(HttpError::Client(McpError::Refused(format!(
            "the server redirected (HTTP {status}) to {target:?}; redirects are not followed"
        ))));
    }
    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        let challenge = header_text(response.headers(), WWW_AUTHENTICATE.as_str())
            .map(|value| format!(" ({})", shorten(&value)))
            .unwrap_or_default();
        return Err(HttpError::Client(McpError::Unauthorized(format!(
            "HTTP {status}{challenge}"
        ))));
    }
    // 404 is how the protocol says a session was forgotten. Some servers (the reference
    // TypeScript ones among them) answer 400 to a session id they do not know; a 400 to a
    // request that carried one is taken the same way: rmcp then opens a new session and
    // sends the request once more, and a second 400 is returned as an error.
    if session_attached && (status == StatusCode::NOT_FOUND || status == StatusCode::BAD_REQUEST) {
        return Err(HttpError::SessionExpired);
    }
    let body = read_prefix(response, DIAGNOSTIC_BYTES).await;
    let detail = shorten(&String::from_utf8_lossy(&body));
    let message = format!("the server answered HTTP {status}: {detail}");
    Err(HttpError::Client(if status.is_server_error() {
        McpError::Transport(message)
    } else {
        McpError::Protocol(message)
    }))
}

/// The whole body, refused once it is over `cap`.
async fn read_capped(response: reqwest::Response, cap: usize) -> Result<Vec<u8>, HttpError> {
    let too_large = || protocol(&format!("the response is over the {cap} byte cap"));
    if response
        .content_length()
        .is_some_and(|length| length > cap as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|err| HttpError::Client(send_error(&err)))?;
        if body.len() + chunk.len() > cap {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Up to `limit` bytes of the body, for a diagnostic; a read error ends it.
async fn read_prefix(response: reqwest::Response, limit: usize) -> Vec<u8> {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(Ok(chunk)) = chunks.next().await {
        let room = limit - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() == limit {
            break;
        }
    }
    body
}

fn parse_message(body: &[u8]) -> Result<ServerJsonRpcMessage, HttpError> {
    serde_json::from_slice(body).map_err(|err| {
        protocol(&format!(
            "the server's answer is not a JSON-RPC message ({err}): {}",
            shorten(&String::from_utf8_lossy(
                &body[..body.len().min(DIAGNOSTIC_BYTES)]
            ))
        ))
    })
}

/// The media type of a response, lowercase, without parameters.
fn media_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(CONTENT_TYPE)?.to_str().ok()?;
    let essence = value.split(';').next().unwrap_or_default().trim();
    Some(essence.to_ascii_lowercase())
}

fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string)
}

/// At most [`DIAGNOSTIC_CHARS`] characters of `text`, on one line.
pub(crate) fn shorten(text: &str) -> String {
    let flat: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match flat.char_indices().nth(DIAGNOSTIC_CHARS) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

fn protocol(message: &str) -> HttpError {
    HttpError::Client(McpError::Protocol(message.to_string()))
}

/// What a failed send (or body read) means: a refused address, a timeout, or a transport error.
pub(crate) fn send_error(err: &reqwest::Error) -> McpError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    let mut chain = Vec::new();
    while let Some(current) = source {
        if let Some(refused) = current.downcast_ref::<AddressRefused>() {
            return McpError::Refused(refused.0.clone());
        }
        chain.push(current.to_string());
        source = current.source();
    }
    chain.dedup();
    let detail = chain.join(": ");
    if err.is_timeout() {
        McpError::Timeout(detail)
    } else {
        McpError::Transport(detail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_headers_are_redacted_and_checked() {
        let headers = CredentialHeaders::from_endpoint(&[
            ("Authorization".into(), Secret::new("Bearer sk-1")),
            ("X-Api-Key".into(), Secret::new("k-2")),
        ])
        .expect("valid headers");
        let shown = format!("{headers:?}");
        assert!(shown.contains("authorization: [redacted]"), "{shown}");
        assert!(!shown.contains("sk-1") && !shown.contains("k-2"), "{shown}");
        assert!(headers.0.iter().all(|(_, value)| value.is_sensitive()));
        for name in ["Accept", "Mcp-Session-Id", "bad name"] {
            let result = CredentialHeaders::from_endpoint(&[(name.into(), Secret::new("v"))]);
            assert!(matches!(result, Err(McpError::Refused(_))), "{name}");
        }
        let bad_value = CredentialHeaders::from_endpoint(&[("X".into(), Secret::new("a\nb"))]);
        assert!(!format!("{bad_value:?}").contains("a\nb"));
    }

    #[test]
    fn diagnostics_are_short_and_on_one_line() {
        assert_eq!(shorten(" a\nb "), "a b");
        let long = "x".repeat(1000);
        assert_eq!(shorten(&long).chars().count(), DIAGNOSTIC_CHARS + 1);
    }
}
