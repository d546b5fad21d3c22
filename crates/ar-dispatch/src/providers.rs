//! Agent providers of the local process runtime: how to start codex, claude, opencode and plain
//! commands, and which [`crate::stream`] parser reads each one's stdout.

use serde_json::Value;

use crate::run::DispatchError;
use crate::spec::RunSpec;
use crate::stream::{ClaudeParser, CodexParser, LineParser, OpenCodeParser, StreamParser};

/// A stdin protocol for agents that take several user turns over stdin (claude stream-json).
/// The run keeps stdin open while turns are outstanding: the prompt and every `signal` are
/// one turn each, and stdin is closed once as many turns have ended as were sent.
#[derive(Clone, Copy)]
pub struct TurnProtocol {
    /// Encodes one user turn as a stdin line (without the newline).
    pub encode: fn(&str) -> String,
    /// True for the stdout line that ends a turn.
    pub is_turn_end: fn(&str) -> bool,
}

impl std::fmt::Debug for TurnProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TurnProtocol")
    }
}

/// How to start an agent process for a spec.
#[derive(Debug, Clone)]
pub struct ProviderCommand {
    /// Program (path or name looked up in the child's PATH).
    pub program: String,
    /// Arguments.
    pub args: Vec<String>,
    /// Keep stdin open as a pipe for `signal`; otherwise stdin is null.
    pub stdin_open: bool,
    /// Text written to stdin first (a newline is added), e.g. the prompt of a command agent.
    pub initial_input: Option<String>,
    /// Extra environment the provider needs.
    pub env: Vec<(String, String)>,
    /// Multi-turn stdin protocol; when set, the prompt is sent as the first turn and
    /// `signal` sends further turns.
    pub turns: Option<TurnProtocol>,
}

impl ProviderCommand {
    /// A single-turn command with null stdin and no extra environment.
    pub fn one_shot(program: &str, args: Vec<String>) -> Self {
        ProviderCommand {
            program: program.to_string(),
            args,
            stdin_open: false,
            initial_input: None,
            env: Vec::new(),
            turns: None,
        }
    }
}

/// An agent CLI: how to start it and how to read its stdout.
pub trait Provider: Send + Sync {
    /// The agent name it serves (`codex`, `claude`, `opencode`, `command`, `command:NAME`).
    fn agent(&self) -> &str;
    /// The process to start. Errors here mean nothing is started.
    fn command(&self, spec: &RunSpec) -> Result<ProviderCommand, DispatchError>;
    /// A fresh reader of one run's stdout.
    fn parser(&self) -> Box<dyn StreamParser>;
    /// The CLI program, for agents whose turns the runtime sets up ([`crate::turn`]).
    fn program(&self) -> Option<&str> {
        None
    }
}

/// A fresh reader of the stdout of `agent` (what a caller reading a remote run's raw lines
/// parses them with): the agent CLI's parser, else one message per line.
pub fn parser_for(agent: &str) -> Box<dyn StreamParser> {
    match agent {
        "codex" => Box::new(CodexParser),
        "claude" => Box::<ClaudeParser>::default(),
        "opencode" => Box::new(OpenCodeParser),
        _ => Box::new(LineParser),
    }
}

/// An agent CLI's arguments: its fixed ones, the spec's model (after `model_flag`, when set),
/// then the provider's extra ones.
fn cli_args(fixed: &[&str], model_flag: &str, spec: &RunSpec, extra: &[String]) -> Vec<String> {
    let mut args: Vec<String> = fixed.iter().map(|s| s.to_string()).collect();
    if !spec.model.is_empty() {
        args.extend([model_flag.to_string(), spec.model.clone()]);
    }
    args.extend(extra.iter().cloned());
    args
}

/// A TOML basic string, for codex `-c key=value` overrides (a JSON string literal is a valid
/// TOML basic string for the characters JSON escapes).
pub fn toml_string(value: &str) -> String {
    Value::String(value.to_string()).to_string()
}

/// `codex exec --json` (sandbox workspace-write unless told otherwise, outside git allowed).
#[derive(Debug, Clone)]
pub struct CodexProvider {
    /// The codex program.
    pub program: String,
    /// Extra arguments placed before the prompt (e.g. `-c model_provider=…`).
    pub extra_args: Vec<String>,
    /// codex's `--sandbox` policy for the commands its model runs.
    pub sandbox: CodexSandbox,
}

/// codex's `--sandbox` policies this runtime uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CodexSandbox {
    /// Writes inside the workdir only (the default).
    #[default]
    WorkspaceWrite,
    /// No writes at all (a read-only workspace).
    ReadOnly,
}

impl CodexSandbox {
    /// The flag's value.
    pub fn as_str(self) -> &'static str {
        match self {
            CodexSandbox::WorkspaceWrite => "workspace-write",
            CodexSandbox::ReadOnly => "read-only",
        }
    }
}

impl Default for CodexProvider {
    fn default() -> Self {
        Self {
            program: "codex".into(),
            extra_args: Vec::new(),
            sandbox: CodexSandbox::default(),
        }
    }
}

impl Provider for CodexProvider {
    fn agent(&self) -> &str {
        "codex"
    }
    fn command(&self, spec: &RunSpec) -> Result<ProviderCommand, DispatchError> {
        let fixed = [
            "exec",
            "--json",
            "--sandbox",
            self.sandbox.as_str(),
            "--skip-git-repo-check",
        ];
        let mut args = cli_args(&fixed, "--model", spec, &self.extra_args);
        args.push("--".into());
        args.push(spec.prompt.clone());
        Ok(ProviderCommand::one_shot(&self.program, args))
    }
    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(CodexParser)
    }
    fn program(&self) -> Option<&str> {
        Some(&self.program)
    }
}

/// `claude -p --output-format stream-json --verbose --input-format stream-json`: the prompt
/// goes to stdin as a stream-json user message, so `signal` can add user turns while the run
/// is alive.
#[derive(Debug, Clone)]
pub struct ClaudeProvider {
    /// The claude program.
    pub program: String,
    /// Extra arguments (e.g. `--allowedTools Bash`).
    pub extra_args: Vec<String>,
}

impl Default for ClaudeProvider {
    fn default() -> Self {
        Self {
            program: "claude".into(),
            extra_args: Vec::new(),
        }
    }
}

fn claude_user_turn(text: &str) -> String {
    serde_json::json!({"type": "user", "message": {"role": "user", "content": text}}).to_string()
}

fn claude_turn_end(line: &str) -> bool {
    line.starts_with('{')
        && serde_json::from_str::<Value>(line)
            .map(|v| v.get("type").and_then(Value::as_str) == Some("result"))
            .unwrap_or(false)
}

impl Provider for ClaudeProvider {
    fn agent(&self) -> &str {
        "claude"
    }
    fn command(&self, spec: &RunSpec) -> Result<ProviderCommand, DispatchError> {
        let fixed = [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--input-format",
            "stream-json",
        ];
        let args = cli_args(&fixed, "--model", spec, &self.extra_args);
        Ok(ProviderCommand {
            program: self.program.clone(),
            args,
            stdin_open: true,
            initial_input: Some(claude_user_turn(&spec.prompt)),
            env: Vec::new(),
            turns: Some(TurnProtocol {
                encode: claude_user_turn,
                is_turn_end: claude_turn_end,
            }),
        })
    }
    fn parser(&self) -> Box<dyn StreamParser> {
        Box::<ClaudeParser>::default()
    }
    fn program(&self) -> Option<&str> {
        Some(&self.program)
    }
}

/// `opencode run --format json`.
#[derive(Debug, Clone)]
pub struct OpenCodeProvider {
    /// The opencode program.
    pub program: String,
    /// Extra arguments.
    pub extra_args: Vec<String>,
}

impl Default for OpenCodeProvider {
    fn default() -> Self {
        Self {
            program: "opencode".into(),
            extra_args: Vec::new(),
        }
    }
}

impl Provider for OpenCodeProvider {
    fn agent(&self) -> &str {
        "opencode"
    }
    fn command(&self, spec: &RunSpec) -> Result<ProviderCommand, DispatchError> {
        let mut args = cli_args(&["run", "--format", "json"], "-m", spec, &self.extra_args);
        args.push("--".into());
        args.push(spec.prompt.clone());
        Ok(ProviderCommand::one_shot(&self.program, args))
    }
    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(OpenCodeParser)
    }
    fn program(&self) -> Option<&str> {
        Some(&self.program)
    }
}

/// Any argv; each stdout line is a `message`; stdin stays open for `signal`.
/// The argv comes from the prompt: a JSON array of strings, or words split like a shell
/// (single and double quotes, backslash escapes; no expansion).
#[derive(Debug, Clone, Default)]
pub struct CommandProvider;

impl Provider for CommandProvider {
    fn agent(&self) -> &str {
        "command"
    }
    fn command(&self, spec: &RunSpec) -> Result<ProviderCommand, DispatchError> {
        let argv = parse_argv(&spec.prompt)?;
        let mut it = argv.into_iter();
        let Some(program) = it.next() else {
            return Err(DispatchError::Spec(crate::spec::SpecError::Decode(
                "command agent needs an argv in Prompt".into(),
            )));
        };
        Ok(ProviderCommand {
            program,
            args: it.collect(),
            stdin_open: true,
            initial_input: None,
            env: Vec::new(),
            turns: None,
        })
    }
    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(LineParser)
    }
}

/// A named command agent (`command:NAME`): runs a fixed program, writes the prompt as the
/// first line of its stdin, keeps stdin open for `signal`; each stdout line is a `message`.
#[derive(Debug, Clone)]
pub struct NamedCommandProvider {
    agent: String,
    program: String,
    args: Vec<String>,
}

impl NamedCommandProvider {
    /// `command:NAME` running `program` (a shell-like word list: program then arguments).
    pub fn new(name: &str, program: &str) -> Result<Self, DispatchError> {
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err(DispatchError::Spec(crate::spec::SpecError::Decode(
                format!("command agent name {name:?} must be letters, digits, . _ -"),
            )));
        }
        let mut argv = split_words(program)?.into_iter();
        let Some(prog) = argv.next() else {
            return Err(DispatchError::Spec(crate::spec::SpecError::Decode(
                format!("command agent {name:?} has no program"),
            )));
        };
        Ok(Self {
            agent: format!("command:{name}"),
            program: prog,
            args: argv.collect(),
        })
    }

    /// Parses `NAME=PROGRAM` (the node's `--command` flag).
    pub fn parse_flag(flag: &str) -> Result<Self, DispatchError> {
        match flag.split_once('=') {
            Some((name, program)) => Self::new(name.trim(), program.trim()),
            None => Err(DispatchError::Spec(crate::spec::SpecError::Decode(
                format!("--command {flag:?} must be NAME=PROGRAM"),
            ))),
        }
    }
}

impl Provider for NamedCommandProvider {
    fn agent(&self) -> &str {
        &self.agent
    }
    fn command(&self, spec: &RunSpec) -> Result<ProviderCommand, DispatchError> {
        Ok(ProviderCommand {
            program: self.program.clone(),
            args: self.args.clone(),
            stdin_open: true,
            initial_input: Some(spec.prompt.replace('\n', " ")),
            env: Vec::new(),
            turns: None,
        })
    }
    fn parser(&self) -> Box<dyn StreamParser> {
        Box::new(LineParser)
    }
}

/// Parses a command argv: a JSON array of strings, or shell-like words.
pub fn parse_argv(prompt: &str) -> Result<Vec<String>, DispatchError> {
    let t = prompt.trim_start();
    if t.starts_with('[') {
        serde_json::from_str::<Vec<String>>(t).map_err(|e| {
            DispatchError::Spec(crate::spec::SpecError::Decode(format!(
                "command argv JSON: {e}"
            )))
        })
    } else {
        split_words(prompt)
    }
}

/// Splits words like a POSIX shell without any expansion.
pub fn split_words(s: &str) -> Result<Vec<String>, DispatchError> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => return Err(unterminated()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x @ ('"' | '\\' | '$' | '`')) => cur.push(x),
                            Some(x) => {
                                cur.push('\\');
                                cur.push(x)
                            }
                            None => return Err(unterminated()),
                        },
                        Some(x) => cur.push(x),
                        None => return Err(unterminated()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(x) = chars.next() {
                    cur.push(x);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

fn unterminated() -> DispatchError {
    DispatchError::Spec(crate::spec::SpecError::Decode(
        "unterminated quote in command".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words() {
        assert_eq!(
            split_words(r#"sh -c 'yes | head -n 3' "a b\"c" d\ e"#).unwrap(),
            vec!["sh", "-c", "yes | head -n 3", "a b\"c", "d e"]
        );
        assert!(split_words("'open").is_err());
        assert_eq!(
            parse_argv(r#"["/bin/echo","x y"]"#).unwrap(),
            vec!["/bin/echo", "x y"]
        );
    }
}
