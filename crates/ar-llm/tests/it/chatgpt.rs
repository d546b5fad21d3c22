//! `openai_chatgpt` against the mock's ChatGPT backend (the stand-in for the subscription
//! endpoint, `ar_test_support::mock_provider::chatgpt`): the request reshaped as that backend
//! takes it, keep-alives without data skipped, one more try when a stream breaks before any
//! output (never after).

use ar_core::model::{ChatMessage, ModelError, ModelRequest, ModelRoute};
use ar_core::secret::Secret;
use ar_test_support::mock_provider::{MockProvider, Reply};

use crate::{bash_tool, call, client, mock};

fn chatgpt_route(mock: &MockProvider, account: Option<&str>) -> ModelRoute {
    ModelRoute {
        provider: "openai_chatgpt".into(),
        model: "gpt-sub".into(),
        base_url: mock.chatgpt_url(),
        api_key: Some(Secret::new("chatgpt-access-token")),
        account_id: account.map(str::to_string),
        ..ModelRoute::default()
    }
}

fn request() -> ModelRequest {
    ModelRequest {
        messages: vec![ChatMessage::system("Be exact."), ChatMessage::user("hi")],
        tools: vec![bash_tool()],
        max_output_tokens: Some(2000),
    }
}

#[tokio::test]
async fn requests_are_shaped_for_the_subscription_backend_and_keepalives_skipped() {
    let mock = mock().await;
    mock.push(Reply::text_deltas(["hel", "lo"]).and_tool_call("bash", r#"{"command":"ls"}"#));
    let (answer, _) = call(
        &client(0),
        &chatgpt_route(&mock, Some("acct-1")),
        &request(),
    )
    .await;
    let answer = answer.expect("the backend answered");
    assert_eq!(answer.text, "hello");
    assert_eq!(answer.tool_calls.len(), 1);
    let sent = mock.model_requests();
    assert_eq!(sent.len(), 1);
    let sent = &sent[0];
    assert_eq!(sent.path, "/backend-api/codex/responses");
    assert_eq!(sent.header("chatgpt-account-id"), Some("acct-1"));
    assert_eq!(
        sent.header("authorization"),
        Some("Bearer chatgpt-access-token")
    );
    assert_eq!(sent.body["store"], false);
    assert_eq!(sent.body["stream"], true);
    assert_eq!(sent.body["instructions"], "Be exact.");
    assert!(
        sent.body.get("max_output_tokens").is_none(),
        "{}",
        sent.body
    );
    assert!(sent.body.get("previous_response_id").is_none());
    assert_eq!(
        sent.body["include"],
        serde_json::json!(["reasoning.encrypted_content"])
    );
}

#[tokio::test]
async fn the_backend_refuses_a_request_without_the_account() {
    let mock = mock().await;
    mock.set_fallback(Some(Reply::text("not reached")));
    let (answer, _) = call(&client(0), &chatgpt_route(&mock, None), &request()).await;
    match answer {
        Err(ModelError::Rejected {
            status: 400,
            message,
        }) => {
            assert!(message.contains("ChatGPT-Account-ID"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_stream_broken_before_any_output_is_asked_once_more_and_never_after_output() {
    let mock = mock().await;
    mock.push(Reply::empty().then_disconnect());
    mock.push(Reply::text("hello"));
    let route = chatgpt_route(&mock, Some("acct-1"));
    let (answer, _) = call(&client(0), &route, &request()).await;
    assert_eq!(answer.expect("asked once more").text, "hello");
    assert_eq!(mock.request_count(), 2);
    // Twice broken: one more try only.
    let mock = self::mock().await;
    mock.set_fallback(Some(Reply::empty().then_disconnect()));
    let route = chatgpt_route(&mock, Some("acct-1"));
    let (answer, _) = call(&client(0), &route, &request()).await;
    assert!(
        matches!(answer, Err(ModelError::Transport { .. })),
        "{answer:?}"
    );
    assert_eq!(mock.request_count(), 2);
    // Output already shown: never asked again (it would be shown twice).
    let mock = self::mock().await;
    mock.push(Reply::text("partial").then_disconnect());
    mock.set_fallback(Some(Reply::text("not reached")));
    let route = chatgpt_route(&mock, Some("acct-1"));
    let (answer, deltas) = call(&client(0), &route, &request()).await;
    assert!(answer.is_err(), "{answer:?}");
    assert!(!deltas.is_empty());
    assert_eq!(mock.request_count(), 1);
}
