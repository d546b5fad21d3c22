//! No credential a run is given ever shows: a run's model key, the one its app's refresh
//! callback answers after a 401, and a replacement PUT by the host are looked for in everything
//! the service writes or says — its debug log, every response body, the SSE stream, the event
//! history, and the raw bytes of its SQLite database (checkpoints and records) — and none is
//! found.

use ar_test_support::mock_provider::{MockProvider, Reply};
use ar_test_support::refresh_host::RefreshHost;
use serde_json::json;

use ar_test_support::service::*;

use crate::BIN;

const FIRST: &str = "sk-sweep-first-7f3a9c";
const REFRESHED: &str = "sk-sweep-refreshed-5d21e0";
const REPLACED: &str = "sk-sweep-replaced-c8b471";
const CALLBACK_TOKEN: &str = "sweep-callback-token-44aa";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_run_credential_appears_in_logs_responses_events_or_the_database() {
    let mock = MockProvider::start().await;
    mock.reject_key(FIRST);
    // Two steps: a tool call (the run pauses for approval), then the answer.
    mock.push(Reply::tool_call(
        "request_user_input",
        json!({"questions": [{"id": "q", "question": "Which one?"}]}).to_string(),
    ));
    mock.push(Reply::text("all done"));
    let host = RefreshHost::start(CALLBACK_TOKEN).await;
    host.answer(Some(
        json!({"type": "api_key", "api_key": REFRESHED, "connection_id": "conn_s"}),
    ));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = sqlite_env(dir.path(), &mock);
    env.insert("AGENT_RUNTIME_LOG".into(), "debug".into());
    env.insert("OPENAI_BASE_URL".into(), mock.base_url());
    let apps = json!({"apps": [{"app_id": APP,
        "model_credential_callback": {"url": host.url(), "token": CALLBACK_TOKEN}}]});
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), apps.to_string());
    let mut server = Server::start(BIN, &env).await;

    let agent = server
        .agent("sweeper", json!({"allowed_tools": ["request_user_input"]}))
        .await;
    let mut said = Vec::new();
    let (status, run) = server
        .post(
            "/v1/runs",
            json!({"app_id": APP, "agent_id": agent, "target": {"type": "t", "id": "1"},
                   "model": {"provider": "openai", "model": "m-1"},
                   "model_credential": {"type": "api_key", "api_key": FIRST, "connection_id": "conn_s"}}),
        )
        .await;
    assert_eq!(status, 202, "{run}");
    said.push(run.to_string());
    let run_id = run["id"].as_str().unwrap().to_string();
    let paused = server
        .wait_status(&run_id, &["paused", "failed", "completed"])
        .await;
    assert_eq!(paused["pause_reason"], "human_input", "{paused}");
    let (status, replaced) = server
        .put(
            &format!("/v1/runs/{run_id}/model-credential?app_id={APP}"),
            json!({"credential": {"type": "api_key", "api_key": REPLACED, "connection_id": "conn_s"}}),
        )
        .await;
    assert_eq!(status, 200, "{replaced}");
    said.push(replaced.to_string());
    let (status, resumed) = server
        .post(
            &format!("/v1/runs/{run_id}/resume?app_id={APP}"),
            json!({"intent": "reply", "content": "the first"}),
        )
        .await;
    assert_eq!(status, 200, "{resumed}");
    said.push(resumed.to_string());
    let ended = server.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(ended["status"], "completed", "{ended}");
    // The keys did their work: the refreshed one after the 401, the replacement after the PUT.
    assert_eq!(
        mock.bearers(),
        vec![
            format!("Bearer {FIRST}"),
            format!("Bearer {REFRESHED}"),
            format!("Bearer {REPLACED}")
        ]
    );

    // Everything the service says about the run.
    for sub in [
        "",
        "/messages",
        "/artifacts",
        "/interactions",
        "/tool-calls",
        "/events/history",
        "/execution",
    ] {
        let (_, body) = server
            .get(&format!("/v1/runs/{run_id}{sub}?app_id={APP}"))
            .await;
        said.push(body.to_string());
    }
    for path in [
        "/v1/capabilities",
        "/v1/app-health?app_id=host_app",
        "/v1/runs?app_id=host_app",
    ] {
        said.push(server.get(path).await.1.to_string());
    }
    let stream = server.open_stream(&run_id, None).await;
    said.push(stream.text().await.unwrap_or_default());
    server.process.terminate();
    assert!(server.process.wait_exit(WAIT).await.success());
    said.push(server.process.stderr());
    said.push(server.process.stdout());
    let mut database = Vec::new();
    for entry in std::fs::read_dir(dir.path().join("data")).expect("data dir") {
        let path = entry.expect("entry").path();
        if path.is_file() {
            database.extend(std::fs::read(&path).expect("read the store"));
        }
    }
    said.push(String::from_utf8_lossy(&database).into_owned());

    assert!(
        said.iter().any(|text| text.contains(&run_id)),
        "the sweep saw the run"
    );
    for secret in [FIRST, REFRESHED, REPLACED, CALLBACK_TOKEN] {
        for (index, text) in said.iter().enumerate() {
            assert!(!text.contains(secret), "{secret} found in item {index}");
        }
    }
}
