//! The studio's read side: runtime snapshots, manifests, command rows, run routes and discovery queries.

use crate::error::StudioError;
use crate::store::CommandPayload;
use crate::wire::{
    Command, CommandState, CommandStatus, ManifestSource, Registration, RunCommand, RuntimeView,
};

use super::StudioServer;

impl StudioServer {
    // ── reads ──────────────────────────────────────────────────────

    /// Every runtime, newest seen first.
    pub fn snapshot(&self) -> Vec<RuntimeView> {
        self.with_state(|st, cfg, now| {
            st.prune(cfg, now);
            st.snapshot()
        })
    }

    /// The remembered manifests, live ones first.
    pub fn manifests(&self) -> Vec<ManifestSource> {
        self.with_state(|st, _, _| st.manifest_list())
    }

    /// A command's lifecycle row.
    pub fn command(&self, id: &str) -> Result<CommandStatus, StudioError> {
        self.with_state(|st, _, _| {
            st.commands
                .get(id)
                .map(|r| r.view())
                .ok_or(StudioError::UnknownCommand)
        })
    }

    /// A run command as enqueued.
    pub fn command_of(&self, id: &str) -> Option<Command> {
        self.with_state(|st, _, _| match st.commands.get(id).map(|r| &r.payload) {
            Some(CommandPayload::Run(c)) => Some(c.clone()),
            _ => None,
        })
    }

    /// The runtime's current registration.
    pub fn registration(&self, runtime_id: &str) -> Option<Registration> {
        self.with_state(|st, _, _| st.runtimes.get(runtime_id).map(|e| e.reg.clone()))
    }

    /// Whether the runtime holds a live command stream.
    pub fn connected(&self, runtime_id: &str) -> bool {
        self.with_state(|st, _, _| {
            st.runtimes
                .get(runtime_id)
                .is_some_and(|e| e.feed.is_some())
        })
    }

    /// The runtime's stored breakpoint set.
    pub fn breakpoints_of(&self, runtime_id: &str) -> Vec<String> {
        self.with_state(|st, _, _| {
            st.runtimes
                .get(runtime_id)
                .map(|e| e.breakpoints.tools.clone())
                .unwrap_or_default()
        })
    }

    /// The runtime that started `run_id`, learned from its acks.
    pub fn runtime_of(&self, run_id: &str) -> Option<String> {
        self.with_state(|st, _, _| st.runs.get(run_id).map(|r| r.runtime.clone()))
    }

    /// The public id `run_id` was scoped to, when it carried one.
    pub fn public_of(&self, run_id: &str) -> Option<String> {
        self.with_state(|st, _, _| {
            st.runs
                .get(run_id)
                .map(|r| r.public_id.clone())
                .filter(|p| !p.is_empty())
        })
    }

    /// Whether `run_id` was started by a fork-mode command.
    pub fn is_fork_run(&self, run_id: &str) -> bool {
        self.with_state(|st, _, _| st.runs.get(run_id).is_some_and(|r| r.fork))
    }

    /// The decisions, steers and cancels addressed to `run_id`, oldest first.
    pub fn commands_on(&self, run_id: &str) -> Vec<RunCommand> {
        self.with_state(|st, _, _| {
            st.runs
                .get(run_id)
                .map(|r| r.commands.clone())
                .unwrap_or_default()
        })
    }

    /// The state of a command, if known.
    pub fn state_of(&self, command_id: &str) -> Option<CommandState> {
        self.with_state(|st, _, _| st.commands.get(command_id).map(|r| r.state))
    }

    /// Whether a connected runtime registered with process instance `instance`.
    pub fn holds_instance(&self, instance: &str) -> bool {
        !instance.is_empty()
            && self.with_state(|st, _, _| {
                st.runtimes
                    .values()
                    .any(|e| e.feed.is_some() && e.reg.instance == instance)
            })
    }

    /// The connected runtime of `service` that holds thread sessions (newest seen).
    pub fn sessions_runtime(&self, service: &str) -> Option<String> {
        self.with_state(|st, _, _| {
            st.runtimes
                .iter()
                .filter(|(_, e)| e.feed.is_some() && e.reg.sessions && e.reg.service == service)
                .max_by(|a, b| a.1.last_seen.cmp(&b.1.last_seen).then(b.0.cmp(a.0)))
                .map(|(id, _)| id.clone())
        })
    }

    /// Whether any run was started by a runtime on the studio's command.
    pub fn any_own_runs(&self) -> bool {
        self.with_state(|st, _, _| !st.runs.is_empty())
    }

    /// Whether any connected runtime holds thread sessions.
    pub fn any_sessions(&self) -> bool {
        self.with_state(|st, _, _| {
            st.runtimes
                .values()
                .any(|e| e.feed.is_some() && e.reg.sessions)
        })
    }

    /// How many command rows the studio holds.
    pub fn command_count(&self) -> usize {
        self.with_state(|st, _, _| st.commands.len())
    }
}
