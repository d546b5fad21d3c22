//! Conformance cases for run records written by replacement: interactions, tool calls,
//! checkpoints and secrets.

use std::sync::Arc;

use ar_core::store::{Checkpoint, RunChange, SecretChange, Store};
use ar_core::InteractionStatus;
use serde_json::json;

use crate::fixtures::{
    at, create, expect_interaction, expect_tool_call, interaction, micros, run, tool_call,
};

pub async fn interactions_upsert_by_id(store: Arc<dyn Store>) {
    let run = run("app-a", "h", 0);
    create(store.as_ref(), &run).await;
    let pending = interaction("int_1", InteractionStatus::Pending);
    let mut other = interaction("int_2", InteractionStatus::Pending);
    other.created_at = at(151);
    store
        .commit(RunChange {
            interactions: vec![pending.clone(), other.clone()],
            ..RunChange::for_run(&run)
        })
        .await
        .unwrap();
    assert_eq!(
        store.list_interactions("app-a", &run.id).await.unwrap(),
        vec![
            expect_interaction(&pending, "app-a", &run.id),
            expect_interaction(&other, "app-a", &run.id)
        ]
    );

    let resolved = interaction("int_1", InteractionStatus::Resolved);
    store
        .commit(RunChange {
            interactions: vec![resolved.clone()],
            ..RunChange::for_run(&run)
        })
        .await
        .unwrap();
    let listed = store.list_interactions("app-a", &run.id).await.unwrap();
    assert_eq!(
        listed,
        vec![
            expect_interaction(&resolved, "app-a", &run.id),
            expect_interaction(&other, "app-a", &run.id)
        ]
    );

    // The same id twice in one change: the last one wins.
    let mut first = interaction("int_3", InteractionStatus::Pending);
    first.created_at = at(170);
    let mut last = first.clone();
    last.title = "Final title".to_string();
    store
        .commit(RunChange {
            interactions: vec![first, last.clone()],
            ..RunChange::for_run(&run)
        })
        .await
        .unwrap();
    let listed = store.list_interactions("app-a", &run.id).await.unwrap();
    assert_eq!(listed.len(), 3);
    assert_eq!(listed[2], expect_interaction(&last, "app-a", &run.id));
    assert!(store
        .list_interactions("app-b", &run.id)
        .await
        .unwrap()
        .is_empty());
}

pub async fn tool_calls_upsert_by_id(store: Arc<dyn Store>) {
    let first_run = run("app-a", "h1", 0);
    let second_run = run("app-a", "h2", 1);
    create(store.as_ref(), &first_run).await;
    create(store.as_ref(), &second_run).await;

    let started = tool_call("call_1", None);
    store
        .commit(RunChange {
            tool_calls: vec![started.clone()],
            ..RunChange::for_run(&first_run)
        })
        .await
        .unwrap();
    // Provider tool call ids repeat across conversations: another run's call_1 is its own.
    let elsewhere = tool_call("call_1", Some(json!("other run")));
    store
        .commit(RunChange {
            tool_calls: vec![elsewhere.clone()],
            ..RunChange::for_run(&second_run)
        })
        .await
        .unwrap();
    let mut finished = tool_call("call_1", Some(json!({"ok": true, "bytes": 2})));
    finished.error = "warning: slow".to_string();
    finished.approval_required = true;
    store
        .commit(RunChange {
            tool_calls: vec![finished.clone()],
            ..RunChange::for_run(&first_run)
        })
        .await
        .unwrap();

    assert_eq!(
        store.list_tool_calls("app-a", &first_run.id).await.unwrap(),
        vec![expect_tool_call(&finished, "app-a", &first_run.id)]
    );
    assert_eq!(
        store
            .list_tool_calls("app-a", &second_run.id)
            .await
            .unwrap(),
        vec![expect_tool_call(&elsewhere, "app-a", &second_run.id)]
    );
    assert!(store
        .list_tool_calls("app-b", &first_run.id)
        .await
        .unwrap()
        .is_empty());
}

pub async fn checkpoints_latest_and_at(store: Arc<dyn Store>) {
    let run = run("app-a", "h", 0);
    create(store.as_ref(), &run).await;
    assert!(store.latest_checkpoint(&run.id).await.unwrap().is_none());
    let checkpoint = |step: i64, note: &str| Checkpoint {
        run_id: run.id.clone(),
        step,
        state: json!({"messages": [{"role": "user", "content": note}], "step": step, "cost": 0.125}),
        created_at: at(step),
    };
    for step in [0, 1, 2] {
        store
            .commit(RunChange {
                checkpoint: Some(checkpoint(step, "first")),
                ..RunChange::for_run(&run)
            })
            .await
            .unwrap();
    }
    let replaced = checkpoint(1, "again");
    store
        .commit(RunChange {
            checkpoint: Some(replaced.clone()),
            ..RunChange::for_run(&run)
        })
        .await
        .unwrap();

    let stored = |checkpoint: Checkpoint| Checkpoint {
        created_at: micros(checkpoint.created_at),
        ..checkpoint
    };
    assert_eq!(
        store.latest_checkpoint(&run.id).await.unwrap(),
        Some(stored(checkpoint(2, "first")))
    );
    assert_eq!(
        store.checkpoint_at(&run.id, 1).await.unwrap(),
        Some(stored(replaced))
    );
    assert_eq!(
        store.checkpoint_at(&run.id, 0).await.unwrap(),
        Some(stored(checkpoint(0, "first")))
    );
    assert!(store.checkpoint_at(&run.id, 3).await.unwrap().is_none());
    assert!(store
        .latest_checkpoint("run_other")
        .await
        .unwrap()
        .is_none());
}

pub async fn secrets_put_and_delete(store: Arc<dyn Store>) {
    let run = run("app-a", "h", 0);
    let other = crate::fixtures::run("app-a", "h2", 1);
    create(store.as_ref(), &run).await;
    create(store.as_ref(), &other).await;
    let put = |kind: &str, bytes: &[u8]| SecretChange::Put {
        kind: kind.to_string(),
        ciphertext: bytes.to_vec(),
    };
    let commit = |run: &ar_core::Run, secrets: Vec<SecretChange>| {
        let store = store.clone();
        let change = RunChange {
            secrets,
            ..RunChange::for_run(run)
        };
        async move { store.commit(change).await.unwrap() }
    };

    commit(&run, vec![put("model", b"m1"), put("mcp:github", b"g1")]).await;
    commit(&other, vec![put("model", b"other")]).await;
    assert_eq!(
        store.get_secret(&run.id, "model").await.unwrap(),
        Some(b"m1".to_vec())
    );
    assert_eq!(
        store.get_secret(&run.id, "mcp:github").await.unwrap(),
        Some(b"g1".to_vec())
    );
    assert_eq!(store.get_secret(&run.id, "nope").await.unwrap(), None);

    commit(
        &run,
        vec![
            put("model", b"m2"),
            SecretChange::Delete {
                kind: "mcp:github".to_string(),
            },
        ],
    )
    .await;
    assert_eq!(
        store.get_secret(&run.id, "model").await.unwrap(),
        Some(b"m2".to_vec())
    );
    assert_eq!(store.get_secret(&run.id, "mcp:github").await.unwrap(), None);

    // Operations apply in order: a put after DeleteAll survives, a put before it does not.
    commit(
        &run,
        vec![
            put("early", b"e"),
            SecretChange::DeleteAll,
            put("late", b"l"),
            put("gone", b"x"),
            SecretChange::Delete {
                kind: "gone".to_string(),
            },
        ],
    )
    .await;
    assert_eq!(store.get_secret(&run.id, "model").await.unwrap(), None);
    assert_eq!(store.get_secret(&run.id, "early").await.unwrap(), None);
    assert_eq!(store.get_secret(&run.id, "gone").await.unwrap(), None);
    assert_eq!(
        store.get_secret(&run.id, "late").await.unwrap(),
        Some(b"l".to_vec())
    );
    assert_eq!(
        store.get_secret(&other.id, "model").await.unwrap(),
        Some(b"other".to_vec()),
        "other runs keep theirs"
    );

    // Binary data survives untouched, including zero bytes.
    commit(&run, vec![put("bin", &[0, 0, 1, 0, 255])]).await;
    assert_eq!(
        store.get_secret(&run.id, "bin").await.unwrap(),
        Some(vec![0, 0, 1, 0, 255])
    );
}

/// An app's secrets outlive runs: written, replaced, read back per app and name only.
pub async fn app_secrets_put_replace_and_scope(store: Arc<dyn Store>) {
    assert_eq!(
        store
            .get_app_secret("app-a", "codex_auth/acct")
            .await
            .unwrap(),
        None
    );
    store
        .put_app_secret("app-a", "codex_auth/acct", &[1, 2, 3])
        .await
        .unwrap();
    store
        .put_app_secret("app-a", "codex_auth/acct", &[0, 255])
        .await
        .unwrap();
    assert_eq!(
        store
            .get_app_secret("app-a", "codex_auth/acct")
            .await
            .unwrap(),
        Some(vec![0, 255]),
        "replaced"
    );
    assert_eq!(
        store
            .get_app_secret("app-b", "codex_auth/acct")
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .get_app_secret("app-a", "codex_auth/other")
            .await
            .unwrap(),
        None
    );
}
