//! `openai_chatgpt` end to end: the binary with `AGENT_RUNTIME_CHATGPT_ENABLED`, a run with an
//! `oauth` credential (access token, expiry, account, connection) against the mock's ChatGPT
//! backend (a stand-in for the subscription endpoint: `mock_provider::chatgpt`), the token
//! renewed only through the app's `model_credential_callback` (after a 401, and before it
//! expires), and what the capabilities say about the provider.

use ar_test_support::mock_provider::{MockProvider, Reply};
use ar_test_support::refresh_host::RefreshHost;
use ar_test_support::service::*;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::BIN;

const CALLBACK_TOKEN: &str = "chatgpt-callback-token";

fn oauth(token: &str, expires_in: chrono::Duration) -> Value {
    json!({"type": "oauth", "access_token": token,
           "expires_at": (chrono::Utc::now() + expires_in).to_rfc3339(),
           "connection_id": "conn_gpt", "account_id": "acct-gpt"})
}

async fn chatgpt_server(
    mock: &MockProvider,
    host: &RefreshHost,
    dir: &tempfile::TempDir,
) -> Server {
    let mut env = sqlite_env(dir.path(), mock);
    env.insert("AGENT_RUNTIME_CHATGPT_ENABLED".into(), "true".into());
    env.insert("AGENT_RUNTIME_CHATGPT_BASE_URL".into(), mock.chatgpt_url());
    let apps = json!({"apps": [{"app_id": APP,
        "model_credential_callback": {"url": host.url(), "token": CALLBACK_TOKEN}}]});
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), apps.to_string());
    Server::start(BIN, &env).await
}

async fn start(server: &Server, credential: Value) -> String {
    let agent = server
        .agent("subscriber", json!({"allowed_tools": ["get_context"]}))
        .await;
    let (status, run) = server
        .post(
            "/v1/runs",
            json!({"app_id": APP, "agent_id": agent, "target": {"type": "t", "id": "1"},
                   "instructions": "Look at the ticket.",
                   "model": {"provider": "openai_chatgpt", "model": "gpt-sub",
                             "controls": {"reasoning_effort": "LOW", "service_tier": "fast"}},
                   "model_credential": credential}),
        )
        .await;
    assert_eq!(status, 202, "{run}");
    run["id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_run_is_shaped_for_the_backend_and_renewed_through_the_callback() {
    let mock = MockProvider::start().await;
    mock.reject_key("at-first");
    mock.push(Reply::tool_call("get_context", "{}"));
    mock.push(Reply::text("The ticket is about a login bug."));
    let host = RefreshHost::start(CALLBACK_TOKEN).await;
    host.answer(Some(oauth("at-renewed", chrono::Duration::hours(1))));
    let dir = tempfile::tempdir().unwrap();
    let server = chatgpt_server(&mock, &host, &dir).await;

    let run_id = start(&server, oauth("at-first", chrono::Duration::hours(1))).await;
    let run = server
        .wait_status(&run_id, &["completed", "paused", "failed"])
        .await;
    assert_eq!(run["status"], "completed", "{run}");
    // One 401, one renewal through the callback, then the renewed token for every call.
    let sent = mock.model_requests();
    let bearers: Vec<_> = sent
        .iter()
        .map(|r| r.header("authorization").unwrap_or_default())
        .collect();
    assert_eq!(
        bearers,
        ["Bearer at-first", "Bearer at-renewed", "Bearer at-renewed"]
    );
    for request in &sent {
        assert_eq!(request.path, "/backend-api/codex/responses");
        assert_eq!(request.header("chatgpt-account-id"), Some("acct-gpt"));
        assert_eq!(request.body["store"], false);
        assert_eq!(request.body["stream"], true);
        assert!(request.body["instructions"]
            .as_str()
            .unwrap()
            .contains("You help."));
        assert!(request.body.get("max_output_tokens").is_none());
        assert_eq!(request.body["reasoning"]["effort"], "low");
        assert_eq!(request.body["service_tier"], "priority");
    }
    let asked = host.requests();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["reason"], "unauthorized");
    assert_eq!(asked[0]["provider"], "openai_chatgpt");
    assert_eq!(asked[0]["account_id"], "acct-gpt");
    assert_eq!(asked[0]["connection_id"], "conn_gpt");
    assert_eq!(
        asked[0]["credential_fingerprint"],
        hex::encode(Sha256::digest(b"at-first"))
    );
    // The capabilities list the provider with its controls and auth mode.
    let (_, capabilities) = server.get("/v1/capabilities").await;
    let chatgpt = capabilities["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "openai_chatgpt")
        .cloned()
        .expect("openai_chatgpt listed");
    assert_eq!(chatgpt["configured"], true, "{chatgpt}");
    assert_eq!(chatgpt["auth_modes"], json!(["oauth"]));
    assert_eq!(chatgpt["protocols"], json!(["responses"]));
    assert_eq!(
        chatgpt["controls"],
        json!(["reasoning_effort", "service_tier"])
    );
    assert_eq!(chatgpt["lossless_response_replay"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiring_token_is_renewed_first_and_an_account_change_pauses_the_run() {
    let mock = MockProvider::start().await;
    mock.set_fallback(Some(Reply::text("done")));
    let host = RefreshHost::start(CALLBACK_TOKEN).await;
    host.answer(Some(oauth("at-fresh", chrono::Duration::hours(1))));
    let dir = tempfile::tempdir().unwrap();
    let server = chatgpt_server(&mock, &host, &dir).await;

    // Ten seconds left: renewed before the call, which carries the new token.
    let run_id = start(&server, oauth("at-expiring", chrono::Duration::seconds(10))).await;
    let run = server
        .wait_status(&run_id, &["completed", "paused", "failed"])
        .await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(host.requests()[0]["reason"], "expired");
    assert_eq!(
        mock.model_requests()[0].header("authorization"),
        Some("Bearer at-fresh")
    );

    // The callback answers another account: refused, the run waits for the host.
    let mut other = oauth("at-other", chrono::Duration::hours(1));
    other["account_id"] = json!("acct-someone-else");
    host.answer(Some(other));
    mock.reject_key("at-stale");
    let run_id = start(&server, oauth("at-stale", chrono::Duration::hours(1))).await;
    let run = server
        .wait_status(&run_id, &["completed", "paused", "failed"])
        .await;
    assert_eq!(
        (run["status"].as_str(), run["pause_reason"].as_str()),
        (Some("paused"), Some("authentication")),
        "{run}"
    );
    let bearers = mock.bearers();
    assert!(
        !bearers.contains(&"Bearer at-other".to_string()),
        "{bearers:?}"
    );
}
