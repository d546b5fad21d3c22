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
