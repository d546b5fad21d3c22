//! One parser per agent CLI's output stream, and the wire form of what it reads.
//!
//! A [`StreamParser`] reads one run's stdout line by line into typed [`AgentEvent`]s: codex
//! `exec --json` ([`CodexParser`]), Claude Code `stream-json` ([`ClaudeParser`]), opencode
//! `run --format json` ([`OpenCodeParser`]) and command agents, whose every line is a message
//! ([`LineParser`]). Both readers of a local run use this one reading: the service records
//! messages, tool calls with their inputs and outputs, and usage from the typed events, and
//! the Fort wire (`agent-runtime exec`, the node protocol) carries their summary, made by
//! [`WireProjection`]: `message`, `tool` `{name, summary}` once per call, `subagent`, `error`,
//! `stderr`, and the raw line as `stdout` when nothing in it has a wire form.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};

use crate::event::{EventType, ProviderUsage, RunEvent};

/// What an agent CLI reported, typed.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// A piece of assistant text (Claude Code with `--include-partial-messages`).
    TextDelta(String),
    /// A complete assistant message.
    Message(String),
    /// A tool call began (`id` is unique within the run).
    ToolStarted {
        id: String,
        name: String,
        input: Value,
    },
    /// A tool call ended with its output. A call reported only once done has no start.
    ToolFinished {
        id: String,
        name: String,
        input: Value,
        output: String,
        is_error: bool,
    },
    /// The agent started a subagent outside its tool calls (a codex collaboration call).
    Subagent { description: String, agent: String },
    /// Tokens used by one model turn or step (to be added up over the run).
    Usage(ProviderUsage),
    /// The agent reported that its turn failed.
    Failed(String),
    /// A warning the agent carries on after (a retry notice, a codex error item).
    Notice(String),
}

/// Reads one run's stdout, line by line (a fresh parser per run: some remember earlier lines).
pub trait StreamParser: Send {
    /// What one line says; empty for a line the parser knows nothing about.
    fn parse(&mut self, line: &str) -> Vec<AgentEvent>;
}

/// The string at `path` in `value`, or "".
pub(crate) fn str_at<'a>(value: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .try_fold(value, |current, key| current.get(*key))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The integer at `path` in `value`, or 0.
fn int_at(value: &Value, path: &[&str]) -> i64 {
    path.iter()
        .try_fold(value, |current, key| current.get(*key))
        .and_then(Value::as_i64)
        .unwrap_or_default()
}

/// The value at `key`, or `{}` (a tool call without input).
fn input_at(value: &Value, key: &str) -> Value {
    value.get(key).cloned().unwrap_or_else(|| json!({}))
}

/// Text of a tool result: a string, or the text blocks of a content array.
fn content_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn json_line(line: &str) -> Option<Value> {
    serde_json::from_str(line).ok()
}

/// Command agents: every stdout line is a message.
#[derive(Debug, Default)]
pub struct LineParser;

impl StreamParser for LineParser {
    fn parse(&mut self, line: &str) -> Vec<AgentEvent> {
        vec![AgentEvent::Message(line.to_string())]
    }
}

/// `codex exec --json`: items (messages, commands, file changes, MCP and web-search calls,
/// collaboration calls, error notices) and turn ends with usage.
#[derive(Debug, Default)]
pub struct CodexParser;

impl StreamParser for CodexParser {
    fn parse(&mut self, line: &str) -> Vec<AgentEvent> {
        let Some(value) = json_line(line) else {
            return Vec::new();
        };
        let item = value.get("item").unwrap_or(&Value::Null);
        let event = match str_at(&value, &["type"]) {
            "item.started" => codex_tool(item).map(|(name, input)| AgentEvent::ToolStarted {
                id: str_at(item, &["id"]).to_string(),
                name,
                input,
            }),
            "item.completed" => codex_completed(item),
            "turn.completed" => {
                let usage = value.get("usage").unwrap_or(&Value::Null);
                Some(AgentEvent::Usage(ProviderUsage {
                    input_tokens: int_at(usage, &["input_tokens"]),
                    cached_input_tokens: int_at(usage, &["cached_input_tokens"]),
                    output_tokens: int_at(usage, &["output_tokens"]),
                    reasoning_tokens: int_at(usage, &["reasoning_output_tokens"]),
                }))
            }
            "turn.failed" => Some(AgentEvent::Failed(
                str_at(&value, &["error", "message"]).to_string(),
            )),
            // Top-level errors are retry notices ("Reconnecting... 1/5"); a real failure ends
            // with `turn.failed` and a non-zero exit.
            "error" => Some(AgentEvent::Notice(str_at(&value, &["message"]).to_string())),
            _ => None,
        };
        event.into_iter().collect()
    }
}

/// A codex item that is a tool call: its name and input.
fn codex_tool(item: &Value) -> Option<(String, Value)> {
    match str_at(item, &["type"]) {
        "command_execution" => Some((
            "shell".into(),
            json!({"command": str_at(item, &["command"])}),
        )),
        "file_change" => Some((
            "apply_patch".into(),
            json!({"changes": item.get("changes").cloned().unwrap_or(Value::Null)}),
        )),
        "mcp_tool_call" => Some((
            format!("{}.{}", str_at(item, &["server"]), str_at(item, &["tool"])),
            item.get("arguments").cloned().unwrap_or(Value::Null),
        )),
        "web_search" => Some((
            "web_search".into(),
            json!({"query": str_at(item, &["query"])}),
        )),
        _ => None,
    }
}

fn codex_completed(item: &Value) -> Option<AgentEvent> {
    match str_at(item, &["type"]) {
        "agent_message" => Some(AgentEvent::Message(str_at(item, &["text"]).to_string())),
        "collab_tool_call" => Some(AgentEvent::Subagent {
            description: str_at(item, &["prompt"]).to_string(),
            agent: str_at(item, &["tool"]).to_string(),
        }),
        // Error items are warnings codex carries on after (e.g. missing model metadata).
        "error" => Some(AgentEvent::Notice(str_at(item, &["message"]).to_string())),
        _ => {
            let (name, input) = codex_tool(item)?;
            let (output, is_error) = codex_tool_output(item);
            Some(AgentEvent::ToolFinished {
                id: str_at(item, &["id"]).to_string(),
                name,
                input,
                output,
                is_error,
            })
        }
    }
}

/// The output of a completed codex tool item and whether the call failed.
fn codex_tool_output(item: &Value) -> (String, bool) {
    let failed = str_at(item, &["status"]) == "failed";
    match str_at(item, &["type"]) {
        "command_execution" => {
            let code = item.get("exit_code").and_then(Value::as_i64);
            (
                str_at(item, &["aggregated_output"]).to_string(),
                failed || code.is_some_and(|code| code != 0),
            )
        }
        "file_change" => (format!("changed {}", changed_paths(item)), failed),
        "mcp_tool_call" => match str_at(item, &["error", "message"]) {
            "" => (
                item.get("result")
                    .map(|result| content_text(result.get("content").unwrap_or(result)))
                    .unwrap_or_default(),
                failed,
            ),
            error => (error.to_string(), true),
        },
        _ => (String::new(), failed),
    }
}

/// The paths of a file change (`{"changes": [{"path": …}, …]}`), comma-separated.
fn changed_paths(value: &Value) -> String {
    value
        .get("changes")
        .and_then(Value::as_array)
        .map(|changes| {
            changes
                .iter()
                .map(|change| str_at(change, &["path"]))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// `claude -p --output-format stream-json`: assistant messages with text and tool-use
/// blocks, tool results in user messages, partial-message text deltas, and the result line
/// with usage and the turn's failure.
#[derive(Debug, Default)]
pub struct ClaudeParser {
    /// Tool calls seen starting: id → (name, input); results name only the id.
    tools: HashMap<String, (String, Value)>,
}

impl StreamParser for ClaudeParser {
    fn parse(&mut self, line: &str) -> Vec<AgentEvent> {
        let Some(value) = json_line(line) else {
            return Vec::new();
        };
        let blocks = value
            .pointer("/message/content")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        match str_at(&value, &["type"]) {
            "stream_event" => claude_delta(&value).into_iter().collect(),
            "assistant" => blocks
                .iter()
                .filter_map(|block| self.assistant_block(block))
                .collect(),
            "user" => blocks
                .iter()
                .filter(|block| str_at(block, &["type"]) == "tool_result")
                .map(|block| self.tool_result(block))
                .collect(),
            "result" => claude_result(&value),
            _ => Vec::new(),
        }
    }
}

impl ClaudeParser {
    fn assistant_block(&mut self, block: &Value) -> Option<AgentEvent> {
        match str_at(block, &["type"]) {
            "text" => {
                let text = str_at(block, &["text"]);
                (!text.is_empty()).then(|| AgentEvent::Message(text.to_string()))
            }
            "tool_use" => {
                let id = str_at(block, &["id"]).to_string();
                let name = str_at(block, &["name"]).to_string();
                let input = input_at(block, "input");
                self.tools.insert(id.clone(), (name.clone(), input.clone()));
                Some(AgentEvent::ToolStarted { id, name, input })
            }
            _ => None,
        }
    }

    fn tool_result(&mut self, block: &Value) -> AgentEvent {
        let id = str_at(block, &["tool_use_id"]).to_string();
        let (name, input) = self
            .tools
            .remove(&id)
            .unwrap_or_else(|| ("tool".to_string(), json!({})));
        AgentEvent::ToolFinished {
            id,
            name,
            input,
            output: content_text(block.get("content").unwrap_or(&Value::Null)),
            is_error: block.get("is_error").and_then(Value::as_bool) == Some(true),
        }
    }
}

/// The text delta of a partial-message stream event (other stream events say nothing new).
fn claude_delta(value: &Value) -> Option<AgentEvent> {
    let event = value.get("event")?;
    let text = str_at(event, &["delta", "text"]);
    let is_text = str_at(event, &["type"]) == "content_block_delta"
        && str_at(event, &["delta", "type"]) == "text_delta";
    (is_text && !text.is_empty()).then(|| AgentEvent::TextDelta(text.to_string()))
}

/// The result line: the turn's failure (an error result) and its usage. The input count
/// includes the cache reads and writes that Claude reports apart.
fn claude_result(value: &Value) -> Vec<AgentEvent> {
    let mut events = Vec::new();
    if value.get("is_error").and_then(Value::as_bool) == Some(true) {
        let message = match str_at(value, &["result"]) {
            "" => str_at(value, &["subtype"]),
            text => text,
        };
        events.push(AgentEvent::Failed(message.to_string()));
    }
    let usage = value.get("usage").unwrap_or(&Value::Null);
    let cached = int_at(usage, &["cache_read_input_tokens"]);
    let written = int_at(usage, &["cache_creation_input_tokens"]);
    events.push(AgentEvent::Usage(ProviderUsage {
        input_tokens: int_at(usage, &["input_tokens"]) + cached + written,
        cached_input_tokens: cached,
        output_tokens: int_at(usage, &["output_tokens"]),
        reasoning_tokens: 0,
    }));
    events
}

/// `opencode run --format json`: text parts, tool-use parts with their state, step ends
/// with tokens, and errors.
#[derive(Debug, Default)]
pub struct OpenCodeParser;

impl StreamParser for OpenCodeParser {
    fn parse(&mut self, line: &str) -> Vec<AgentEvent> {
        let Some(value) = json_line(line) else {
            return Vec::new();
        };
        let part = value.get("part").unwrap_or(&Value::Null);
        let event = match str_at(&value, &["type"]) {
            "text" => {
                let text = str_at(part, &["text"]);
                (!text.is_empty()).then(|| AgentEvent::Message(text.to_string()))
            }
            "tool_use" => Some(opencode_tool(part)),
            "step_finish" => {
                let tokens = part.get("tokens").unwrap_or(&Value::Null);
                let cached = int_at(tokens, &["cache", "read"]);
                Some(AgentEvent::Usage(ProviderUsage {
                    input_tokens: int_at(tokens, &["input"]) + cached,
                    cached_input_tokens: cached,
                    output_tokens: int_at(tokens, &["output"]),
                    reasoning_tokens: int_at(tokens, &["reasoning"]),
                }))
            }
            "error" => Some(AgentEvent::Failed(opencode_error(&value))),
            _ => None,
        };
        event.into_iter().collect()
    }
}

/// A tool-use part: started while pending or running, finished once completed or failed.
fn opencode_tool(part: &Value) -> AgentEvent {
    let id = match str_at(part, &["callID"]) {
        "" => str_at(part, &["id"]),
        id => id,
    }
    .to_string();
    let name = str_at(part, &["tool"]).to_string();
    let state = part.get("state").unwrap_or(&Value::Null);
    let input = input_at(state, "input");
    let finished = |output: &str, is_error| AgentEvent::ToolFinished {
        id: id.clone(),
        name: name.clone(),
        input: input.clone(),
        output: content_text(state.get(output).unwrap_or(&Value::Null)),
        is_error,
    };
    match str_at(state, &["status"]) {
        "completed" => finished("output", false),
        "error" => finished("error", true),
        _ => AgentEvent::ToolStarted { id, name, input },
    }
}

fn opencode_error(value: &Value) -> String {
    for path in [&["error", "data", "message"][..], &["error", "message"]] {
        let text = str_at(value, path);
        if !text.is_empty() {
            return text.to_string();
        }
    }
    value.get("error").map(Value::to_string).unwrap_or_default()
}

/// The Fort wire form of one run's typed events. Stateful: a tool call is announced once,
/// when it is first seen (its start, or its end when it was reported only once done).
#[derive(Debug, Default)]
pub struct WireProjection {
    announced: HashSet<String>,
}

impl WireProjection {
    /// The events of one stdout line read as `events`; a line none of whose events has a
    /// wire form is one `stdout` event with the line.
    pub fn line(&mut self, run_id: &str, line: String, events: Vec<AgentEvent>) -> Vec<RunEvent> {
        let mut wire: Vec<RunEvent> = events
            .into_iter()
            .filter_map(|event| self.event(run_id, event))
            .collect();
        if wire.is_empty() {
            wire.push(RunEvent::new(run_id, EventType::Stdout, line));
        }
        wire
    }

    fn event(&mut self, run_id: &str, event: AgentEvent) -> Option<RunEvent> {
        match event {
            AgentEvent::Message(text) => Some(RunEvent::new(run_id, EventType::Message, text)),
            AgentEvent::ToolStarted { id, name, input } => {
                self.announced.insert(id);
                Some(tool_call(run_id, &name, &input))
            }
            AgentEvent::ToolFinished {
                id, name, input, ..
            } => (!self.announced.remove(&id)).then(|| tool_call(run_id, &name, &input)),
            AgentEvent::Subagent { description, agent } => {
                Some(RunEvent::subagent(run_id, &description, &agent))
            }
            AgentEvent::Failed(message) => Some(RunEvent::error(run_id, message, "")),
            AgentEvent::Notice(message) => Some(RunEvent::new(run_id, EventType::Stderr, message)),
            AgentEvent::TextDelta(_) | AgentEvent::Usage(_) => None,
        }
    }
}

/// A tool call on the wire: `subagent` for the tools that start one (Claude Code's `Task`
/// and `Agent`, opencode's `task`), else `tool` with a one-line summary of the input.
fn tool_call(run_id: &str, name: &str, input: &Value) -> RunEvent {
    if matches!(name, "Task" | "Agent" | "task") {
        return RunEvent::subagent(
            run_id,
            str_at(input, &["description"]),
            str_at(input, &["subagent_type"]),
        );
    }
    RunEvent::tool(run_id, name, &input_summary(input))
}

/// The most telling field of a tool input (a command, a path, a query, the changed paths),
/// else the input itself, cut to 200 bytes.
fn input_summary(input: &Value) -> String {
    let telling = [
        "command",
        "file_path",
        "path",
        "pattern",
        "url",
        "query",
        "description",
    ];
    if let Some(text) = telling
        .iter()
        .find_map(|key| input.get(*key).and_then(Value::as_str))
    {
        return short(text, 200);
    }
    if input.get("changes").is_some_and(Value::is_array) {
        return short(&changed_paths(input), 200);
    }
    short(&input.to_string(), 200)
}

/// `text` cut to at most `max` bytes, marked with `…` when cut.
fn short(text: &str, max: usize) -> String {
    let prefix = char_prefix(text, max);
    if prefix.len() == text.len() {
        text.to_string()
    } else {
        format!("{prefix}…")
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub(crate) fn char_prefix(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(
        parser: &mut dyn StreamParser,
        projection: &mut WireProjection,
        line: &str,
    ) -> Vec<(EventType, String)> {
        projection
            .line("r", line.to_string(), parser.parse(line))
            .into_iter()
            .map(|event| (event.kind, event.data))
            .collect()
    }

    #[test]
    fn codex_command_with_output_and_usage() {
        let mut parser = CodexParser;
        let started = parser.parse(r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#);
        assert_eq!(
            started,
            vec![AgentEvent::ToolStarted {
                id: "item_1".into(),
                name: "shell".into(),
                input: json!({"command": "bash -lc ls"}),
            }]
        );
        let done = parser.parse(r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"a.txt\n","exit_code":0,"status":"completed"}}"#);
        assert!(
            matches!(&done[..], [AgentEvent::ToolFinished { output, is_error: false, .. }] if output == "a.txt\n"),
            "{done:?}"
        );
        let failed = parser.parse(r#"{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"false","aggregated_output":"","exit_code":1,"status":"completed"}}"#);
        assert!(matches!(
            &failed[..],
            [AgentEvent::ToolFinished { is_error: true, .. }]
        ));
        let usage = parser.parse(r#"{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":3,"reasoning_output_tokens":1}}"#);
        assert_eq!(
            usage,
            vec![AgentEvent::Usage(ProviderUsage {
                input_tokens: 10,
                cached_input_tokens: 4,
                output_tokens: 3,
                reasoning_tokens: 1,
            })]
        );
        assert_eq!(
            parser.parse(r#"{"type":"turn.failed","error":{"message":"boom"}}"#),
            vec![AgentEvent::Failed("boom".into())]
        );
        assert!(parser.parse("not json").is_empty());
    }

    #[test]
    fn codex_file_change_mcp_and_collaboration_items() {
        let mut parser = CodexParser;
        let patch = parser.parse(r#"{"type":"item.completed","item":{"id":"p","type":"file_change","changes":[{"path":"a.rs","kind":"add"},{"path":"b.rs","kind":"update"}],"status":"completed"}}"#);
        assert!(
            matches!(&patch[..], [AgentEvent::ToolFinished { name, output, is_error: false, .. }] if name == "apply_patch" && output == "changed a.rs, b.rs"),
            "{patch:?}"
        );
        let mcp = parser.parse(r#"{"type":"item.completed","item":{"id":"m","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"x"},"result":{"content":[{"type":"text","text":"found"}]},"status":"completed"}}"#);
        assert!(
            matches!(&mcp[..], [AgentEvent::ToolFinished { name, input, output, .. }] if name == "docs.search" && input["q"] == "x" && output == "found"),
            "{mcp:?}"
        );
        let mcp_error = parser.parse(r#"{"type":"item.completed","item":{"id":"m2","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{},"error":{"message":"down"},"status":"failed"}}"#);
        assert!(
            matches!(&mcp_error[..], [AgentEvent::ToolFinished { output, is_error: true, .. }] if output == "down")
        );
        assert_eq!(
            parser.parse(r#"{"type":"item.completed","item":{"id":"c","type":"collab_tool_call","tool":"spawn","prompt":"look"}}"#),
            vec![AgentEvent::Subagent {
                description: "look".into(),
                agent: "spawn".into()
            }]
        );
        assert_eq!(
            parser.parse(r#"{"type":"error","message":"Reconnecting... 1/5"}"#),
            vec![AgentEvent::Notice("Reconnecting... 1/5".into())]
        );
    }

    #[test]
    fn claude_tool_result_pairs_with_its_call() {
        let mut parser = ClaudeParser::default();
        let assistant = parser.parse(r#"{"type":"assistant","message":{"content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]}}"#);
        assert_eq!(assistant.len(), 2, "{assistant:?}");
        assert_eq!(assistant[0], AgentEvent::Message("ok".into()));
        let result = parser.parse(r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"x"},{"type":"text","text":"y"}],"is_error":false}]}}"#);
        assert_eq!(
            result,
            vec![AgentEvent::ToolFinished {
                id: "t1".into(),
                name: "Bash".into(),
                input: json!({"command": "ls"}),
                output: "x\ny".into(),
                is_error: false,
            }]
        );
        let text_result = parser.parse(r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t9","content":"denied","is_error":true}]}}"#);
        assert!(
            matches!(&text_result[..], [AgentEvent::ToolFinished { name, output, is_error: true, .. }] if name == "tool" && output == "denied")
        );
    }

    #[test]
    fn claude_partial_messages_are_deltas_and_the_result_has_usage() {
        let mut parser = ClaudeParser::default();
        assert_eq!(
            parser.parse(r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}}"#),
            vec![AgentEvent::TextDelta("Hel".into())]
        );
        assert!(parser
            .parse(r#"{"type":"stream_event","event":{"type":"message_start"}}"#)
            .is_empty());
        let result = parser.parse(r#"{"type":"result","subtype":"success","is_error":false,"usage":{"input_tokens":5,"cache_read_input_tokens":3,"cache_creation_input_tokens":2,"output_tokens":4}}"#);
        assert_eq!(
            result,
            vec![AgentEvent::Usage(ProviderUsage {
                input_tokens: 10,
                cached_input_tokens: 3,
                output_tokens: 4,
                reasoning_tokens: 0,
            })]
        );
        let failed =
            parser.parse(r#"{"type":"result","subtype":"error_max_turns","is_error":true}"#);
        assert_eq!(failed[0], AgentEvent::Failed("error_max_turns".into()));
    }

    #[test]
    fn opencode_text_tool_tokens_and_error() {
        let mut parser = OpenCodeParser;
        assert_eq!(
            parser.parse(r#"{"type":"text","part":{"type":"text","text":"hi"}}"#),
            vec![AgentEvent::Message("hi".into())]
        );
        let tool = parser.parse(r#"{"type":"tool_use","part":{"tool":"bash","callID":"c1","state":{"status":"completed","input":{"command":"ls"},"output":"a"}}}"#);
        assert!(
            matches!(&tool[..], [AgentEvent::ToolFinished { id, output, is_error: false, .. }] if id == "c1" && output == "a"),
            "{tool:?}"
        );
        let running = parser.parse(r#"{"type":"tool_use","part":{"tool":"bash","id":"p2","state":{"status":"running","input":{"command":"ls"}}}}"#);
        assert!(matches!(&running[..], [AgentEvent::ToolStarted { id, .. }] if id == "p2"));
        let usage = parser.parse(r#"{"type":"step_finish","part":{"tokens":{"input":5,"output":2,"reasoning":1,"cache":{"read":1,"write":0}}}}"#);
        assert_eq!(
            usage,
            vec![AgentEvent::Usage(ProviderUsage {
                input_tokens: 6,
                cached_input_tokens: 1,
                output_tokens: 2,
                reasoning_tokens: 1,
            })]
        );
        assert_eq!(
            parser.parse(
                r#"{"type":"error","error":{"name":"APIError","data":{"message":"quota"}}}"#
            ),
            vec![AgentEvent::Failed("quota".into())]
        );
        assert!(parser.parse("plain text").is_empty());
    }

    #[test]
    fn the_wire_announces_each_call_once_and_keeps_unread_lines() {
        let mut parser = ClaudeParser::default();
        let mut projection = WireProjection::default();
        let line = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"a","name":"Task","input":{"description":"look","subagent_type":"explorer"}},{"type":"tool_use","id":"b","name":"Bash","input":{"command":"ls"}}]}}"#;
        assert_eq!(
            wire(&mut parser, &mut projection, line),
            vec![
                (EventType::Message, "hi".to_string()),
                (
                    EventType::Subagent,
                    r#"{"agent":"explorer","description":"look"}"#.to_string()
                ),
                (
                    EventType::Tool,
                    r#"{"name":"Bash","summary":"ls"}"#.to_string()
                ),
            ]
        );
        // The result of an announced call and a usage line have no wire form: the raw line.
        let result = r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"b","content":"x"}]}}"#;
        assert_eq!(
            wire(&mut parser, &mut projection, result),
            vec![(EventType::Stdout, result.to_string())]
        );
        let failed = r#"{"type":"result","is_error":true,"result":"out of credit","usage":{}}"#;
        assert_eq!(
            wire(&mut parser, &mut projection, failed),
            vec![(EventType::Error, "out of credit".to_string())]
        );

        let mut codex = CodexParser;
        let patch = r#"{"type":"item.completed","item":{"id":"p","type":"file_change","changes":[{"path":"a.rs"},{"path":"b.rs"}],"status":"completed"}}"#;
        assert_eq!(
            wire(&mut codex, &mut projection, patch),
            vec![(
                EventType::Tool,
                r#"{"name":"apply_patch","summary":"a.rs, b.rs"}"#.to_string()
            )]
        );
        assert_eq!(
            wire(&mut codex, &mut projection, "not json"),
            vec![(EventType::Stdout, "not json".to_string())]
        );
        assert_eq!(
            wire(&mut LineParser, &mut projection, "plain"),
            vec![(EventType::Message, "plain".to_string())]
        );
    }
}
