//! Codex's ChatGPT device sign-in through the service: `POST /v1/runs/{id}/codex-auth/
//! device-code/start` and `/cancel` on a running codex run, driven by the real binary through
//! a real `codex app-server`, which signs in against the mock provider standing in for
//! OpenAI's issuer and the ChatGPT backend's account discovery (`AGENT_RUNTIME_CODEX_LOGIN_ISSUER`,
//! `AGENT_RUNTIME_CHATGPT_BASE_URL`). What is exercised: the app-server's device-code login
//! (user code, polling while the person has not signed in, the token exchange, the account
//! read), the contract's states as `codex_auth.state_changed` events and answers, the tokens
//! sealed in the store as the app's sign-in of the ChatGPT account, and cancel. What is not:
//! the vendor's real issuer, which cannot be reached from here.
//!
//! A missing codex skips loudly; under `CI=true` it fails instead.

use std::path::Path;
use std::time::Duration;

use ar_test_support::mock_provider::{DeviceLoginScript, MockProvider, Reply};
use ar_test_support::require_cli;
use ar_test_support::service::*;
use serde_json::{json, Value};

use crate::BIN;

/// The service pointed at the mock provider as the issuer and the ChatGPT backend.
pub fn env(dir: &Path, mock: &MockProvider) -> Env {
    let mut env = sqlite_env(dir, mock);
    env.insert("AGENT_RUNTIME_LOG".into(), "debug".into());
    env.insert("AGENT_RUNTIME_CODEX_LOGIN_ISSUER".into(), mock.root_url());
    env.insert(
        "AGENT_RUNTIME_CHATGPT_BASE_URL".into(),
        format!("{}/backend-api/codex", mock.root_url()),
    );
    env
}

/// A codex run that stays `running`: the model takes its time to answer.
async fn running_codex_run(server: &Server, mock: &MockProvider) -> String {
    mock.set_fallback(Some(Reply::text("later").delay(Duration::from_secs(90))));
    let agent = server
        .agent("codex-signin", json!({"runtime_kind": "codex"}))
        .await;
    let run = server.start_run(mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    server.wait_status(&run_id, &["running"]).await;
    run_id
}

fn auth_path(run_id: &str, action: &str) -> String {
    format!("/v1/runs/{run_id}/codex-auth/device-code/{action}?app_id={APP}")
}

/// The `codex_auth.state_changed` events' data, in order.
async fn auth_states(server: &Server, run_id: &str) -> Vec<Value> {
    server
        .events(run_id)
        .await
        .into_iter()
        .filter(|event| event["type"] == "codex_auth.state_changed")
        .map(|event| event["data"].clone())
        .collect()
}

async fn wait_auth_state(server: &Server, run_id: &str, state: &str) -> Vec<Value> {
    wait_for(
        &format!("codex_auth {state}"),
        Duration::from_secs(90),
        || async {
            let states = auth_states(server, run_id).await;
            states
                .iter()
                .any(|data| data["state"] == state)
                .then_some(states)
        },
    )
    .await
}

/// Signs the app in as the script's account through a codex run kept running meanwhile
/// (cancelled afterwards; the mock answers at once again).
pub async fn sign_in(server: &Server, mock: &MockProvider) {
    let run_id = running_codex_run(server, mock).await;
    let (status, started) = server.post(&auth_path(&run_id, "start"), json!({})).await;
    assert_eq!(status, 200, "{started}");
    assert_eq!(started["state"], "pending");
    wait_auth_state(server, &run_id, "connected").await;
    let (status, _) = server
        .post(&format!("/v1/runs/{run_id}/cancel?app_id={APP}"), json!({}))
        .await;
    assert_eq!(status, 200);
    server.wait_status(&run_id, &["cancelled"]).await;
    mock.set_fallback(None);
}

/// Every byte of the SQLite store's files.
fn store_bytes(dir: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(dir.join("data"))
        .expect("data dir")
        .flatten()
    {
        bytes.extend(std::fs::read(entry.path()).unwrap_or_default());
    }
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_run_signs_in_by_device_code_and_keeps_the_tokens_sealed() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.device_login(DeviceLoginScript {
        pending_polls: 3,
        plan_type: "pro".into(),
        ..DeviceLoginScript::default()
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(BIN, &env(dir.path(), &mock)).await;
    let run_id = running_codex_run(&server, &mock).await;

    let (status, started) = server.post(&auth_path(&run_id, "start"), json!({})).await;
    assert_eq!(status, 200, "{started}");
    assert_eq!(started["state"], "pending");
    assert_eq!(started["provider"], "openai");
    assert_eq!(started["user_code"], "MOCK-1234");
    assert_eq!(
        started["verification_url"],
        format!("{}/codex/device", mock.root_url())
    );
    let login_id = started["login_id"].as_str().expect("login id").to_string();

    let states = wait_auth_state(&server, &run_id, "connected").await;
    let names: Vec<&str> = states.iter().filter_map(|s| s["state"].as_str()).collect();
    assert_eq!(names, ["pending", "connected"], "{states:?}");
    assert_eq!(states[0]["user_code"], "MOCK-1234");
    assert_eq!(states[1]["plan_type"], "pro");
    assert_eq!(states[1]["login_id"], login_id.as_str());
    assert!(
        mock.device_login_polls() >= 3,
        "the app-server polled the issuer"
    );

    // The tokens: issued by the issuer, kept sealed, said nowhere.
    let tokens = mock.issued_chatgpt_tokens();
    assert_eq!(tokens.len(), 3, "access, id and refresh tokens");
    let sealed = sqlite_strings(
        dir.path(),
        "SELECT name FROM app_secrets WHERE app_id = 'host_app'",
    )
    .await;
    assert_eq!(sealed, ["codex_auth/acct_mock_1"]);
    let stored = store_bytes(dir.path());
    let (_, history) = server
        .get(&format!("/v1/runs/{run_id}/events?app_id={APP}"))
        .await;
    let log = server.process.stderr();
    for token in &tokens {
        let needle = token.as_bytes();
        assert!(
            !stored.windows(needle.len()).any(|w| w == needle),
            "a token in the store's bytes"
        );
        assert!(
            !history.to_string().contains(token.as_str()),
            "a token in the events"
        );
        assert!(!started.to_string().contains(token.as_str()));
        assert!(!log.contains(token.as_str()), "a token in the service log");
    }
    assert!(
        codex_login_homes(dir.path()).is_empty(),
        "the login's private home was removed"
    );

    // A second sign-in waits for the person until it is cancelled.
    mock.device_login(DeviceLoginScript {
        pending_polls: 100_000,
        ..DeviceLoginScript::default()
    });
    let (status, second) = server.post(&auth_path(&run_id, "start"), json!({})).await;
    assert_eq!(
        (status, second["state"].as_str()),
        (200, Some("pending")),
        "{second}"
    );
    let (status, again) = server.post(&auth_path(&run_id, "start"), json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(
        again["login_id"], second["login_id"],
        "the waiting login is answered again"
    );
    let (status, cancelled) = server.post(&auth_path(&run_id, "cancel"), json!({})).await;
    assert_eq!(
        (status, cancelled["state"].as_str()),
        (200, Some("cancelled")),
        "{cancelled}"
    );
    let states = wait_auth_state(&server, &run_id, "cancelled").await;
    let names: Vec<&str> = states.iter().filter_map(|s| s["state"].as_str()).collect();
    assert_eq!(names, ["pending", "connected", "pending", "cancelled"]);
    assert_eq!(
        mock.issued_chatgpt_tokens().len(),
        3,
        "nothing issued for the cancelled login"
    );
    wait_for(
        "the cancelled login's home gone",
        Duration::from_secs(10),
        || async { codex_login_homes(dir.path()).is_empty().then_some(()) },
    )
    .await;

    let (status, _) = server
        .post(&format!("/v1/runs/{run_id}/cancel?app_id={APP}"), json!({}))
        .await;
    assert_eq!(status, 200);
}

/// The logins' private homes left under the service's data directory.
fn codex_login_homes(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.join("xdg"), dir.join("data")];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("codex-login-"))
                {
                    found.push(path.display().to_string());
                }
                stack.push(path);
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_the_service_cannot_give_is_refused_by_name() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(BIN, &env(dir.path(), &mock)).await;
    let (status, body) = server
        .post(&auth_path("run_nope", "start"), json!({}))
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("run not found"))
    );
    mock.push(Reply::text("done"));
    let agent = server.agent("native", json!({})).await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().expect("run id");
    for action in ["start", "cancel"] {
        let (status, body) = server.post(&auth_path(run_id, action), json!({})).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(
            body["error"],
            "codex auth is only available for runs of codex agents"
        );
    }
    assert!(
        auth_states(&server, run_id).await.is_empty(),
        "nothing recorded"
    );
    assert!(mock.issued_chatgpt_tokens().is_empty());
}
