//! ar-llm against the mock provider: each wire format end to end over real HTTP, retries,
//! error mapping, mid-stream failures and cancellation.

mod anthropic;
mod chat;
mod chatgpt;
mod failures;
mod loops;
mod responses;

use std::sync::{Arc, Mutex};

use ar_core::model::{
    ChatMessage, ModelClient, ModelError, ModelRequest, ModelResponse, ModelRoute, StreamDelta,
    ToolSpec,
};
use ar_core::secret::Secret;
use ar_llm::{LlmClient, LlmClientConfig, RetryPolicy};
use ar_test_support::mock_provider::MockProvider;

pub fn route(provider: &str, base_url: String) -> ModelRoute {
    ModelRoute {
        provider: provider.to_string(),
        model: "mock-model".to_string(),
        base_url,
        api_key: Some(Secret::new("sk-test")),
        controls: None,
        account_id: None,
    }
}

pub fn client(retries: u32) -> LlmClient {
    LlmClient::with_config(LlmClientConfig {
        retry: RetryPolicy::fast(retries),
        ..LlmClientConfig::default()
    })
    .expect("client")
}

pub fn bash_tool() -> ToolSpec {
    ToolSpec {
        name: "bash".into(),
        description: "Run a command".into(),
        parameters: serde_json::json!({"type": "object", "properties": {"command": {"type": "string"}}}),
    }
}

pub fn simple_request() -> ModelRequest {
    ModelRequest {
        messages: vec![ChatMessage::system("be brief"), ChatMessage::user("hi")],
        tools: vec![bash_tool()],
        max_output_tokens: None,
    }
}

/// Runs one call and returns the result plus every delta seen.
pub async fn call(
    client: &LlmClient,
    route: &ModelRoute,
    request: &ModelRequest,
) -> (Result<ModelResponse, ModelError>, Vec<StreamDelta>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink_seen = seen.clone();
    let mut sink = move |d: StreamDelta| sink_seen.lock().unwrap().push(d);
    let result = client.complete(route, request, &mut sink).await;
    let deltas = seen.lock().unwrap().clone();
    (result, deltas)
}

pub fn text_of(deltas: &[StreamDelta]) -> String {
    deltas
        .iter()
        .filter_map(|d| match d {
            StreamDelta::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

pub async fn mock() -> MockProvider {
    MockProvider::start().await
}
