//! Persistence across a simulated studio restart, through the SQLite store (file and memory URL) and the in-memory store.

use std::sync::Arc;
use std::time::Duration;

use ar_studio::store::{MemoryStore, SqliteStore, StudioStore};
use ar_studio::wire::{Ack, Command, CommandState, BREAKPOINTS_BY_STORE};
use ar_studio::{ManualClock, StudioError, StudioServer};

use crate::support::{registration, test_config};

fn run(id: &str) -> Command {
    Command {
        command_id: id.into(),
        agent: "helper".into(),
        ..Command::default()
    }
}

fn ack(id: &str, state: &str, run: &str) -> Ack {
    Ack {
        command_id: id.into(),
        state: state.into(),
        run_id: run.into(),
        status: if state == "finished" {
            "succeeded".into()
        } else {
            String::new()
        },
        ..Ack::default()
    }
}

/// Runs a first studio life on `store`, then a second one on `reopen()`, and checks that the
/// second one lost neither rows nor breakpoint sets.
async fn survives_a_restart(first: Arc<dyn StudioStore>, second: Arc<dyn StudioStore>) {
    let clock = Arc::new(ManualClock::starting_now());
    let s = StudioServer::with_store(test_config(), clock.clone(), first)
        .await
        .expect("studio");
    s.register(registration("rt")).expect("register");
    let _feed = s.open_stream("rt", None).expect("open");
    for id in ["a", "b", "c"] {
        s.enqueue("rt", run(id)).expect("enqueue");
    }
    s.ack(&ack("a", "accepted", "run-a")).expect("ack");
    s.ack(&ack("a", "finished", "run-a")).expect("ack");
    s.ack(&ack("b", "accepted", "run-b")).expect("ack");
    s.set_breakpoints_from("rt", &["pay".into()], "api")
        .expect("bp");
    let decision = ar_studio::wire::ApprovalDecision {
        command_id: "dec".into(),
        run_id: "run-b".into(),
        call_id: "k".into(),
        decision: "approve".into(),
        ..Default::default()
    };
    s.enqueue_approval("rt", decision).expect("approve");
    s.shutdown().await;
    drop(s);

    let s = StudioServer::with_store(test_config(), clock.clone(), second)
        .await
        .expect("restarted");
    assert_eq!(s.state_of("a"), Some(CommandState::Finished));
    assert_eq!(s.command("a").expect("a").run_id, "run-a");
    assert_eq!(s.state_of("b"), Some(CommandState::Accepted));
    let c = s.command("c").expect("c");
    assert_eq!(
        (c.state, c.error.as_deref()),
        (CommandState::Lost, Some("studio restarted before the ack"))
    );
    assert_eq!(s.runtime_of("run-b").as_deref(), Some("rt"));
    let on = s.commands_on("run-b");
    assert_eq!((on.len(), on[0].call_id.as_str()), (1, "k"));
    let view = &s.snapshot()[0];
    assert!(view.restored && !view.connected);
    assert_eq!(
        (view.breakpoints.clone(), view.breakpoints_by.as_str()),
        (vec!["pay".to_string()], BREAKPOINTS_BY_STORE)
    );
    assert!(matches!(
        s.enqueue("rt", run("a")),
        Err(StudioError::DuplicateCommand)
    ));
    // The runtime comes back registering no set: the stored set wins and is sent on open.
    s.register(registration("rt")).expect("register");
    assert_eq!(s.breakpoints_of("rt"), vec!["pay"]);
    let feed = s.open_stream("rt", None).expect("open");
    assert!(String::from_utf8_lossy(&feed.opening[1]).ends_with("data: {\"tools\":[\"pay\"]}\n\n"));
    assert!(!s.snapshot()[0].restored);
    // New commands sort after the restored ones.
    s.enqueue("rt", run("d")).expect("enqueue");
    let reopened = s.open_stream("rt", Some("c")).expect("open");
    assert_eq!(reopened.opening.len(), 3);
    // The accepted row still finishes late, or is lost after the finish deadline.
    clock.advance(Duration::from_secs(601));
    s.sweep();
    assert_eq!(s.state_of("b"), Some(CommandState::Lost));
    s.ack(&ack("b", "finished", "run-b")).expect("late finish");
    assert_eq!(s.state_of("b"), Some(CommandState::Finished));
    s.shutdown().await;
}

#[tokio::test]
async fn sqlite_file_store_survives_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("studio.db");
    let path = path.to_string_lossy().to_string();
    let first = SqliteStore::open(&path).await.expect("open");
    let keep = first.clone();
    let first: Arc<dyn StudioStore> = Arc::new(first);
    // The second life opens the file anew, as a restarted process would.
    let second = Arc::new(LazyReopen {
        path: path.clone(),
        before: keep,
    });
    survives_a_restart(first, second).await;
}

/// Closes the first life's pool, then opens the file again.
struct LazyReopen {
    path: String,
    before: SqliteStore,
}

#[async_trait::async_trait]
impl StudioStore for LazyReopen {
    async fn load(&self) -> Result<ar_studio::store::StoredState, ar_studio::store::StoreError> {
        self.before.close().await;
        SqliteStore::open(&self.path).await?.load().await
    }
    async fn apply(
        &self,
        ops: Vec<ar_studio::store::StoreOp>,
    ) -> Result<(), ar_studio::store::StoreError> {
        SqliteStore::open(&self.path).await?.apply(ops).await
    }
}

#[tokio::test]
async fn sqlite_memory_store_survives_a_rebuilt_studio() {
    let store: Arc<dyn StudioStore> =
        Arc::new(SqliteStore::open("sqlite::memory:").await.expect("open"));
    survives_a_restart(store.clone(), store).await;
}

#[tokio::test]
async fn memory_store_survives_a_rebuilt_studio() {
    let store: Arc<dyn StudioStore> = Arc::new(MemoryStore::new());
    survives_a_restart(store.clone(), store).await;
}

#[tokio::test]
async fn pruned_rows_and_forgotten_runtimes_leave_the_store() {
    let store = Arc::new(MemoryStore::new());
    let clock = Arc::new(ManualClock::starting_now());
    let s = StudioServer::with_store(test_config(), clock.clone(), store.clone())
        .await
        .expect("studio");
    let mut reg = registration("rt");
    reg.breakpoints = vec!["pay".into()];
    s.register(reg).expect("register");
    let feed = s.open_stream("rt", None).expect("open");
    s.enqueue("rt", run("a")).expect("enqueue");
    s.ack(&ack("a", "finished", "r")).expect("finish");
    s.stream_ended("rt", feed.feed_id);
    s.forget("rt").expect("forget");
    clock.advance(Duration::from_secs(24 * 3600 + 1));
    s.sweep();
    s.flush().await;
    let stored = store.load().await.expect("load");
    assert!(stored.commands.is_empty() && stored.breakpoints.is_empty());
}
