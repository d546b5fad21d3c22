//! A run's tool-gateway token, the one a CLI turn's MCP bridge holds instead of the service
//! token: it opens `GET` and `POST /v1/runs/{id}/tools` of its own run and app, nothing else,
//! and nothing once the run ended; the service token opens everything as before. The run gets
//! the token's digest through the store, as a CLI turn gives it (the real CLIs and their
//! bridge are exercised in agent-runtime's end-to-end tests).

use ar_core::secret::Secret;
use ar_core::store::{RunChange, Store as _};
use ar_test_support::mock_provider::{MockProvider, Reply};
use reqwest::Method;
use serde_json::{json, Value};

use ar_test_support::service::*;

const RUN_TOKEN: &str = "art_run_0123456789abcdefghijklmnopqrstuvwxyzABCDEF";

/// A native run that paused asking the user (a run that is neither running a turn nor ended).
async fn paused_run(server: &TestServer, mock: &MockProvider) -> String {
    mock.push(Reply::tool_call(
        "request_user_input",
        json!({"questions": [{"id": "q", "question": "?"}]}).to_string(),
    ));
    let agent = server
        .agent(
            "asker",
            json!({"allowed_tools": ["get_context", "request_user_input"]}),
        )
        .await;
    let run = server.start_run(mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    server.wait_status(&run_id, &["paused"]).await;
    run_id
}

/// Puts the digest of `token` on the run, through a second connection to the service's store.
async fn give_token(server: &TestServer, run_id: &str, token: &str) {
    let dir = server.dir.as_ref().expect("the server's directory");
    let dsn = dir.path().join("runtime.db");
    let store = ar_store::SqliteStore::connect(dsn.to_str().expect("utf-8 path"))
        .await
        .expect("open the service's store");
    let mut run = store
        .get_run(APP, run_id)
        .await
        .expect("read the run")
        .expect("the run exists");
    let version = run.version;
    run.engine.tool_gateway_token_sha256 = Some(Secret::new(token).digest());
    store
        .commit(RunChange::update(run, version))
        .await
        .expect("commit the digest");
}

fn tools_of(run_id: &str) -> String {
    format!("/v1/runs/{run_id}/tools?app_id={APP}")
}

async fn as_run(server: &TestServer, token: &str, method: Method, path: &str) -> (u16, Value) {
    let body = (method == Method::POST).then(|| json!({"tool_name": "get_context", "input": {}}));
    server.send_as(Some(token), method, path, body).await
}

#[tokio::test]
async fn a_run_token_opens_its_own_runs_tools_only() {
    let mock = MockProvider::start().await;
    let server = TestServer::start(&mock).await;
    let run_id = paused_run(&server, &mock).await;
    let other = paused_run(&server, &mock).await;
    give_token(&server, &run_id, RUN_TOKEN).await;

    let (status, listed) = as_run(&server, RUN_TOKEN, Method::GET, &tools_of(&run_id)).await;
    assert_eq!(status, 200, "{listed}");
    assert!(listed.to_string().contains("get_context"), "{listed}");
    let (status, called) = as_run(&server, RUN_TOKEN, Method::POST, &tools_of(&run_id)).await;
    assert_eq!(status, 200, "{called}");
    assert!(called.to_string().contains("T-42"), "{called}");

    let refused = [
        (Method::GET, tools_of(&other)),
        (Method::POST, tools_of(&other)),
        (
            Method::GET,
            format!("/v1/runs/{run_id}/tools?app_id=v2_app"),
        ),
        (Method::GET, format!("/v1/runs/{run_id}/tools")),
        (
            Method::GET,
            format!("/internal/runs/{run_id}/tools?app_id={APP}"),
        ),
        (Method::GET, format!("/v1/runs/{run_id}?app_id={APP}")),
        (
            Method::GET,
            format!("/v1/runs/{run_id}/tool-calls?app_id={APP}"),
        ),
        (
            Method::GET,
            format!("/v1/runs/{run_id}/messages?app_id={APP}"),
        ),
        (
            Method::POST,
            format!("/v1/runs/{run_id}/cancel?app_id={APP}"),
        ),
        (
            Method::POST,
            format!("/v1/runs/{run_id}/approve?app_id={APP}"),
        ),
        (Method::GET, format!("/v1/runs?app_id={APP}")),
        (Method::GET, "/v1/capabilities".to_string()),
    ];
    for (method, path) in refused {
        let (status, body) = as_run(&server, RUN_TOKEN, method.clone(), &path).await;
        assert_eq!(status, 401, "{method} {path}: {body}");
        assert_eq!(body, json!({"error": "unauthorized"}));
    }
    // Another token of the same form, or the digest itself, opens nothing.
    let digest = Secret::new(RUN_TOKEN).digest();
    for wrong in [
        "art_run_0123456789abcdefghijklmnopqrstuvwxyzABCDEX",
        &digest,
    ] {
        let (status, _) = as_run(&server, wrong, Method::GET, &tools_of(&run_id)).await;
        assert_eq!(status, 401, "{wrong}");
    }
    // The service token still opens everything.
    let (status, _) = server.get(&tools_of(&other)).await;
    assert_eq!(status, 200);
    server.stop().await;
}

#[tokio::test]
async fn a_run_token_opens_nothing_once_the_run_ended() {
    let mock = MockProvider::start().await;
    let server = TestServer::start(&mock).await;
    let run_id = paused_run(&server, &mock).await;
    give_token(&server, &run_id, RUN_TOKEN).await;
    let (status, _) = as_run(&server, RUN_TOKEN, Method::GET, &tools_of(&run_id)).await;
    assert_eq!(status, 200);
    let (status, body) = server
        .post(&format!("/v1/runs/{run_id}/cancel?app_id={APP}"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    for method in [Method::GET, Method::POST] {
        let (status, body) = as_run(&server, RUN_TOKEN, method.clone(), &tools_of(&run_id)).await;
        assert_eq!(status, 401, "{method}: {body}");
    }
    server.stop().await;
}
