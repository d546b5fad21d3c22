//! The `stdio` provider transport: MCP JSON-RPC lines over the stdin and stdout of a local
//! process, started through `ar-process` (its own process group, the standard environment
//! plus the provider's, killed with its group on close or drop). The process is started by
//! the first request, kept for the ones after, and started again by the next request once it
//! has exited. Errors name the command and end with its exit and the tail of its stderr,
//! never with its environment.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ar_core::mcp::McpError;
use ar_core::secret::Secret;
use ar_core::tool::ToolOutput;
use ar_process::{EnvPolicy, Process, ProcessSpec, StderrTail, StdinMode};
use async_trait::async_trait;
use rmcp::model::ClientConfig;
use rmcp::service::{serve_client, Peer, RunningService};
use rmcp::RoleClient;
use serde_json::Value;

use super::mcp::{provider_tool, with_context};
use super::{ProviderConnection, ProviderTool};
use crate::peer;
use crate::policy::DEFAULT_CONNECT_TIMEOUT;
use crate::session::{client_info, handshake_error, seconds};

/// How long a process that failed or is being closed gets to be reaped (and its stderr read
/// to the end) before the error is told without its exit.
const EXIT_GRACE: Duration = Duration::from_millis(500);
/// The most of a process's stderr an error quotes (its end).
const STDERR_NOTE_BYTES: usize = 2 * 1024;

/// A provider speaking MCP over a local process's stdio.
pub struct StdioProvider {
    command: String,
    args: Vec<String>,
    env: BTreeMap<String, Secret>,
    workdir: PathBuf,
    timeout: Duration,
    connect_timeout: Duration,
    /// The running process's session, started by the first request that needs it (the lock
    /// makes concurrent first requests wait for one start).
    running: tokio::sync::Mutex<Option<Arc<StdioSession>>>,
}

impl std::fmt::Debug for StdioProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioProvider")
            .field("command", &self.command)
            .field("args", &self.args.len())
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("workdir", &self.workdir)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// One started process and the MCP session on its stdio.
struct StdioSession {
    peer: Peer<RoleClient>,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, ClientConfig>>>,
    process: tokio::sync::Mutex<Process>,
    stderr: StderrTail,
    pid: u32,
}

impl StdioProvider {
    /// A provider run as `command args` in `workdir` (created when missing), with the
    /// standard environment plus `env`. Nothing is started before the first request;
    /// `timeout` bounds every request, the handshake has the 10 s connect timeout.
    pub fn new(
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, Secret>,
        workdir: PathBuf,
        timeout: Duration,
    ) -> Self {
        StdioProvider {
            command,
            args,
            env,
            workdir,
            timeout,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            running: tokio::sync::Mutex::new(None),
        }
    }

    /// Bounds the handshake of a started process by `limit` instead of 10 s.
    pub fn with_connect_timeout(mut self, limit: Duration) -> Self {
        self.connect_timeout = limit;
        self
    }

    /// The pid (which is also the process group id) of the process the connection holds,
    /// if it started one and has not closed it.
    pub async fn pid(&self) -> Option<u32> {
        self.running
            .lock()
            .await
            .as_ref()
            .map(|session| session.pid)
    }

    /// The running session, the process started now if there is none or it has exited.
    async fn session(&self) -> Result<Arc<StdioSession>, McpError> {
        let mut running = self.running.lock().await;
        if let Some(session) = running.as_ref() {
            if session.is_alive().await {
                return Ok(session.clone());
            }
            session.close().await;
            *running = None;
        }
        let session = Arc::new(self.start().await?);
        *running = Some(session.clone());
        Ok(session)
    }

    /// Starts the process and opens the MCP session on its stdio (the MCP handshake, bounded
    /// by the connect timeout). A process that fails the handshake is killed.
    async fn start(&self) -> Result<StdioSession, McpError> {
        let mut process = ar_process::spawn(&self.spec()).map_err(|err| {
            McpError::Transport(format!(
                "cannot start the MCP provider process {}: {err}",
                self.command
            ))
        })?;
        let pid = process.pid();
        let stderr = process.stderr_tail();
        let pipes = process.take_stdout_raw().zip(process.take_stdin());
        let Some(pipes) = pipes else {
            return Err(self
                .failed(
                    McpError::Transport("its stdin or stdout is not a pipe".into()),
                    &mut process,
                )
                .await);
        };
        let handshake =
            tokio::time::timeout(self.connect_timeout, serve_client(client_info(), pipes));
        let service = match handshake.await {
            Ok(Ok(service)) => service,
            Ok(Err(err)) => return Err(self.failed(handshake_error(err), &mut process).await),
            Err(_) => {
                let late = McpError::Timeout(format!(
                    "the MCP handshake did not finish within {}",
                    seconds(self.connect_timeout)
                ));
                return Err(self.failed(late, &mut process).await);
            }
        };
        tracing::debug!(pid, command = %self.command, "MCP provider process started");
        Ok(StdioSession {
            peer: service.peer().clone(),
            service: tokio::sync::Mutex::new(Some(service)),
            process: tokio::sync::Mutex::new(process),
            stderr,
            pid,
        })
    }

    /// What the process is started with. The spec holds the environment's values: it is
    /// built for the spawn and dropped, never shown.
    fn spec(&self) -> ProcessSpec {
        let env = self
            .env
            .iter()
            .fold(EnvPolicy::standard(), |env, (name, value)| {
                env.with(name, value.expose())
            });
        ProcessSpec::new(self.command.clone(), self.workdir.clone())
            .args(self.args.iter().cloned())
            .env(env)
            .stdin(StdinMode::Piped)
    }

    /// `err` of a process that failed to start its session: killed, reaped, then told with
    /// its exit and stderr.
    async fn failed(&self, err: McpError, process: &mut Process) -> McpError {
        process.kill_group();
        let exit = reap(process).await;
        self.about(err, &exit_note(exit, &process.stderr_tail()))
    }

    /// `result` of a request on `session`; a transport failure (the process gone, its pipes
    /// closed) ends with the process's exit and stderr.
    async fn explained<T>(
        &self,
        session: &StdioSession,
        result: Result<T, McpError>,
    ) -> Result<T, McpError> {
        match result {
            Ok(value) => Ok(value),
            Err(err @ McpError::Transport(_)) => {
                let exit = if session.peer.is_transport_closed() {
                    reap(&mut *session.process.lock().await).await
                } else {
                    session.process.lock().await.try_wait().ok().flatten()
                };
                Err(self.about(err, &exit_note(exit, &session.stderr)))
            }
            Err(err) => Err(self.about(err, "")),
        }
    }

    /// `err` naming the provider's command, followed by `note`.
    fn about(&self, err: McpError, note: &str) -> McpError {
        let told =
            |message: String| format!("MCP provider process {}: {message}{note}", self.command);
        match err {
            McpError::Unauthorized(message) => McpError::Unauthorized(told(message)),
            McpError::Refused(message) => McpError::Refused(told(message)),
            McpError::Timeout(message) => McpError::Timeout(told(message)),
            McpError::Transport(message) => McpError::Transport(told(message)),
            McpError::Protocol(message) => McpError::Protocol(told(message)),
        }
    }
}

impl StdioSession {
    /// The session's connection is open and the process has not exited.
    async fn is_alive(&self) -> bool {
        !self.peer.is_transport_closed() && matches!(self.process.lock().await.try_wait(), Ok(None))
    }

    /// Kills the process group, ends the session (its loop stops at the closed pipe) and
    /// reaps the process.
    async fn close(&self) {
        let mut process = self.process.lock().await;
        process.kill_group();
        let service = self.service.lock().await.take();
        if let Some(service) = service {
            if let Err(err) = service.cancel().await {
                tracing::debug!(
                    pid = self.pid,
                    "ending an MCP provider session failed: {err}"
                );
            }
        }
        reap(&mut process).await;
    }
}

#[async_trait]
impl ProviderConnection for StdioProvider {
    async fn list_tools(&self) -> Result<Vec<ProviderTool>, McpError> {
        // One session for every page: a listing starts the process at most once.
        let session = self.session().await?;
        let listed =
            peer::all_tools(|cursor| peer::list_page(&session.peer, cursor, self.timeout)).await;
        let tools = self.explained(&session, listed).await?;
        Ok(tools.into_iter().map(provider_tool).collect())
    }

    async fn call_tool(
        &self,
        tool: &str,
        input: Value,
        meta: &Value,
    ) -> Result<ToolOutput, McpError> {
        let params = match peer::call_params(tool, input) {
            Ok(params) => with_context(params, meta),
            Err(refused) => return Ok(refused),
        };
        let session = self.session().await?;
        let called = peer::call(&session.peer, params, self.timeout).await;
        self.explained(&session, called).await
    }

    async fn close(&self) {
        let session = self.running.lock().await.take();
        if let Some(session) = session {
            session.close().await;
        }
    }
}

/// How the process ended, if it ends within [`EXIT_GRACE`] (waiting also reads its stderr to
/// the end).
async fn reap(process: &mut Process) -> Option<ar_process::ExitInfo> {
    tokio::time::timeout(EXIT_GRACE, process.wait())
        .await
        .ok()
        .and_then(Result::ok)
}

/// `; it exited (…); its stderr ends with: …`, each part when known.
fn exit_note(exit: Option<ar_process::ExitInfo>, stderr: &StderrTail) -> String {
    let mut note = String::new();
    if let Some(exit) = exit {
        note.push_str(&format!("; it exited ({exit})"));
    }
    let tail = stderr.snapshot();
    if !tail.trim().is_empty() {
        note.push_str("; its stderr ends with: ");
        note.push_str(&stderr_end(&tail));
    }
    note
}

/// The last [`STDERR_NOTE_BYTES`] of `text`, its lines joined by ` | `.
fn stderr_end(text: &str) -> String {
    let mut start = text.len().saturating_sub(STDERR_NOTE_BYTES);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let cut = if start > 0 { "…" } else { "" };
    let lines: Vec<&str> = text[start..]
        .lines()
        .map(str::trim_end)
        .filter(|line| !line.is_empty())
        .collect();
    let flat: String = lines
        .join(" | ")
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!("{cut}{flat}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stderr_note_is_the_bounded_end_on_one_line() {
        assert_eq!(stderr_end("first\n\nsecond\r\n"), "first | second");
        let long = format!("{}\nlast words", "é".repeat(STDERR_NOTE_BYTES));
        let end = stderr_end(&long);
        assert!(
            end.starts_with('…') && end.ends_with(" | last words"),
            "{end}"
        );
        assert!(end.len() <= STDERR_NOTE_BYTES + " | ".len() + '…'.len_utf8());
    }
}
