//! Conversation-driven ("auto") replies: inspect the request body of any wire format, count the
//! tool results of the current turn, and emit the next tool call or the final answer.

use serde_json::Value;

use super::reply::{Reply, ToolCall, Usage};
use super::WireFormat;

/// Read-only view of one model request, handed to responders.
#[derive(Clone, Copy, Debug)]
pub struct Conversation<'a> {
    /// Wire format of the request.
    pub wire: WireFormat,
    /// The request's JSON body.
    pub body: &'a Value,
}

impl<'a> Conversation<'a> {
    pub(crate) fn new(wire: WireFormat, body: &'a Value) -> Self {
        Self { wire, body }
    }

    /// Conversation items: `messages` (Chat, Anthropic) or `input` (Responses; a bare string
    /// input counts as one user message and yields an empty slice here).
    fn items(&self) -> &'a [Value] {
        let key = match self.wire {
            WireFormat::Responses => "input",
            WireFormat::ChatCompletions | WireFormat::AnthropicMessages => "messages",
        };
        self.body
            .get(key)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Tool results sent in the conversation (the whole history).
    pub fn tool_results_total(&self) -> usize {
        self.items().iter().map(|m| self.results_in(m)).sum()
    }

    /// Tool results after the last genuine user message (the current turn).
    pub fn tool_results_in_turn(&self) -> usize {
        let items = self.items();
        let start = items
            .iter()
            .rposition(|m| self.is_user_prompt(m))
            .map(|p| p + 1)
            .unwrap_or(0);
        items[start..].iter().map(|m| self.results_in(m)).sum()
    }

    /// Calls of the tool `name` the model made after the last genuine user message.
    pub fn calls_in_turn(&self, name: &str) -> usize {
        let items = self.items();
        let start = items
            .iter()
            .rposition(|m| self.is_user_prompt(m))
            .map(|p| p + 1)
            .unwrap_or(0);
        items[start..].iter().map(|m| self.calls_in(m, name)).sum()
    }

    fn calls_in(&self, m: &Value, name: &str) -> usize {
        let named = |v: Option<&Value>| v.and_then(Value::as_str) == Some(name);
        match self.wire {
            WireFormat::ChatCompletions => m
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(|calls| {
                    calls
                        .iter()
                        .filter(|c| named(c.pointer("/function/name")))
                        .count()
                })
                .unwrap_or(0),
            WireFormat::Responses => usize::from(
                m.get("type").and_then(Value::as_str) == Some("function_call")
                    && named(m.get("name")),
            ),
            WireFormat::AnthropicMessages => m
                .get("content")
                .and_then(Value::as_array)
                .map(|blocks| {
                    blocks
                        .iter()
                        .filter(|b| {
                            b.get("type").and_then(Value::as_str) == Some("tool_use")
                                && named(b.get("name"))
                        })
                        .count()
                })
                .unwrap_or(0),
        }
    }

    /// Text of the last genuine user message, if any.
    pub fn last_user_text(&self) -> Option<String> {
        if self.wire == WireFormat::Responses {
            if let Some(s) = self.body.get("input").and_then(Value::as_str) {
                return Some(s.to_string());
            }
        }
        let m = self.items().iter().rev().find(|m| self.is_user_prompt(m))?;
        Some(content_text(m.get("content")?))
    }

    /// Names of the tools the request declares (`tools[].name` or `tools[].function.name`).
    pub fn tool_names(&self) -> Vec<String> {
        self.body
            .get("tools")
            .and_then(Value::as_array)
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| {
                        t.get("name")
                            .or_else(|| t.pointer("/function/name"))
                            .and_then(Value::as_str)
                            .map(str::to_string)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether the request declares any tool.
    pub fn declares_tools(&self) -> bool {
        self.body
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|t| !t.is_empty())
    }

    fn results_in(&self, m: &Value) -> usize {
        match self.wire {
            WireFormat::ChatCompletions => usize::from(role(m) == Some("tool")),
            WireFormat::Responses => {
                let t = m.get("type").and_then(Value::as_str).unwrap_or("");
                usize::from(t == "function_call_output" || t == "custom_tool_call_output")
            }
            WireFormat::AnthropicMessages => {
                if role(m) != Some("user") {
                    return 0;
                }
                m.get("content")
                    .and_then(Value::as_array)
                    .map(|blocks| blocks.iter().filter(|b| is_tool_result(b)).count())
                    .unwrap_or(0)
            }
        }
    }

    fn is_user_prompt(&self, m: &Value) -> bool {
        if role(m) != Some("user") {
            return false;
        }
        match self.wire {
            WireFormat::ChatCompletions => true,
            WireFormat::Responses => {
                m.get("type").and_then(Value::as_str).unwrap_or("message") == "message"
            }
            WireFormat::AnthropicMessages => match m.get("content") {
                Some(Value::Array(blocks)) => !blocks.iter().any(is_tool_result),
                _ => true,
            },
        }
    }
}

fn role(m: &Value) -> Option<&str> {
    m.get("role").and_then(Value::as_str)
}

fn is_tool_result(b: &Value) -> bool {
    b.get("type").and_then(Value::as_str) == Some("tool_result")
}

fn content_text(c: &Value) -> String {
    match c {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

type ArgsFn = std::sync::Arc<dyn Fn(usize) -> String + Send + Sync>;

/// A shell-command tool call in the flavour the requesting client declares: codex
/// `exec_command {"cmd"}` / `shell_command {"command"}` / `shell {"command":[argv]}`, Claude Code
/// `Bash {"command","description"}`, opencode `bash {"command","description"}`. Without a known
/// shell tool in the request it falls back to `bash {"command"}`.
pub fn shell_call(conv: &Conversation<'_>, cmd: &str) -> ToolCall {
    let names = conv.tool_names();
    let has = |n: &str| names.iter().any(|t| t == n);
    let (name, args) = if has("exec_command") {
        ("exec_command", serde_json::json!({ "cmd": cmd }))
    } else if has("shell_command") {
        ("shell_command", serde_json::json!({ "command": cmd }))
    } else if has("shell") {
        (
            "shell",
            serde_json::json!({ "command": ["bash", "-lc", cmd] }),
        )
    } else if has("Bash") {
        (
            "Bash",
            serde_json::json!({ "command": cmd, "description": "Run a shell command" }),
        )
    } else {
        (
            "bash",
            serde_json::json!({ "command": cmd, "description": "Run a shell command" }),
        )
    };
    ToolCall::new(name, args.to_string())
}

#[derive(Clone)]
enum StepTool {
    /// A fixed tool name with generated JSON arguments.
    Fixed { name: String, args: ArgsFn },
    /// A shell command, adapted to the client's shell tool (see [`shell_call`]).
    Shell(ArgsFn),
}

/// Script for [`super::MockProvider::auto`]: while the current turn holds fewer than `steps`
/// tool results, answer with one tool call (step index = results so far); then answer the final
/// text. Stateless, so any number of concurrent runs can share one mock. Requests that declare
/// no tools at all (e.g. opencode's title generation) get the final text right away.
#[derive(Clone)]
pub struct AutoScript {
    steps: usize,
    tool: StepTool,
    final_text: String,
    usage: Usage,
}

impl std::fmt::Debug for AutoScript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tool = match &self.tool {
            StepTool::Fixed { name, .. } => name.as_str(),
            StepTool::Shell(_) => "<shell>",
        };
        f.debug_struct("AutoScript")
            .field("steps", &self.steps)
            .field("tool", &tool)
            .field("final_text", &self.final_text)
            .finish()
    }
}

impl AutoScript {
    /// `steps` calls of `tool` with arguments `{"command":"echo step N"}` (N from 1), then
    /// `final_text`.
    pub fn new(steps: usize, tool: impl Into<String>, final_text: impl Into<String>) -> Self {
        Self {
            steps,
            tool: StepTool::Fixed {
                name: tool.into(),
                args: std::sync::Arc::new(|i| {
                    serde_json::json!({ "command": format!("echo step {}", i + 1) }).to_string()
                }),
            },
            final_text: final_text.into(),
            usage: Usage::new(100, 20),
        }
    }

    /// `steps` shell commands (`echo step N` unless [`AutoScript::commands`] is set), each sent
    /// through whichever shell tool the client declares (see [`shell_call`]), then `final_text`.
    /// Works unchanged for codex, Claude Code and opencode.
    pub fn shell(steps: usize, final_text: impl Into<String>) -> Self {
        Self {
            steps,
            tool: StepTool::Shell(std::sync::Arc::new(|i| format!("echo step {}", i + 1))),
            final_text: final_text.into(),
            usage: Usage::new(100, 20),
        }
    }

    /// The benchmark "5-step agent": one user message, four sequential tool calls, final answer.
    pub fn five_step(tool: impl Into<String>) -> Self {
        Self::new(4, tool, "All steps done.")
    }

    /// Sets the JSON-argument generator of a fixed tool (`step` is 0-based); turns a shell
    /// script into a fixed `bash` tool.
    pub fn args<F>(mut self, f: F) -> Self
    where
        F: Fn(usize) -> String + Send + Sync + 'static,
    {
        let name = match &self.tool {
            StepTool::Fixed { name, .. } => name.clone(),
            StepTool::Shell(_) => "bash".to_string(),
        };
        self.tool = StepTool::Fixed {
            name,
            args: std::sync::Arc::new(f),
        };
        self
    }

    /// Sets the shell-command generator (`step` is 0-based); turns the script into a shell one.
    pub fn commands<F>(mut self, f: F) -> Self
    where
        F: Fn(usize) -> String + Send + Sync + 'static,
    {
        self.tool = StepTool::Shell(std::sync::Arc::new(f));
        self
    }

    /// Sets the usage reported on every reply (default 100 in / 20 out).
    pub fn usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self
    }

    /// The reply for a given request.
    pub fn reply_for(&self, conv: &Conversation<'_>) -> Reply {
        let done = conv.tool_results_in_turn();
        // A request declaring no tools (title generation, summaries) cannot take a tool call.
        if done >= self.steps || !conv.declares_tools() {
            return Reply::text(self.final_text.clone()).usage(self.usage);
        }
        // Empty ids: the renderer generates one unique per request.
        let call = match &self.tool {
            StepTool::Fixed { name, args } => ToolCall::new(name.clone(), args(done)),
            StepTool::Shell(cmd) => shell_call(conv, &cmd(done)),
        };
        Reply::tool_calls([call]).usage(self.usage)
    }
}
