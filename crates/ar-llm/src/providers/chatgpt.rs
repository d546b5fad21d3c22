//! ChatGPT subscriptions (`openai_chatgpt`): the Responses format as the subscription backend
//! takes it. The request is the Responses body reshaped: never stored (`store: false`), always
//! streamed, the system text as `instructions` (a default when there is none: the backend
//! requires them), no `max_output_tokens` or `previous_response_id` (the backend refuses
//! them), encrypted reasoning asked for; the account the token acts for goes in the
//! `ChatGPT-Account-ID` header. The answer is the Responses stream, parsed by `responses`;
//! events that carry no data (keep-alives) are skipped there like any other.

use ar_core::model::{ModelRequest, ModelRoute};
use serde_json::{json, Value};

use super::responses;

/// The header naming the ChatGPT account of the access token.
pub(crate) const ACCOUNT_HEADER: &str = "ChatGPT-Account-ID";

/// What the backend is told when the agent has no system text of its own.
const DEFAULT_INSTRUCTIONS: &str = "You are a helpful assistant.";

/// Parameters the subscription backend refuses.
const REFUSED: &[&str] = &["max_output_tokens", "previous_response_id"];

pub(crate) fn endpoint(base_url: &str) -> String {
    responses::endpoint(base_url)
}

pub(crate) fn body(route: &ModelRoute, request: &ModelRequest) -> Value {
    let mut body = responses::body(route, request);
    if let Some(object) = body.as_object_mut() {
        for key in REFUSED {
            object.remove(*key);
        }
        let instructions = object
            .get("instructions")
            .and_then(Value::as_str)
            .filter(|text| !text.trim().is_empty())
            .unwrap_or(DEFAULT_INSTRUCTIONS)
            .to_string();
        object.insert("instructions".into(), Value::from(instructions));
        object.insert("store".into(), Value::Bool(false));
        object.insert("stream".into(), Value::Bool(true));
        object.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    body
}

/// The bearer token and the account header.
pub(crate) fn auth(
    builder: reqwest::RequestBuilder,
    route: &ModelRoute,
) -> reqwest::RequestBuilder {
    let builder = match route.api_key.as_ref().filter(|key| !key.is_empty()) {
        Some(token) => builder.bearer_auth(token.expose()),
        None => builder,
    };
    match route.account_id.as_deref().map(str::trim) {
        Some(account) if !account.is_empty() => builder.header(ACCOUNT_HEADER, account),
        _ => builder,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ar_core::model::ChatMessage;

    #[test]
    fn the_body_is_reshaped_for_the_subscription_backend() {
        let route = ModelRoute {
            provider: "openai_chatgpt".into(),
            model: "gpt-test".into(),
            controls: Some(json!({"service_tier": "fast", "reasoning_effort": "low"})),
            ..ModelRoute::default()
        };
        let request = ModelRequest {
            messages: vec![ChatMessage::user("hi")],
            max_output_tokens: Some(500),
            ..ModelRequest::default()
        };
        let body = body(&route, &request);
        assert_eq!(body["instructions"], DEFAULT_INSTRUCTIONS);
        assert_eq!(body["store"], false);
        assert_eq!(body["stream"], true);
        assert!(body.get("max_output_tokens").is_none(), "{body}");
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(body["service_tier"], "priority");
        assert_eq!(body["reasoning"]["effort"], "low");
        let request = ModelRequest {
            messages: vec![ChatMessage::system("Be exact."), ChatMessage::user("hi")],
            ..ModelRequest::default()
        };
        let body = super::body(&route, &request);
        assert_eq!(body["instructions"], "Be exact.");
        assert!(body["input"]
            .as_array()
            .unwrap()
            .iter()
            .all(|item| item["role"] != "system"));
    }
}
