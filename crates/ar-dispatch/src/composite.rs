//! Composite runtimes: the authority mux, the cluster router and the gateway decorator (spend cap, tracer, failover).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::consts::ERROR_CHAT_POLICY_UNAVAILABLE;
use crate::event::{RunEvent, Status};
use crate::run::{DispatchError, Run, RunControl, RunError, RunSink, Runtime};
use crate::spec::RunSpec;

/// Keeps the legacy lane and the subscription lane strictly apart.
/// Empty authority → legacy (unless the agent or profile names the subscription lane, which
/// is refused); `chat_subscription_isolated_v1` → subscription; anything else →
/// `chat_policy_unavailable`.
pub struct AuthorityMux {
    legacy: Arc<dyn Runtime>,
    subscription: Arc<dyn Runtime>,
}

impl AuthorityMux {
    /// A mux over the two lanes.
    pub fn new(legacy: Arc<dyn Runtime>, subscription: Arc<dyn Runtime>) -> Self {
        Self {
            legacy,
            subscription,
        }
    }
}

#[async_trait]
impl Runtime for AuthorityMux {
    fn name(&self) -> &str {
        "authority-mux"
    }
    async fn dispatch(&self, spec: RunSpec) -> Result<Run, DispatchError> {
        spec.validate_authority()?;
        match spec.authority.as_str() {
            "" if spec.looks_like_subscription() => Err(DispatchError::Policy {
                code: ERROR_CHAT_POLICY_UNAVAILABLE,
                message: "codex-subscription requires authority chat_subscription_isolated_v1"
                    .into(),
            }),
            "" => self.legacy.dispatch(spec).await,
            crate::consts::AUTHORITY_CHAT_SUBSCRIPTION_ISOLATED_V1 => {
                self.subscription.dispatch(spec).await
            }
            other => Err(DispatchError::Policy {
                code: ERROR_CHAT_POLICY_UNAVAILABLE,
                message: format!("unknown authority {other:?}"),
            }),
        }
    }
}

/// Routes by `RunSpec::machine`: empty or the local machine's name → local runtime; a peer
/// name → that peer's runtime (normally a [`crate::RemoteRuntime`]); anything else → error.
pub struct ClusterRouter {
    local_name: String,
    local: Arc<dyn Runtime>,
    peers: HashMap<String, Arc<dyn Runtime>>,
}

impl ClusterRouter {
    /// A router whose local machine is called `local_name`.
    pub fn new(local_name: impl Into<String>, local: Arc<dyn Runtime>) -> Self {
        Self {
            local_name: local_name.into(),
            local,
            peers: HashMap::new(),
        }
    }

    /// Adds a peer.
    pub fn with_peer(mut self, name: impl Into<String>, runtime: Arc<dyn Runtime>) -> Self {
        self.peers.insert(name.into(), runtime);
        self
    }

    /// Known peer names, sorted.
    pub fn peers(&self) -> Vec<String> {
        let mut v: Vec<String> = self.peers.keys().cloned().collect();
        v.sort();
        v
    }
}

#[async_trait]
impl Runtime for ClusterRouter {
    fn name(&self) -> &str {
        "cluster"
    }
    async fn dispatch(&self, spec: RunSpec) -> Result<Run, DispatchError> {
        if spec.machine.is_empty() || spec.machine == self.local_name {
            return self.local.dispatch(spec).await;
        }
        match self.peers.get(&spec.machine) {
            Some(peer) => peer.dispatch(spec).await,
            None => Err(DispatchError::UnknownMachine(spec.machine.clone())),
        }
    }
}

/// Observes what goes through a [`Gateway`].
pub trait Tracer: Send + Sync {
    /// A run was dispatched (after failover, `spec.agent` is the agent that took it).
    fn on_dispatch(&self, flow: &str, spec: &RunSpec, run_id: &str);
    /// A dispatch was refused.
    fn on_refused(&self, flow: &str, spec: &RunSpec, error: &DispatchError);
    /// An event passed.
    fn on_event(&self, event: &RunEvent);
    /// A run ended.
    fn on_finish(&self, run_id: &str, status: &Status);
}

type FlowFn = Arc<dyn Fn(&RunSpec) -> String + Send + Sync>;
type CostFn = Arc<dyn Fn(&RunSpec) -> u64 + Send + Sync>;

/// Adds a per-flow spend cap, a tracer hook and agent failover to another runtime.
///
/// - The flow of a spec is `flow_of(spec)` (default: the part of `RunID` before the first
///   `:`, or the whole id). Each dispatch costs `cost_of(spec)` units (default 1); a
///   dispatch that would take the flow's spend past the cap fails with
///   [`DispatchError::BudgetExceeded`] and starts nothing. Refused dispatches cost nothing.
/// - Failover: when dispatching agent A fails and `failover(A, B)` was set, B is tried
///   with the same spec (once per hop, no loops).
pub struct Gateway {
    inner: Arc<dyn Runtime>,
    cap: Option<u64>,
    spent: Mutex<HashMap<String, u64>>,
    flow_of: FlowFn,
    cost_of: CostFn,
    tracer: Option<Arc<dyn Tracer>>,
    failover: HashMap<String, String>,
}

impl Gateway {
    /// A gateway with no cap, no tracer and no failover.
    pub fn new(inner: Arc<dyn Runtime>) -> Self {
        Self {
            inner,
            cap: None,
            spent: Mutex::new(HashMap::new()),
            flow_of: Arc::new(|s: &RunSpec| {
                s.run_id
                    .split_once(':')
                    .map(|(f, _)| f.to_string())
                    .unwrap_or_else(|| s.run_id.clone())
            }),
            cost_of: Arc::new(|_| 1),
            tracer: None,
            failover: HashMap::new(),
        }
    }
    /// Sets the per-flow spend cap.
    pub fn with_cap(mut self, cap: u64) -> Self {
        self.cap = Some(cap);
        self
    }
    /// Sets how a spec's flow is found.
    pub fn with_flow_fn(mut self, f: impl Fn(&RunSpec) -> String + Send + Sync + 'static) -> Self {
        self.flow_of = Arc::new(f);
        self
    }
    /// Sets the cost of a dispatch.
    pub fn with_cost_fn(mut self, f: impl Fn(&RunSpec) -> u64 + Send + Sync + 'static) -> Self {
        self.cost_of = Arc::new(f);
        self
    }
    /// Sets the tracer.
    pub fn with_tracer(mut self, t: Arc<dyn Tracer>) -> Self {
        self.tracer = Some(t);
        self
    }
    /// When agent `from` cannot be dispatched, try `to`.
    pub fn with_failover(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.failover.insert(from.into(), to.into());
        self
    }
    /// Units spent by a flow so far.
    pub fn spent(&self, flow: &str) -> u64 {
        let g = match self.spent.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        g.get(flow).copied().unwrap_or(0)
    }

    fn reserve(&self, flow: &str, cost: u64) -> Result<(), DispatchError> {
        let mut g = match self.spent.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let spent = g.get(flow).copied().unwrap_or(0);
        if let Some(cap) = self.cap {
            if spent.saturating_add(cost) > cap {
                return Err(DispatchError::BudgetExceeded {
                    flow: flow.to_string(),
                    spent,
                    cap,
                    cost,
                });
            }
        }
        g.insert(flow.to_string(), spent.saturating_add(cost));
        Ok(())
    }

    fn refund(&self, flow: &str, cost: u64) {
        let mut g = match self.spent.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if let Some(v) = g.get_mut(flow) {
            *v = v.saturating_sub(cost);
        }
    }
}

#[async_trait]
impl Runtime for Gateway {
    fn name(&self) -> &str {
        "gateway"
    }
    async fn dispatch(&self, spec: RunSpec) -> Result<Run, DispatchError> {
        let flow = (self.flow_of)(&spec);
        let cost = (self.cost_of)(&spec);
        if let Err(e) = self.reserve(&flow, cost) {
            if let Some(t) = &self.tracer {
                t.on_refused(&flow, &spec, &e);
            }
            return Err(e);
        }
        let mut attempt = spec;
        let mut tried: Vec<String> = Vec::new();
        let run = loop {
            tried.push(attempt.agent.clone());
            match self.inner.dispatch(attempt.clone()).await {
                Ok(run) => break run,
                Err(e) => {
                    let next = self
                        .failover
                        .get(&attempt.agent)
                        .filter(|n| !tried.contains(n))
                        .cloned();
                    match next {
                        Some(next) => {
                            tracing::info!(from = %attempt.agent, to = %next, error = %e, "gateway failover");
                            attempt.agent = next;
                        }
                        None => {
                            self.refund(&flow, cost);
                            if let Some(t) = &self.tracer {
                                t.on_refused(&flow, &attempt, &e);
                            }
                            return Err(e);
                        }
                    }
                }
            }
        };
        let Some(tracer) = self.tracer.clone() else {
            return Ok(run);
        };
        tracer.on_dispatch(&flow, &attempt, run.id());
        Ok(traced(run, tracer))
    }
}

struct ForwardControl {
    inner: Arc<Run>,
}

#[async_trait]
impl RunControl for ForwardControl {
    fn cancel(&self) {
        self.inner.cancel();
    }
    async fn signal(&self, input: &str) -> Result<(), RunError> {
        self.inner.signal(input).await
    }
}

/// Wraps a run so that every event and the final status pass through a tracer.
fn traced(run: Run, tracer: Arc<dyn Tracer>) -> Run {
    let id = run.id().to_string();
    let events = run.events();
    let inner = Arc::new(run);
    let (sink, parts) = RunSink::channel(id.clone(), CancellationToken::new());
    let control = Arc::new(ForwardControl {
        inner: inner.clone(),
    });
    tokio::spawn(async move {
        if let Some(mut ev) = events {
            while let Some(e) = ev.next().await {
                tracer.on_event(&e);
                if e.kind == crate::event::EventType::Exited {
                    // The final status is known before the last event is delivered.
                    let status = inner.wait_status().await;
                    tracer.on_finish(&id, &status);
                    sink.clone().finish(status, vec![e]).await;
                    return;
                }
                sink.emit(e).await;
            }
        }
        let status = inner.wait_status().await;
        tracer.on_finish(&id, &status);
        sink.finish(status, Vec::new()).await;
    });
    Run::new(parts, control)
}
