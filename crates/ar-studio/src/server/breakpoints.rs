//! Breakpoint sets: stored only once delivered to a live stream, with who set them, when, and through which surface.

use chrono::{DateTime, Utc};

use crate::error::StudioError;
use crate::frame::Frame;
use crate::wire::BREAKPOINTS_BY_STUDIO;

use super::state::{BreakpointSet, State};
use super::ServerConfig;

impl State {
    pub(crate) fn set_breakpoints(
        &mut self,
        runtime_id: &str,
        tools: &[String],
        surface: &str,
        cfg: &ServerConfig,
        now: DateTime<Utc>,
    ) -> Result<(), StudioError> {
        if self.closed {
            return Err(StudioError::ShuttingDown);
        }
        if !self.runtimes.contains_key(runtime_id) {
            return Err(StudioError::UnknownRuntime);
        }
        let id = self.minter.mint(now);
        let frame = Frame::Breakpoints {
            id,
            tools: tools.to_vec(),
        };
        // Nothing is stored for a set that could not be delivered: the stored set is what the
        // studio reports as in force.
        self.deliver(runtime_id, frame.encode(), cfg, now)?;
        if let Some(entry) = self.runtimes.get_mut(runtime_id) {
            entry.breakpoints = BreakpointSet {
                tools: tools.to_vec(),
                by: BREAKPOINTS_BY_STUDIO.to_string(),
                surface: surface.to_string(),
                set_at: Some(now),
            };
        }
        self.save_breakpoints(runtime_id);
        Ok(())
    }
}
