//! The SDK flow on PostgreSQL: the binary with `AGENT_RUNTIME_STORE_DRIVER=postgres` against a
//! database created for this test and dropped afterwards (see
//! [`ar_test_support::service::on_fresh_database`]: skipped loudly when PostgreSQL is
//! unreachable, a failure under `CI=true`).

use ar_test_support::mock_provider::MockProvider;

use ar_test_support::service::*;

use crate::BIN;

/// The service environment on PostgreSQL at `database_url`.
fn postgres_env(dir: &std::path::Path, mock: &MockProvider, database_url: &str) -> Env {
    on_postgres(sqlite_env(dir, mock), database_url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_flow_on_postgres() {
    on_fresh_database(
        "e2e::postgres::sdk_flow_on_postgres",
        |database_url| async move {
            let mock = MockProvider::start().await;
            let dir = tempfile::tempdir().expect("tempdir");
            let mut server =
                Server::start(BIN, &postgres_env(dir.path(), &mock, &database_url)).await;
            crate::sdk_flow::sdk_flow(&server, &mock).await;
            let (status, capabilities) = server.get("/v1/capabilities").await;
            assert_eq!(status, 200);
            assert_eq!(
                capabilities["store"]["driver"], "postgres",
                "{capabilities}"
            );
            server.process.terminate();
            assert!(server.process.wait_exit(WAIT).await.success());
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_replica_on_postgres_takes_over_a_dead_owners_run() {
    on_fresh_database(
        "e2e::postgres::replica_takeover_on_postgres",
        |database_url| async move {
            let mock = MockProvider::start().await;
            let dir = tempfile::tempdir().expect("tempdir");
            let env = postgres_env(dir.path(), &mock, &database_url);
            crate::replicas::takeover_scenario(&env, &mock).await;
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_deliver_every_event_on_postgres() {
    on_fresh_database(
        "e2e::postgres::callbacks_on_postgres",
        |database_url| async move {
            let mock = MockProvider::start().await;
            let dir = tempfile::tempdir().expect("tempdir");
            let env = postgres_env(dir.path(), &mock, &database_url);
            crate::callbacks::concurrent_runs_deliver_every_event(&env, &mock).await;
        },
    )
    .await;
}

/// A `none` credential for an approved no-auth endpoint has nothing to seal: a PostgreSQL
/// deployment without `AGENT_RUNTIME_MODEL_CREDENTIAL_ENCRYPTION_KEY` runs it, and still
/// refuses a credential with a secret (there is no key to seal it with).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_none_credential_needs_no_encryption_key_on_postgres() {
    on_fresh_database(
        "e2e::postgres::none_credential_without_key",
        |database_url| async move {
            let mock = MockProvider::start().await;
            mock.push(ar_test_support::mock_provider::Reply::text("no key needed"));
            let dir = tempfile::tempdir().expect("tempdir");
            let mut env = postgres_env(dir.path(), &mock, &database_url);
            env.remove("AGENT_RUNTIME_MODEL_CREDENTIAL_ENCRYPTION_KEY");
            let apps = serde_json::json!({"apps": [{"app_id": APP, "model_endpoints": [
                {"id": "open", "base_url": mock.base_url(), "auth_mode": "none", "allow_http": true},
                {"id": "keyed", "base_url": mock.base_url(), "auth_mode": "api_key", "allow_http": true}]}]});
            env.insert("AGENT_RUNTIME_APP_CONFIG".into(), apps.to_string());
            let mut server = Server::start(BIN, &env).await;
            let agent = server.agent("keyless", serde_json::json!({})).await;
            let start = |endpoint: &str, credential: serde_json::Value| {
                serde_json::json!({"app_id": APP, "agent_id": agent, "target": {"type": "t", "id": "1"},
                    "model": {"provider": "openai_compatible", "model": "m",
                              "endpoint": {"id": endpoint, "base_url": mock.base_url(),
                                           "auth_mode": if endpoint == "open" { "none" } else { "api_key" }}},
                    "model_credential": credential})
            };
            let (status, run) = server
                .post("/v1/runs", start("open", serde_json::json!({"type": "none"})))
                .await;
            assert_eq!(status, 202, "{run}");
            let ended = server
                .wait_status(run["id"].as_str().unwrap(), &["completed", "failed"])
                .await;
            assert_eq!(ended["status"], "completed", "{ended}");
            assert!(mock.model_requests()[0].header("authorization").is_none());
            let (status, refused) = server
                .post(
                    "/v1/runs",
                    start("keyed", serde_json::json!({"type": "api_key", "api_key": "sk-x"})),
                )
                .await;
            assert_eq!(status, 400, "{refused}");
            assert!(
                refused["error"].as_str().unwrap().contains("ENCRYPTION_KEY"),
                "{refused}"
            );
            server.process.terminate();
            assert!(server.process.wait_exit(WAIT).await.success());
        },
    )
    .await;
}
