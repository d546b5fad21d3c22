//! Conformance cases for `commit`: the version guard, per-run sequences (also under
//! concurrency), event listing and the store-wide position feed.

use crate::fixtures::set_status;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use ar_core::store::{RunChange, Store, StoreError};
use ar_core::EventKind;
use ar_core::{RunStatus, StoredEvent};
use chrono::Utc;

use crate::fixtures::{
    artifact, at, create, event, expect_artifact, expect_message, message, micros, run, stored,
};

pub async fn commit_version_guard(store: Arc<dyn Store>) {
    let run = run("app-a", "h", 0);
    create(store.as_ref(), &run).await;

    let mut next = stored(&run);
    set_status(&mut next, RunStatus::Running);
    next.output_summary.insert("step".to_string(), 1.into());
    next.updated_at = at(50);
    let committed = store
        .commit(RunChange::update(next.clone(), 1).with_event(event(EventKind::RunStarted, 1)))
        .await
        .unwrap();
    assert_eq!(committed.version, 2);
    let read = store.get_run("app-a", &run.id).await.unwrap().unwrap();
    assert_eq!(
        read,
        ar_core::Run {
            version: 2,
            updated_at: micros(at(50)),
            ..next.clone()
        }
    );

    // A stale version is a conflict and writes nothing.
    let mut stale = next.clone();
    set_status(&mut stale, RunStatus::Failed);
    let change = RunChange {
        messages: vec![message("user", "lost")],
        ..RunChange::update(stale, 1)
    }
    .with_event(event(EventKind::RunFailed, 2));
    assert!(matches!(
        store.commit(change).await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(
        store
            .get_run("app-a", &run.id)
            .await
            .unwrap()
            .unwrap()
            .status(),
        RunStatus::Running
    );
    assert_eq!(
        store
            .list_events_after("app-a", &run.id, 0, None)
            .await
            .unwrap()
            .len(),
        2
    );
    assert!(store
        .list_messages("app-a", &run.id)
        .await
        .unwrap()
        .is_empty());

    // Without an explicit expected version, the record's own version guards the update.
    let mut implicit = read.clone();
    implicit.error_message = "note".to_string();
    let change = RunChange {
        expected_version: None,
        ..RunChange::update(implicit.clone(), 0)
    };
    assert_eq!(store.commit(change).await.unwrap().version, 3);
    let change = RunChange {
        expected_version: None,
        ..RunChange::update(implicit, 0)
    };
    assert!(matches!(
        store.commit(change).await,
        Err(StoreError::Conflict(_))
    ));

    // Unknown runs are not found, with or without a row update.
    let ghost = crate::fixtures::run("app-a", "", 0);
    assert!(matches!(
        store.commit(RunChange::update(stored(&ghost), 1)).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store
            .commit(RunChange::for_run(&ghost).with_event(event(EventKind::RunStarted, 0)))
            .await,
        Err(StoreError::NotFound(_))
    ));
}

pub async fn commit_without_run_keeps_version(store: Arc<dyn Store>) {
    let run = run("app-a", "h", 0);
    create(store.as_ref(), &run).await;
    let now = Utc::now();
    assert!(store
        .try_acquire_lease(&run.id, "owner-1", now + chrono::Duration::seconds(60), now)
        .await
        .unwrap());

    let committed = store
        .commit(RunChange {
            messages: vec![message("assistant", "hi")],
            ..RunChange::for_run(&run)
        })
        .await
        .unwrap();
    assert_eq!(
        committed.version, 1,
        "records alone do not bump the version"
    );
    assert!(committed.events.is_empty());

    let mut next = stored(&run);
    set_status(&mut next, RunStatus::Running);
    store.commit(RunChange::update(next, 1)).await.unwrap();
    // Commits never touch the lease.
    assert!(!store
        .try_acquire_lease(&run.id, "owner-2", now + chrono::Duration::seconds(60), now)
        .await
        .unwrap());
    let leased: Vec<String> = store
        .list_runs_leased_by("owner-1")
        .await
        .unwrap()
        .into_iter()
        .map(|run| run.id)
        .collect();
    assert_eq!(leased, vec![run.id.clone()]);
}

pub async fn commit_assigns_sequences(store: Arc<dyn Store>) {
    let run = run("app-a", "host-s", 0);
    let created = create(store.as_ref(), &run).await;
    assert_eq!(created.events[0].sequence_no, 1);

    let messages = vec![
        message("user", "one"),
        message("assistant", "two"),
        message("user", "three"),
    ];
    let artifacts = vec![artifact("a"), artifact("b")];
    let change = RunChange {
        messages: messages.clone(),
        artifacts: artifacts.clone(),
        events: (1..=3).map(|n| event(EventKind::PlanUpdated, n)).collect(),
        ..RunChange::for_run(&run)
    };
    let first = store.commit(change).await.unwrap();
    let second = store
        .commit(RunChange {
            messages: vec![messages[0].clone()],
            artifacts: vec![artifacts[0].clone()],
            events: vec![event(EventKind::RunCompleted, 4)],
            ..RunChange::for_run(&run)
        })
        .await
        .unwrap();

    let expected_messages: Vec<_> = messages
        .iter()
        .enumerate()
        .map(|(index, message)| expect_message(message, "app-a", &run.id, index as i64 + 1))
        .collect();
    assert_eq!(first.messages, expected_messages);
    assert_eq!(
        second.messages,
        vec![expect_message(&messages[0], "app-a", &run.id, 4)]
    );
    assert_eq!(
        first.artifacts,
        vec![
            expect_artifact(&artifacts[0], "app-a", &run.id, 1),
            expect_artifact(&artifacts[1], "app-a", &run.id, 2)
        ]
    );
    assert_eq!(second.artifacts[0].sequence_no, 3);
    let seqs: Vec<i64> = first
        .events
        .iter()
        .chain(&second.events)
        .map(|event| event.sequence_no)
        .collect();
    assert_eq!(seqs, vec![2, 3, 4, 5]);

    let all_events = store
        .list_events_after("app-a", &run.id, 0, None)
        .await
        .unwrap();
    let mut expected_events = created.events.clone();
    expected_events.extend(first.events.clone());
    expected_events.extend(second.events.clone());
    assert_eq!(
        all_events, expected_events,
        "listed events equal what commit returned"
    );
    assert!(all_events
        .windows(2)
        .all(|pair| pair[0].position < pair[1].position));
    let ids: HashSet<&str> = all_events
        .iter()
        .map(|event| event.event_id.as_str())
        .collect();
    assert_eq!(ids.len(), all_events.len(), "event ids are unique");
    let before = micros(Utc::now()) - chrono::Duration::seconds(60);
    assert!(all_events
        .iter()
        .all(|event| event.created_at > before && event.host_run_id == "host-s"));

    let mut listed = first.messages.clone();
    listed.extend(second.messages.clone());
    assert_eq!(store.list_messages("app-a", &run.id).await.unwrap(), listed);
    let mut listed = first.artifacts.clone();
    listed.extend(second.artifacts.clone());
    assert_eq!(
        store.list_artifacts("app-a", &run.id).await.unwrap(),
        listed
    );
}

pub async fn commit_sequences_contiguous_under_concurrency(store: Arc<dyn Store>) {
    const TASKS: usize = 8;
    const COMMITS: usize = 50;
    let run = run("app-a", "busy", 0);
    create(store.as_ref(), &run).await;

    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let store = store.clone();
        let run = run.clone();
        tasks.push(tokio::spawn(async move {
            let mut version_bumps = 0;
            for commit in 0..COMMITS {
                let n = (task * COMMITS + commit) as i64;
                let base = RunChange::for_run(&run).with_event(event(EventKind::PlanUpdated, n));
                let change = RunChange {
                    messages: vec![message("assistant", &format!("m{n}"))],
                    artifacts: if commit % 5 == 0 {
                        vec![artifact(&format!("a{n}"))]
                    } else {
                        Vec::new()
                    },
                    ..base
                };
                if commit % 10 == 0 {
                    // A versioned update, retried on conflict like the engine does.
                    loop {
                        let current = store.get_run("app-a", &run.id).await.unwrap().unwrap();
                        let version = current.version;
                        let mut next = current;
                        next.output_summary
                            .insert(format!("t{task}"), (commit as i64).into());
                        let attempt = RunChange {
                            run: Some(next),
                            expected_version: Some(version),
                            ..change.clone()
                        };
                        match store.commit(attempt).await {
                            Ok(committed) => {
                                assert_eq!(committed.version, version + 1);
                                break;
                            }
                            Err(StoreError::Conflict(_)) => continue,
                            Err(error) => panic!("commit failed: {error}"),
                        }
                    }
                    version_bumps += 1;
                } else {
                    store.commit(change).await.unwrap();
                }
            }
            version_bumps
        }));
    }
    let mut bumps = 0;
    for task in tasks {
        bumps += task.await.unwrap();
    }

    let total = (TASKS * COMMITS) as i64;
    let events = store
        .list_events_after("app-a", &run.id, 0, None)
        .await
        .unwrap();
    let seqs: Vec<i64> = events.iter().map(|event| event.sequence_no).collect();
    assert_eq!(
        seqs,
        (1..=total + 1).collect::<Vec<_>>(),
        "events are contiguous"
    );
    assert!(
        events
            .windows(2)
            .all(|pair| pair[0].position < pair[1].position),
        "positions follow sequence"
    );
    let messages = store.list_messages("app-a", &run.id).await.unwrap();
    let seqs: Vec<i64> = messages.iter().map(|message| message.sequence_no).collect();
    assert_eq!(
        seqs,
        (1..=total).collect::<Vec<_>>(),
        "messages are contiguous"
    );
    let artifacts = store.list_artifacts("app-a", &run.id).await.unwrap();
    let seqs: Vec<i64> = artifacts
        .iter()
        .map(|artifact| artifact.sequence_no)
        .collect();
    assert_eq!(
        seqs,
        (1..=total / 5).collect::<Vec<_>>(),
        "artifacts are contiguous"
    );
    let run = store.get_run("app-a", &run.id).await.unwrap().unwrap();
    assert_eq!(run.version, 1 + bumps);
    assert_eq!(run.output_summary.len(), TASKS + 1);
}

pub async fn events_after_with_limit(store: Arc<dyn Store>) {
    let run = run("app-a", "h", 0);
    create(store.as_ref(), &run).await;
    store
        .commit(RunChange {
            events: (1..=6).map(|n| event(EventKind::PlanUpdated, n)).collect(),
            ..RunChange::for_run(&run)
        })
        .await
        .unwrap();
    let seqs = |events: Vec<StoredEvent>| {
        events
            .into_iter()
            .map(|event| event.sequence_no)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        seqs(
            store
                .list_events_after("app-a", &run.id, 0, None)
                .await
                .unwrap()
        ),
        vec![1, 2, 3, 4, 5, 6, 7]
    );
    assert_eq!(
        seqs(
            store
                .list_events_after("app-a", &run.id, 3, None)
                .await
                .unwrap()
        ),
        vec![4, 5, 6, 7]
    );
    assert_eq!(
        seqs(
            store
                .list_events_after("app-a", &run.id, 3, Some(2))
                .await
                .unwrap()
        ),
        vec![4, 5]
    );
    assert_eq!(
        seqs(
            store
                .list_events_after("app-a", &run.id, 7, Some(10))
                .await
                .unwrap()
        ),
        Vec::<i64>::new()
    );
    assert_eq!(
        seqs(
            store
                .list_events_after("app-a", &run.id, 0, Some(0))
                .await
                .unwrap()
        ),
        Vec::<i64>::new()
    );
    assert!(store
        .list_events_after("app-a", "run_missing", 0, None)
        .await
        .unwrap()
        .is_empty());
}

/// Reads the feed until it shows `want` events: PostgreSQL holds back events after a position
/// a running transaction may still commit, so the feed may lag a moment behind commits.
pub async fn feed(store: &dyn Store, after: i64, limit: i64, want: usize) -> Vec<StoredEvent> {
    let mut events = Vec::new();
    for _ in 0..100 {
        events = store
            .list_events_after_position(after, limit)
            .await
            .unwrap();
        if events.len() >= want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    events
}

pub async fn events_position_feed(store: Arc<dyn Store>) {
    let first = run("app-a", "one", 0);
    let second = run("app-b", "two", 1);
    let a = create(store.as_ref(), &first).await;
    let b = create(store.as_ref(), &second).await;
    let c = store
        .commit(
            RunChange::for_run(&first)
                .with_event(event(EventKind::RunStarted, 1))
                .with_event(event(EventKind::PlanUpdated, 2)),
        )
        .await
        .unwrap();
    let mut expected: Vec<StoredEvent> = a
        .events
        .into_iter()
        .chain(b.events)
        .chain(c.events)
        .collect();
    let all = feed(store.as_ref(), 0, 100, 4).await;
    assert_eq!(
        all, expected,
        "the feed spans runs and apps in commit order"
    );

    let after_first = all[0].position;
    expected.remove(0);
    assert_eq!(feed(store.as_ref(), after_first, 100, 3).await, expected);
    assert_eq!(
        feed(store.as_ref(), after_first, 2, 2).await,
        expected[..2].to_vec()
    );
    assert!(store
        .list_events_after_position(all[3].position, 10)
        .await
        .unwrap()
        .is_empty());
}

/// Callers that give up on a commit (a dropped future) leave the store usable: each commit
/// either happened whole or not at all, and later commits continue the sequences.
pub async fn commit_abandoned_midway_leaves_store_usable(store: Arc<dyn Store>) {
    use futures::FutureExt;
    let run = run("app-a", "h", 0);
    create(store.as_ref(), &run).await;
    let mut finished = 0;
    for n in 0..40 {
        let change = RunChange {
            messages: vec![message("assistant", &format!("m{n}"))],
            ..RunChange::for_run(&run)
        }
        .with_event(event(EventKind::PlanUpdated, n));
        // Poll once (the statement is usually in flight by then), then drop the future.
        if store.commit(change).now_or_never().is_some() {
            finished += 1;
        }
        if n % 4 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let last = store
        .commit(RunChange::for_run(&run).with_event(event(EventKind::RunCompleted, 99)))
        .await
        .unwrap();
    let events = store
        .list_events_after("app-a", &run.id, 0, None)
        .await
        .unwrap();
    let seqs: Vec<i64> = events.iter().map(|event| event.sequence_no).collect();
    assert_eq!(
        seqs,
        (1..=events.len() as i64).collect::<Vec<_>>(),
        "no gaps"
    );
    assert_eq!(last.events[0].sequence_no, events.len() as i64);
    let messages = store.list_messages("app-a", &run.id).await.unwrap();
    // Every applied commit wrote its event and its message together.
    assert_eq!(messages.len(), events.len() - 2);
    assert!(messages.len() >= finished);
    let read = store.get_run("app-a", &run.id).await.unwrap().unwrap();
    assert_eq!(read.version, 1);
}

/// A commit can take back messages (a rolled-back resume): they are gone with the run row's
/// change, their sequence numbers are not handed out again, and a stale commit deletes nothing.
pub async fn commit_removes_messages(store: Arc<dyn Store>) {
    let run = run("app-a", "host-rm", 0);
    create(store.as_ref(), &run).await;
    let messages = vec![
        message("user", "one"),
        message("user", "two"),
        message("user", "three"),
    ];
    store
        .commit(RunChange {
            messages: messages.clone(),
            ..RunChange::for_run(&run)
        })
        .await
        .unwrap();
    let listed = |store: Arc<dyn Store>, run_id: String| async move {
        store
            .list_messages("app-a", &run_id)
            .await
            .unwrap()
            .into_iter()
            .map(|m| (m.sequence_no, m.content))
            .collect::<Vec<_>>()
    };

    // A stale version: the run row is not written, so neither is the removal.
    let mut next = stored(&run);
    next.error_message = "rolled back".to_string();
    let stale = RunChange {
        removed_messages: vec![messages[2].id.clone()],
        ..RunChange::update(next.clone(), 7)
    };
    assert!(matches!(
        store.commit(stale).await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(listed(store.clone(), run.id.clone()).await.len(), 3);

    // The run under another app's id is not found and removes nothing.
    let mut foreign = RunChange {
        removed_messages: vec![messages[0].id.clone()],
        ..RunChange::for_run(&run)
    };
    foreign.app_id = "app-b".to_string();
    assert!(store.commit(foreign).await.is_err());

    let committed = store
        .commit(RunChange {
            removed_messages: vec![messages[2].id.clone(), "msg_unknown".to_string()],
            ..RunChange::update(next, 1)
        })
        .await
        .unwrap();
    assert_eq!(committed.version, 2);
    assert_eq!(
        listed(store.clone(), run.id.clone()).await,
        vec![(1, "one".to_string()), (2, "two".to_string())]
    );
    let after = store
        .commit(RunChange {
            messages: vec![message("user", "four")],
            ..RunChange::for_run(&run)
        })
        .await
        .unwrap();
    assert_eq!(after.messages[0].sequence_no, 4, "a number is never reused");
    assert_eq!(
        listed(store, run.id.clone()).await,
        vec![
            (1, "one".to_string()),
            (2, "two".to_string()),
            (4, "four".to_string())
        ]
    );
}
