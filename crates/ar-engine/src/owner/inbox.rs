//! What reaches a run's owner task from the rest of the process: one typed message stream per
//! owner ([`OwnerMsg`]), the registry of owners that routes messages by run id ([`Owners`]), and
//! the secrets an owner holds, which everything that records or streams for its run reads, and
//! the run's workspace tools while it executes here.

use std::sync::Arc;

use ar_core::redact::Redactor;
use ar_core::secret::Secret;
use ar_core::workspace::RunToolHost;
use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use tokio::sync::mpsc;

/// One input to a run's owner task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OwnerMsg {
    /// Stop at once, aborting the model call, tool or CLI turn in flight.
    Stop(StopReason),
    /// A pause was requested: stop at the next safe point.
    Pause,
    /// A user message for the loop's next safe boundary (studio steering).
    Steer(String),
    /// The run's model credential may have changed (replaced or revoked here, or the run
    /// changed under another process): resolve the model route again.
    RouteStale,
    /// A commit made the run terminal: nothing can resume it.
    Ended,
    /// A commit gave up this process's lease together with the change that stopped the run.
    LeaseReleased,
}

/// Why an owner is told to stop at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopReason {
    /// The run was cancelled through the API.
    Cancelled,
    /// The process is shutting down and its deadline passed: the run stays at its last
    /// checkpoint for the next owner.
    Abandoned,
}

/// The owner's end of its message stream, with what the messages so far amount to.
#[derive(Debug)]
pub(crate) struct Inbox {
    receiver: mpsc::UnboundedReceiver<OwnerMsg>,
    seen: Seen,
}

/// The state the messages received so far add up to.
#[derive(Debug, Default)]
struct Seen {
    stop: Option<StopReason>,
    pause: bool,
    steers: Vec<String>,
    route_stale: bool,
    ended: bool,
    lease_released: bool,
}

impl Seen {
    fn apply(&mut self, message: OwnerMsg) {
        match message {
            OwnerMsg::Stop(reason) => {
                self.stop.get_or_insert(reason);
            }
            OwnerMsg::Pause => self.pause = true,
            OwnerMsg::Steer(text) => self.steers.push(text),
            OwnerMsg::RouteStale => self.route_stale = true,
            OwnerMsg::Ended => self.ended = true,
            OwnerMsg::LeaseReleased => self.lease_released = true,
        }
    }
}

impl Inbox {
    /// Takes in every message already sent (never waits).
    fn drain(&mut self) -> &mut Seen {
        while let Ok(message) = self.receiver.try_recv() {
            self.seen.apply(message);
        }
        &mut self.seen
    }

    /// Whether the owner was told to stop at once.
    pub(crate) fn stop_requested(&mut self) -> bool {
        self.drain().stop.is_some()
    }

    pub(crate) fn pause_requested(&mut self) -> bool {
        self.drain().pause
    }

    /// The steer messages received since the last call.
    pub(crate) fn take_steers(&mut self) -> Vec<String> {
        std::mem::take(&mut self.drain().steers)
    }

    /// Whether the cached model route must be resolved again (clears the mark).
    pub(crate) fn take_route_stale(&mut self) -> bool {
        std::mem::take(&mut self.drain().route_stale)
    }

    /// Whether a commit made the run terminal.
    pub(crate) fn ended(&mut self) -> bool {
        self.drain().ended
    }

    /// Whether a commit already gave up this process's lease.
    pub(crate) fn lease_released(&mut self) -> bool {
        self.drain().lease_released
    }

    /// Resolves when the owner is told to stop at once; other messages received meanwhile are
    /// kept. Cancel-safe, so it can race the work it interrupts in a `select!`.
    pub(crate) async fn stopped(&mut self) {
        self.wait_until(|seen| seen.stop.is_some()).await
    }

    /// Resolves when the owner is told to stop or to pause: what interrupts a model call (a
    /// pause does not wait for the answer, nothing of which is kept). Cancel-safe.
    pub(crate) async fn stopped_or_paused(&mut self) {
        self.wait_until(|seen| seen.stop.is_some() || seen.pause)
            .await
    }

    async fn wait_until(&mut self, done: impl Fn(&Seen) -> bool) {
        while !done(&self.seen) {
            match self.receiver.recv().await {
                Some(message) => self.seen.apply(message),
                // Every sender is gone (the registry let go of this owner): nothing can stop it.
                None => std::future::pending::<()>().await,
            }
        }
    }
}

/// The secrets a run's routes carried, scrubbed from all it records and streams. The owner
/// adds to them; commits and live events of the run read them.
#[derive(Debug, Default)]
pub(crate) struct HeldSecrets(parking_lot::Mutex<Arc<Redactor>>);

impl HeldSecrets {
    /// Remembers a secret the run holds (a model key handed to its route).
    pub(crate) fn hold(&self, secret: Option<&Secret>) {
        let Some(secret) = secret else { return };
        let mut current = self.0.lock();
        if current.holds(secret) {
            return;
        }
        let mut next = Redactor::clone(&current);
        next.add(secret);
        *current = Arc::new(next);
    }

    pub(crate) fn redactor(&self) -> Arc<Redactor> {
        self.0.lock().clone()
    }
}

/// The workspace tools of a run executing here, opened by its owner over the lease's root and
/// dropped with the owner.
pub(crate) type HeldWorkspace = parking_lot::Mutex<Option<Arc<dyn RunToolHost>>>;

/// What the task owning a run holds: its inbox, its secrets and its workspace tools.
pub(crate) struct Owner {
    pub(crate) inbox: Inbox,
    pub(crate) secrets: Arc<HeldSecrets>,
    workspace: Arc<HeldWorkspace>,
}

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owner")
            .field("inbox", &self.inbox)
            .field("workspace", &self.workspace.lock().is_some())
            .finish_non_exhaustive()
    }
}

impl Owner {
    /// The run's workspace tools from now until the owner stops.
    pub(crate) fn set_workspace(&self, tools: Arc<dyn RunToolHost>) {
        *self.workspace.lock() = Some(tools);
    }
}

struct Registered {
    sender: mpsc::UnboundedSender<OwnerMsg>,
    secrets: Arc<HeldSecrets>,
    workspace: Arc<HeldWorkspace>,
}

/// The runs executing in this process, by run id: how the rest of the engine reaches an owner.
#[derive(Default)]
pub(crate) struct Owners {
    entries: DashMap<String, Registered>,
}

impl Owners {
    /// Registers a new owner of `run_id`; `None` when the run already has one here.
    pub(crate) fn claim(&self, run_id: &str) -> Option<Owner> {
        let Entry::Vacant(slot) = self.entries.entry(run_id.to_string()) else {
            return None;
        };
        let (sender, receiver) = mpsc::unbounded_channel();
        let secrets = Arc::new(HeldSecrets::default());
        let workspace = Arc::new(HeldWorkspace::default());
        slot.insert(Registered {
            sender,
            secrets: secrets.clone(),
            workspace: workspace.clone(),
        });
        Some(Owner {
            inbox: Inbox {
                receiver,
                seen: Seen::default(),
            },
            secrets,
            workspace,
        })
    }

    /// Forgets the owner of `run_id`; messages sent before stay readable in its inbox.
    pub(crate) fn release(&self, run_id: &str) {
        self.entries.remove(run_id);
    }

    /// Sends `message` to the owner of `run_id`; false when the run has none here.
    pub(crate) fn tell(&self, run_id: &str, message: OwnerMsg) -> bool {
        self.entries
            .get(run_id)
            .is_some_and(|entry| entry.sender.send(message).is_ok())
    }

    /// Sends `message` to every owner.
    pub(crate) fn tell_all(&self, message: &OwnerMsg) {
        for entry in self.entries.iter() {
            let _ = entry.sender.send(message.clone());
        }
    }

    /// Adds `secret` to the secrets of the run's owner here, if it has one.
    pub(crate) fn hold_secret(&self, run_id: &str, secret: &Secret) {
        if let Some(entry) = self.entries.get(run_id) {
            entry.secrets.hold(Some(secret));
        }
    }

    /// The secrets of a run executing here (none known for runs owned elsewhere).
    pub(crate) fn redactor(&self, run_id: &str) -> Option<Arc<Redactor>> {
        let redactor = self.entries.get(run_id)?.secrets.redactor();
        (!redactor.is_empty()).then_some(redactor)
    }

    /// The workspace tools of a run executing here.
    pub(crate) fn workspace(&self, run_id: &str) -> Option<Arc<dyn RunToolHost>> {
        self.entries.get(run_id)?.workspace.lock().clone()
    }

    pub(crate) fn contains(&self, run_id: &str) -> bool {
        self.entries.contains_key(run_id)
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_has_one_owner_and_messages_reach_it_in_order() {
        let owners = Owners::default();
        let mut owner = owners.claim("run_1").expect("first claim");
        assert!(owners.claim("run_1").is_none(), "second owner of one run");
        assert!(owners.tell("run_1", OwnerMsg::Steer("one".into())));
        assert!(owners.tell("run_1", OwnerMsg::Steer("two".into())));
        assert!(owners.tell("run_1", OwnerMsg::Pause));
        assert!(!owners.tell("run_2", OwnerMsg::Pause), "no owner of run_2");
        assert_eq!(owner.inbox.take_steers(), ["one", "two"]);
        assert!(
            owner.inbox.take_steers().is_empty(),
            "steers are taken once"
        );
        assert!(owner.inbox.pause_requested());
        assert!(!owner.inbox.stop_requested());
    }

    #[test]
    fn route_staleness_is_cleared_when_taken() {
        let owners = Owners::default();
        let mut owner = owners.claim("run_1").unwrap();
        owners.tell("run_1", OwnerMsg::RouteStale);
        assert!(owner.inbox.take_route_stale());
        assert!(!owner.inbox.take_route_stale());
    }

    #[test]
    fn messages_sent_before_release_are_still_read() {
        let owners = Owners::default();
        let mut owner = owners.claim("run_1").unwrap();
        owners.tell("run_1", OwnerMsg::Ended);
        owners.tell("run_1", OwnerMsg::LeaseReleased);
        owners.release("run_1");
        assert!(!owners.contains("run_1"));
        assert!(!owners.tell("run_1", OwnerMsg::Pause));
        assert!(owner.inbox.ended() && owner.inbox.lease_released());
        assert!(
            owners.claim("run_1").is_some(),
            "a released run can be owned again"
        );
    }

    #[tokio::test]
    async fn stopped_waits_for_a_stop_and_keeps_what_came_before() {
        let owners = Arc::new(Owners::default());
        let mut owner = owners.claim("run_1").unwrap();
        owners.tell("run_1", OwnerMsg::Steer("hi".into()));
        let sender = owners.clone();
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            sender.tell_all(&OwnerMsg::Stop(StopReason::Cancelled));
        });
        owner.inbox.stopped().await;
        assert!(owner.inbox.stop_requested());
        assert_eq!(owner.inbox.take_steers(), ["hi"]);
    }

    #[test]
    fn secrets_are_known_only_while_the_owner_is_registered() {
        let owners = Owners::default();
        let owner = owners.claim("run_1").unwrap();
        assert!(owners.redactor("run_1").is_none(), "nothing held yet");
        let key = Secret::new("sk-live-abcdef123456");
        owner.secrets.hold(Some(&key));
        owner.secrets.hold(Some(&key));
        let redactor = owners.redactor("run_1").expect("a held secret");
        let mut text = "key=sk-live-abcdef123456".to_string();
        redactor.scrub(&mut text);
        assert!(!text.contains("sk-live"), "{text}");
        owners.release("run_1");
        assert!(owners.redactor("run_1").is_none());
    }
}
