//! Conformance cases for run leases (ownership across processes) and outbox cursors.

use crate::fixtures::set_status;
use std::sync::Arc;

use ar_core::store::{CreateRun, LeaseChange, RunChange, Store};
use ar_core::RunStatus;
use chrono::Duration;

use crate::fixtures::{at, create, run, stored};

pub async fn leases_acquire_expire_renew_release(store: Arc<dyn Store>) {
    let run = run("app-a", "h", 0);
    create(store.as_ref(), &run).await;
    let now = at(1000);
    let later = |seconds: i64| now + Duration::seconds(seconds);

    assert!(
        store
            .try_acquire_lease(&run.id, "a", later(30), now)
            .await
            .unwrap(),
        "free lease"
    );
    assert!(
        store
            .try_acquire_lease(&run.id, "a", later(40), later(1))
            .await
            .unwrap(),
        "holder re-acquires"
    );
    assert!(
        !store
            .try_acquire_lease(&run.id, "b", later(60), later(10))
            .await
            .unwrap(),
        "held by a"
    );
    assert!(
        !store
            .try_acquire_lease(&run.id, "b", later(60), later(39))
            .await
            .unwrap(),
        "still held"
    );
    assert!(
        store
            .try_acquire_lease(&run.id, "b", later(100), later(41))
            .await
            .unwrap(),
        "expired: b steals it"
    );
    assert!(
        !store
            .try_acquire_lease(&run.id, "a", later(100), later(50))
            .await
            .unwrap(),
        "a lost it"
    );

    // Renewal extends every lease of the owner, and only those.
    let second = crate::fixtures::run("app-b", "h", 1);
    create(store.as_ref(), &second).await;
    assert!(store
        .try_acquire_lease(&second.id, "b", later(90), later(50))
        .await
        .unwrap());
    assert_eq!(store.renew_leases("b", later(500)).await.unwrap(), 2);
    assert_eq!(store.renew_leases("nobody", later(500)).await.unwrap(), 0);
    assert!(
        !store
            .try_acquire_lease(&run.id, "a", later(600), later(400))
            .await
            .unwrap(),
        "renewed"
    );

    // Release: only by the holder.
    store.release_lease(&run.id, "a").await.unwrap();
    assert!(
        !store
            .try_acquire_lease(&run.id, "a", later(600), later(400))
            .await
            .unwrap(),
        "a is not the holder"
    );
    store.release_lease(&run.id, "b").await.unwrap();
    assert!(
        store
            .try_acquire_lease(&run.id, "a", later(600), later(400))
            .await
            .unwrap(),
        "released lease is free"
    );
    assert!(!store
        .try_acquire_lease("run_missing", "a", later(600), later(400))
        .await
        .unwrap());
}

pub async fn leases_orphans_and_owned_runs(store: Arc<dyn Store>) {
    let now = at(5000);
    let later = |seconds: i64| now + Duration::seconds(seconds);
    let make = |host: &str, created: i64, status: RunStatus| {
        let mut run = run("app-a", host, created);
        set_status(&mut run, status);
        run
    };
    let unleased = make("unleased", 1, RunStatus::Queued);
    let leased = make("leased", 2, RunStatus::Running);
    let expired = make("expired", 3, RunStatus::Running);
    let paused = make("paused", 4, RunStatus::Paused);
    let done = make("done", 5, RunStatus::Completed);
    let mut other_app = make("other-app", 6, RunStatus::Queued);
    other_app.app_id = "app-b".to_string();
    for run in [&unleased, &leased, &expired, &paused, &done, &other_app] {
        create(store.as_ref(), run).await;
    }
    assert!(store
        .try_acquire_lease(&leased.id, "me", later(60), now)
        .await
        .unwrap());
    assert!(store
        .try_acquire_lease(&expired.id, "me", later(5), now)
        .await
        .unwrap());
    assert!(store
        .try_acquire_lease(&done.id, "me", later(60), now)
        .await
        .unwrap());

    let ids = |runs: Vec<ar_core::Run>| runs.into_iter().map(|run| run.id).collect::<Vec<_>>();
    let orphans = ids(store.list_orphaned_runs(later(10), 100).await.unwrap());
    assert_eq!(
        orphans,
        vec![
            unleased.id.clone(),
            expired.id.clone(),
            other_app.id.clone()
        ]
    );
    assert_eq!(
        ids(store.list_orphaned_runs(later(10), 2).await.unwrap()),
        orphans[..2].to_vec()
    );
    let orphans = ids(store.list_orphaned_runs(later(1), 100).await.unwrap());
    assert_eq!(
        orphans,
        vec![unleased.id.clone(), other_app.id.clone()],
        "not yet expired"
    );

    // Runs of a previous life of `me`, active ones only, whatever the expiry.
    let mine = ids(store.list_runs_leased_by("me").await.unwrap());
    assert_eq!(mine, vec![leased.id.clone(), expired.id.clone()]);
    assert!(store
        .list_runs_leased_by("someone")
        .await
        .unwrap()
        .is_empty());

    // An orphaned run returned whole.
    let found = store.list_orphaned_runs(later(10), 1).await.unwrap();
    assert_eq!(found, vec![stored(&unleased)]);

    // Finishing a run takes it out of the scan even with its lease gone.
    let mut finished = stored(&unleased);
    set_status(&mut finished, RunStatus::Completed);
    store.commit(RunChange::update(finished, 1)).await.unwrap();
    let orphans = ids(store.list_orphaned_runs(later(10), 100).await.unwrap());
    assert_eq!(orphans, vec![expired.id.clone(), other_app.id.clone()]);
}

pub async fn leases_written_with_a_change(store: Arc<dyn Store>) {
    let now = at(7000);
    let later = |seconds: i64| now + Duration::seconds(seconds);
    let mut created = run("app-a", "leased-at-birth", 1);
    set_status(&mut created, RunStatus::Queued);
    let change = RunChange {
        run: Some(created.clone()),
        lease: Some(LeaseChange::Take {
            owner: "creator".to_string(),
            until: later(30),
        }),
        ..RunChange::for_run(&created)
    };
    assert!(matches!(
        store.create_run(change).await.unwrap(),
        CreateRun::Created(_)
    ));
    assert!(
        store
            .list_orphaned_runs(later(1), 100)
            .await
            .unwrap()
            .is_empty(),
        "a run created with its lease is not an orphan"
    );
    assert!(
        !store
            .try_acquire_lease(&created.id, "other", later(60), later(1))
            .await
            .unwrap(),
        "held by its creator"
    );
    assert!(store
        .try_acquire_lease(&created.id, "creator", later(60), later(1))
        .await
        .unwrap());

    // A release by someone else changes nothing; the holder's own clears it.
    let mut current = stored(&created);
    set_status(&mut current, RunStatus::Running);
    let release = |run: &ar_core::Run, owner: &str, version: i64| RunChange {
        lease: Some(LeaseChange::Release {
            owner: owner.to_string(),
        }),
        ..RunChange::update(run.clone(), version)
    };
    let committed = store.commit(release(&current, "other", 1)).await.unwrap();
    assert!(
        !store
            .try_acquire_lease(&created.id, "other", later(60), later(2))
            .await
            .unwrap(),
        "still held by its creator"
    );
    set_status(&mut current, RunStatus::Paused);
    let committed = store
        .commit(release(&current, "creator", committed.version))
        .await
        .unwrap();
    assert!(store
        .list_runs_leased_by("creator")
        .await
        .unwrap()
        .is_empty());
    assert!(
        store
            .try_acquire_lease(&created.id, "other", later(60), later(2))
            .await
            .unwrap(),
        "released with the change"
    );

    // Taking it with an update overrides whoever held it; an update without a lease
    // change leaves it alone.
    set_status(&mut current, RunStatus::Running);
    let committed = store
        .commit(RunChange {
            lease: Some(LeaseChange::Take {
                owner: "third".to_string(),
                until: later(90),
            }),
            ..RunChange::update(current.clone(), committed.version)
        })
        .await
        .unwrap();
    store
        .commit(RunChange::update(current.clone(), committed.version))
        .await
        .unwrap();
    let mine = store.list_runs_leased_by("third").await.unwrap();
    assert_eq!(mine.len(), 1);
    assert!(store
        .list_orphaned_runs(later(89), 100)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store
            .list_orphaned_runs(later(91), 100)
            .await
            .unwrap()
            .len(),
        1
    );
}

pub async fn cursors_compare_and_swap(store: Arc<dyn Store>) {
    assert_eq!(store.get_cursor("callbacks").await.unwrap(), None);
    assert!(
        !store.advance_cursor("callbacks", Some(0), 5).await.unwrap(),
        "no cursor to move"
    );
    assert!(
        store.advance_cursor("callbacks", None, 3).await.unwrap(),
        "created"
    );
    assert!(
        !store.advance_cursor("callbacks", None, 4).await.unwrap(),
        "already exists"
    );
    assert_eq!(store.get_cursor("callbacks").await.unwrap(), Some(3));
    assert!(store
        .advance_cursor("callbacks", Some(3), 10)
        .await
        .unwrap());
    assert!(
        !store
            .advance_cursor("callbacks", Some(3), 11)
            .await
            .unwrap(),
        "stale from"
    );
    assert_eq!(store.get_cursor("callbacks").await.unwrap(), Some(10));
    assert_eq!(store.get_cursor("other").await.unwrap(), None);

    // Racing advances from the same position: exactly one wins.
    let mut tasks = Vec::new();
    for to in 11..19 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .advance_cursor("callbacks", Some(10), to)
                .await
                .unwrap()
        }));
    }
    let mut wins = 0;
    for task in tasks {
        wins += usize::from(task.await.unwrap());
    }
    assert_eq!(wins, 1);
}
