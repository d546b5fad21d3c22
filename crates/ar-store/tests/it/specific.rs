//! Backend-specific checks: connection strings, in-memory sharing, persistence across
//! reopening, corrupt stored values and PostgreSQL schema isolation.

use std::sync::Arc;

use ar_core::store::{Store, StoreError};
use ar_core::StoredEvent;
use ar_store::{open, ConnectError, SqliteStore};

use crate::commit::feed;
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
    let pragma = |name: &'static str| {
        let store = store.clone();
        async move { store.pragma(name).await.unwrap() }
    };
    assert_eq!(pragma("journal_mode").await.as_deref(), Some("wal"));
    assert_eq!(pragma("foreign_keys").await.as_deref(), Some("1"));
    assert_eq!(pragma("synchronous").await.as_deref(), Some("1"), "NORMAL");
    // Checkpoints run on the store's own thread, never inside a commit.
    assert_eq!(pragma("wal_autocheckpoint").await.as_deref(), Some("0"));
    assert!(store.pragma("journal_mode; DROP TABLE runs").await.is_err());
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
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("corrupt.db");
    let store = SqliteStore::connect(path.to_str().unwrap()).await.unwrap();
    let run = run("app-a", "h", 0);
    create(&store, &run).await;
    // Another connection damages the row, as a tool or a bug elsewhere could.
    let other = rusqlite::Connection::open(&path).unwrap();
    let damage = |sql: &str| {
        other.execute(sql, [&run.id]).unwrap();
    };
    damage("UPDATE runs SET status = 'sleeping' WHERE id = ?1");
    assert!(matches!(
        store.get_run("app-a", &run.id).await,
        Err(StoreError::Corrupt(_))
    ));
    damage("UPDATE runs SET status = 'queued', input = '{not json' WHERE id = ?1");
    assert!(matches!(
        store.get_run("app-a", &run.id).await,
        Err(StoreError::Corrupt(_))
    ));
    damage("UPDATE runs SET input = '{}', created_at = 'yesterday' WHERE id = ?1");
    assert!(matches!(
        store.list_runs("app-a").await,
        Err(StoreError::Corrupt(_))
    ));
    damage("UPDATE runs SET created_at = 42 WHERE id = ?1");
    assert!(matches!(
        store.list_runs("app-a").await,
        Err(StoreError::Corrupt(_))
    ));
    store.close().await;
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

/// While another process holds SQLite's write lock, a commit waits for it off the async
/// threads: the runtime (here a current-thread one) keeps running other tasks, reads are
/// served meanwhile (WAL), and queued writes go through once the lock is released.
#[tokio::test]
async fn sqlite_waits_for_another_writer_without_blocking_the_runtime() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use ar_core::store::RunChange;
    use ar_core::EventKind;

    use crate::fixtures::event;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let store = SqliteStore::connect(path.to_str().unwrap()).await.unwrap();
    let run = run("app-a", "h", 0);
    create(&store, &run).await;

    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        released.recv().unwrap();
        other.execute_batch("COMMIT").unwrap();
    });

    let ticks = Arc::new(AtomicUsize::new(0));
    let ticker = tokio::spawn({
        let ticks = Arc::clone(&ticks);
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                ticks.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    let commits: Vec<_> = (0..2)
        .map(|n| {
            let store = store.clone();
            let change = RunChange::for_run(&run).with_event(event(EventKind::PlanUpdated, n));
            tokio::spawn(async move { store.commit(change).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        ticks.load(Ordering::Relaxed) >= 10,
        "the runtime kept running while the commits waited"
    );
    assert!(commits.iter().all(|commit| !commit.is_finished()));
    assert_eq!(
        store.get_run("app-a", &run.id).await.unwrap(),
        Some(stored(&run)),
        "reads are served while another process writes"
    );

    release.send(()).unwrap();
    holder.join().unwrap();
    let mut sequences = Vec::new();
    for commit in commits {
        let committed = commit.await.unwrap().unwrap();
        sequences.push(committed.events[0].sequence_no);
    }
    sequences.sort_unstable();
    assert_eq!(sequences, [2, 3]);
    ticker.abort();
    store.close().await;
    assert!(store.ping().await.is_err(), "closed");
}

/// A commit whose statement fails midway leaves nothing behind: no records, no counter or
/// version change, and the next commit continues the sequence without a gap.
#[tokio::test]
async fn sqlite_failed_commit_rolls_back() {
    use ar_core::store::RunChange;
    use ar_core::EventKind;

    use crate::fixtures::{event, message, tool_call};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rollback.db");
    let store = SqliteStore::connect(path.to_str().unwrap()).await.unwrap();
    let run = run("app-a", "h", 0);
    create(&store, &run).await;
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TRIGGER refuse_tool_call BEFORE INSERT ON tool_calls \
             WHEN NEW.id = 'refused' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
        )
        .unwrap();

    let mut next = stored(&run);
    next.error_message = "changed".to_string();
    let failed = store
        .commit(RunChange {
            messages: vec![message("assistant", "lost")],
            tool_calls: vec![tool_call("refused", None)],
            ..RunChange::update(next.clone(), 1).with_event(event(EventKind::PlanUpdated, 1))
        })
        .await;
    assert!(
        matches!(&failed, Err(error @ StoreError::Backend { .. }) if ar_core::error_chain(error).contains("refused by the test")),
        "{failed:?}"
    );
    assert_eq!(
        store.get_run("app-a", &run.id).await.unwrap(),
        Some(stored(&run))
    );
    assert!(store
        .list_messages("app-a", &run.id)
        .await
        .unwrap()
        .is_empty());
    let committed = store
        .commit(RunChange::update(next, 1).with_event(event(EventKind::PlanUpdated, 2)))
        .await
        .unwrap();
    assert_eq!(committed.version, 2);
    assert_eq!(committed.events[0].sequence_no, 2);
    store.close().await;
}

/// Commits never checkpoint inline; the store's checkpoint thread keeps the WAL small and
/// truncates it once the store is idle.
#[tokio::test]
async fn sqlite_wal_is_checkpointed_in_the_background() {
    use std::time::{Duration, Instant};

    use ar_core::store::RunChange;
    use ar_core::EventKind;

    use crate::fixtures::{event, message};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wal.db");
    let wal = dir.path().join("wal.db-wal");
    let store = SqliteStore::connect(path.to_str().unwrap()).await.unwrap();
    let run = run("app-a", "h", 0);
    create(&store, &run).await;
    let mut largest = 0;
    for n in 0..1_500 {
        store
            .commit(RunChange {
                messages: vec![message("assistant", &"x".repeat(2_000))],
                ..RunChange::for_run(&run).with_event(event(EventKind::PlanUpdated, n))
            })
            .await
            .unwrap();
        largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
    }
    // Each commit adds ~8 pages to the WAL: ~50 MB for all of them without checkpoints.
    assert!(largest < 24 * 1024 * 1024, "WAL grew to {largest} bytes");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let size = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
        if size == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "WAL still {size} bytes after idling"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        store.list_messages("app-a", &run.id).await.unwrap().len(),
        1_500
    );
    store.close().await;
}

/// Commits that reach the writer together are written in one transaction, each in its own
/// savepoint: one that fails or is stale is reported alone and leaves nothing behind, the
/// others stand with contiguous sequences.
#[tokio::test]
async fn sqlite_grouped_commits_succeed_or_fail_one_by_one() {
    use ar_core::store::RunChange;
    use ar_core::EventKind;

    use crate::fixtures::{event, message, tool_call};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("group.db");
    let store = SqliteStore::connect(path.to_str().unwrap()).await.unwrap();
    let runs: Vec<_> = (0..12)
        .map(|n| run("app-a", &format!("group-{n}"), n))
        .collect();
    for run in &runs {
        create(&store, run).await;
    }
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TRIGGER refuse_tool_call BEFORE INSERT ON tool_calls \
             WHEN NEW.id = 'refused' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
        )
        .unwrap();

    // Polled together on one thread, these meet at the writer and form one group.
    let commits = runs.iter().enumerate().map(|(n, run)| {
        let store = store.clone();
        let mut next = stored(run);
        next.error_message = format!("step {n}");
        let change = match n {
            3 => RunChange {
                messages: vec![message("assistant", "lost")],
                tool_calls: vec![tool_call("refused", None)],
                ..RunChange::update(next, 1).with_event(event(EventKind::PlanUpdated, 1))
            },
            7 => RunChange::update(next, 5).with_event(event(EventKind::PlanUpdated, 1)),
            _ => RunChange {
                messages: vec![message("assistant", "kept")],
                ..RunChange::update(next, 1).with_event(event(EventKind::PlanUpdated, 1))
            },
        };
        async move { store.commit(change).await }
    });
    let outcomes = futures::future::join_all(commits).await;
    for (n, outcome) in outcomes.iter().enumerate() {
        match n {
            3 => assert!(
                matches!(outcome, Err(error @ StoreError::Backend { .. }) if ar_core::error_chain(error).contains("refused")),
                "{outcome:?}"
            ),
            7 => assert!(
                matches!(outcome, Err(StoreError::Conflict(_))),
                "{outcome:?}"
            ),
            _ => {
                let committed = outcome.as_ref().expect("commit");
                assert_eq!(committed.version, 2);
                assert_eq!(committed.events[0].sequence_no, 2);
                assert_eq!(committed.messages[0].sequence_no, 1);
            }
        }
    }
    for (n, run) in runs.iter().enumerate() {
        let stored_run = store.get_run("app-a", &run.id).await.unwrap().unwrap();
        let messages = store.list_messages("app-a", &run.id).await.unwrap();
        if n == 3 || n == 7 {
            assert_eq!(stored_run, stored(run), "run {n} unchanged");
            assert!(messages.is_empty(), "run {n}: nothing written");
        } else {
            assert_eq!(stored_run.error_message, format!("step {n}"));
            assert_eq!(messages.len(), 1);
        }
    }
    // The failed run continues without a gap.
    let committed = store
        .commit(RunChange::update(stored(&runs[3]), 1).with_event(event(EventKind::PlanUpdated, 2)))
        .await
        .unwrap();
    assert_eq!(committed.events[0].sequence_no, 2);
    store.close().await;
}

/// Inserts one event of `run` in `tx` as a commit would; returns its position.
async fn insert_event(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    run: &ar_core::Run,
    sequence_no: i64,
) -> i64 {
    sqlx::query_scalar(
        "INSERT INTO events (run_id, app_id, host_run_id, sequence_no, event_id, event_type, \
         data, created_at) VALUES ($1, $2, '', $3, $4, 'plan_updated', '{}', now()) \
         RETURNING position",
    )
    .bind(&run.id)
    .bind(&run.app_id)
    .bind(sequence_no)
    .bind(format!("evt_gap_{sequence_no}"))
    .fetch_one(&mut **tx)
    .await
    .expect("insert event")
}

/// Transactions commit in another order than they drew positions: the older one (by
/// transaction id) commits a later position while the younger one still holds an earlier one.
/// The feed must not show the later position before the earlier one is committed, or a
/// reader's cursor passes it for good; and a position rolled back must not hold it forever.
#[tokio::test]
async fn postgres_position_feed_never_passes_a_position_still_being_committed() {
    let Some((store, schema)) = postgres_store("position_feed_gaps").await else {
        return;
    };
    let run = run("app-a", "h", 0);
    let start = create(&store, &run).await.events[0].position;
    let positions =
        |events: Vec<StoredEvent>| events.iter().map(|e| e.position).collect::<Vec<_>>();

    let mut older = store.pool().begin().await.unwrap();
    sqlx::query("SELECT pg_current_xact_id()")
        .execute(&mut *older)
        .await
        .unwrap();
    let mut younger = store.pool().begin().await.unwrap();
    let early = insert_event(&mut younger, &run, 1001).await;
    let late = insert_event(&mut older, &run, 1002).await;
    assert!(early < late);
    older.commit().await.unwrap();
    assert_eq!(
        positions(store.list_events_after_position(start, 10).await.unwrap()),
        Vec::<i64>::new(),
        "{late} is committed, but {early} may still come"
    );
    younger.commit().await.unwrap();
    assert_eq!(
        positions(feed(&store, start, 10, 2).await),
        vec![early, late]
    );

    let mut rolled_back = store.pool().begin().await.unwrap();
    let lost = insert_event(&mut rolled_back, &run, 1003).await;
    rolled_back.rollback().await.unwrap();
    let mut after = store.pool().begin().await.unwrap();
    let next = insert_event(&mut after, &run, 1004).await;
    after.commit().await.unwrap();
    assert!(lost < next);
    assert_eq!(
        positions(feed(&store, late, 10, 1).await),
        vec![next],
        "a position rolled back is passed once no transaction may hold it"
    );
    store.close().await;
    drop_schema(&schema).await;
}
