//! Command-stream bookkeeping: opening a runtime's feed with its opening frames and backlog, delivery, stalls, disconnects.

use bytes::Bytes;
use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use crate::error::StudioError;
use crate::frame::Frame;
use crate::ids::COMMAND_ID_PREFIX;
use crate::store::CommandPayload;
use crate::wire::CommandState;

use super::state::{Feed, State};
use super::ServerConfig;

/// What a newly opened stream writes first, and where its live frames come from.
#[derive(Debug)]
pub struct StreamStart {
    /// `ping`, `breakpoints`, then the backlog, in order.
    pub opening: Vec<Bytes>,
    /// Live frames; ends when the feed is replaced, dropped full, or the studio shuts down.
    pub feed: mpsc::Receiver<Bytes>,
    /// Identifies this stream to [`super::StudioServer::stream_ended`].
    pub feed_id: u64,
}

pub(crate) fn frame_of(payload: &CommandPayload) -> Frame {
    match payload {
        CommandPayload::Run(c) => Frame::Run(c.clone()),
        CommandPayload::Approve(d) => Frame::Approve(d.clone()),
        CommandPayload::Session(s) => Frame::Session(s.clone()),
    }
}

impl State {
    /// Opens (or replaces) the runtime's stream.
    pub(crate) fn open_stream(
        &mut self,
        runtime_id: &str,
        last_event_id: Option<&str>,
        cfg: &ServerConfig,
        now: DateTime<Utc>,
    ) -> Result<StreamStart, StudioError> {
        if self.closed {
            return Err(StudioError::ShuttingDown);
        }
        let breakpoint_id = self.minter.mint(now);
        self.next_feed += 1;
        let feed_id = self.next_feed;
        let backlog = self.backlog(runtime_id, last_event_id);
        let entry = self
            .runtimes
            .get_mut(runtime_id)
            .ok_or(StudioError::UnknownRuntime)?;
        let (tx, rx) = mpsc::channel(cfg.feed_size.max(1));
        // Replacing the sender ends the previous stream once it drains what it holds.
        entry.feed = Some(Feed { id: feed_id, tx });
        entry.last_seen = now;
        let mut opening = Vec::with_capacity(backlog.len() + 2);
        opening.push(Frame::Ping.encode());
        // The set goes before the backlog: a re-sent run must start under the current set.
        opening.push(
            Frame::Breakpoints {
                id: breakpoint_id,
                tools: entry.breakpoints.tools.clone(),
            }
            .encode(),
        );
        opening.extend(backlog);
        Ok(StreamStart {
            opening,
            feed: rx,
            feed_id,
        })
    }

    /// The runtime's still-queued commands after the resume cursor, in sequence order.
    fn backlog(&self, runtime_id: &str, last_event_id: Option<&str>) -> Vec<Bytes> {
        let mut after = 0;
        if let Some(last) = last_event_id.filter(|l| !l.is_empty()) {
            match self.commands.get(last) {
                Some(row) => after = row.seq,
                // An id this studio never minted: nothing after it, rather than re-sending all.
                None if last.starts_with(COMMAND_ID_PREFIX) => return Vec::new(),
                None => {}
            }
        }
        self.by_seq
            .range(after + 1..)
            .filter_map(|(_, id)| self.commands.get(id))
            .filter(|row| row.runtime == runtime_id && row.state == CommandState::Queued)
            .map(|row| frame_of(&row.payload).encode())
            .collect()
    }

    /// Hands a frame to the runtime's live feed. A full feed means the runtime stopped
    /// reading: the stream is dropped and `NotConnected` returned.
    pub(crate) fn deliver(
        &mut self,
        runtime_id: &str,
        frame: Bytes,
        cfg: &ServerConfig,
        now: DateTime<Utc>,
    ) -> Result<(), StudioError> {
        let entry = self
            .runtimes
            .get(runtime_id)
            .ok_or(StudioError::UnknownRuntime)?;
        let feed = entry.feed.as_ref().ok_or(StudioError::NotConnected)?;
        match feed.tx.try_send(frame) {
            Ok(()) => Ok(()),
            Err(_) => {
                self.drop_feed(runtime_id, cfg, now);
                Err(StudioError::NotConnected)
            }
        }
    }

    /// Ends a stalled stream; accepted commands get their finish watch, queued ones keep
    /// their ack timers (the runtime reconnects and the backlog re-sends them).
    pub(crate) fn drop_feed(&mut self, runtime_id: &str, cfg: &ServerConfig, now: DateTime<Utc>) {
        let Some(entry) = self.runtimes.get_mut(runtime_id) else {
            return;
        };
        if entry.feed.take().is_none() {
            return;
        }
        entry.last_seen = now;
        for id in self.commands_of(runtime_id, CommandState::Accepted) {
            self.arm_finish(&id, cfg.finish_deadline, "runtime stalled, no finish", now);
        }
    }

    /// The disconnect sweep: queued commands are lost at once, accepted ones get the finish
    /// watch. A stream that was replaced or dropped is not the runtime's any more: nothing.
    pub(crate) fn stream_ended(
        &mut self,
        runtime_id: &str,
        feed_id: u64,
        cfg: &ServerConfig,
        now: DateTime<Utc>,
    ) {
        let Some(entry) = self.runtimes.get_mut(runtime_id) else {
            return;
        };
        if entry.feed.as_ref().map(|f| f.id) != Some(feed_id) {
            return;
        }
        entry.feed = None;
        entry.last_seen = now;
        for id in self.commands_of(runtime_id, CommandState::Queued) {
            self.terminate(
                &id,
                CommandState::Lost,
                "runtime disconnected before the ack",
                now,
            );
        }
        for id in self.commands_of(runtime_id, CommandState::Accepted) {
            self.arm_finish(
                &id,
                cfg.finish_deadline,
                "runtime disconnected, no finish",
                now,
            );
        }
    }

    /// Ids of the runtime's rows in `state`, in sequence order.
    pub(crate) fn commands_of(&self, runtime_id: &str, state: CommandState) -> Vec<String> {
        self.by_seq
            .values()
            .filter(|id| {
                self.commands
                    .get(*id)
                    .is_some_and(|r| r.runtime == runtime_id && r.state == state)
            })
            .cloned()
            .collect()
    }

    /// Ends every stream at once.
    pub(crate) fn close_all(&mut self) {
        self.closed = true;
        for entry in self.runtimes.values_mut() {
            entry.feed = None;
        }
    }
}
