//! A rough cost probe (ignored by default): drives runs shaped like a 5-step native run
//! (~15 commits each) and prints wall time and CPU per run for this process and, for
//! PostgreSQL on the same host, for the server processes. Run with
//! `cargo test -p ar-store --release -- --ignored perf --nocapture`.

use crate::fixtures::set_status;
use std::time::Instant;

use ar_core::store::{Checkpoint, RunChange, SecretChange, Store};
use ar_core::EventKind;
use ar_core::{InteractionStatus, RunStatus};
use serde_json::json;

use crate::fixtures::{event, interaction, message, run, stored, tool_call};

/// CPU seconds (user + system) of the processes whose `comm` satisfies `select`.
fn cpu_seconds(select: impl Fn(u32, &str) -> bool) -> f64 {
    let ticks_per_second = 100.0;
    let mut total = 0.0;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        if !select(pid, comm) {
            continue;
        }
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after `comm`.
        let utime: f64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0);
        let stime: f64 = fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
        total += (utime + stime) / ticks_per_second;
    }
    total
}

async fn drive(store: &dyn Store, runs: usize) {
    for index in 0..runs {
        let run = run(
            "app-perf",
            &format!("host-{}", ar_core::ids::new_id("h")),
            index as i64,
        );
        let change = RunChange {
            run: Some(run.clone()),
            secrets: vec![SecretChange::Put {
                kind: "model".to_string(),
                ciphertext: vec![7; 64],
            }],
            ..RunChange::for_run(&run)
        }
        .with_event(event(EventKind::RunQueued, 0));
        assert!(matches!(
            store.create_run(change).await.unwrap(),
            ar_core::store::CreateRun::Created(_)
        ));
        let now = chrono::Utc::now();
        store
            .try_acquire_lease(&run.id, "perf", now + chrono::Duration::seconds(30), now)
            .await
            .unwrap();
        let mut current = stored(&run);
        set_status(&mut current, RunStatus::Running);
        let committed = store
            .commit(
                RunChange::update(current.clone(), 1).with_event(event(EventKind::RunStarted, 1)),
            )
            .await
            .unwrap();
        current.version = committed.version;
        for step in 0..5_i64 {
            let call_id = format!("call_{step}");
            store
                .commit(RunChange {
                    messages: vec![message("assistant", "I will call a tool")],
                    tool_calls: vec![tool_call(&call_id, None)],
                    events: vec![
                        event(EventKind::AssistantMessageStarted, step),
                        event(EventKind::AssistantMessageCompleted, step),
                        event(EventKind::ToolCallStarted, step),
                    ],
                    ..RunChange::for_run(&run)
                })
                .await
                .unwrap();
            let mut interactions = Vec::new();
            if step == 2 {
                interactions.push(interaction("int_perf", InteractionStatus::Resolved));
            }
            store
                .commit(RunChange {
                    messages: vec![message("tool", "result")],
                    tool_calls: vec![tool_call(&call_id, Some(json!({"ok": true})))],
                    interactions,
                    events: vec![event(EventKind::ToolCallResult, step), event(EventKind::ToolCallFinished, step)],
                    checkpoint: Some(Checkpoint {
                        run_id: run.id.clone(),
                        step,
                        state: json!({"messages": [{"role": "user", "content": "x".repeat(400)}], "step": step}),
                        created_at: chrono::Utc::now(),
                    }),
                    ..RunChange::for_run(&run)
                })
                .await
                .unwrap();
        }
        current
            .output_summary
            .insert("tokens".to_string(), 1234.into());
        let committed = store
            .commit(
                RunChange::update(current.clone(), current.version)
                    .with_event(event(EventKind::UsageCheckpoint, 9)),
            )
            .await
            .unwrap();
        current.version = committed.version;
        set_status(&mut current, RunStatus::Completed);
        store
            .commit(
                RunChange {
                    secrets: vec![SecretChange::DeleteAll],
                    ..RunChange::update(current.clone(), current.version)
                }
                .with_event(event(EventKind::RunCompleted, 10)),
            )
            .await
            .unwrap();
        store.release_lease(&run.id, "perf").await.unwrap();
    }
}

async fn measure(label: &str, store: &dyn Store) {
    drive(store, 20).await; // warm up statement caches and plans
    let runs = 300;
    let me = std::process::id();
    let own_before = cpu_seconds(|pid, _| pid == me);
    let pg_before = cpu_seconds(|_, comm| comm.starts_with("postgres"));
    let started = Instant::now();
    drive(store, runs).await;
    let wall = started.elapsed().as_secs_f64();
    let own = cpu_seconds(|pid, _| pid == me) - own_before;
    let pg = cpu_seconds(|_, comm| comm.starts_with("postgres")) - pg_before;
    let per_run = |seconds: f64| seconds * 1000.0 / runs as f64;
    eprintln!(
        "{label}: per run (16 store calls, 14 commits): wall {:.3} ms, this process CPU {:.3} ms, \
         postgres CPU {:.3} ms",
        per_run(wall),
        per_run(own),
        per_run(pg)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "cost probe; run explicitly"]
async fn perf_five_step_runs() {
    // AR_PERF_BACKENDS picks backends (comma separated: file, memory, postgres).
    let wanted =
        std::env::var("AR_PERF_BACKENDS").unwrap_or_else(|_| "file,memory,postgres".to_string());
    if wanted.contains("file") {
        let dir = tempfile::tempdir().unwrap();
        let store = ar_store::SqliteStore::connect(dir.path().join("perf.db").to_str().unwrap())
            .await
            .unwrap();
        measure("sqlite file", &store).await;
        store.close().await;
    }
    if wanted.contains("memory") {
        let store = ar_store::SqliteStore::connect(":memory:").await.unwrap();
        measure("sqlite memory", &store).await;
    }
    if wanted.contains("postgres") {
        if let Some((store, schema)) = crate::harness::postgres_store("perf").await {
            measure("postgres", &store).await;
            store.close().await;
            crate::harness::drop_schema(&schema).await;
        }
    }
}

/// Context switches of every thread of this process (voluntary, involuntary).
fn switches() -> (u64, u64) {
    let mut total = (0, 0);
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return total;
    };
    for task in tasks.flatten() {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find(|line| line.starts_with(name))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|value| value.parse().ok())
                .unwrap_or(0)
        };
        total.0 += field("voluntary_ctxt_switches");
        total.1 += field("nonvoluntary_ctxt_switches");
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "cost probe; run explicitly"]
async fn perf_call_overhead() {
    let backend = std::env::var("AR_PERF_BACKENDS").unwrap_or_default();
    let mut schema = None;
    let mut pool = None;
    let dir = tempfile::tempdir().unwrap();
    let store: std::sync::Arc<dyn Store> = if backend.contains("postgres") {
        let (store, name) = crate::harness::postgres_store("perf")
            .await
            .expect("postgres");
        schema = Some(name);
        pool = Some(store.pool().clone());
        std::sync::Arc::new(store)
    } else if backend.contains("file") {
        let path = dir.path().join("calls.db");
        std::sync::Arc::new(
            ar_store::SqliteStore::connect(path.to_str().unwrap())
                .await
                .unwrap(),
        )
    } else {
        std::sync::Arc::new(ar_store::SqliteStore::connect(":memory:").await.unwrap())
    };
    let store = store.as_ref();
    let run = run("app", "h", 0);
    crate::fixtures::create(store, &run).await;
    let me = std::process::id();
    let mut version = 1;
    for (label, calls) in [
        ("ping", 0),
        ("commit", 1),
        ("get_run", 2),
        ("update", 3),
        ("raw update", 4),
        ("raw cte", 5),
        ("commit + get_run", 6),
        ("ping", 0),
    ] {
        let n = 2000;
        let cpu_before = cpu_seconds(|pid, _| pid == me);
        let pg_before = cpu_seconds(|_, comm| comm.starts_with("postgres"));
        let sw_before = switches();
        let started = Instant::now();
        for index in 0..n {
            match calls {
                0 => store.ping().await.unwrap(),
                1 => {
                    store
                        .commit(
                            RunChange::for_run(&run)
                                .with_event(event(EventKind::PlanUpdated, index)),
                        )
                        .await
                        .unwrap();
                }
                2 => {
                    store.get_run("app", &run.id).await.unwrap();
                }
                6 => {
                    // A read right after a write: on a file, the reader's page cache is stale.
                    store
                        .commit(
                            RunChange::for_run(&run)
                                .with_event(event(EventKind::PlanUpdated, index)),
                        )
                        .await
                        .unwrap();
                    store.get_run("app", &run.id).await.unwrap();
                }
                4 | 5 if pool.is_none() => {}
                4 => {
                    sqlx::query("UPDATE runs SET event_seq = event_seq + 1 WHERE id = $1")
                        .bind(&run.id)
                        .execute(pool.as_ref().unwrap())
                        .await
                        .unwrap();
                }
                5 => {
                    sqlx::query(
                        "WITH r AS (UPDATE runs SET event_seq = event_seq + 1 WHERE id = $1 RETURNING id, app_id, host_run_id, event_seq) \
                         INSERT INTO events (run_id, app_id, host_run_id, sequence_no, event_id, event_type, data, created_at) \
                         SELECT r.id, r.app_id, r.host_run_id, r.event_seq, 'evt', 'x', '{}'::jsonb, now() FROM r",
                    )
                    .bind(&run.id)
                    .execute(pool.as_ref().unwrap())
                    .await
                    .unwrap();
                }
                _ => {
                    let mut next = stored(&run);
                    next.error_message = format!("{index}");
                    version = store
                        .commit(
                            RunChange::update(next, version)
                                .with_event(event(EventKind::PlanUpdated, index)),
                        )
                        .await
                        .unwrap()
                        .version;
                }
            }
        }
        let wall = started.elapsed().as_secs_f64();
        let cpu = cpu_seconds(|pid, _| pid == me) - cpu_before;
        let pg = cpu_seconds(|_, comm| comm.starts_with("postgres")) - pg_before;
        let sw = switches();
        eprintln!(
            "{label}: wall {:.1} us, cpu {:.1} us, postgres cpu {:.1} us, voluntary switches {:.1}, involuntary {:.1} per call",
            wall * 1e6 / n as f64,
            cpu * 1e6 / n as f64,
            pg * 1e6 / n as f64,
            (sw.0 - sw_before.0) as f64 / n as f64,
            (sw.1 - sw_before.1) as f64 / n as f64
        );
    }
    if let Some(schema) = schema {
        crate::harness::drop_schema(&schema).await;
    }
}
