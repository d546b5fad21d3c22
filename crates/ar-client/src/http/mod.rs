//! The typed HTTP client of the service's `/v1` and `/v2` API, method for method the Go SDK's
//! `Client`, with the SSE stream that resumes by itself ([`EventStream`]).
//!
//! ```no_run
//! # async fn example() -> Result<(), ar_client::Error> {
//! use ar_client::{Client, RunSearch};
//! let client = Client::builder("https://agent-runtime.internal")
//!     .app_id("host_app")
//!     .service_token("service-token")
//!     .build()?;
//! let page = client
//!     .search_runs(&RunSearch { status: "running".into(), limit: 25, ..Default::default() })
//!     .await?;
//! println!("{} running", page.total);
//! # Ok(()) }
//! ```

mod error;
mod meta;
mod records;
mod runs;
mod stream;

use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, Url};
use serde::de::DeserializeOwned;
use serde::Serialize;

pub use error::{Error, HttpStatusError, MAX_ERROR_BODY};
pub use runs::RunSearch;
pub use stream::{EventStream, StreamItem, StreamOptions};

/// How long a JSON request may take by default (the SDK's `http.Client` timeout).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A client of one service for one app. Cheap to clone (the connection pool is shared).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    /// The service's base URL, its path ending in `/`.
    base: Url,
    app_id: String,
    token: Option<String>,
    event_protocol: String,
    http: reqwest::Client,
    timeout: Duration,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.inner.base.as_str())
            .field("app_id", &self.inner.app_id)
            .field(
                "service_token",
                &self.inner.token.as_ref().map(|_| ar_wire::REDACTED),
            )
            .field("event_protocol", &self.inner.event_protocol)
            .finish()
    }
}

/// Builds a [`Client`] (the SDK's `ClientOption`s).
pub struct ClientBuilder {
    base_url: String,
    app_id: String,
    token: Option<String>,
    event_protocol: String,
    http: Option<reqwest::Client>,
    timeout: Duration,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("base_url", &self.base_url)
            .field("app_id", &self.app_id)
            .field(
                "service_token",
                &self.token.as_ref().map(|_| ar_wire::REDACTED),
            )
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// The app whose agents and runs the client works on (`?app_id=` and the bodies' `app_id`).
    pub fn app_id(mut self, app_id: impl Into<String>) -> Self {
        self.app_id = app_id.into().trim().to_string();
        self
    }

    /// The bearer token of every request; an empty one sends none.
    pub fn service_token(mut self, token: impl Into<String>) -> Self {
        let token = token.into().trim().to_string();
        self.token = (!token.is_empty()).then_some(token);
        self
    }

    /// The event protocol (`v1`, `v2`) declared for new runs in `X-Agent-Runtime-Event-Protocol`.
    pub fn event_protocol(mut self, protocol: impl Into<String>) -> Self {
        self.event_protocol = protocol.into().trim().to_lowercase();
        self
    }

    /// A reqwest client of the caller's own (proxies, TLS roots, pools).
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// How long one JSON request may take ([`DEFAULT_TIMEOUT`]); event streams are not bound by it.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The client; fails on a base URL that is empty, relative or not `http(s)`.
    pub fn build(self) -> Result<Client, Error> {
        let text = self.base_url.trim().trim_end_matches('/');
        if text.is_empty() {
            return Err(Error::Config("agent runtime base URL is required".into()));
        }
        let mut base = Url::parse(&format!("{text}/"))
            .map_err(|error| Error::Config(format!("base URL {text:?}: {error}")))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(Error::Config(format!(
                "base URL {text:?} must be an http or https URL"
            )));
        }
        base.set_query(None);
        base.set_fragment(None);
        let http = match self.http {
            Some(http) => http,
            None => reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                .build()
                .map_err(|error| Error::Config(format!("HTTP client: {error}")))?,
        };
        Ok(Client {
            inner: Arc::new(Inner {
                base,
                app_id: self.app_id,
                token: self.token,
                event_protocol: self.event_protocol,
                http,
                timeout: self.timeout,
            }),
        })
    }
}

/// A query string's pairs.
type Query = Vec<(&'static str, String)>;

impl Client {
    /// A builder for the service at `base_url` (`https://host[:port][/prefix]`).
    pub fn builder(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            base_url: base_url.into(),
            app_id: String::new(),
            token: None,
            event_protocol: String::new(),
            http: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The app the client works on (`""` when none was given).
    pub fn app_id(&self) -> &str {
        &self.inner.app_id
    }

    /// The service's base URL.
    pub fn base_url(&self) -> &Url {
        &self.inner.base
    }

    /// `?app_id=` of the client's app, when it has one.
    fn app_query(&self) -> Query {
        if self.inner.app_id.is_empty() {
            Vec::new()
        } else {
            vec![("app_id", self.inner.app_id.clone())]
        }
    }

    /// The URL of `segments` below the base (each percent-encoded as one segment) with `query`.
    fn url(&self, segments: &[&str], query: &Query) -> Url {
        let mut url = self.inner.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty();
            path.extend(segments.iter().map(|segment| segment.trim()));
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query.iter());
        }
        url
    }

    /// A request with the client's headers (token, event protocol).
    fn request(&self, method: Method, url: Url) -> reqwest::RequestBuilder {
        let mut request = self.inner.http.request(method, url);
        if let Some(token) = &self.inner.token {
            request = request.bearer_auth(token);
        }
        if !self.inner.event_protocol.is_empty() {
            request = request.header(ar_wire::EVENT_PROTOCOL_HEADER, &self.inner.event_protocol);
        }
        request
    }

    /// Sends a JSON request and decodes a JSON answer.
    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        segments: &[&str],
        query: Query,
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> Result<T, Error> {
        let (method_text, path, response) = self.send(method, segments, query, body).await?;
        let bytes = response.bytes().await.map_err(|source| Error::Transport {
            method: method_text.clone(),
            path: path.clone(),
            source,
        })?;
        serde_json::from_slice(&bytes).map_err(|source| Error::Decode {
            method: method_text,
            path,
            source,
        })
    }

    /// Sends a JSON request whose answer has no body of interest (204).
    async fn call_empty(
        &self,
        method: Method,
        segments: &[&str],
        query: Query,
    ) -> Result<(), Error> {
        self.send(method, segments, query, None::<&()>).await?;
        Ok(())
    }

    /// Sends a request; a 2xx answer is returned, any other is an [`HttpStatusError`].
    async fn send(
        &self,
        method: Method,
        segments: &[&str],
        query: Query,
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> Result<(String, String, reqwest::Response), Error> {
        let url = self.url(segments, &query);
        let path = url.path().to_string();
        let method_text = method.as_str().to_string();
        let mut request = self
            .request(method, url)
            .timeout(self.inner.timeout)
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|source| Error::Transport {
            method: method_text.clone(),
            path: path.clone(),
            source,
        })?;
        let response = check_status(response, &method_text, &path).await?;
        Ok((method_text, path, response))
    }
}

/// The answer when it is 2xx, else an [`HttpStatusError`] with (at most 4 KiB of) its body.
async fn check_status(
    mut response: reqwest::Response,
    method: &str,
    path: &str,
) -> Result<reqwest::Response, Error> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let mut body = Vec::new();
    while body.len() < MAX_ERROR_BODY {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(MAX_ERROR_BODY);
    Err(Error::Status(HttpStatusError {
        method: method.to_string(),
        path: path.to_string(),
        status: status.as_u16(),
        body: String::from_utf8_lossy(&body).trim().to_string(),
    }))
}
