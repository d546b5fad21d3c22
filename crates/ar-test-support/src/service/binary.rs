//! The real `agent-runtime` binary as a child process: started with exactly the environment a
//! test gives it, its address learnt from stderr, killed and reaped when its guard drops.

use std::net::SocketAddr;
use std::ops::Deref;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::json;

use super::{app_config, Api, Env, CREDENTIAL_KEY, TOKEN, WAIT};
use crate::mock_provider::MockProvider;

fn drain(
    mut pipe: impl std::io::Read + Send + 'static,
    into: Arc<Mutex<Vec<u8>>>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buffer = [0u8; 8192];
        loop {
            match pipe.read(&mut buffer) {
                Ok(0) | Err(_) => return,
                Ok(read) => into
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .extend_from_slice(&buffer[..read]),
            }
        }
    })
}

/// A child process of the binary; killed (SIGKILL) and reaped when dropped unless it exited.
pub struct ChildGuard {
    child: Child,
    label: String,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
    status: Option<ExitStatus>,
}

impl ChildGuard {
    /// Starts `<bin> <args>` with exactly `env` (nothing inherited).
    pub fn spawn(bin: &str, args: &[&str], env: &Env) -> ChildGuard {
        let mut child = Command::new(bin)
            .args(args)
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {bin}: {error}"));
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut readers = Vec::new();
        if let Some(pipe) = child.stdout.take() {
            readers.push(drain(pipe, stdout.clone()));
        }
        if let Some(pipe) = child.stderr.take() {
            readers.push(drain(pipe, stderr.clone()));
        }
        ChildGuard {
            child,
            label: format!("{bin} {}", args.join(" ")),
            stdout,
            stderr,
            readers,
            status: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the child wrote to stderr so far.
    pub fn stderr(&self) -> String {
        let bytes = self
            .stderr
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Everything the child wrote to stdout so far.
    pub fn stdout(&self) -> String {
        let bytes = self
            .stdout
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The exit status, if the child has exited (reaps it).
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.status = Some(status);
                // The pipes are closed now; let the readers collect the last bytes.
                for reader in self.readers.drain(..) {
                    let _ = reader.join();
                }
            }
        }
        self.status
    }

    /// Waits (bounded) for the child to exit; panics with its stderr when it does not.
    pub async fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(status) = self.try_status() {
                return status;
            }
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "{} did not exit within {within:?}; stderr:\n{}",
                    self.label,
                    self.stderr()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits (bounded) until stderr contains `needle`; returns the line holding it.
    /// Panics with the whole stderr when the child exits first or the time runs out.
    pub async fn wait_stderr_line(&mut self, needle: &str, within: Duration) -> String {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let text = self.stderr();
            // Only whole lines: one eprintln! can reach the pipe in several writes.
            let complete = &text[..text.rfind('\n').map_or(0, |end| end + 1)];
            if let Some(line) = complete.lines().find(|line| line.contains(needle)) {
                return line.to_string();
            }
            if let Some(status) = self.try_status() {
                panic!(
                    "{} exited ({status}) before printing {needle:?}; stderr:\n{}",
                    self.label,
                    self.stderr()
                );
            }
            if tokio::time::Instant::now() >= deadline {
                panic!(
                    "{} did not print {needle:?} within {within:?}; stderr:\n{text}",
                    self.label
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends SIGTERM (graceful shutdown).
    pub fn terminate(&self) {
        let pid = rustix::process::Pid::from_raw(self.pid() as i32).expect("child pid");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("send SIGTERM");
    }

    /// Sends SIGINT (Ctrl-C; also a graceful shutdown).
    pub fn interrupt(&self) {
        let pid = rustix::process::Pid::from_raw(self.pid() as i32).expect("child pid");
        rustix::process::kill_process(pid, rustix::process::Signal::INT).expect("send SIGINT");
    }

    /// Sends SIGKILL and reaps the child.
    pub fn kill_hard(&mut self) -> ExitStatus {
        if let Some(status) = self.try_status() {
            return status;
        }
        let _ = self.child.kill();
        let status = self.child.wait().expect("reap the killed child");
        self.status = Some(status);
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        status
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if self.try_status().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!("----- stderr of {} -----\n{}", self.label, self.stderr());
        }
    }
}

/// Runs `<bin> <args>` to completion (bounded); returns (status, stdout, stderr).
pub async fn run_command(bin: &str, args: &[&str], env: &Env) -> (ExitStatus, String, String) {
    let mut child = ChildGuard::spawn(bin, args, env);
    let status = child.wait_exit(WAIT).await;
    (status, child.stdout(), child.stderr())
}

/// The environment every child starts from: a private HOME and data directory below `dir`,
/// loopback with an ephemeral port, nothing inherited from the test's own environment.
pub fn base_env(dir: &Path) -> Env {
    let mut env = Env::new();
    env.insert(
        "PATH".to_string(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".to_string()),
    );
    env.insert("HOME".to_string(), dir.join("home").display().to_string());
    env.insert(
        "XDG_DATA_HOME".to_string(),
        dir.join("xdg").display().to_string(),
    );
    env.insert("AGENT_RUNTIME_ADDR".to_string(), "127.0.0.1:0".to_string());
    env.insert("AGENT_RUNTIME_LOG".to_string(), "info".to_string());
    env
}

/// Runs `sql` on the SQLite store of a service started with [`sqlite_env`] on `dir`, beside
/// the running binary (WAL mode lets both in): how a test makes the store refuse a write.
pub async fn sqlite_execute(dir: &Path, sql: &str) {
    use sqlx::Connection as _;
    let url = format!("sqlite://{}", dir.join("data").join("runtime.db").display());
    let mut db = sqlx::SqliteConnection::connect(&url)
        .await
        .unwrap_or_else(|error| panic!("opening {url}: {error}"));
    sqlx::raw_sql(sql)
        .execute(&mut db)
        .await
        .unwrap_or_else(|error| panic!("{sql}: {error}"));
    db.close().await.ok();
}

/// The first column of each row `sql` selects, as text, from the SQLite store of a service
/// started with [`sqlite_env`] on `dir`.
pub async fn sqlite_strings(dir: &Path, sql: &str) -> Vec<String> {
    use sqlx::Connection as _;
    let url = format!("sqlite://{}", dir.join("data").join("runtime.db").display());
    let mut db = sqlx::SqliteConnection::connect(&url)
        .await
        .unwrap_or_else(|error| panic!("opening {url}: {error}"));
    let rows: Vec<(String,)> = sqlx::query_as(sql)
        .fetch_all(&mut db)
        .await
        .unwrap_or_else(|error| panic!("{sql}: {error}"));
    db.close().await.ok();
    rows.into_iter().map(|(value,)| value).collect()
}

/// A configured service on the SQLite file `dir/data/runtime.db`, pointed at `mock`.
pub fn sqlite_env(dir: &Path, mock: &MockProvider) -> Env {
    let mut env = base_env(dir);
    env.insert("AGENT_RUNTIME_SERVICE_TOKEN".into(), TOKEN.into());
    env.insert("AGENT_RUNTIME_STORE_DRIVER".into(), "sqlite".into());
    env.insert(
        "AGENT_RUNTIME_SQLITE_DSN".into(),
        dir.join("data").join("runtime.db").display().to_string(),
    );
    env.insert(
        "AGENT_RUNTIME_APP_CONFIG".into(),
        app_config(mock, json!({})).to_string(),
    );
    env.insert(
        "AGENT_RUNTIME_MODEL_CREDENTIAL_ENCRYPTION_KEY".into(),
        CREDENTIAL_KEY.into(),
    );
    env
}

/// A running `<bin> serve` and a client for it (through `Deref`).
pub struct Server {
    api: Api,
    pub process: ChildGuard,
}

impl Deref for Server {
    type Target = Api;

    fn deref(&self) -> &Api {
        &self.api
    }
}

impl Server {
    /// Starts `<bin> serve` with `env` and waits (bounded) until it listens; requests carry
    /// `AGENT_RUNTIME_SERVICE_TOKEN` of `env`, if set.
    pub async fn start(bin: &str, env: &Env) -> Server {
        Server::start_with_args(bin, &["serve"], env).await
    }

    /// The same server, its requests carrying `token` (one it generated and printed).
    pub fn with_token(self, token: Option<String>) -> Server {
        Server {
            api: Api::new(self.api.addr, token),
            process: self.process,
        }
    }

    /// [`Server::start`] with the command line given (`["serve", "--demo"]`).
    pub async fn start_with_args(bin: &str, args: &[&str], env: &Env) -> Server {
        let mut process = ChildGuard::spawn(bin, args, env);
        const LISTENING: &str = "agent runtime listening on http://";
        let line = process.wait_stderr_line(LISTENING, WAIT).await;
        let addr: SocketAddr = line
            .split_once(LISTENING)
            .and_then(|(_, rest)| rest.split(|c: char| c.is_whitespace() || c == '/').next())
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        assert!(addr.ip().is_loopback(), "listening on {addr}");
        Server {
            api: Api::new(addr, env.get("AGENT_RUNTIME_SERVICE_TOKEN").cloned()),
            process,
        }
    }
}
