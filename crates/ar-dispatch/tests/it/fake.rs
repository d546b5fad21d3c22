//! `FakeRuntime`: replays canned events per agent, records dispatched specs and signals (the composites' tests run over it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use ar_dispatch::run::{run_id_for, RunSink};
use ar_dispatch::{
    DispatchError, EventType, Run, RunControl, RunError, RunEvent, RunSpec, Runtime, State, Status,
};

/// One scripted step of a fake run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FakeStep {
    /// Emit an event of this type with this data.
    Event(EventType, String),
    /// Wait until a signal arrives, then emit it as a `message`.
    AwaitSignal,
    /// End with this exit code (0 → succeeded, else failed). Without it a script ends with 0.
    Exit(i32),
}

/// A canned script for one agent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FakeScript {
    /// The steps, in order.
    pub steps: Vec<FakeStep>,
}

impl FakeScript {
    /// A script that answers one message and exits 0.
    pub fn answer(text: &str) -> Self {
        Self {
            steps: vec![
                FakeStep::Event(EventType::Message, text.to_string()),
                FakeStep::Exit(0),
            ],
        }
    }
}

/// Replays scripts. `started` is always emitted first and `exited` last.
#[derive(Default)]
pub struct FakeRuntime {
    scripts: Mutex<HashMap<String, FakeScript>>,
    dispatched: Mutex<Vec<RunSpec>>,
    signals: Arc<Mutex<Vec<(String, String)>>>,
}

impl std::fmt::Debug for FakeRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeRuntime").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl FakeRuntime {
    /// An empty fake (every agent unknown until scripted).
    pub fn new() -> Self {
        Self::default()
    }
    /// Scripts an agent.
    pub fn with_script(self, agent: &str, script: FakeScript) -> Self {
        lock(&self.scripts).insert(agent.to_string(), script);
        self
    }
    /// Every spec dispatched so far (including refused ones).
    pub fn dispatched(&self) -> Vec<RunSpec> {
        lock(&self.dispatched).clone()
    }
    /// Every `(run id, input)` signalled so far.
    pub fn signals(&self) -> Vec<(String, String)> {
        lock(&self.signals).clone()
    }
}

struct FakeControl {
    token: CancellationToken,
    inbox: tokio::sync::mpsc::UnboundedSender<String>,
    log: Arc<Mutex<Vec<(String, String)>>>,
    run_id: String,
}

#[async_trait]
impl RunControl for FakeControl {
    fn cancel(&self) {
        self.token.cancel();
    }
    async fn signal(&self, input: &str) -> Result<(), RunError> {
        lock(&self.log).push((self.run_id.clone(), input.to_string()));
        self.inbox
            .send(input.to_string())
            .map_err(|_| RunError::Finished)
    }
}

#[async_trait]
impl Runtime for FakeRuntime {
    fn name(&self) -> &str {
        "fake"
    }
    async fn dispatch(&self, spec: RunSpec) -> Result<Run, DispatchError> {
        lock(&self.dispatched).push(spec.clone());
        let script = lock(&self.scripts)
            .get(&spec.agent)
            .cloned()
            .ok_or_else(|| DispatchError::UnknownAgent(spec.agent.clone()))?;
        let run_id = run_id_for(&spec)?;
        let token = CancellationToken::new();
        let (sink, parts) = RunSink::channel(run_id.clone(), token.clone());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let control = Arc::new(FakeControl {
            token: token.clone(),
            inbox: tx,
            log: self.signals.clone(),
            run_id: run_id.clone(),
        });
        let agent = spec.agent.clone();
        tokio::spawn(async move {
            sink.emit(RunEvent::new(&run_id, EventType::Started, agent))
                .await;
            let mut code = 0;
            let mut canceled = false;
            for step in script.steps {
                if token.is_cancelled() {
                    canceled = true;
                    break;
                }
                match step {
                    FakeStep::Event(kind, data) => {
                        sink.emit(RunEvent::new(&run_id, kind, data)).await
                    }
                    FakeStep::AwaitSignal => {
                        tokio::select! {
                            m = rx.recv() => if let Some(m) = m {
                                sink.emit(RunEvent::new(&run_id, EventType::Message, m)).await
                            },
                            _ = token.cancelled() => { canceled = true; break; }
                        }
                    }
                    FakeStep::Exit(c) => {
                        code = c;
                        break;
                    }
                }
            }
            let canceled = canceled || token.is_cancelled();
            let status = if canceled {
                code = -1;
                Status::ended(State::Canceled, code, "canceled")
            } else if code == 0 {
                Status::ended(State::Succeeded, 0, "")
            } else {
                Status::ended(State::Failed, code, format!("exit status {code}"))
            };
            let exited = if canceled {
                RunEvent::exited_canceled(&run_id, code)
            } else {
                RunEvent::exited(&run_id, code)
            };
            sink.finish(status, vec![exited]).await;
        });
        Ok(Run::new(parts, control))
    }
}
