//! The reference MCP server `@modelcontextprotocol/server-everything` (npm, pinned in
//! `tests/mcp/package.json`, installed by `.ci/steps/install-mcp-servers.sh`) run for a test
//! over streamable HTTP ([`ServerEverything`]): `node …/dist/index.js streamableHttp` on a
//! free loopback port, its log kept to count the sessions it opened and ended.
//!
//! ```ignore
//! let Some(server) = ServerEverything::start().await else { return }; // not installed, no CI
//! let url = server.url(); // http://127.0.0.1:PORT/mcp, tools `echo`, `get-sum`, …
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

/// How long the server may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running server-everything; killed when dropped.
pub struct ServerEverything {
    entry: PathBuf,
    port: u16,
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
}

impl ServerEverything {
    /// The installed package's entry point, if it is installed.
    pub fn entry_point() -> Option<PathBuf> {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
            "../../tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        );
        path.exists().then_some(path)
    }

    /// The installed package's entry point for a test that needs it (a stdio provider runs
    /// `node <it> stdio`); `None` when it is not installed, said loudly on stderr so the test
    /// can skip.
    ///
    /// # Panics
    /// When it is not installed under `CI=true`: a missing peer fails the suite there.
    pub fn required_entry_point() -> Option<PathBuf> {
        let entry = Self::entry_point();
        if entry.is_none() {
            let message =
                "server-everything is not installed: run .ci/steps/install-mcp-servers.sh";
            if std::env::var("CI").is_ok_and(|value| value == "true") {
                panic!("{message} (CI=true: a missing peer fails the suite)");
            }
            // Straight to the process's stderr: the test harness shows no captured output of
            // a test that passes, and a skip must be seen.
            let _ = writeln!(std::io::stderr(), "!!!!!! SKIPPING: {message} !!!!!!");
        }
        entry
    }

    /// Starts the server over streamable HTTP; `None` when it is not installed (see
    /// [`ServerEverything::required_entry_point`]).
    ///
    /// # Panics
    /// When it is not installed under `CI=true`, or does not start.
    pub async fn start() -> Option<ServerEverything> {
        let entry = Self::required_entry_point()?;
        let port = free_port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let child = spawn(&entry, port, &log).await;
        Some(ServerEverything {
            entry,
            port,
            child,
            log,
        })
    }

    /// `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Kills the process and starts a new one on the same port: every session is forgotten.
    /// The log starts anew.
    pub async fn restart(&mut self) {
        let _ = self.child.kill().await;
        self.log.lock().clear();
        self.child = spawn(&self.entry, self.port, &self.log).await;
    }

    /// Sessions this process opened (`initialize` requests served).
    pub fn sessions_opened(&self) -> usize {
        self.count("Session initialized with ID")
    }

    /// Sessions this process was asked to end (DELETE requests).
    pub fn sessions_ended(&self) -> usize {
        self.count("Received session termination request")
    }

    /// The process's output so far (stdout and stderr lines).
    pub fn log(&self) -> Vec<String> {
        self.log.lock().clone()
    }

    fn count(&self, needle: &str) -> usize {
        self.log
            .lock()
            .iter()
            .filter(|line| line.contains(needle))
            .count()
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap_or_else(|err| panic!("server-everything: no free port: {err}"));
    listener
        .local_addr()
        .unwrap_or_else(|err| panic!("server-everything: no local address: {err}"))
        .port()
}

async fn spawn(entry: &PathBuf, port: u16, log: &Arc<Mutex<Vec<String>>>) -> Child {
    let mut child = Command::new("node")
        .arg(entry)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|err| panic!("server-everything: cannot run node: {err}"));
    if let Some(stdout) = child.stdout.take() {
        tokio::spawn(keep_lines(stdout, log.clone()));
    }
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(keep_lines(stderr, log.clone()));
    }
    let started = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if started.elapsed() > START_TIMEOUT {
            panic!(
                "server-everything did not listen on {port} within {START_TIMEOUT:?}: {:?}",
                log.lock()
            );
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("server-everything exited ({status}): {:?}", log.lock());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child
}

async fn keep_lines(output: impl AsyncRead + Unpin, log: Arc<Mutex<Vec<String>>>) {
    let mut lines = BufReader::new(output).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        log.lock().push(line);
    }
}
