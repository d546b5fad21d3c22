//! The cluster router: runs go to this machine or to nodes ([`crate::RemoteRuntime`] peers).
//!
//! As a [`Runtime`] it routes by `RunSpec::machine` alone (empty or the local name: here; a
//! peer's name: that peer), which is what `agent-runtime exec --machine` uses. A service
//! places runs with [`ClusterRouter::place`] instead:
//! - a [`Placement`] names a machine (`local`, or a node), or labels every chosen node must
//!   carry, or neither;
//! - only ready nodes whose inventory has the run's agent ready are eligible (health rounds,
//!   [`ClusterRouter::check_health`], ask each node for its capabilities; a node that fails a
//!   run is marked down until the next round finds it well); nodes the caller wants to avoid
//!   (one that just lost the run) are skipped;
//! - without a machine or labels, any eligible node takes the run, else this machine when it
//!   has the agent;
//! - each node takes at most `max_concurrent_runs` of this router's runs: the least loaded
//!   eligible node with a free place gets the run; when all are full, `place` waits for a
//!   place to free or the health to change;
//! - with none eligible it fails with [`PlaceError::NoneEligible`], saying why each candidate
//!   could not take the run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ar_core::secret::Secret;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use crate::contracts::AgentSourceInventorySnapshot;
use crate::inventory::ready_agents;
use crate::local::AgentOutput;
use crate::remote::{NodeCapabilities, RemoteRuntime};
use crate::run::{DispatchError, Run, Runtime};
use crate::spec::RunSpec;

/// The machine name that always means this one.
pub const LOCAL_MACHINE: &str = "local";
/// How long a placement waits for nodes whose first health check has not come back.
pub const FIRST_CHECK_PATIENCE: Duration = Duration::from_secs(30);

/// A node as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Its name (what placements and `Machine` name).
    pub name: String,
    /// Its base URL.
    pub url: String,
    /// Its bearer token.
    pub token: Secret,
    /// Labels placements select it by.
    pub labels: BTreeMap<String, String>,
    /// Most of this router's runs on it at once (0: no limit).
    pub max_concurrent_runs: usize,
}

/// Where a run may go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// The agent it runs (`codex`, `claude`, `opencode`, …).
    pub agent: String,
    /// A machine: `local` (or the router's local name), or a node's name.
    pub machine: Option<String>,
    /// Labels a node must carry (all of them).
    pub labels: BTreeMap<String, String>,
    /// Nodes not to use (those that lost this run).
    pub avoid: Vec<String>,
    /// Only this machine may run it (a run whose workspace is here).
    pub local_only: bool,
}

/// Why a run cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlaceError {
    /// The placement names a machine the router does not know.
    #[error("unknown machine {0:?}")]
    UnknownMachine(String),
    /// No machine the placement allows can take the run now; says why for each.
    #[error("{0}")]
    NoneEligible(String),
}

/// A node's health, as the last check (or run) found it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NodeHealth {
    /// It answers and takes runs.
    pub ready: bool,
    /// When it was last checked.
    pub checked_at: Option<DateTime<Utc>>,
    /// Why it is not ready (empty when it is).
    pub error: String,
    /// The agents ready on it.
    pub agents: Vec<String>,
    /// What it said of itself.
    pub capabilities: Option<NodeCapabilities>,
}

/// A node as the router sees it now.
#[derive(Debug, Clone, Serialize)]
pub struct NodeStatus {
    pub name: String,
    pub url: String,
    pub labels: BTreeMap<String, String>,
    /// This router's runs on it.
    pub active_runs: usize,
    pub max_concurrent_runs: usize,
    #[serde(flatten)]
    pub health: NodeHealth,
}

impl NodeStatus {
    /// Its seed 000 inventory, when it reported one.
    pub fn inventory(&self) -> Option<&AgentSourceInventorySnapshot> {
        self.health.capabilities.as_ref()?.inventory.as_ref()
    }
}

struct Peer {
    name: String,
    url: String,
    labels: BTreeMap<String, String>,
    runtime: Arc<dyn Runtime>,
    /// Set for configured nodes (health-checked); peers added with [`ClusterRouter::with_peer`]
    /// are always taken as ready.
    remote: Option<RemoteRuntime>,
    max: usize,
    slots: Option<Arc<Semaphore>>,
    health: Mutex<NodeHealth>,
}

impl Peer {
    fn health(&self) -> NodeHealth {
        lock(&self.health).clone()
    }

    fn active(&self) -> usize {
        match &self.slots {
            Some(slots) => self.max - slots.available_permits(),
            None => 0,
        }
    }

    /// Whether the first health check of this node is still to come.
    fn unchecked(&self) -> bool {
        self.remote.is_some() && lock(&self.health).checked_at.is_none()
    }

    /// Why this node cannot take a run of `agent` now (`None`: it can).
    fn unfit(&self, agent: &str) -> Option<String> {
        // Peers without health checks are always fit.
        self.remote.as_ref()?;
        let health = lock(&self.health);
        if !health.ready {
            let why = if health.error.is_empty() {
                "not checked yet"
            } else {
                &health.error
            };
            return Some(format!("node {:?} is not ready ({why})", self.name));
        }
        (!health.agents.iter().any(|a| a == agent))
            .then(|| format!("node {:?} has no ready {agent}", self.name))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Routes runs between this machine and nodes (see the module docs).
pub struct ClusterRouter {
    local_name: String,
    local: Arc<dyn Runtime>,
    /// The agents this machine runs (`None`: any).
    local_agents: Option<Vec<String>>,
    peers: Vec<Arc<Peer>>,
    changed: Arc<Notify>,
}

impl std::fmt::Debug for ClusterRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let peers: Vec<&str> = self.peers.iter().map(|p| p.name.as_str()).collect();
        f.debug_struct("ClusterRouter")
            .field("local_name", &self.local_name)
            .field("peers", &peers)
            .finish()
    }
}

impl ClusterRouter {
    /// A router whose local machine is called `local_name`.
    pub fn new(local_name: impl Into<String>, local: Arc<dyn Runtime>) -> Self {
        Self {
            local_name: local_name.into(),
            local,
            local_agents: None,
            peers: Vec::new(),
            changed: Arc::new(Notify::new()),
        }
    }

    /// Says which agents this machine runs (placements fall back to it only for those).
    pub fn with_local_agents(mut self, agents: Vec<String>) -> Self {
        self.local_agents = Some(agents);
        self
    }

    /// Adds a peer that is always taken as ready, without labels or limit.
    pub fn with_peer(mut self, name: impl Into<String>, runtime: Arc<dyn Runtime>) -> Self {
        let name = name.into();
        self.peers.push(Arc::new(Peer {
            url: String::new(),
            name,
            labels: BTreeMap::new(),
            runtime,
            remote: None,
            max: 0,
            slots: None,
            health: Mutex::new(NodeHealth {
                ready: true,
                ..NodeHealth::default()
            }),
        }));
        self
    }

    /// Adds a configured node: health-checked, placed by name and labels, limited.
    pub fn with_node(mut self, spec: NodeSpec) -> Result<Self, DispatchError> {
        let remote = RemoteRuntime::new(&spec.name, &spec.url, spec.token.expose())?;
        let slots = (spec.max_concurrent_runs > 0)
            .then(|| Arc::new(Semaphore::new(spec.max_concurrent_runs)));
        self.peers.push(Arc::new(Peer {
            name: spec.name,
            url: spec.url,
            labels: spec.labels,
            runtime: Arc::new(remote.clone()),
            remote: Some(remote),
            max: spec.max_concurrent_runs,
            slots,
            health: Mutex::new(NodeHealth::default()),
        }));
        Ok(self)
    }

    /// Whether any node is configured.
    pub fn has_nodes(&self) -> bool {
        self.peers.iter().any(|peer| peer.remote.is_some())
    }

    /// The nodes as the router sees them now.
    pub fn nodes(&self) -> Vec<NodeStatus> {
        self.peers
            .iter()
            .filter(|peer| peer.remote.is_some())
            .map(|peer| NodeStatus {
                name: peer.name.clone(),
                url: peer.url.clone(),
                labels: peer.labels.clone(),
                active_runs: peer.active(),
                max_concurrent_runs: peer.max,
                health: peer.health(),
            })
            .collect()
    }

    /// Asks every node for its capabilities (bounded by `timeout`) and records its health.
    pub async fn check_health(&self, timeout: Duration) {
        let checks = self.peers.iter().filter_map(|peer| {
            let remote = peer.remote.clone()?;
            Some(async move {
                let found = remote.capabilities(timeout).await;
                (peer, found)
            })
        });
        for (peer, found) in futures::future::join_all(checks).await {
            let health = match found {
                // A node still probing its CLIs is not checked yet: runs wait for it.
                Ok(caps) if caps.inventory.is_none() && caps.accepting => NodeHealth {
                    error: "probing its agent CLIs".into(),
                    capabilities: Some(caps),
                    ..NodeHealth::default()
                },
                Ok(caps) => NodeHealth {
                    ready: caps.accepting,
                    checked_at: Some(Utc::now()),
                    error: if caps.accepting {
                        String::new()
                    } else {
                        "shutting down".into()
                    },
                    agents: caps
                        .inventory
                        .as_ref()
                        .map(ready_agents)
                        .unwrap_or_else(|| caps.agents.clone()),
                    capabilities: Some(caps),
                },
                Err(error) => NodeHealth {
                    ready: false,
                    checked_at: Some(Utc::now()),
                    error: error.to_string(),
                    ..NodeHealth::default()
                },
            };
            *lock(&peer.health) = health;
        }
        self.changed.notify_waiters();
    }

    /// Checks the nodes' health every `every` until `stop` fires.
    pub fn spawn_health(
        self: &Arc<Self>,
        every: Duration,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let router = self.clone();
        tokio::spawn(async move {
            loop {
                router
                    .check_health(every.min(Duration::from_secs(10)))
                    .await;
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(every) => {}
                }
            }
        });
    }

    /// Marks a node down after it failed a run (until a health round finds it well).
    pub fn mark_down(&self, name: &str, reason: &str) {
        if let Some(peer) = self
            .peers
            .iter()
            .find(|peer| peer.name == name && peer.remote.is_some())
        {
            let mut health = lock(&peer.health);
            health.ready = false;
            health.error = reason.to_string();
            health.checked_at = Some(Utc::now());
        }
        self.changed.notify_waiters();
    }

    /// Checks a placement against the configuration (not the health): the machine it names
    /// exists, its labels match some node.
    pub fn check(&self, placement: &Placement) -> Result<(), PlaceError> {
        if let Some(machine) = &placement.machine {
            if !self.is_local(machine) && !self.peers.iter().any(|peer| &peer.name == machine) {
                return Err(PlaceError::UnknownMachine(machine.clone()));
            }
        }
        if !placement.labels.is_empty()
            && !self
                .peers
                .iter()
                .any(|peer| carries(peer, &placement.labels))
        {
            return Err(PlaceError::NoneEligible(format!(
                "no node carries the labels {}",
                show_labels(&placement.labels)
            )));
        }
        Ok(())
    }

    fn is_local(&self, machine: &str) -> bool {
        machine.is_empty() || machine == LOCAL_MACHINE || machine == self.local_name
    }

    fn local_serves(&self, agent: &str) -> bool {
        self.local_agents
            .as_ref()
            .is_none_or(|agents| agents.iter().any(|a| a == agent))
    }

    fn local_slot(&self, agent: &str) -> Result<Option<Slot>, PlaceError> {
        if !self.local_serves(agent) {
            return Err(PlaceError::NoneEligible(format!(
                "this machine has no {agent}"
            )));
        }
        Ok(Some(Slot {
            machine: LOCAL_MACHINE.to_string(),
            local: true,
            runtime: self.local.clone(),
            _permit: None,
            changed: self.changed.clone(),
        }))
    }

    /// Places a run: a slot on the chosen machine, waiting while every eligible node is full
    /// (and, for at most [`FIRST_CHECK_PATIENCE`], for nodes not checked yet).
    pub async fn place(&self, placement: &Placement) -> Result<Slot, PlaceError> {
        let since = tokio::time::Instant::now();
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let patient = since.elapsed() < FIRST_CHECK_PATIENCE;
            if let Some(slot) = self.try_place(placement, patient)? {
                return Ok(slot);
            }
            // Every eligible node is full: wait for a place or a health change (and look
            // again now and then, should a wake-up be missed).
            let _ = tokio::time::timeout(Duration::from_secs(1), changed).await;
        }
    }

    /// One attempt: a slot, `None` when every eligible node is full (or, while `patient`, not
    /// checked yet), or why none is eligible.
    fn try_place(&self, placement: &Placement, patient: bool) -> Result<Option<Slot>, PlaceError> {
        let agent = placement.agent.as_str();
        if placement.local_only {
            return match &placement.machine {
                Some(machine) if !self.is_local(machine) => Err(PlaceError::NoneEligible(format!(
                    "this run's workspace is on this machine; it cannot run on {machine:?}"
                ))),
                _ => self.local_slot(agent),
            };
        }
        let candidates: Vec<&Arc<Peer>> = match &placement.machine {
            Some(machine) if self.is_local(machine) => return self.local_slot(agent),
            Some(machine) => {
                let named: Vec<&Arc<Peer>> =
                    self.peers.iter().filter(|p| &p.name == machine).collect();
                if named.is_empty() {
                    return Err(PlaceError::UnknownMachine(machine.clone()));
                }
                named
            }
            None => self
                .peers
                .iter()
                .filter(|p| carries(p, &placement.labels))
                .collect(),
        };
        let mut reasons = Vec::new();
        let mut eligible = Vec::new();
        let mut unchecked = false;
        for peer in candidates {
            if placement.avoid.contains(&peer.name) {
                reasons.push(format!("node {:?} lost this run", peer.name));
            } else if peer.unchecked() && patient {
                // Its first health check is on its way (the service or the node just started).
                unchecked = true;
            } else if let Some(why) = peer.unfit(agent) {
                reasons.push(why);
            } else {
                eligible.push(peer);
            }
        }
        if eligible.is_empty() && unchecked {
            return Ok(None);
        }
        if eligible.is_empty() {
            let pinned = placement.machine.is_some() || !placement.labels.is_empty();
            if !pinned && self.local_serves(agent) {
                return self.local_slot(agent);
            }
            if reasons.is_empty() {
                reasons.push(format!(
                    "no node is configured and this machine has no {agent}"
                ));
            }
            return Err(PlaceError::NoneEligible(format!(
                "no machine can run {agent} now: {}",
                reasons.join("; ")
            )));
        }
        eligible.sort_by(|a, b| load(a).total_cmp(&load(b)));
        Ok(eligible.into_iter().find_map(|peer| self.take(peer)))
    }

    fn take(&self, peer: &Arc<Peer>) -> Option<Slot> {
        let permit = match &peer.slots {
            Some(slots) => Some(slots.clone().try_acquire_owned().ok()?),
            None => None,
        };
        Some(Slot {
            machine: peer.name.clone(),
            local: false,
            runtime: peer.runtime.clone(),
            _permit: permit,
            changed: self.changed.clone(),
        })
    }
}

/// A node's share of its places in use.
fn load(peer: &Peer) -> f64 {
    match peer.max {
        0 => 0.0,
        max => peer.active() as f64 / max as f64,
    }
}

fn carries(peer: &Peer, labels: &BTreeMap<String, String>) -> bool {
    labels
        .iter()
        .all(|(key, value)| peer.labels.get(key) == Some(value))
}

fn show_labels(labels: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(",")
}

/// A place for one run on one machine; dropping it gives the place back.
pub struct Slot {
    machine: String,
    local: bool,
    runtime: Arc<dyn Runtime>,
    _permit: Option<OwnedSemaphorePermit>,
    changed: Arc<Notify>,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("machine", &self.machine)
            .finish()
    }
}

impl Slot {
    /// The machine: `local` or a node's name.
    pub fn machine(&self) -> &str {
        &self.machine
    }

    /// Whether the run stays on this machine.
    pub fn is_local(&self) -> bool {
        self.local
    }

    /// Starts the run there, handing over its typed output.
    pub async fn start(&self, spec: RunSpec) -> Result<Run<AgentOutput>, DispatchError> {
        self.runtime.start(spec).await
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // After the permit goes back (fields drop after this), so wake on the next tick.
        let changed = self.changed.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move { changed.notify_waiters() });
        } else {
            changed.notify_waiters();
        }
    }
}

#[async_trait]
impl Runtime for ClusterRouter {
    fn name(&self) -> &str {
        "cluster"
    }
    async fn dispatch(&self, spec: RunSpec) -> Result<Run, DispatchError> {
        if self.is_local(&spec.machine) {
            return self.local.dispatch(spec).await;
        }
        match self.peers.iter().find(|peer| peer.name == spec.machine) {
            Some(peer) => peer.runtime.dispatch(spec).await,
            None => Err(DispatchError::UnknownMachine(spec.machine.clone())),
        }
    }
}
