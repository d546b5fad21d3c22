//! HTTP plumbing shared by the host-callback clients: the client, bounded body reads, typed errors and domain→wire target conversion.

use ar_core::TargetRef;

/// Failure to build a host-callback client or catalog.
#[derive(Debug, thiserror::Error)]
pub enum ToolsError {
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    /// A host command would shadow a tool the runtime defines.
    #[error("app {app_id}: host command {name:?} collides with a runtime tool of the same name")]
    NameCollision { app_id: String, name: String },
    /// The embedded host command catalogue is unusable.
    #[error(transparent)]
    Catalog(#[from] crate::command_catalog::CatalogError),
}

/// Largest host response body read (context or command output).
pub(crate) const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

/// A client for host callbacks. Redirects are refused: following one would send the app's
/// bearer token to wherever the redirect points.
pub(crate) fn client() -> Result<reqwest::Client, ToolsError> {
    Ok(reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("agent-runtime/", env!("CARGO_PKG_VERSION")))
        .build()?)
}

/// Why reading a host response failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("response larger than {MAX_RESPONSE_BYTES} bytes")]
    TooLarge,
    /// The transport failed mid-body (the error carries no URL: a query may hold credentials).
    #[error("reading the response failed: {}", describe(.0))]
    Transport(#[source] reqwest::Error),
}

/// Reads the body, refusing more than [`MAX_RESPONSE_BYTES`].
/// A host callback carries the trace context of the step that makes it (`traceparent`, when
/// traces are exported), so the host's own spans join the run's trace.
pub(crate) fn traced(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    match ar_core::trace::traceparent() {
        Some(parent) => request.header(ar_core::trace::TRACEPARENT, parent),
        None => request,
    }
}

pub(crate) async fn read_limited(mut response: reqwest::Response) -> Result<Vec<u8>, ReadError> {
    if response
        .content_length()
        .is_some_and(|len| len > MAX_RESPONSE_BYTES as u64)
    {
        return Err(ReadError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| ReadError::Transport(err.without_url()))?
    {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(ReadError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A transport error without its URL (a query string may carry credentials).
pub(crate) fn describe(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        return "request timed out".to_string();
    }
    if err.is_connect() {
        return "connection failed".to_string();
    }
    let mut message = err.to_string();
    if let Some(url) = err.url() {
        message = message.replace(url.as_str(), "<endpoint>");
    }
    message
}

/// The first characters of a host's error body, for messages.
pub(crate) fn snippet(body: &[u8]) -> String {
    const MAX: usize = 200;
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// Domain target → wire target.
pub(crate) fn wire_target(target: &TargetRef) -> ar_wire::target::TargetRef {
    ar_wire::target::TargetRef {
        target_type: target.target_type.clone(),
        id: target.id.clone(),
        display: target
            .display
            .as_ref()
            .map(|d| ar_wire::target::TargetDisplay {
                title: d.title.clone(),
                url: d.url.clone(),
            }),
        metadata: target.metadata.clone().unwrap_or_default(),
    }
}

/// Wire target → domain target.
pub(crate) fn domain_target(target: ar_wire::target::TargetRef) -> TargetRef {
    TargetRef {
        target_type: target.target_type,
        id: target.id,
        display: target.display.map(|d| ar_core::run::TargetDisplay {
            title: d.title,
            url: d.url,
        }),
        metadata: (!target.metadata.is_empty()).then_some(target.metadata),
    }
}
