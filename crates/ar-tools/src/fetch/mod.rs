//! `fetch_url`, the built-in web fetch of native runs: a GET whose every hop (redirects are
//! followed here, never by the client) is checked against the [`FetchPolicy`], bounded in time
//! and size, its body turned into text for the model or written to an `output_path` inside the
//! run's workspace.
//!
//! - `policy.rs`: the destination rules and the resolver that enforces them at connect time;
//! - `body.rs`: content types, HTML to text, the text cap;
//! - `output.rs`: the confined write beneath the workspace root.

mod body;
mod output;
mod policy;

use std::path::PathBuf;
use std::time::Duration;

use ar_core::tool::{ToolContext, ToolDefinition, ToolOutput};
use ar_core::RiskLevel;
use serde_json::{json, Value};
use url::Url;

use crate::host_tools::WORKSPACE_LEASE_KEY;
use crate::http::{self, ToolsError};
use body::Kind;
pub use output::{write_beneath, OutputError};
pub use policy::{FetchPolicy, Refused};

/// The tool's name.
pub const NAME: &str = "fetch_url";
/// Largest body read (and largest file an `output_path` receives): 2 MiB.
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;
/// Largest text handed to the model: 64 KiB.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;
/// Redirects followed before giving up.
pub const MAX_REDIRECTS: usize = 5;
/// Bound on a whole fetch, redirects and body included.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The `fetch_url` tool: its client (with the policy's resolver) and limits.
#[derive(Debug, Clone)]
pub struct FetchUrl {
    client: reqwest::Client,
    policy: FetchPolicy,
    timeout: Duration,
}

/// A response at the end of the redirects, its body read up to the cap.
struct Fetched {
    url: Url,
    status: u16,
    content_type: String,
    body: Vec<u8>,
    /// The body was longer than [`MAX_BODY_BYTES`] and is cut there.
    cut: bool,
}

/// Why a fetch failed, in words for the model.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error("refused: {0}")]
    Refused(String),
    #[error("{0}")]
    Failed(String),
}

impl FetchUrl {
    /// The tool under `policy`.
    pub fn new(policy: FetchPolicy) -> Result<Self, ToolsError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(std::sync::Arc::new(policy::PolicyResolver(policy)))
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("agent-runtime/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(FetchUrl {
            client,
            policy,
            timeout: TIMEOUT,
        })
    }

    /// Bound on one whole fetch.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The tool the model sees.
    pub fn definition() -> ToolDefinition {
        ToolDefinition {
            name: NAME.to_string(),
            description: format!(
                "Fetch a public web page or file with GET. HTML comes back as readable text, JSON and other text as it is (at most {} KiB for you). Give output_path to save the body (at most {} MiB, any type) into the run's workspace instead.",
                MAX_TEXT_BYTES / 1024,
                MAX_BODY_BYTES / (1024 * 1024)
            ),
            category: "Web".to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "The http(s) URL to fetch."},
                    "output_path": {"type": "string", "description": "Path relative to the workspace root to write the body to."}
                },
                "required": ["url"],
                "additionalProperties": false
            }),
            mutating: false,
            risk_level: Some(RiskLevel::Read),
            supported_target_types: Vec::new(),
        }
    }

    /// Runs one call of the tool.
    pub async fn call(&self, ctx: &ToolContext, input: Value) -> ToolOutput {
        let (url, output_path) = match arguments(&input) {
            Ok(args) => args,
            Err(message) => return ToolOutput::error(format!("fetch_url: {message}")),
        };
        let target = match &output_path {
            Some(path) => match workspace_root(ctx) {
                Ok(root) => Some((root, path.clone())),
                Err(message) => return ToolOutput::error(format!("fetch_url: {message}")),
            },
            None => None,
        };
        let fetched = match tokio::time::timeout(self.timeout, self.fetch(&url)).await {
            Ok(Ok(fetched)) => fetched,
            Ok(Err(err)) => return ToolOutput::error(format!("fetch_url {url}: {err}")),
            Err(_) => {
                return ToolOutput::error(format!(
                    "fetch_url {url}: no complete answer within {} s",
                    self.timeout.as_secs()
                ))
            }
        };
        if !(200..300).contains(&fetched.status) {
            return ToolOutput::error(format!(
                "fetch_url {}: HTTP {}: {}",
                fetched.url,
                fetched.status,
                http::snippet(&fetched.body)
            ));
        }
        match target {
            Some((root, path)) => save(fetched, &root, &path),
            None => as_text(fetched),
        }
    }

    /// GET `url`, following redirects by hand: each hop checked, its name resolved by the
    /// policy's resolver.
    async fn fetch(&self, url: &str) -> Result<Fetched, FetchError> {
        let mut url = Url::parse(url).map_err(|e| FetchError::Failed(format!("bad URL: {e}")))?;
        for _ in 0..=MAX_REDIRECTS {
            self.policy
                .check_url(&url)
                .map_err(|Refused(reason)| FetchError::Refused(reason))?;
            let response =
                self.client.get(url.clone()).send().await.map_err(
                    |err| match policy::refusal_in(&err) {
                        Some(reason) => FetchError::Refused(reason),
                        None => FetchError::Failed(http::describe(&err)),
                    },
                )?;
            if response.status().is_redirection() {
                if let Some(next) = redirect_target(&url, &response)? {
                    url = next;
                    continue;
                }
            }
            return read(url, response).await;
        }
        Err(FetchError::Failed(format!(
            "more than {MAX_REDIRECTS} redirects"
        )))
    }
}

/// The `Location` of a redirect, resolved against the URL that answered it.
fn redirect_target(url: &Url, response: &reqwest::Response) -> Result<Option<Url>, FetchError> {
    let Some(location) = response.headers().get(reqwest::header::LOCATION) else {
        return Ok(None);
    };
    let location = location
        .to_str()
        .map_err(|_| FetchError::Failed("a redirect with an unreadable Location".into()))?;
    url.join(location)
        .map(Some)
        .map_err(|e| FetchError::Failed(format!("a redirect to a bad URL: {e}")))
}

/// Reads the body up to [`MAX_BODY_BYTES`], noting whether there was more.
async fn read(url: Url, mut response: reqwest::Response) -> Result<Fetched, FetchError> {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let mut body = Vec::new();
    let mut cut = false;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| FetchError::Failed(http::describe(&err.without_url())))?
    {
        let room = MAX_BODY_BYTES - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            cut = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Fetched {
        url,
        status,
        content_type,
        body,
        cut,
    })
}

fn arguments(input: &Value) -> Result<(String, Option<String>), String> {
    let url = input
        .get("url")
        .and_then(Value::as_str)
        .filter(|url| !url.trim().is_empty())
        .ok_or("`url` (a string) is required")?;
    let output_path = match input.get("output_path") {
        None | Some(Value::Null) => None,
        Some(Value::String(path)) => Some(path.clone()),
        Some(_) => return Err("`output_path` must be a string".into()),
    };
    Ok((url.trim().to_string(), output_path))
}

/// The run's writable workspace root, from the lease the engine places in the call's context.
fn workspace_root(ctx: &ToolContext) -> Result<PathBuf, String> {
    let lease = ctx.run_metadata.get(WORKSPACE_LEASE_KEY);
    let root = lease
        .and_then(|lease| lease.get("root_path"))
        .and_then(Value::as_str)
        .filter(|root| std::path::Path::new(root).is_absolute())
        .ok_or("output_path needs a workspace, and this run has none")?;
    if lease.and_then(|l| l.get("access")).and_then(Value::as_str) == Some("read_only") {
        return Err("output_path cannot be written: the run's workspace is read-only".into());
    }
    Ok(PathBuf::from(root))
}

fn save(fetched: Fetched, root: &std::path::Path, path: &str) -> ToolOutput {
    if fetched.cut {
        return ToolOutput::error(format!(
            "fetch_url {}: the body is larger than {} MiB; nothing was written",
            fetched.url,
            MAX_BODY_BYTES / (1024 * 1024)
        ));
    }
    match write_beneath(root, path, &fetched.body) {
        Ok(bytes) => {
            let summary = json!({
                "url": fetched.url.as_str(), "status": fetched.status,
                "content_type": fetched.content_type, "output_path": path, "bytes": bytes,
            });
            ToolOutput {
                content: format!("wrote {bytes} bytes from {} to {path}", fetched.url),
                structured: Some(summary),
                is_error: false,
            }
        }
        Err(err) => ToolOutput::error(format!("fetch_url: {err}")),
    }
}

fn as_text(fetched: Fetched) -> ToolOutput {
    let raw = String::from_utf8_lossy(&fetched.body);
    let text = match Kind::of(&fetched.content_type) {
        Kind::Binary => {
            return ToolOutput::error(format!(
                "fetch_url {}: {} is not text; give output_path to save it into the workspace",
                fetched.url, fetched.content_type
            ))
        }
        Kind::Html => body::html_to_text(&raw),
        Kind::Json | Kind::Text => raw.into_owned(),
    };
    let (mut text, cut_text) = body::cap_text(text, MAX_TEXT_BYTES);
    let truncated = cut_text || fetched.cut;
    if truncated {
        text.push_str("\n[truncated]");
    }
    let summary = json!({
        "url": fetched.url.as_str(), "status": fetched.status,
        "content_type": fetched.content_type, "truncated": truncated,
    });
    ToolOutput {
        content: text,
        structured: Some(summary),
        is_error: false,
    }
}

#[cfg(test)]
mod tests;
