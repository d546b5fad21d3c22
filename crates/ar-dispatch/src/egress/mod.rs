//! The model egress proxy: a loopback listener of one run, through which its agent CLI reaches
//! the run's model route without ever holding the route's key.
//!
//! The runtime that starts a CLI turn with a model route starts a proxy for it and hands the
//! CLI the proxy's address and a placeholder token (`arp_` and 32 random bytes) instead of the
//! key. The proxy:
//! - accepts only that placeholder (as `Authorization: Bearer …` or `x-api-key`, compared in
//!   constant time), and swaps it for the run's credential in the same header form;
//! - forwards only to the route: every request goes to the route's origin, under the path
//!   the CLI was given; a request naming another host (absolute form, `CONNECT`), a path
//!   outside the route or one that tries to climb out of it (`..`, encoded slashes) is
//!   refused with a JSON error saying why; redirects are never followed;
//! - streams both ways (request and response bodies are never held whole), with bounds:
//!   32 MiB per request body and 16 MiB per response body by default — a response past its
//!   bound is cut, and the proxy's report says so (the run fails with that reason rather
//!   than the CLI's own view of a broken stream);
//! - counts requests, refusals, bytes each way and the token usage the responses report
//!   ([`usage`]);
//! - stops when the run ends ([`EgressProxy::stop`], or dropping it): the listener closes and
//!   open connections are cut, so nothing it served can be reused by another process.

mod usage;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use ar_core::secret::{bearer_token, Secret};
use axum::body::{Body, Bytes};
use axum::http::{
    header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode,
};
use futures::{Stream, StreamExt};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::event::ProviderUsage;
use usage::UsageScanner;

/// Largest request body forwarded by default.
pub const DEFAULT_MAX_REQUEST_BYTES: u64 = 32 * 1024 * 1024;
/// Largest response body forwarded by default.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 16 * 1024 * 1024;
/// Prefix of every placeholder token.
pub const PLACEHOLDER_PREFIX: &str = "arp_";

/// Where a run's model calls go: the route's base URL and its credential.
#[derive(Clone, PartialEq, Eq)]
pub struct EgressRoute {
    /// `scheme://host[:port][/path]` of the model API.
    pub base_url: String,
    /// The key sent upstream in place of the placeholder; `None`: nothing is sent.
    pub credential: Option<Secret>,
    /// Headers the route needs on every call besides the key (a ChatGPT subscription's
    /// `ChatGPT-Account-ID`); they replace the client's own of the same name.
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Debug for EgressRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressRoute")
            .field("base_url", &self.base_url)
            .field("credential", &self.credential)
            .field("headers", &self.headers)
            .finish()
    }
}

/// Bounds of one proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EgressLimits {
    /// Largest request body.
    pub max_request_bytes: u64,
    /// Largest response body.
    pub max_response_bytes: u64,
}

impl Default for EgressLimits {
    fn default() -> Self {
        EgressLimits {
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

/// What a proxy saw over its life (sent with the run's `exited` event by a node).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct EgressReport {
    /// Requests forwarded to the route.
    pub requests: u64,
    /// Requests refused (wrong placeholder, another host, outside the route, too large).
    pub refused: u64,
    /// Request body bytes sent upstream.
    pub bytes_sent: u64,
    /// Response body bytes received from upstream.
    pub bytes_received: u64,
    /// Token usage the responses reported, added up.
    pub usage: ProviderUsage,
    /// The proxy's reason a model call failed (a response over its bound, an unreachable
    /// route); empty when none did.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// Why a proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    /// The route's base URL is unusable.
    #[error("model route {0}")]
    Route(String),
    /// The loopback listener could not be bound.
    #[error("binding the model egress proxy: {0}")]
    Bind(#[from] std::io::Error),
}

/// One run's running proxy. Dropping it stops it.
pub struct EgressProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for EgressProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressProxy")
            .field("addr", &self.addr)
            .field("prefix", &self.shared.prefix)
            .finish()
    }
}

/// A client for proxies' upstream calls: no redirects, no proxy from the environment, no
/// overall deadline (model streams are long), a connect deadline.
pub fn upstream_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(Duration::from_secs(10))
        .tcp_nodelay(true)
        .build()
}

impl EgressProxy {
    /// Starts a proxy for `route` on a loopback port of its own. The CLI is given
    /// [`EgressProxy::base_url`] (the proxy's address and `cli_path`, which must lie on the
    /// route's host, e.g. the route's path or, for clients that add `/v1` themselves, that
    /// path without it) and [`EgressProxy::placeholder`].
    pub async fn start(
        route: &EgressRoute,
        cli_path: &str,
        limits: EgressLimits,
        client: reqwest::Client,
    ) -> Result<EgressProxy, EgressError> {
        let origin = route_origin(&route.base_url)?;
        let prefix = cli_path.trim_end_matches('/').to_string();
        if !(prefix.is_empty() || prefix.starts_with('/')) || has_bad_segment(&prefix) {
            return Err(EgressError::Route(format!(
                "path {cli_path:?} is not a path"
            )));
        }
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            origin,
            prefix,
            placeholder: Secret::new(new_placeholder()),
            credential: route.credential.clone().filter(|key| !key.is_empty()),
            headers: route_headers(&route.headers)?,
            client,
            limits,
            stopped: CancellationToken::new(),
            stats: Stats::default(),
        });
        tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(EgressProxy { addr, shared })
    }

    /// The base URL the CLI uses: `http://127.0.0.1:PORT` and the path it was given.
    pub fn base_url(&self) -> String {
        format!("http://{}{}", self.addr, self.shared.prefix)
    }

    /// The loopback address the proxy listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The token the CLI presents instead of the key.
    pub fn placeholder(&self) -> &Secret {
        &self.shared.placeholder
    }

    /// What the proxy saw so far.
    pub fn report(&self) -> EgressReport {
        self.shared.stats.report()
    }

    /// Stops accepting and cuts open connections; idempotent.
    pub fn stop(&self) {
        self.shared.stopped.cancel();
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `arp_` and 32 random bytes, hex.
fn new_placeholder() -> String {
    use rand::RngCore as _;
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("{PLACEHOLDER_PREFIX}{}", hex::encode(bytes))
}

/// `scheme://host[:port]` of a route's base URL: http(s), a host, no credentials, query or
/// fragment.
fn route_origin(base_url: &str) -> Result<String, EgressError> {
    let url = reqwest::Url::parse(base_url.trim())
        .map_err(|error| EgressError::Route(format!("{base_url:?} is not a URL: {error}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(EgressError::Route(format!("{base_url:?} must be http(s)")));
    }
    let Some(host) = url.host_str() else {
        return Err(EgressError::Route(format!("{base_url:?} has no host")));
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(EgressError::Route("URL must not carry credentials".into()));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(EgressError::Route(format!(
            "{base_url:?} must have no query or fragment"
        )));
    }
    Ok(match url.port() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    })
}

/// The route's extra headers, checked.
fn route_headers(
    pairs: &[(String, String)],
) -> Result<Vec<(HeaderName, HeaderValue)>, EgressError> {
    pairs
        .iter()
        .map(|(name, value)| {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| EgressError::Route(format!("header name {name:?} is not valid")))?;
            let value = HeaderValue::from_str(value).map_err(|_| {
                EgressError::Route(format!("header {name} has a value that is not valid"))
            })?;
            Ok((name, value))
        })
        .collect()
}

struct Shared {
    /// `scheme://host[:port]` of the route.
    origin: String,
    /// Requests must lie under this path.
    prefix: String,
    placeholder: Secret,
    credential: Option<Secret>,
    headers: Vec<(HeaderName, HeaderValue)>,
    client: reqwest::Client,
    limits: EgressLimits,
    stopped: CancellationToken,
    stats: Stats,
}

#[derive(Default)]
struct Stats {
    requests: AtomicU64,
    refused: AtomicU64,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    usage: Mutex<ProviderUsage>,
    error: Mutex<String>,
}

impl Stats {
    fn report(&self) -> EgressReport {
        EgressReport {
            requests: self.requests.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            bytes_sent: self.bytes_sent.load(Ordering::Relaxed),
            bytes_received: self.bytes_received.load(Ordering::Relaxed),
            usage: *lock(&self.usage),
            error: lock(&self.error).clone(),
        }
    }

    fn fail(&self, reason: String) {
        tracing::warn!(%reason, "model egress proxy");
        *lock(&self.error) = reason;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(60));
    loop {
        let accepted = tokio::select! {
            () = shared.stopped.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else {
            // A connection that failed before it was accepted; the listener itself is fine.
            continue;
        };
        let _ = stream.set_nodelay(true);
        let conn_shared = shared.clone();
        let service = hyper::service::service_fn(move |request| {
            let shared = conn_shared.clone();
            async move { Ok::<_, std::convert::Infallible>(handle(&shared, request).await) }
        });
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let stopped = shared.stopped.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = stopped.cancelled() => {}
                _ = connection => {}
            }
        });
    }
}

/// A refused request: its status and the reason the CLI is told.
struct Refusal(StatusCode, String);

impl Refusal {
    /// A JSON error both OpenAI-style and Anthropic clients show (`error.message`).
    fn response(self) -> Response<Body> {
        let Refusal(status, message) = self;
        let body = serde_json::json!({
            "type": "error",
            "error": {"type": "agent_runtime_egress", "code": "egress_refused", "message": message},
        });
        let mut response = Response::new(Body::from(body.to_string()));
        *response.status_mut() = status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}

async fn handle(shared: &Arc<Shared>, request: Request<Incoming>) -> Response<Body> {
    if let Err(refusal) = admit(shared, &request) {
        shared.stats.refused.fetch_add(1, Ordering::Relaxed);
        return refusal.response();
    }
    match forward(shared, request).await {
        Ok(response) => response,
        Err(refusal) => {
            shared.stats.refused.fetch_add(1, Ordering::Relaxed);
            refusal.response()
        }
    }
}

/// Checks what the request asks for before anything is sent upstream.
fn admit(shared: &Shared, request: &Request<Incoming>) -> Result<(), Refusal> {
    if shared.stopped.is_cancelled() {
        return Err(Refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "the run has ended; its model egress proxy accepts nothing more".into(),
        ));
    }
    let uri = request.uri();
    if request.method() == Method::CONNECT || uri.authority().is_some() {
        let host = uri.authority().map(|a| a.as_str()).unwrap_or_default();
        return Err(Refusal(
            StatusCode::FORBIDDEN,
            format!("the model egress proxy forwards only to the run's model route; a request for {host:?} is refused"),
        ));
    }
    let path = uri.path();
    if has_bad_segment(path) {
        return Err(Refusal(
            StatusCode::BAD_REQUEST,
            format!(
                "path {path:?} is not allowed (dot segments, empty segments or encoded separators)"
            ),
        ));
    }
    let under = shared.prefix.is_empty()
        || path == shared.prefix
        || path
            .strip_prefix(shared.prefix.as_str())
            .is_some_and(|rest| rest.starts_with('/'));
    if !under {
        return Err(Refusal(
            StatusCode::NOT_FOUND,
            format!(
                "path {path:?} is outside the run's model route ({:?})",
                shared.prefix
            ),
        ));
    }
    match presented_token(request.headers()) {
        Some(token) if shared.placeholder.matches(token) => Ok(()),
        Some(_) => Err(Refusal(
            StatusCode::UNAUTHORIZED,
            "this token is not the run's egress token (it belongs to no run, another run, or an ended one)".into(),
        )),
        None => Err(Refusal(
            StatusCode::UNAUTHORIZED,
            "the run's egress token is missing (Authorization: Bearer or x-api-key)".into(),
        )),
    }
}

/// The token a client presents: `Authorization: Bearer …`, else `x-api-key`.
fn presented_token(headers: &HeaderMap) -> Option<&str> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        return value.to_str().ok().and_then(bearer_token);
    }
    headers
        .get("x-api-key")
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
}

/// Whether a path has a `.` or `..` segment, an empty segment, a backslash or an encoded `/`,
/// `\` or `.` (any of which could make the upstream read another path than the one checked).
fn has_bad_segment(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    if lower.contains("%2f")
        || lower.contains("%5c")
        || lower.contains("%2e")
        || path.contains('\\')
    {
        return true;
    }
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let last = segments.len().saturating_sub(1);
    segments.iter().enumerate().any(|(index, segment)| {
        *segment == "." || *segment == ".." || (segment.is_empty() && index < last)
    })
}

/// Headers that belong to one connection, never forwarded.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
    )
}

/// Sends the request upstream with the run's credential and streams the answer back.
async fn forward(
    shared: &Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Refusal> {
    let (parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > shared.limits.max_request_bytes) {
        return Err(Refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "request body over the egress proxy's limit of {} bytes",
                shared.limits.max_request_bytes
            ),
        ));
    }
    let target = match parts.uri.query() {
        Some(query) => format!("{}{}?{query}", shared.origin, parts.uri.path()),
        None => format!("{}{}", shared.origin, parts.uri.path()),
    };
    let mut upstream = shared.client.request(parts.method.clone(), target);
    upstream = upstream.headers(upstream_headers(shared, &parts.headers));
    let sent = Counted::request(Body::new(body).into_data_stream(), shared.clone());
    upstream = upstream.body(reqwest::Body::wrap_stream(sent));
    shared.stats.requests.fetch_add(1, Ordering::Relaxed);
    let answer = upstream.send().await.map_err(|error| {
        let reason = format!(
            "the run's model route could not be reached: {}",
            without_url(&error)
        );
        shared.stats.fail(reason.clone());
        Refusal(StatusCode::BAD_GATEWAY, reason)
    })?;
    respond(shared, answer)
}

/// The request's headers for upstream: hop-by-hop headers, the client's credentials and its
/// encodings dropped (a plain body lets the usage be read), the run's credential added in the
/// form the client used.
fn upstream_headers(shared: &Shared, incoming: &HeaderMap) -> HeaderMap {
    let as_api_key = !incoming.contains_key(header::AUTHORIZATION);
    let mut headers = HeaderMap::with_capacity(incoming.len());
    for (name, value) in incoming {
        if hop_by_hop(name)
            || name == header::AUTHORIZATION
            || name == "x-api-key"
            || name == header::ACCEPT_ENCODING
        {
            continue;
        }
        headers.append(name.clone(), value.clone());
    }
    for (name, value) in &shared.headers {
        headers.insert(name.clone(), value.clone());
    }
    if let Some(key) = &shared.credential {
        let (name, value) = if as_api_key {
            (
                HeaderName::from_static("x-api-key"),
                key.expose().to_string(),
            )
        } else {
            (header::AUTHORIZATION, format!("Bearer {}", key.expose()))
        };
        if let Ok(mut value) = HeaderValue::from_str(&value) {
            value.set_sensitive(true);
            headers.insert(name, value);
        }
    }
    headers
}

/// A reqwest error without the URL it carries.
fn without_url(error: &reqwest::Error) -> String {
    let kind = if error.is_connect() {
        "connection failed"
    } else if error.is_timeout() {
        "timed out"
    } else if error.is_body() {
        "request body failed"
    } else {
        "request failed"
    };
    match std::error::Error::source(error) {
        Some(cause) => format!("{kind}: {cause}"),
        None => kind.to_string(),
    }
}

/// The client's response: upstream's status and headers, its body streamed, counted, scanned
/// for usage and cut at the bound.
fn respond(shared: &Arc<Shared>, answer: reqwest::Response) -> Result<Response<Body>, Refusal> {
    let max = shared.limits.max_response_bytes;
    if answer.content_length().is_some_and(|len| len > max) {
        let reason = too_large(max);
        shared.stats.fail(reason.clone());
        return Err(Refusal(StatusCode::BAD_GATEWAY, reason));
    }
    let content_type = answer
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let mut response = Response::builder().status(answer.status());
    if let Some(headers) = response.headers_mut() {
        for (name, value) in answer.headers() {
            if !hop_by_hop(name) {
                headers.append(name.clone(), value.clone());
            }
        }
    }
    let received = Counted::response(answer.bytes_stream(), shared.clone(), &content_type);
    response
        .body(Body::from_stream(received))
        .map_err(|error| Refusal(StatusCode::BAD_GATEWAY, error.to_string()))
}

fn too_large(max: u64) -> String {
    format!(
        "the model's response exceeded the egress proxy's limit of {} MiB; the call was cut",
        max / (1024 * 1024)
    )
}

/// A body stream passing through the proxy: counted, bounded and (responses) scanned.
struct Counted<S> {
    inner: S,
    shared: Arc<Shared>,
    seen: u64,
    max: u64,
    /// Responses only.
    scanner: Option<UsageScanner>,
    upstream: bool,
    done: bool,
}

impl<S> Counted<S> {
    fn request(inner: S, shared: Arc<Shared>) -> Self {
        let max = shared.limits.max_request_bytes;
        Counted {
            inner,
            shared,
            seen: 0,
            max,
            scanner: None,
            upstream: true,
            done: false,
        }
    }

    fn response(inner: S, shared: Arc<Shared>, content_type: &str) -> Self {
        let max = shared.limits.max_response_bytes;
        let scanner = Some(UsageScanner::for_content_type(content_type));
        Counted {
            inner,
            shared,
            seen: 0,
            max,
            scanner,
            upstream: false,
            done: false,
        }
    }

    /// The body ended: a response's usage joins the run's.
    fn end(&mut self) {
        self.done = true;
        if let Some(found) = self.scanner.take().and_then(UsageScanner::finish) {
            usage::add(&mut lock(&self.shared.stats.usage), &found);
        }
    }

    fn over(&mut self) -> std::io::Error {
        self.done = true;
        self.scanner = None;
        let reason = if self.upstream {
            format!(
                "request body over the egress proxy's limit of {} bytes",
                self.max
            )
        } else {
            too_large(self.max)
        };
        self.shared.stats.fail(reason.clone());
        std::io::Error::other(reason)
    }
}

impl<S, E> Stream for Counted<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match self.inner.poll_next_unpin(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                self.end();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(error))) => {
                self.done = true;
                Poll::Ready(Some(Err(std::io::Error::other(error.to_string()))))
            }
            Poll::Ready(Some(Ok(chunk))) => {
                self.seen += chunk.len() as u64;
                if self.seen > self.max {
                    return Poll::Ready(Some(Err(self.over())));
                }
                let counter = if self.upstream {
                    &self.shared.stats.bytes_sent
                } else {
                    &self.shared.stats.bytes_received
                };
                counter.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                if let Some(scanner) = self.scanner.as_mut() {
                    scanner.feed(&chunk);
                }
                Poll::Ready(Some(Ok(chunk)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_could_climb_out_are_refused() {
        for bad in [
            "/v1/../admin",
            "/v1/./x",
            "/v1//x",
            "/v1/%2e%2e/x",
            "/v1%2Fx",
            "/v1\\x",
        ] {
            assert!(has_bad_segment(bad), "{bad}");
        }
        for fine in ["/v1/responses", "/", "/v1/models/gpt-5", "/v1/messages", ""] {
            assert!(!has_bad_segment(fine), "{fine}");
        }
    }

    #[test]
    fn route_origins() {
        assert_eq!(
            route_origin("https://api.openai.com/v1").unwrap(),
            "https://api.openai.com"
        );
        assert_eq!(
            route_origin("http://127.0.0.1:9000/v1/").unwrap(),
            "http://127.0.0.1:9000"
        );
        for bad in [
            "ftp://x/v1",
            "https://user:pw@x/v1",
            "https://x/v1?a=b",
            "not a url",
        ] {
            assert!(route_origin(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn placeholders_are_fresh() {
        let a = new_placeholder();
        assert!(a.starts_with(PLACEHOLDER_PREFIX) && a.len() == 68, "{a}");
        assert_ne!(a, new_placeholder());
    }
}
