//! 10,000 commands through link clients: every one acked, run once and finished, none lost, no frame duplicated.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::link::{Admission, CommandHandler, LinkClient, LinkConfig, Outcome, Rejection, Work};
use crate::wire::{Command, CommandState, Registration};

use super::report::ThroughputFigures;
use super::rig::{registration, Rig};

struct Counting {
    id: String,
    runs: Arc<Mutex<HashMap<String, u32>>>,
    executed: AtomicU64,
}

#[async_trait]
impl CommandHandler for Counting {
    async fn registration(&self) -> Registration {
        registration(&self.id)
    }

    async fn admit(&self, work: &Work) -> Result<Admission, Rejection> {
        Ok(Admission {
            run_id: format!("run-{}", work.command_id()),
        })
    }

    async fn execute(&self, work: Work, _a: Admission, _c: CancellationToken) -> Outcome {
        *self
            .runs
            .lock()
            .entry(work.command_id().to_string())
            .or_default() += 1;
        self.executed.fetch_add(1, Ordering::Relaxed);
        Outcome::succeeded()
    }
}

pub(crate) async fn measure(runtimes: usize, per_runtime: usize) -> ThroughputFigures {
    match run(runtimes, per_runtime).await {
        Ok(f) => f,
        Err(e) => ThroughputFigures {
            runtimes,
            commands: runtimes * per_runtime,
            error: Some(e),
            ..ThroughputFigures::default()
        },
    }
}

async fn run(runtimes: usize, per_runtime: usize) -> Result<ThroughputFigures, String> {
    let rig = Rig::start().await.map_err(|e| e.to_string())?;
    let runs = Arc::new(Mutex::new(HashMap::new()));
    let mut handlers = Vec::new();
    let mut links = Vec::new();
    for i in 0..runtimes {
        let handler = Arc::new(Counting {
            id: format!("tp-{i}"),
            runs: Arc::clone(&runs),
            executed: AtomicU64::new(0),
        });
        let config = LinkConfig {
            heartbeat: Duration::ZERO,
            backoff_min: Duration::from_millis(20),
            ..LinkConfig::new(format!("http://{}", rig.addr))
        };
        links.push(LinkClient::start(config, handler.clone()).map_err(|e| e.to_string())?);
        handlers.push(handler);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while (0..runtimes).any(|i| !rig.server.connected(&format!("tp-{i}"))) {
        if Instant::now() > deadline {
            return Err("runtimes did not connect".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let total = runtimes * per_runtime;
    let started = Instant::now();
    let mut sent = vec![0usize; runtimes];
    let deadline = Instant::now() + Duration::from_secs(300);
    while sent.iter().sum::<usize>() < total {
        let mut progressed = false;
        for (i, handler) in handlers.iter().enumerate() {
            // Keep at most 128 commands outstanding per runtime, half the stream's bound.
            let done =
                usize::try_from(handler.executed.load(Ordering::Relaxed)).unwrap_or(usize::MAX);
            while sent[i] < per_runtime && sent[i].saturating_sub(done) < 128 {
                let cmd = Command {
                    command_id: format!("tp-{i}-{}", sent[i]),
                    agent: "agent".into(),
                    input: Some("x".into()),
                    ..Command::default()
                };
                rig.server
                    .enqueue(&format!("tp-{i}"), cmd)
                    .map_err(|e| e.to_string())?;
                sent[i] += 1;
                progressed = true;
            }
        }
        if Instant::now() > deadline {
            return Err("enqueue stalled".into());
        }
        if !progressed {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let ids: Vec<String> = (0..runtimes)
        .flat_map(|i| (0..per_runtime).map(move |n| format!("tp-{i}-{n}")))
        .collect();
    let settled = |ids: &[String]| {
        ids.iter()
            .filter(|id| {
                rig.server
                    .state_of(id)
                    .is_some_and(CommandState::is_terminal)
            })
            .count()
    };
    while settled(&ids) < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let elapsed = started.elapsed();
    let count = |state: CommandState| {
        ids.iter()
            .filter(|id| rig.server.state_of(id) == Some(state))
            .count()
    };
    let runs = runs.lock().clone();
    let mut duplicate_frames = 0;
    for link in links {
        duplicate_frames += link.stats().duplicates;
        link.stop().await;
    }
    let figures = ThroughputFigures {
        runtimes,
        commands: total,
        finished: count(CommandState::Finished),
        lost: count(CommandState::Lost),
        rejected: count(CommandState::Rejected),
        executed_twice: runs.values().filter(|&&n| n > 1).count(),
        never_executed: ids.iter().filter(|id| !runs.contains_key(*id)).count(),
        duplicate_frames,
        elapsed,
        error: None,
    };
    rig.stop().await;
    Ok(figures)
}
