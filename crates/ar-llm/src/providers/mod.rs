//! One module per wire format (request body, endpoint, auth, stream parser) plus the pieces they
//! share: tool-call assembly from deltas and finish-reason normalisation.

pub(crate) mod anthropic;
pub(crate) mod chat;
pub(crate) mod chatgpt;
pub(crate) mod responses;

use ar_core::model::{ModelToolCall, StreamDelta};

/// Joins a base URL and a path without doubling slashes.
pub(crate) fn join(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// Vendor-neutral finish reasons: `stop`, `tool_calls`, `length`, `content_filter`; anything
/// else passes through unchanged.
pub(crate) fn normalize_finish(reason: &str) -> String {
    match reason {
        "stop" | "end_turn" | "stop_sequence" | "completed" => "stop",
        "tool_calls" | "tool_use" | "function_call" => "tool_calls",
        "length" | "max_tokens" | "max_output_tokens" => "length",
        "content_filter" | "refusal" => "content_filter",
        other => other,
    }
    .to_string()
}

#[derive(Debug, Default)]
struct PendingCall {
    id: String,
    name: String,
    arguments: String,
    started: bool,
}

/// Assembles tool calls from streamed pieces and emits `ToolCallStarted`/`ToolCallArguments`.
///
/// `ToolCallStarted` is emitted once the call's name is known; arguments that arrive earlier
/// are buffered and emitted right after it.
#[derive(Debug, Default)]
pub(crate) struct ToolCallAssembler {
    calls: Vec<PendingCall>,
}

impl ToolCallAssembler {
    /// Registers a new call and returns its index.
    pub fn open(&mut self) -> usize {
        self.calls.push(PendingCall::default());
        self.calls.len() - 1
    }

    pub fn len(&self) -> usize {
        self.calls.len()
    }

    /// Sets id/name when given (non-empty) and emits `ToolCallStarted` when possible.
    pub fn identify(
        &mut self,
        index: usize,
        id: Option<&str>,
        name: Option<&str>,
        sink: &mut (dyn FnMut(StreamDelta) + Send),
    ) {
        let Some(call) = self.calls.get_mut(index) else {
            return;
        };
        if let Some(id) = id.filter(|s| !s.is_empty()) {
            call.id = id.to_string();
        }
        if let Some(name) = name.filter(|s| !s.is_empty()) {
            if !call.started {
                call.name.push_str(name);
            }
        }
        if !call.started && !call.name.is_empty() {
            call.started = true;
            if call.id.is_empty() {
                call.id = format!("call_{index}");
            }
            sink(StreamDelta::ToolCallStarted {
                index,
                id: call.id.clone(),
                name: call.name.clone(),
            });
            if !call.arguments.is_empty() {
                sink(StreamDelta::ToolCallArguments {
                    index,
                    delta: call.arguments.clone(),
                });
            }
        }
    }

    /// Appends an arguments piece.
    pub fn append(
        &mut self,
        index: usize,
        delta: &str,
        sink: &mut (dyn FnMut(StreamDelta) + Send),
    ) {
        let Some(call) = self.calls.get_mut(index) else {
            return;
        };
        if delta.is_empty() {
            return;
        }
        call.arguments.push_str(delta);
        if call.started {
            sink(StreamDelta::ToolCallArguments {
                index,
                delta: delta.to_string(),
            });
        }
    }

    /// Replaces the arguments with the vendor's final value (emitting any unseen suffix).
    pub fn set_final(
        &mut self,
        index: usize,
        arguments: &str,
        sink: &mut (dyn FnMut(StreamDelta) + Send),
    ) {
        let Some(call) = self.calls.get_mut(index) else {
            return;
        };
        if let Some(rest) = arguments.strip_prefix(call.arguments.as_str()) {
            if !rest.is_empty() {
                let rest = rest.to_string();
                self.append(index, &rest, sink);
            }
        } else {
            call.arguments = arguments.to_string();
        }
    }

    /// The finished calls, in order.
    pub fn finish(self) -> Vec<ModelToolCall> {
        self.calls
            .into_iter()
            .enumerate()
            .map(|(i, c)| ModelToolCall {
                id: if c.id.is_empty() {
                    format!("call_{i}")
                } else {
                    c.id
                },
                name: c.name,
                arguments: c.arguments,
            })
            .collect()
    }
}

/// A string control from `route.controls` (e.g. `reasoning_effort`).
pub(crate) fn control<'a>(
    route: &'a ar_core::model::ModelRoute,
    key: &str,
) -> Option<&'a serde_json::Value> {
    route.controls.as_ref().and_then(|c| c.get(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembler_buffers_arguments_until_named() {
        let mut out = Vec::new();
        let mut sink = |d: StreamDelta| out.push(d);
        let mut a = ToolCallAssembler::default();
        let i = a.open();
        a.append(i, "{\"a\":", &mut sink);
        a.identify(i, Some("id1"), Some("f"), &mut sink);
        a.append(i, "1}", &mut sink);
        a.set_final(i, "{\"a\":1}", &mut sink);
        let calls = a.finish();
        assert_eq!(calls[0].arguments, "{\"a\":1}");
        assert_eq!(
            out,
            vec![
                StreamDelta::ToolCallStarted {
                    index: 0,
                    id: "id1".into(),
                    name: "f".into()
                },
                StreamDelta::ToolCallArguments {
                    index: 0,
                    delta: "{\"a\":".into()
                },
                StreamDelta::ToolCallArguments {
                    index: 0,
                    delta: "1}".into()
                },
            ]
        );
    }

    #[test]
    fn finish_reasons_are_normalised() {
        assert_eq!(normalize_finish("end_turn"), "stop");
        assert_eq!(normalize_finish("tool_use"), "tool_calls");
        assert_eq!(normalize_finish("max_tokens"), "length");
        assert_eq!(normalize_finish("weird"), "weird");
    }
}
