//! The service's run tool gateway over HTTP: `GET /v1/runs/{id}/tools` lists the run's
//! effective tools, `POST` calls one through the service's approval gate, so a bridged call is
//! gated and recorded exactly like a native one.

use std::future::Future;

use ar_wire::{RunToolCallRequest, Tool, ToolCallResult, ToolListResponse};
use reqwest::Url;
use serde_json::Value;

use super::settings::BridgeSettings;

/// Why the gateway gave no answer the bridge can use.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("the run tool gateway could not be reached")]
    Unreachable(#[source] reqwest::Error),
    #[error("the run tool gateway answered {status}: {message}")]
    Refused { status: u16, message: String },
    #[error("the run tool gateway's answer is not readable")]
    Unreadable(#[source] reqwest::Error),
}

impl GatewayError {
    /// The message with its causes, for the client (nothing here carries the token).
    pub fn describe(&self) -> String {
        let mut text = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(error) = cause {
            text.push_str(": ");
            text.push_str(&error.to_string());
            cause = error.source();
        }
        text
    }
}

/// What the bridge needs from the gateway; the protocol is tested against a fake.
pub trait RunTools: Send + Sync + 'static {
    /// The run's effective tools.
    fn list(&self) -> impl Future<Output = Result<Vec<Tool>, GatewayError>> + Send;
    /// Calls `name` with `input` (a JSON object).
    fn call(
        &self,
        name: &str,
        input: Value,
    ) -> impl Future<Output = Result<ToolCallResult, GatewayError>> + Send;
}

/// The gateway of one run of one service.
pub struct HttpGateway {
    client: reqwest::Client,
    tools_url: Url,
    token: Option<ar_core::secret::Secret>,
}

impl HttpGateway {
    pub fn new(settings: &BridgeSettings) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .build()?;
        let mut tools_url = settings.base_url.clone();
        tools_url
            .path_segments_mut()
            .map_err(|()| anyhow::anyhow!("{} cannot be a base URL", settings.base_url))?
            .pop_if_empty()
            .extend(["v1", "runs", &settings.run_id, "tools"]);
        tools_url
            .query_pairs_mut()
            .append_pair("app_id", &settings.app_id);
        Ok(HttpGateway {
            client,
            tools_url,
            token: settings.token.clone(),
        })
    }

    async fn send<T: serde::de::DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<T, GatewayError> {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token.expose()),
            None => request,
        };
        let response = request.send().await.map_err(GatewayError::Unreachable)?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(GatewayError::Refused {
                status: status.as_u16(),
                message: error_message(&body),
            });
        }
        response.json().await.map_err(GatewayError::Unreadable)
    }
}

impl RunTools for HttpGateway {
    async fn list(&self) -> Result<Vec<Tool>, GatewayError> {
        let answer: ToolListResponse = self.send(self.client.get(self.tools_url.clone())).await?;
        Ok(answer.tools)
    }

    async fn call(&self, name: &str, input: Value) -> Result<ToolCallResult, GatewayError> {
        let body = RunToolCallRequest {
            tool_name: name.to_owned(),
            input,
        };
        self.send(self.client.post(self.tools_url.clone()).json(&body))
            .await
    }
}

/// The service's `{"error": "…"}`, else the body as it came (bounded).
fn error_message(body: &str) -> String {
    let parsed = serde_json::from_str::<Value>(body).ok();
    match parsed.as_ref().and_then(|v| v["error"].as_str()) {
        Some(message) => message.to_owned(),
        None => body.chars().take(500).collect(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_tools_url_keeps_a_base_path_and_escapes_ids() {
        let settings = BridgeSettings {
            base_url: Url::parse("http://host:1/prefix/").unwrap(),
            app_id: "my app".into(),
            run_id: "run/1".into(),
            token: None,
            timeout: Duration::from_secs(1),
        };
        let gateway = HttpGateway::new(&settings).unwrap();
        assert_eq!(
            gateway.tools_url.as_str(),
            "http://host:1/prefix/v1/runs/run%2F1/tools?app_id=my+app"
        );
    }

    #[test]
    fn the_service_error_message_is_kept() {
        assert_eq!(
            error_message(r#"{"error":"run not found"}"#),
            "run not found"
        );
        assert_eq!(error_message("oops"), "oops");
    }
}
