//! Conformance cases for runs: creation, exact round trip, host run id idempotency, app
//! scoping, listing and search.

use crate::fixtures::set_status;
use std::sync::Arc;

use ar_core::store::{CreateRun, RunChange, RunSearch, SecretChange, Store, StoreError};
use ar_core::EventKind;
use ar_core::{ExecutionMode, RunStatus, TargetRef};

use crate::fixtures::{
    artifact, at, create, event, expect_artifact, expect_message, map, message, run, stored,
};

pub async fn run_create_round_trip(store: Arc<dyn Store>) {
    let run = run("app-a", "host-1", 0);
    let msg = message("user", "hello");
    let art = artifact("# Title");
    let change = RunChange {
        run: Some(run.clone()),
        messages: vec![msg.clone()],
        artifacts: vec![art.clone()],
        secrets: vec![SecretChange::Put {
            kind: "model".to_string(),
            ciphertext: vec![0, 1, 2, 255],
        }],
        events: vec![
            event(EventKind::RunQueued, 1),
            event(EventKind::PlanUpdated, 2),
        ],
        ..RunChange::for_run(&run)
    };
    let CreateRun::Created(committed) = store.create_run(change).await.unwrap() else {
        panic!("expected a new run");
    };
    assert_eq!(committed.version, 1);
    assert_eq!(
        committed.messages,
        vec![expect_message(&msg, "app-a", &run.id, 1)]
    );
    assert_eq!(
        committed.artifacts,
        vec![expect_artifact(&art, "app-a", &run.id, 1)]
    );
    let sequence: Vec<i64> = committed
        .events
        .iter()
        .map(|event| event.sequence_no)
        .collect();
    assert_eq!(sequence, vec![1, 2]);
    assert!(committed.events[0].position < committed.events[1].position);
    for event in &committed.events {
        assert_eq!(event.app_id, "app-a");
        assert_eq!(event.run_id, run.id);
        assert_eq!(event.host_run_id, "host-1");
        assert!(event.event_id.starts_with("evt_"), "{}", event.event_id);
    }
    assert_eq!(
        *committed.events[1].data,
        map(
            serde_json::json!({"content": "event 2", "plan": 2, "note": "", "data": {}, "host_run_id": "host-1"})
        )
    );

    let read = store
        .get_run("app-a", &run.id)
        .await
        .unwrap()
        .expect("run exists");
    assert_eq!(
        read,
        stored(&run),
        "whole record round-trips, truncated to microseconds"
    );
    assert_eq!(
        store.list_messages("app-a", &run.id).await.unwrap(),
        committed.messages
    );
    assert_eq!(
        store.list_artifacts("app-a", &run.id).await.unwrap(),
        committed.artifacts
    );
    assert_eq!(
        store
            .list_events_after("app-a", &run.id, 0, None)
            .await
            .unwrap(),
        committed.events
    );
    assert_eq!(
        store.get_secret(&run.id, "model").await.unwrap(),
        Some(vec![0, 1, 2, 255])
    );
}

pub async fn run_minimal_fields_round_trip(store: Arc<dyn Store>) {
    let mut run = run("app-a", "", 0);
    run.target = TargetRef {
        target_type: "t".to_string(),
        id: "1".to_string(),
        ..TargetRef::default()
    };
    run.input = Default::default();
    run.output_summary = Default::default();
    run.workspace_lease = Some(serde_json::Value::Null);
    run.started_at = None;
    // A pause request is stored with the run (the store keeps any state it is given).
    run.state = ar_core::RunState::restore(
        RunStatus::Running,
        run.pause_reason(),
        run.approval_state(),
        true,
    );
    create(store.as_ref(), &run).await;
    assert_eq!(
        store.get_run("app-a", &run.id).await.unwrap(),
        Some(stored(&run))
    );
}

pub async fn run_host_run_id_is_idempotent(store: Arc<dyn Store>) {
    let first = run("app-a", "host-x", 0);
    create(store.as_ref(), &first).await;

    let again = run("app-a", "host-x", 5);
    let change = RunChange {
        run: Some(again.clone()),
        ..RunChange::for_run(&again)
    }
    .with_event(event(EventKind::RunQueued, 0));
    match store.create_run(change).await.unwrap() {
        CreateRun::HostRunIdTaken(existing) => assert_eq!(*existing, stored(&first)),
        CreateRun::Created(_) => panic!("a second run with the same host run id was created"),
    }
    assert!(
        store.get_run("app-a", &again.id).await.unwrap().is_none(),
        "nothing of it was written"
    );
    assert_eq!(store.list_runs("app-a").await.unwrap().len(), 1);

    // The same host run id in another app is unrelated; empty host run ids never collide.
    create(store.as_ref(), &run("app-b", "host-x", 0)).await;
    create(store.as_ref(), &run("app-a", "", 1)).await;
    create(store.as_ref(), &run("app-a", "", 2)).await;

    assert_eq!(
        store
            .get_run_by_host_run_id("app-a", "host-x")
            .await
            .unwrap()
            .map(|run| run.id),
        Some(first.id.clone())
    );
    assert!(store
        .get_run_by_host_run_id("app-c", "host-x")
        .await
        .unwrap()
        .is_none());
    assert!(store
        .get_run_by_host_run_id("app-a", "")
        .await
        .unwrap()
        .is_none());

    // Reusing a run id is a conflict, not a silent overwrite.
    let mut clash = run("app-a", "other-host", 9);
    clash.id = first.id.clone();
    let change = RunChange {
        run: Some(clash.clone()),
        ..RunChange::for_run(&clash)
    };
    assert!(matches!(
        store.create_run(change).await,
        Err(StoreError::Conflict(_))
    ));
}

pub async fn run_create_races_on_host_run_id(store: Arc<dyn Store>) {
    let mut tasks = Vec::new();
    for index in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let run = run("app-a", "racy", index);
            let change = RunChange {
                run: Some(run.clone()),
                ..RunChange::for_run(&run)
            }
            .with_event(event(EventKind::RunQueued, 0));
            (run.id, store.create_run(change).await.unwrap())
        }));
    }
    let mut winners = Vec::new();
    let mut losers = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            (id, CreateRun::Created(_)) => winners.push(id),
            (_, CreateRun::HostRunIdTaken(existing)) => losers.push(existing.id),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one create wins");
    assert!(
        losers.iter().all(|id| *id == winners[0]),
        "losers see the winner"
    );
    assert_eq!(store.list_runs("app-a").await.unwrap().len(), 1);
}

pub async fn run_app_scoping(store: Arc<dyn Store>) {
    let run = run("app-a", "h", 0);
    create(store.as_ref(), &run).await;
    assert!(store.get_run("app-b", &run.id).await.unwrap().is_none());
    assert!(store.list_runs("app-b").await.unwrap().is_empty());
    assert!(store
        .list_events_after("app-b", &run.id, 0, None)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .list_messages("app-b", &run.id)
        .await
        .unwrap()
        .is_empty());

    let foreign = RunChange {
        app_id: "app-b".to_string(),
        ..RunChange::for_run(&run)
    }
    .with_event(event(EventKind::RunStarted, 1));
    assert!(matches!(
        store.commit(foreign).await,
        Err(StoreError::NotFound(_))
    ));
    let mut update = stored(&run);
    update.app_id = "app-b".to_string();
    let foreign = RunChange::update(update, 1);
    assert!(matches!(
        store.commit(foreign).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(
        store.get_run("app-a", &run.id).await.unwrap(),
        Some(stored(&run))
    );
}

pub async fn run_list_newest_first(store: Arc<dyn Store>) {
    let older = run("app-a", "", 10);
    let newest = run("app-a", "", 30);
    let middle = run("app-a", "", 20);
    for run in [&older, &newest, &middle] {
        create(store.as_ref(), run).await;
    }
    create(store.as_ref(), &run("app-b", "", 40)).await;
    let ids: Vec<String> = store
        .list_runs("app-a")
        .await
        .unwrap()
        .into_iter()
        .map(|run| run.id)
        .collect();
    assert_eq!(ids, vec![newest.id, middle.id, older.id]);
}

pub async fn run_search_and_pagination(store: Arc<dyn Store>) {
    let mut runs = Vec::new();
    for index in 0..12_i64 {
        let mut run = run("app-a", &format!("Host-{index:02}"), index);
        run.agent_id = if index % 2 == 0 {
            "Agent-Even".to_string()
        } else {
            "agent-odd".to_string()
        };
        run.target.target_type = if index % 3 == 0 {
            "PullRequest".to_string()
        } else {
            "Issue".to_string()
        };
        run.target.id = format!("TGT-{}", 100 + index);
        if index % 4 == 0 {
            set_status(&mut run, RunStatus::Running);
        }
        create(store.as_ref(), &run).await;
        runs.push(run);
    }
    let mut other = run("app-b", "Host-00", 0);
    other.agent_id = "Agent-Even".to_string();
    create(store.as_ref(), &other).await;

    let search = |query: &str, status: Option<RunStatus>, limit: i64, offset: i64| RunSearch {
        app_id: "app-a".to_string(),
        query: query.to_string(),
        status,
        limit,
        offset,
    };
    let ids = |page: &[ar_core::Run]| page.iter().map(|run| run.id.clone()).collect::<Vec<_>>();
    let newest_first: Vec<String> = runs.iter().rev().map(|run| run.id.clone()).collect();

    let (page, total) = store.search_runs(&search("", None, 5, 0)).await.unwrap();
    assert_eq!(total, 12);
    assert_eq!(ids(&page), newest_first[..5].to_vec());
    let (page, total) = store.search_runs(&search("", None, 5, 10)).await.unwrap();
    assert_eq!(total, 12);
    assert_eq!(ids(&page), newest_first[10..].to_vec());
    let (page, total) = store.search_runs(&search("", None, 5, 50)).await.unwrap();
    assert_eq!((page.len(), total), (0, 12));

    // Case-insensitive substring over each searchable field.
    assert_eq!(
        store
            .search_runs(&search("AGENT-EVEN", None, 50, 0))
            .await
            .unwrap()
            .1,
        6
    );
    assert_eq!(
        store
            .search_runs(&search("host-1", None, 50, 0))
            .await
            .unwrap()
            .1,
        2
    );
    assert_eq!(
        store
            .search_runs(&search("pullrequest", None, 50, 0))
            .await
            .unwrap()
            .1,
        4
    );
    assert_eq!(
        store
            .search_runs(&search("tgt-107", None, 50, 0))
            .await
            .unwrap()
            .1,
        1
    );
    let (page, total) = store
        .search_runs(&search(&runs[3].id.to_uppercase(), None, 50, 0))
        .await
        .unwrap();
    assert_eq!((ids(&page), total), (vec![runs[3].id.clone()], 1));
    // `%` and `_` are literal characters, not patterns.
    assert_eq!(
        store
            .search_runs(&search("%", None, 50, 0))
            .await
            .unwrap()
            .1,
        0
    );
    assert_eq!(
        store
            .search_runs(&search("_", None, 50, 0))
            .await
            .unwrap()
            .1,
        12,
        "run ids contain _"
    );

    let (page, total) = store
        .search_runs(&search("", Some(RunStatus::Running), 50, 0))
        .await
        .unwrap();
    assert_eq!(total, 3);
    assert!(page.iter().all(|run| run.status() == RunStatus::Running));
    let (_, total) = store
        .search_runs(&search("agent-even", Some(RunStatus::Running), 50, 0))
        .await
        .unwrap();
    assert_eq!(total, 3);
    let (_, total) = store
        .search_runs(&search("agent-odd", Some(RunStatus::Running), 50, 0))
        .await
        .unwrap();
    assert_eq!(total, 0);
}

pub async fn runs_counted_by_status(store: Arc<dyn Store>) {
    assert!(store.count_runs_by_status().await.unwrap().is_empty());
    for index in 0..5_i64 {
        let app = if index < 3 { "app-a" } else { "app-b" };
        let mut run = run(app, &format!("count-{index}"), index);
        if index % 2 == 0 {
            set_status(&mut run, RunStatus::Running);
        }
        create(store.as_ref(), &run).await;
    }
    let mut counts = store.count_runs_by_status().await.unwrap();
    counts.sort_by_key(|(status, _)| status.as_str());
    let queued = run("x", "count-x", 0).status();
    let mut expected = vec![(RunStatus::Running, 3), (queued, 2)];
    expected.sort_by_key(|(status, _)| status.as_str());
    assert_eq!(counts, expected, "every app's runs, by status");
}

/// What the durable reconciler inspects: durable runs still queued, running or paused whose row
/// has not changed since a cutoff, oldest change first, across apps.
pub async fn stale_durable_runs_listed(store: Arc<dyn Store>) {
    let make = |host: &str, updated: i64, status: RunStatus, durable: bool| {
        let mut run = run("app-a", host, updated - 1);
        set_status(&mut run, status);
        if durable {
            run.execution_mode = ExecutionMode::Durable;
        }
        run
    };
    let queued = make("queued", 20, RunStatus::Queued, true);
    let paused = make("paused", 10, RunStatus::Paused, true);
    let mut running = make("running", 30, RunStatus::Running, true);
    running.app_id = "app-b".to_string();
    let fresh = make("fresh", 500, RunStatus::Running, true);
    let done = make("done", 5, RunStatus::Failed, true);
    let light = make("light", 5, RunStatus::Running, false);
    for run in [&queued, &paused, &running, &fresh, &done, &light] {
        create(store.as_ref(), run).await;
    }
    let ids = |runs: Vec<ar_core::Run>| runs.into_iter().map(|run| run.id).collect::<Vec<_>>();
    let stale = store.list_stale_durable_runs(at(100), 100).await.unwrap();
    assert_eq!(
        ids(stale.clone()),
        vec![paused.id.clone(), queued.id.clone(), running.id.clone()]
    );
    assert_eq!(stale[0], stored(&paused), "returned whole");
    assert_eq!(
        ids(store.list_stale_durable_runs(at(100), 1).await.unwrap()),
        vec![paused.id.clone()]
    );
    assert_eq!(
        ids(store.list_stale_durable_runs(at(15), 100).await.unwrap()),
        vec![paused.id.clone()],
        "the cutoff"
    );
}
