//! Backend-specific checks: connection strings, in-memory sharing, persistence across
//! reopening, corrupt stored values and PostgreSQL schema isolation.

use std::sync::Arc;

use ar_core::store::{Store, StoreError};
use ar_store::{open, ConnectError, SqliteStore};

use crate::fixtures::{agent, create, run, stored};
use crate::harness::{drop_schema, postgres_store, postgres_url};

#[tokio::test]
async fn sqlite_file_is_created_and_persists() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a").join("b").join("runtime.db");
    let run = run("app-a", "h", 0);
    {
        let store = SqliteStore::connect(path.to_str().unwrap()).await.unwrap();
        assert_eq!(store.driver(), "sqlite");
        assert!(!store.in_memory());
        create(&store, &run).await;
        store.close().await;
    }
    assert!(path.exists(), "database file created with its directories");
    let url = format!("sqlite://{}", path.display());
    let store = SqliteStore::connect(&url).await.unwrap();
    assert_eq!(
        store.get_run("app-a", &run.id).await.unwrap(),
        Some(stored(&run)),
        "reopened by URL"
    );
    let journal: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(store.writer_pool())
        .await
        .unwrap();
    assert_eq!(journal, "wal");
    let foreign_keys: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
        .fetch_one(store.writer_pool())
        .await
        .unwrap();
    assert_eq!(foreign_keys, 1);
    store.ping().await.unwrap();
    store.close().await;
}

#[tokio::test]
async fn sqlite_memory_is_shared_between_handles() {
    for dsn in [":memory:", "sqlite::memory:"] {
        let store = SqliteStore::connect(dsn).await.unwrap();
        assert!(store.in_memory());
        let clone = store.clone();
        assert!(store.put_agent(&agent("app", "a1", 0)).await.unwrap());
        assert!(
            clone.get_agent("app", "a1").await.unwrap().is_some(),
            "{dsn}: clones see the same db"
        );
        let other = SqliteStore::connect(dsn).await.unwrap();
        assert!(
            other.get_agent("app", "a1").await.unwrap().is_none(),
            "{dsn}: separate stores are separate"
        );
    }
    let store = open("memory", "", "").await.unwrap();
    assert!(store.in_memory());
    assert_eq!(store.driver(), "sqlite");
    assert!(matches!(
        open("oracle", "", "").await,
        Err(ConnectError::UnknownDriver(_))
    ));
    assert!(matches!(
        open("sqlite", " ", "").await,
        Err(ConnectError::MissingPath)
    ));
}

#[tokio::test]
async fn sqlite_corrupt_values_are_reported() {
    let store = SqliteStore::connect(":memory:").await.unwrap();
    let run = run("app-a", "h", 0);
    create(&store, &run).await;
    sqlx::query("UPDATE runs SET status = 'sleeping' WHERE id = $1")
        .bind(&run.id)
        .execute(store.writer_pool())
        .await
        .unwrap();
    assert!(matches!(
        store.get_run("app-a", &run.id).await,
        Err(StoreError::Corrupt(_))
    ));
    sqlx::query("UPDATE runs SET status = 'queued', input = '{not json' WHERE id = $1")
        .bind(&run.id)
        .execute(store.writer_pool())
        .await
        .unwrap();
    assert!(matches!(
        store.get_run("app-a", &run.id).await,
        Err(StoreError::Corrupt(_))
    ));
    sqlx::query("UPDATE runs SET input = '{}', created_at = 'yesterday' WHERE id = $1")
        .bind(&run.id)
        .execute(store.writer_pool())
        .await
        .unwrap();
    assert!(matches!(
        store.list_runs("app-a").await,
        Err(StoreError::Corrupt(_))
    ));
}

#[tokio::test]
async fn postgres_corrupt_values_are_reported() {
    let Some((store, schema)) = postgres_store("corrupt_values_are_reported").await else {
        return;
    };
    let run = run("app-a", "h", 0);
    create(&store, &run).await;
    sqlx::query("UPDATE runs SET status = 'sleeping' WHERE id = $1")
        .bind(&run.id)
        .execute(store.pool())
        .await
        .unwrap();
    let result = store.get_run("app-a", &run.id).await;
    store.close().await;
    drop_schema(&schema).await;
    assert!(matches!(result, Err(StoreError::Corrupt(_))), "{result:?}");
}

#[tokio::test]
async fn postgres_schemas_are_isolated() {
    let Some((first, first_schema)) = postgres_store("schemas_are_isolated").await else {
        return;
    };
    let Some((second, second_schema)) = postgres_store("schemas_are_isolated").await else {
        return;
    };
    let run = run("app-a", "h", 0);
    create(&first, &run).await;
    let seen_by_second = second.get_run("app-a", &run.id).await.unwrap();
    assert_eq!(first.driver(), "postgres");
    assert!(!first.in_memory());
    first.ping().await.unwrap();
    // Reconnecting to an existing schema keeps its data (migrations are idempotent).
    let again = ar_store::PostgresStore::connect_with_schema(&postgres_url(), &first_schema)
        .await
        .unwrap();
    let seen_again = again.get_run("app-a", &run.id).await.unwrap();
    let bad = ar_store::PostgresStore::connect_with_schema(&postgres_url(), "bad\"name").await;
    for store in [&first, &second, &again] {
        store.close().await;
    }
    drop_schema(&first_schema).await;
    drop_schema(&second_schema).await;
    assert!(seen_by_second.is_none());
    assert_eq!(seen_again, Some(stored(&run)));
    assert!(matches!(bad, Err(ConnectError::InvalidSchema(_))));
}

#[tokio::test]
async fn open_picks_the_backend() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("open.db");
    let store: Arc<dyn Store> = open("sqlite", path.to_str().unwrap(), "").await.unwrap();
    assert_eq!(store.driver(), "sqlite");
    assert!(!store.in_memory());
}

/// Stores hold connections for their whole life; dropping one where no runtime is current
/// (after `block_on` returned) must not panic.
#[test]
fn stores_can_be_dropped_outside_a_runtime() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (memory, file, postgres, _dir) = runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let memory = SqliteStore::connect(":memory:").await.unwrap();
        let file = SqliteStore::connect(dir.path().join("d.db").to_str().unwrap())
            .await
            .unwrap();
        memory.ping().await.unwrap();
        file.ping().await.unwrap();
        create(&file, &run("app", "h", 0)).await;
        let postgres = postgres_store("stores_can_be_dropped_outside_a_runtime").await;
        if let Some((store, _)) = &postgres {
            store.ping().await.unwrap();
        }
        (memory, file, postgres, dir)
    });
    drop(memory);
    drop(file);
    if let Some((store, schema)) = postgres {
        drop(store);
        runtime.block_on(drop_schema(&schema));
    }
}
