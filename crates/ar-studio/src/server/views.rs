//! Building the read views: runtime snapshots with agents and tools, and the live-manifest listing.

use std::collections::HashSet;

use crate::manifests::ManifestKey;
use crate::wire::{AgentView, ManifestSource, RuntimeView, ToolView};

use super::state::{RuntimeEntry, State};

fn runtime_view(id: &str, e: &RuntimeEntry) -> RuntimeView {
    let agents = e
        .reg
        .agents
        .iter()
        .map(|a| {
            let approval = a.manifest_approval_tools();
            let tools = a
                .manifest_tool_names()
                .into_iter()
                .map(|name| ToolView {
                    side_effects: a.side_effects.get(&name).cloned().unwrap_or_default(),
                    allow: a.is_allowed(&name),
                    approval: approval.contains(&name),
                    name,
                })
                .collect();
            AgentView {
                name: a.name.clone(),
                models: a.models.clone(),
                resolver: a.resolver,
                // A runtime older than the option lab registers no defaults: show none.
                defaults: (!a.defaults.tool_choice.mode.is_empty()).then(|| a.defaults.clone()),
                tools,
                instructions: a.manifest_instructions(),
                manifest_hash: a.hash(),
                model_provider: a.manifest_model_provider(),
            }
        })
        .collect();
    RuntimeView {
        id: id.to_string(),
        host: e.reg.host.clone(),
        pid: e.reg.pid,
        service: e.reg.service.clone(),
        env: e.reg.env.clone(),
        weft_version: e.reg.weft_version.clone(),
        instance: e.reg.instance.clone(),
        studio_url: e.reg.studio_url.clone(),
        cwd: e.reg.cwd.clone(),
        connected_since: e.connected_since,
        last_seen: e.last_seen,
        connected: e.feed.is_some(),
        restored: e.restored,
        sessions: e.reg.sessions,
        agents,
        breakpoints: e.breakpoints.tools.clone(),
        breakpoints_own: e.reg.breakpoints_own,
        breakpoints_by: e.breakpoints.by.clone(),
        breakpoints_set_at: e.breakpoints.set_at,
        breakpoints_surface: e.breakpoints.surface.clone(),
    }
}

impl State {
    /// Every runtime, newest seen first, then by id.
    pub(crate) fn snapshot(&self) -> Vec<RuntimeView> {
        let mut views: Vec<RuntimeView> = self
            .runtimes
            .iter()
            .map(|(id, e)| runtime_view(id, e))
            .collect();
        views.sort_by(|a, b| b.last_seen.cmp(&a.last_seen).then(a.id.cmp(&b.id)));
        views
    }

    pub(crate) fn manifest_list(&self) -> Vec<ManifestSource> {
        let live: HashSet<ManifestKey> = self
            .runtimes
            .values()
            .filter(|e| e.feed.is_some())
            .filter_map(|e| e.manifest.clone())
            .collect();
        self.manifests.list(&live)
    }
}
