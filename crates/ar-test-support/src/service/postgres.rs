//! A fresh PostgreSQL database per test, dropped afterwards even when the test panics.
//!
//! The server comes from `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`),
//! used only to create and drop the test database. When it is unreachable the test is skipped
//! with a loud message, unless `CI=true`, where that is a failure.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::FutureExt as _;
use sqlx::Connection as _;

use super::Env;

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

/// A fresh database; its URL for the service and its name (to drop it).
async fn create_database(case: &str) -> Option<(String, String)> {
    let mut admin = match admin_connection().await {
        Ok(connection) => connection,
        Err(error) if !in_ci() => {
            eprintln!(
                "\n!!!!! SKIPPING {case}: PostgreSQL at {} is unreachable ({error}). \
                 Set DATABASE_URL or start PostgreSQL; under CI=true this fails.\n",
                admin_url()
            );
            return None;
        }
        Err(error) => panic!("{case}: PostgreSQL is required under CI: {error}"),
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.subsec_nanos())
        .unwrap_or_default();
    let name = format!("ar_test_{}_{nanos}", std::process::id());
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

/// Runs `body` with the URL of a fresh database, dropping it afterwards even when it panics.
/// `case` names the test in the skip message.
pub async fn on_fresh_database<F, Fut>(case: &str, body: F)
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

/// `env` with its store moved to PostgreSQL at `database_url`.
pub fn on_postgres(mut env: Env, database_url: &str) -> Env {
    env.remove("AGENT_RUNTIME_SQLITE_DSN");
    env.insert("AGENT_RUNTIME_STORE_DRIVER".into(), "postgres".into());
    env.insert("DATABASE_URL".into(), database_url.to_string());
    env
}
