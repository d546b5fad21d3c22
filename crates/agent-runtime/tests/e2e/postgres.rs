//! The SDK flow on PostgreSQL: the binary with `AGENT_RUNTIME_STORE_DRIVER=postgres` against a
//! database created for this test and dropped afterwards (best effort).
//!
//! The server comes from `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`),
//! used only to create and drop the test database. When it is unreachable the test is skipped
//! with a loud message, unless `CI=true`, where that is a failure.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use ar_test_support::mock_provider::MockProvider;
use futures::FutureExt as _;
use sqlx::Connection as _;

use crate::harness::*;

fn admin_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".to_string())
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value.eq_ignore_ascii_case("true") || value == "1")
}

async fn admin_connection() -> Result<sqlx::PgConnection, String> {
    match tokio::time::timeout(
        Duration::from_secs(10),
        sqlx::PgConnection::connect(&admin_url()),
    )
    .await
    {
        Ok(Ok(connection)) => Ok(connection),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("connection timed out".to_string()),
    }
}

/// A fresh database; its URL for the binary and its name (to drop it).
async fn create_database(case: &str) -> Option<(String, String)> {
    let mut admin = match admin_connection().await {
        Ok(connection) => connection,
        Err(error) if !in_ci() => {
            eprintln!(
                "\n!!!!! SKIPPING e2e::postgres::{case}: PostgreSQL at {} is unreachable ({error}). \
                 Set DATABASE_URL or start PostgreSQL; under CI=true this fails.\n",
                admin_url()
            );
            return None;
        }
        Err(error) => panic!("e2e::postgres::{case}: PostgreSQL is required under CI: {error}"),
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.subsec_nanos())
        .unwrap_or_default();
    let name = format!("ar_e2e_{}_{nanos}", std::process::id());
    sqlx::query(&format!("CREATE DATABASE \"{name}\""))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|error| panic!("create database {name}: {error}"));
    let _ = admin.close().await;
    let mut url = url::Url::parse(&admin_url()).expect("DATABASE_URL is a URL");
    url.set_path(&format!("/{name}"));
    Some((url.to_string(), name))
}

async fn drop_database(name: &str) {
    match admin_connection().await {
        Ok(mut admin) => {
            let statement = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
            if let Err(error) = sqlx::query(&statement).execute(&mut admin).await {
                eprintln!("could not drop test database {name}: {error}");
            }
            let _ = admin.close().await;
        }
        Err(error) => eprintln!("could not drop test database {name}: {error}"),
    }
}

/// Runs `case` with the URL of a fresh database, dropping it afterwards even when it panics.
async fn on_fresh_database<F, Fut>(case: &str, body: F)
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let Some((database_url, name)) = create_database(case).await else {
        return;
    };
    let outcome = AssertUnwindSafe(body(database_url)).catch_unwind().await;
    drop_database(&name).await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// The service environment on PostgreSQL at `database_url`.
fn postgres_env(
    dir: &std::path::Path,
    mock: &MockProvider,
    database_url: &str,
) -> std::collections::BTreeMap<String, String> {
    let mut env = sqlite_env(dir, mock);
    env.remove("AGENT_RUNTIME_SQLITE_DSN");
    env.insert("AGENT_RUNTIME_STORE_DRIVER".into(), "postgres".into());
    env.insert("DATABASE_URL".into(), database_url.to_string());
    env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_flow_on_postgres() {
    on_fresh_database("sdk_flow_on_postgres", |database_url| async move {
        let mock = MockProvider::start().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let mut server = Server::start(&postgres_env(dir.path(), &mock, &database_url)).await;
        crate::sdk_flow::sdk_flow(&server, &mock).await;
        let (status, capabilities) = server.get("/v1/capabilities").await;
        assert_eq!(status, 200);
        assert_eq!(
            capabilities["store"]["driver"], "postgres",
            "{capabilities}"
        );
        server.process.terminate();
        assert!(server.process.wait_exit(WAIT).await.success());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_replica_on_postgres_takes_over_a_dead_owners_run() {
    on_fresh_database("replica_takeover_on_postgres", |database_url| async move {
        let mock = MockProvider::start().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let env = postgres_env(dir.path(), &mock, &database_url);
        crate::replicas::takeover_scenario(&env, &mock).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_deliver_every_event_on_postgres() {
    on_fresh_database("callbacks_on_postgres", |database_url| async move {
        let mock = MockProvider::start().await;
        let dir = tempfile::tempdir().expect("tempdir");
        let env = postgres_env(dir.path(), &mock, &database_url);
        crate::callbacks::concurrent_runs_deliver_every_event(&env, &mock).await;
    })
    .await;
}
