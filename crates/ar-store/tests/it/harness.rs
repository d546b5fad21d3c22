//! Runs one conformance case against a fresh store of a given backend: a temporary SQLite
//! file, SQLite in memory, or a PostgreSQL schema of its own (dropped afterwards).
//!
//! PostgreSQL comes from `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`).
//! When it is unreachable the case is skipped with a loud message, unless `CI=true`, where
//! that is a failure.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;

use ar_core::store::Store;
use ar_store::{ConnectError, PostgresStore, SqliteStore};
use futures::FutureExt;
use sqlx::Connection;

pub type CaseFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

#[derive(Debug, Clone, Copy)]
pub enum Backend {
    SqliteFile,
    SqliteMemory,
    Postgres,
}

pub fn postgres_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".to_string())
}

pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value.eq_ignore_ascii_case("true") || value == "1")
}

/// A fresh schema name for one test.
pub fn schema_name() -> String {
    format!("ar_test_{}", ulid_suffix())
}

fn ulid_suffix() -> String {
    ar_core::ids::new_id("x")
        .trim_start_matches("x_")
        .to_string()
}

/// Opens a PostgresStore in a fresh schema, or `None` when PostgreSQL is unreachable outside
/// CI (after saying so loudly).
pub async fn postgres_store(case: &str) -> Option<(PostgresStore, String)> {
    let schema = schema_name();
    match PostgresStore::connect_with_schema(&postgres_url(), &schema).await {
        Ok(store) => Some((store, schema)),
        Err(ConnectError::Connect { source, .. }) if !in_ci() => {
            // Straight to the stderr handle: the test harness captures `eprintln!` of passing
            // tests, and a skipped backend must be visible.
            use std::io::Write as _;
            static BANNER: std::sync::Once = std::sync::Once::new();
            BANNER.call_once(|| {
                let _ = writeln!(
                    std::io::stderr(),
                    "\n!!!!! PostgreSQL at {} is unreachable ({source}): SKIPPING every \
                     postgres test. Set DATABASE_URL or start PostgreSQL; with CI=true this \
                     fails instead.\n",
                    postgres_url()
                );
            });
            let _ = writeln!(std::io::stderr(), "!!!!! SKIPPED postgres::{case}");
            None
        }
        Err(error) => panic!("postgres::{case}: cannot open a test schema: {error}"),
    }
}

/// Drops a test schema (best effort: a leftover schema only costs space).
pub async fn drop_schema(schema: &str) {
    match sqlx::PgConnection::connect(&postgres_url()).await {
        Ok(mut conn) => {
            let statement = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
            if let Err(error) = sqlx::query(&statement).execute(&mut conn).await {
                eprintln!("could not drop test schema {schema}: {error}");
            }
            let _ = conn.close().await;
        }
        Err(error) => eprintln!("could not drop test schema {schema}: {error}"),
    }
}

/// Runs `case` against a fresh store of `backend`, cleaning up even when it panics.
pub async fn run<F>(backend: Backend, name: &str, case: F)
where
    F: FnOnce(Arc<dyn Store>) -> CaseFuture,
{
    match backend {
        Backend::SqliteFile => {
            let dir = tempfile::tempdir().expect("temp dir");
            let path = dir.path().join("nested").join("store.db");
            let store = SqliteStore::connect(path.to_str().expect("utf-8 path"))
                .await
                .expect("open sqlite file store");
            let result = AssertUnwindSafe(case(Arc::new(store.clone())))
                .catch_unwind()
                .await;
            store.close().await;
            if let Err(panic) = result {
                std::panic::resume_unwind(panic);
            }
        }
        Backend::SqliteMemory => {
            let store = SqliteStore::connect("sqlite::memory:")
                .await
                .expect("open sqlite memory store");
            case(Arc::new(store)).await;
        }
        Backend::Postgres => {
            let Some((store, schema)) = postgres_store(name).await else {
                return;
            };
            let result = AssertUnwindSafe(case(Arc::new(store.clone())))
                .catch_unwind()
                .await;
            store.close().await;
            drop_schema(&schema).await;
            if let Err(panic) = result {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

/// Generates, for every listed case `module::case`, one test per backend:
/// `sqlite::case`, `sqlite_memory::case` and `postgres::case`.
#[macro_export]
macro_rules! conformance {
    ($($module:ident :: $case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    $crate::harness::run($crate::harness::Backend::SqliteFile, stringify!($case), |store| {
                        Box::pin($crate::$module::$case(store))
                    })
                    .await;
                }
            )*
        }
        mod sqlite_memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    $crate::harness::run($crate::harness::Backend::SqliteMemory, stringify!($case), |store| {
                        Box::pin($crate::$module::$case(store))
                    })
                    .await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    $crate::harness::run($crate::harness::Backend::Postgres, stringify!($case), |store| {
                        Box::pin($crate::$module::$case(store))
                    })
                    .await;
                }
            )*
        }
    };
}
