//! Frames of the command stream: each command's event name, id and JSON data, encoded byte-exact
//! (framing by `ar-sse`) and decoded back on the link's side.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::wire::{ApprovalDecision, Breakpoints, Command, SessionCommand, SteerMessage};

/// The keep-alive frame, exactly as written.
pub const PING_FRAME: &[u8] = b"event: ping\ndata: {}\n\n";

/// One frame of the command stream.
#[derive(Debug, Clone, PartialEq)]
// Values of this enum are built once per command and moved, never held in bulk arrays
// where the variant size difference would matter.
#[allow(clippy::large_enum_variant)]
pub enum Frame {
    /// `event: ping`, data `{}`, no id.
    Ping,
    /// `event: run`, id = command id, data = the command.
    Run(Command),
    /// `event: cancel`, no id, data `{"command_id":…}`.
    Cancel { command_id: String },
    /// `event: approve`, id = command id, data = the decision.
    Approve(ApprovalDecision),
    /// `event: breakpoints`, id = a fresh command id, data `{"tools":[…]}`.
    Breakpoints { id: String, tools: Vec<String> },
    /// `event: steer`, id = a fresh command id, data `{"run_id","message"}`.
    Steer { id: String, steer: SteerMessage },
    /// `event: session`, id = command id, data = the session command.
    Session(SessionCommand),
}

#[derive(Serialize, Deserialize)]
struct CancelData {
    command_id: String,
}

/// A frame that could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("unknown event {0:?}")]
    UnknownEvent(String),
    #[error("bad {event} data: {source}")]
    BadData {
        event: &'static str,
        source: serde_json::Error,
    },
}

impl Frame {
    /// The frame's event name.
    pub fn event(&self) -> &'static str {
        match self {
            Frame::Ping => "ping",
            Frame::Run(_) => "run",
            Frame::Cancel { .. } => "cancel",
            Frame::Approve(_) => "approve",
            Frame::Breakpoints { .. } => "breakpoints",
            Frame::Steer { .. } => "steer",
            Frame::Session(_) => "session",
        }
    }

    /// The frame's `id:` line value, if it carries one.
    pub fn id(&self) -> Option<&str> {
        match self {
            Frame::Ping | Frame::Cancel { .. } => None,
            Frame::Run(c) => Some(&c.command_id),
            Frame::Approve(d) => Some(&d.command_id),
            Frame::Breakpoints { id, .. } | Frame::Steer { id, .. } => Some(id),
            Frame::Session(s) => Some(&s.command_id),
        }
    }

    /// The frame's bytes: `id: …\n` (when it has one), `event: …\n`, `data: …\n`, blank line
    /// (framing by [`ar_sse::frame`]).
    ///
    /// JSON from serde never holds a raw line break, and ids are validated before they reach a
    /// frame, so the data is one line and a frame cannot end early or smuggle a field.
    pub fn encode(&self) -> Bytes {
        let data = match self {
            Frame::Ping => return Bytes::from_static(PING_FRAME),
            Frame::Run(c) => serde_json::to_string(c),
            Frame::Cancel { command_id } => serde_json::to_string(&CancelData {
                command_id: command_id.clone(),
            }),
            Frame::Approve(d) => serde_json::to_string(d),
            Frame::Breakpoints { tools, .. } => serde_json::to_string(&Breakpoints {
                tools: tools.clone(),
            }),
            Frame::Steer { steer, .. } => serde_json::to_string(steer),
            Frame::Session(s) => serde_json::to_string(s),
        };
        // Serializing these plain structs (strings, numbers, lists, string-keyed maps) cannot
        // fail; an empty object keeps the frame well-formed if it ever did.
        let data = data.unwrap_or_else(|_| "{}".to_string());
        Bytes::from(ar_sse::frame(self.id(), self.event(), &data))
    }

    /// Decodes a frame from its event name, id line and data.
    pub fn decode(event: &str, id: Option<&str>, data: &str) -> Result<Frame, FrameError> {
        fn parse<T: for<'de> Deserialize<'de>>(
            event: &'static str,
            data: &str,
        ) -> Result<T, FrameError> {
            serde_json::from_str(data).map_err(|source| FrameError::BadData { event, source })
        }
        let id = id.unwrap_or_default().to_string();
        Ok(match event {
            "ping" => Frame::Ping,
            "run" => Frame::Run(parse("run", data)?),
            "cancel" => {
                let c: CancelData = parse("cancel", data)?;
                Frame::Cancel {
                    command_id: c.command_id,
                }
            }
            "approve" => Frame::Approve(parse("approve", data)?),
            "breakpoints" => {
                let b: Breakpoints = parse("breakpoints", data)?;
                Frame::Breakpoints { id, tools: b.tools }
            }
            "steer" => Frame::Steer {
                id,
                steer: parse("steer", data)?,
            },
            "session" => Frame::Session(parse("session", data)?),
            other => return Err(FrameError::UnknownEvent(other.to_string())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_byte_exact() {
        assert_eq!(&Frame::Ping.encode()[..], b"event: ping\ndata: {}\n\n");
        assert_eq!(ar_sse::frame(None, "ping", "{}").as_bytes(), PING_FRAME);
        let cancel = Frame::Cancel {
            command_id: "cmd_1".into(),
        };
        assert_eq!(
            &cancel.encode()[..],
            b"event: cancel\ndata: {\"command_id\":\"cmd_1\"}\n\n"
        );
        let bp = Frame::Breakpoints {
            id: "cmd_2".into(),
            tools: vec!["pay".into()],
        };
        assert_eq!(
            &bp.encode()[..],
            b"id: cmd_2\nevent: breakpoints\ndata: {\"tools\":[\"pay\"]}\n\n"
        );
        let steer = Frame::Steer {
            id: "cmd_3".into(),
            steer: SteerMessage {
                run_id: "r1".into(),
                message: "line\nbreak".into(),
            },
        };
        assert_eq!(
            &steer.encode()[..],
            b"id: cmd_3\nevent: steer\ndata: {\"run_id\":\"r1\",\"message\":\"line\\nbreak\"}\n\n"
        );
        let run = Frame::Run(Command {
            command_id: "c1".into(),
            agent: "a".into(),
            ..Default::default()
        });
        let text = String::from_utf8(run.encode().to_vec()).unwrap_or_default();
        assert_eq!(
            text,
            "id: c1\nevent: run\ndata: {\"command_id\":\"c1\",\"agent\":\"a\",\"source\":null,\"input\":null,\"overrides\":{},\"transcript_edits\":[],\"engine\":\"\",\"side_effects\":\"\",\"thread\":\"\",\"experiment_id\":\"\",\"actor\":\"\",\"public_id\":\"\"}\n\n"
        );
        let approve = Frame::Approve(ApprovalDecision {
            command_id: "c2".into(),
            run_id: "r".into(),
            call_id: "k".into(),
            decision: "deny".into(),
            reason: "no".into(),
            public_id: "secret".into(),
            ..Default::default()
        });
        assert_eq!(
            &approve.encode()[..],
            b"id: c2\nevent: approve\ndata: {\"command_id\":\"c2\",\"run_id\":\"r\",\"call_id\":\"k\",\"decision\":\"deny\",\"reason\":\"no\"}\n\n"
        );
    }

    #[test]
    fn frames_decode_back() {
        for frame in [
            Frame::Ping,
            Frame::Cancel {
                command_id: "x".into(),
            },
            Frame::Breakpoints {
                id: "i".into(),
                tools: vec![],
            },
            Frame::Run(Command {
                command_id: "c".into(),
                input: Some("hi".into()),
                ..Default::default()
            }),
        ] {
            let mut decoder = ar_sse::Decoder::new();
            decoder.push(&frame.encode());
            let raw = decoder.next_event().expect("one frame");
            assert_eq!(raw.event, frame.event());
            assert_eq!(raw.id.as_deref(), frame.id());
            let back = Frame::decode(&raw.event, raw.id.as_deref(), &raw.data);
            assert_eq!(back.ok(), Some(frame));
        }
        assert!(Frame::decode("nope", None, "{}").is_err());
    }
}
