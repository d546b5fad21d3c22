//! Retention: terminal rows after 24 h, at most 10,000 rows (oldest terminal first), stale run routes and dead runtimes.

use std::collections::HashSet;

use chrono::{DateTime, Utc};

use crate::clock::earlier;

use super::state::State;
use super::ServerConfig;

impl State {
    /// Drops what nothing can act on any more.
    pub(crate) fn prune(&mut self, cfg: &ServerConfig, now: DateTime<Utc>) {
        if cfg.retention.is_zero() {
            return;
        }
        let cutoff = earlier(now, cfg.retention);
        let old: Vec<String> = self
            .commands
            .values()
            .filter(|r| r.state.is_terminal() && r.updated < cutoff)
            .map(|r| r.id.clone())
            .collect();
        for id in old {
            self.remove_row(&id);
        }
        self.cap_rows(cfg.max_commands);
        let mut live_runs = HashSet::new();
        let mut live_runtimes = HashSet::new();
        for row in self.commands.values().filter(|r| !r.state.is_terminal()) {
            live_runtimes.insert(row.runtime.clone());
            if !row.run_id.is_empty() {
                live_runs.insert(row.run_id.clone());
            }
        }
        self.runs.retain(|run, route| {
            live_runs.contains(run) || route.seen.is_none_or(|seen| seen >= cutoff)
        });
        let linger = if cfg.finish_deadline.is_zero() {
            cfg.retention
        } else {
            cfg.finish_deadline
        };
        let mut dead = Vec::new();
        for (id, entry) in &self.runtimes {
            if entry.feed.is_some() || live_runtimes.contains(id) {
                continue;
            }
            let keep = if entry.breakpoints.tools.is_empty() {
                linger
            } else {
                cfg.retention
            };
            if entry.last_seen < earlier(now, keep) {
                dead.push(id.clone());
            }
        }
        for id in dead {
            self.runtimes.remove(&id);
            self.forget_breakpoints(&id);
        }
    }

    /// Keeps at most `max` rows by dropping the oldest terminal ones.
    pub(crate) fn cap_rows(&mut self, max: usize) {
        let mut over = self.commands.len().saturating_sub(max);
        if over == 0 {
            return;
        }
        let mut doomed = Vec::with_capacity(over);
        for id in self.by_seq.values() {
            if over == 0 {
                break;
            }
            if self.commands.get(id).is_some_and(|r| r.state.is_terminal()) {
                doomed.push(id.clone());
                over -= 1;
            }
        }
        for id in doomed {
            self.remove_row(&id);
        }
    }
}
