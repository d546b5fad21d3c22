//! The `engine_state` migration on both backends: a database written by the previous schema,
//! whose runs keep the engine's own keys in the host's metadata, opens with those keys moved
//! into the run's typed engine state and the host's metadata left as the host wrote it.

use ar_core::store::Store;
use ar_core::studio::StudioEngine;
use ar_core::{PauseReason, Run, RunStatus};
use ar_store::{PostgresStore, SqliteStore};
use serde_json::json;
use sqlx::{Connection, Executor};

use crate::fixtures::{create, run};
use crate::harness::{drop_schema, postgres_store, postgres_url};

/// The metadata a run of the previous version carried: the host's `team` and the engine's keys.
fn old_metadata() -> serde_json::Value {
    json!({
        "team": "core",
        "turn_started_at": "2026-03-04T05:06:09.123456+00:00",
        "last_resume": {"resume_id": "res_1", "fingerprint": "fp", "intent": "reply",
                        "message_provenance": "", "content": "go on",
                        "external_actor_id": "u1", "interaction_id": "int_1"},
        "workdir": "/tmp/agent-runtime/run_1",
        "studio": {"command_id": "cmd_1", "engine": "scripted", "side_effects": "park",
                   "source_run_id": "run_src", "from_step": 2},
        "forked_from": "run_src"
    })
}

fn paused_run() -> Run {
    let mut run = run("app-a", "", 0);
    run.engine = ar_core::EngineState::default();
    run.state = ar_core::RunState::restore(
        RunStatus::Paused,
        PauseReason::HumanInput,
        run.approval_state(),
        false,
    );
    run
}

fn assert_migrated(read: &Run) {
    assert_eq!(
        read.input
            .metadata
            .as_ref()
            .map(|m| serde_json::Value::Object(m.clone())),
        Some(json!({"team": "core"})),
        "the host's metadata is the host's alone again"
    );
    let engine = &read.engine;
    assert_eq!(
        engine.turn_started_at.map(|at| at.to_rfc3339()),
        Some("2026-03-04T05:06:09.123456+00:00".to_string())
    );
    let resume = engine.last_resume.as_ref().expect("last resume moved");
    assert_eq!(
        (resume.resume_id.as_str(), resume.interaction_id.as_str()),
        ("res_1", "int_1")
    );
    assert_eq!(engine.workdir.as_deref(), Some("/tmp/agent-runtime/run_1"));
    let studio = engine.studio.as_ref().expect("studio policy moved");
    assert_eq!(studio.engine, StudioEngine::Scripted);
    assert_eq!(studio.source_run_id, "run_src");
    assert_eq!(read.status(), RunStatus::Paused);
    assert_eq!(read.pause_reason(), PauseReason::HumanInput);
}

#[tokio::test]
async fn sqlite_moves_the_engine_keys_out_of_the_hosts_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let path = path.to_str().unwrap().to_string();
    let run = paused_run();
    let store = SqliteStore::connect(&path).await.unwrap();
    create(&store, &run).await;
    store.close().await;
    // Back to the previous schema, as that version left the row.
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{path}"))
        .await
        .unwrap();
    let downgrade = format!(
        "UPDATE runs SET input = json_set(input, '$.metadata', json('{}')); \
         ALTER TABLE runs DROP COLUMN engine_state; \
         DELETE FROM _sqlx_migrations WHERE version = 2;",
        old_metadata()
    );
    conn.execute(downgrade.as_str()).await.unwrap();
    conn.close().await.unwrap();

    let store = SqliteStore::connect(&path).await.unwrap();
    let read = store.get_run("app-a", &run.id).await.unwrap().unwrap();
    assert_migrated(&read);
    store.close().await;
}

#[tokio::test]
async fn postgres_moves_the_engine_keys_out_of_the_hosts_metadata() {
    let Some((store, schema)) = postgres_store("engine_state_migration").await else {
        return;
    };
    let run = paused_run();
    create(&store, &run).await;
    store.close().await;
    let mut conn = sqlx::PgConnection::connect(&postgres_url()).await.unwrap();
    let downgrade = format!(
        "SET search_path TO \"{schema}\"; \
         UPDATE runs SET input = jsonb_set(input, '{{metadata}}', '{}'::jsonb); \
         ALTER TABLE runs DROP COLUMN engine_state; \
         DELETE FROM _sqlx_migrations WHERE version = 2;",
        old_metadata()
    );
    conn.execute(downgrade.as_str()).await.unwrap();
    conn.close().await.unwrap();

    let store = PostgresStore::connect_with_schema(&postgres_url(), &schema)
        .await
        .unwrap();
    let read = store.get_run("app-a", &run.id).await.unwrap().unwrap();
    store.close().await;
    drop_schema(&schema).await;
    assert_migrated(&read);
}
