//! The app's `model_credential_callback`: a run credential renewed 30 s before it expires and
//! after one 401 (before anything streamed), the model asked once more with the new key; a
//! callback that cannot help pauses the run for authentication.

use ar_test_support::mock_provider::{MockProvider, Reply};
use ar_test_support::refresh_host::RefreshHost;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use ar_test_support::service::*;

const CALLBACK_TOKEN: &str = "refresh-callback-token";

async fn server_with_callback(
    mock: &MockProvider,
    host: &RefreshHost,
    dir: &tempfile::TempDir,
) -> TestServer {
    let mut env = env_for(mock, &dir.path().join("refresh.db").display().to_string());
    env.insert("OPENAI_BASE_URL".into(), mock.base_url());
    let apps = json!({"apps": [{"app_id": APP,
        "model_credential_callback": {"url": host.url(), "token": CALLBACK_TOKEN}}]});
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), apps.to_string());
    TestServer::start_with(env).await
}

fn key(api_key: &str, expires_at: Option<String>) -> Value {
    let mut credential = json!({"type": "api_key", "api_key": api_key, "connection_id": "conn_1"});
    if let Some(expiry) = expires_at {
        credential["expires_at"] = Value::from(expiry);
    }
    credential
}

async fn start(server: &TestServer, credential: Value) -> String {
    let agent = server.agent("refreshing", json!({})).await;
    let (status, run) = server
        .post(
            "/v1/runs",
            json!({"app_id": APP, "agent_id": agent, "target": {"type": "t", "id": "1"},
                   "model": {"provider": "openai", "model": "m-1"}, "model_credential": credential}),
        )
        .await;
    assert_eq!(status, 202, "{run}");
    run["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_rejected_key_is_renewed_through_the_callback_and_the_call_asked_again() {
    let mock = MockProvider::start().await;
    mock.reject_key("sk-old");
    mock.push(Reply::text("done with the new key"));
    let host = RefreshHost::start(CALLBACK_TOKEN).await;
    host.answer(Some(key("sk-new", None)));
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_callback(&mock, &host, &dir).await;
    let run_id = start(&server, key("sk-old", None)).await;
    let run = server
        .wait_status(&run_id, &["completed", "paused", "failed"])
        .await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(mock.bearers(), vec!["Bearer sk-old", "Bearer sk-new"]);
    let requests = host.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0]["reason"], "unauthorized");
    assert_eq!(requests[0]["connection_id"], "conn_1");
    assert_eq!(requests[0]["provider"], "openai");
    assert_eq!(requests[0]["run_id"], run_id.as_str());
    assert_eq!(
        requests[0]["credential_fingerprint"],
        hex::encode(Sha256::digest(b"sk-old"))
    );
    assert!(!requests[0].to_string().contains("sk-old"));
    server.stop().await;
}

#[tokio::test]
async fn a_credential_about_to_expire_is_renewed_before_the_call() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("fresh"));
    let host = RefreshHost::start(CALLBACK_TOKEN).await;
    let later = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    host.answer(Some(key("sk-renewed", Some(later))));
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_callback(&mock, &host, &dir).await;
    let soon = (chrono::Utc::now() + chrono::Duration::seconds(10)).to_rfc3339();
    let run_id = start(&server, key("sk-expiring", Some(soon))).await;
    let run = server
        .wait_status(&run_id, &["completed", "paused", "failed"])
        .await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(mock.bearers(), vec!["Bearer sk-renewed"]);
    assert_eq!(host.requests()[0]["reason"], "expired");
    server.stop().await;
}

#[tokio::test]
async fn a_callback_that_cannot_help_pauses_the_run_for_authentication() {
    let mock = MockProvider::start().await;
    mock.reject_key("sk-old");
    mock.reject_key("sk-also-bad");
    let host = RefreshHost::start(CALLBACK_TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_callback(&mock, &host, &dir).await;
    // The callback fails: one call, one refresh, then the pause.
    let run_id = start(&server, key("sk-old", None)).await;
    let run = server
        .wait_status(&run_id, &["completed", "paused", "failed"])
        .await;
    assert_eq!(
        (run["status"].as_str(), run["pause_reason"].as_str()),
        (Some("paused"), Some("authentication")),
        "{run}"
    );
    assert_eq!(mock.model_requests().len(), 1);
    assert_eq!(host.requests().len(), 1);
    assert_authentication_pause(&server, &run_id).await;
    // The callback answers a key the vendor rejects too: asked once more, never a third time.
    host.answer(Some(key("sk-also-bad", None)));
    let run_id = start(&server, key("sk-old", None)).await;
    let run = server
        .wait_status(&run_id, &["completed", "paused", "failed"])
        .await;
    assert_eq!(run["pause_reason"], "authentication", "{run}");
    assert_eq!(host.requests().len(), 2);
    assert_eq!(mock.model_requests().len(), 3);
    // A replacement that changes the connection is refused.
    host.answer(Some(
        json!({"type": "api_key", "api_key": "sk-good", "connection_id": "conn_2"}),
    ));
    let run_id = start(&server, key("sk-old", None)).await;
    let run = server
        .wait_status(&run_id, &["completed", "paused", "failed"])
        .await;
    assert_eq!(run["pause_reason"], "authentication", "{run}");
    assert!(!mock.bearers().contains(&"Bearer sk-good".to_string()));
    server.stop().await;
}

/// A run whose first call is refused (`sk-old`) while the app's callback takes 3 s to answer
/// `answer`; returns once the refresh is in flight.
async fn refresh_in_flight(
    mock: &MockProvider,
    answer: &str,
) -> (RefreshHost, TestServer, tempfile::TempDir, String) {
    mock.reject_key("sk-old");
    let host = RefreshHost::start(CALLBACK_TOKEN).await;
    host.answer(Some(key(answer, None)));
    host.delay(std::time::Duration::from_secs(3));
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_callback(mock, &host, &dir).await;
    let run_id = start(&server, key("sk-old", None)).await;
    wait_for("the refresh after the 401", WAIT, || async {
        (!host.requests().is_empty()).then_some(())
    })
    .await;
    (host, server, dir, run_id)
}

#[tokio::test]
async fn a_refresh_never_overwrites_a_credential_the_host_replaced_while_it_ran() {
    let mock = MockProvider::start().await;
    // What the slow callback answers: older than the host's replacement, and refused.
    mock.reject_key("sk-stale");
    mock.push(Reply::text("done with the host's key"));
    let (host, server, _dir, run_id) = refresh_in_flight(&mock, "sk-stale").await;
    let (status, body) = server
        .put(
            &format!("/v1/runs/{run_id}/model-credential?app_id={APP}"),
            json!({"credential": key("sk-host", None)}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let run = server
        .wait_status(&run_id, &["completed", "paused", "failed"])
        .await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(mock.bearers(), vec!["Bearer sk-old", "Bearer sk-host"]);
    assert_eq!(host.requests().len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn a_refresh_does_not_bring_back_a_credential_the_host_revoked_while_it_ran() {
    let mock = MockProvider::start().await;
    mock.set_fallback(Some(Reply::text("not reached")));
    let (_host, server, _dir, run_id) = refresh_in_flight(&mock, "sk-renewed").await;
    let (status, body) = server.revoke_model_credential(&run_id).await;
    assert_eq!(status, 204, "{body}");
    let run = server
        .wait_status(&run_id, &["completed", "paused", "failed"])
        .await;
    assert_eq!(run["pause_reason"], "authentication", "{run}");
    assert_eq!(mock.bearers(), vec!["Bearer sk-old"]);
    server.stop().await;
}

/// The pause as the contract has it: a pending `authentication` interaction whose payload
/// names the provider, the credential's connection and the reason, and a `run.paused` event
/// with the reason, provider and connection; never the key.
async fn assert_authentication_pause(server: &TestServer, run_id: &str) {
    let interactions = server.list(run_id, "interactions").await;
    let pending: Vec<&Value> = interactions
        .iter()
        .filter(|i| i["interaction_kind"] == "authentication" && i["status"] == "pending")
        .collect();
    assert_eq!(pending.len(), 1, "{interactions:?}");
    let payload = &pending[0]["request_payload"];
    assert_eq!(payload["provider"], "openai", "{payload}");
    assert_eq!(payload["connection_id"], "conn_1", "{payload}");
    assert!(
        !payload["reason"].as_str().unwrap_or_default().is_empty(),
        "{payload}"
    );
    let events = server.events(run_id).await;
    let paused = events
        .iter()
        .rev()
        .find(|e| e["type"] == "run.paused")
        .expect("a run.paused event");
    assert_eq!(paused["data"]["pause_reason"], "authentication", "{paused}");
    assert_eq!(paused["data"]["provider"], "openai", "{paused}");
    assert_eq!(paused["data"]["connection_id"], "conn_1", "{paused}");
    assert!(!format!("{interactions:?}{events:?}").contains("sk-old"));
}
