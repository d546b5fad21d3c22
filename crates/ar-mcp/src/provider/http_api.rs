//! The `http` provider transport: the JSON API the original SDKs' provider routers serve
//! (`GET {url}/tools` → `{"tools":[…]}`, `POST {url}/call` `{tool_name, input, meta}` →
//! `{content:[{type,text}], is_error, structured_content?}`), with the app's bearer token.

use std::time::Duration;

use ar_core::mcp::McpError;
use ar_core::secret::Secret;
use ar_core::tool::ToolOutput;
use async_trait::async_trait;
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};
use url::Url;

use super::{ProviderConnection, ProviderTool};
use crate::output::BoundedText;
use crate::policy::DEFAULT_MAX_RESPONSE_BYTES;

/// A provider speaking the simple JSON API.
pub struct HttpApiProvider {
    tools_url: String,
    call_url: String,
    token: Option<Secret>,
    http: reqwest::Client,
}

impl std::fmt::Debug for HttpApiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpApiProvider")
            .field("tools_url", &self.tools_url)
            .field("token", &self.token.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

/// A tool as the JSON API lists it.
#[derive(Deserialize)]
struct ListedTool {
    #[serde(default)]
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    input_schema: Option<Value>,
    #[serde(default)]
    mutating: bool,
    #[serde(default)]
    risk_level: Option<String>,
}

#[derive(Deserialize)]
struct ToolList {
    #[serde(default)]
    tools: Vec<ListedTool>,
}

#[derive(Deserialize)]
struct ContentItem {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct CallResult {
    #[serde(default)]
    content: Vec<ContentItem>,
    #[serde(default)]
    is_error: bool,
    #[serde(default)]
    structured_content: Option<Value>,
}

impl HttpApiProvider {
    /// A provider at `url` (its `/tools` and `/call` are joined to it). Redirects are refused:
    /// following one would hand the app's token to wherever it points.
    pub fn new(url: Url, token: Option<Secret>, timeout: Duration) -> Result<Self, McpError> {
        let base = url.as_str().trim_end_matches('/').to_string();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .user_agent(concat!("agent-runtime-mcp/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|err| McpError::Transport(format!("cannot build the HTTP client: {err}")))?;
        Ok(HttpApiProvider {
            tools_url: format!("{base}/tools"),
            call_url: format!("{base}/call"),
            token,
            http,
        })
    }

    /// Sends the request and reads a JSON answer of at most 16 MiB.
    async fn exchange<T: serde::de::DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
        doing: &str,
    ) -> Result<T, McpError> {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token.expose()),
            None => request,
        };
        let response = request.send().await.map_err(|err| transport(&err, doing))?;
        let status = response.status();
        let body = read_bounded(response, doing).await?;
        if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            return Err(McpError::Unauthorized(format!(
                "{doing}: the provider answered {status}"
            )));
        }
        if !status.is_success() {
            return Err(McpError::Transport(format!(
                "{doing}: the provider answered {status}: {}",
                snippet(&body)
            )));
        }
        serde_json::from_slice(&body).map_err(|err| {
            McpError::Protocol(format!(
                "{doing}: the answer is not the expected JSON: {err}"
            ))
        })
    }
}

#[async_trait]
impl ProviderConnection for HttpApiProvider {
    async fn list_tools(&self) -> Result<Vec<ProviderTool>, McpError> {
        let list: ToolList = self
            .exchange(self.http.get(&self.tools_url), "listing the tools")
            .await?;
        Ok(list.tools.into_iter().map(ProviderTool::from).collect())
    }

    async fn call_tool(
        &self,
        tool: &str,
        input: Value,
        meta: &Value,
    ) -> Result<ToolOutput, McpError> {
        let input = match input {
            Value::Null => json!({}),
            object @ Value::Object(_) => object,
            _ => {
                return Ok(ToolOutput::error(format!(
                    "the input of the provider tool {tool} must be a JSON object"
                )))
            }
        };
        let body = json!({"tool_name": tool, "input": input, "meta": meta});
        let result: CallResult = self
            .exchange(
                self.http.post(&self.call_url).json(&body),
                &format!("calling the tool {tool}"),
            )
            .await?;
        Ok(result.into_output())
    }

    async fn close(&self) {}
}

impl From<ListedTool> for ProviderTool {
    fn from(tool: ListedTool) -> Self {
        ProviderTool {
            name: tool.name.trim().to_string(),
            description: tool.description.trim().to_string(),
            category: tool.category.unwrap_or_default(),
            input_schema: match tool.input_schema {
                Some(schema @ Value::Object(_)) => schema,
                _ => json!({"type": "object", "properties": {}}),
            },
            mutating: tool.mutating,
            risk_level: tool.risk_level.filter(|level| !level.trim().is_empty()),
        }
    }
}

impl CallResult {
    /// The model's view: text items joined (bounded), structured content kept when small.
    fn into_output(self) -> ToolOutput {
        let mut text = BoundedText::new(crate::output::MAX_OUTPUT_BYTES);
        for item in &self.content {
            match &item.text {
                Some(part) => text.push_part(part),
                None => text.push_part(&format!("[{} content]", item.kind)),
            }
        }
        let structured = self.structured_content.filter(|value| !value.is_null());
        let (content, structured) = crate::output::finish_with_structured(text, structured);
        ToolOutput {
            content,
            structured,
            is_error: self.is_error,
        }
    }
}

async fn read_bounded(mut response: reqwest::Response, doing: &str) -> Result<Vec<u8>, McpError> {
    let too_large = || {
        McpError::Protocol(format!(
            "{doing}: the answer is larger than {DEFAULT_MAX_RESPONSE_BYTES} bytes"
        ))
    };
    if response
        .content_length()
        .is_some_and(|len| len > DEFAULT_MAX_RESPONSE_BYTES as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| transport(&err, doing))?
    {
        if body.len() + chunk.len() > DEFAULT_MAX_RESPONSE_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A transport failure, without the URL (a provider URL may carry a path the operator
/// considers private; the provider is named by the caller).
fn transport(err: &reqwest::Error, doing: &str) -> McpError {
    if err.is_timeout() {
        return McpError::Timeout(format!("{doing}: the provider did not answer in time"));
    }
    if err.is_connect() {
        return McpError::Transport(format!("{doing}: cannot connect to the provider"));
    }
    let mut message = err.to_string();
    if let Some(url) = err.url() {
        message = message.replace(url.as_str(), "<provider>");
    }
    McpError::Transport(format!("{doing}: {message}"))
}

fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}
