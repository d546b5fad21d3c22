//! Codex's ChatGPT sign-in by device code, driven through a real `codex app-server` (its
//! JSON-RPC protocol over stdio, one JSON message per line).
//!
//! [`DeviceLogin::start`] starts the app-server in a private `CODEX_HOME` (mode 0700, removed
//! when the login ends), sends `initialize`, `initialized` and `account/login/start` with
//! `{"type": "chatgptDeviceCode"}`, and answers with the login id, the verification URL and the
//! user code the person enters there. The app-server then polls the issuer itself; when it
//! reports `account/login/completed`, [`DeviceLogin::outcome`] reads the account
//! (`account/read`: plan, email, the ChatGPT account id) and the `auth.json` the app-server
//! wrote, and hands them over as a [`SignedIn`] whose tokens are secrets; a failed login says
//! why. [`DeviceLogin::cancel`] sends `account/login/cancel`. The process and its home go with
//! the login, whatever its end; a login that is not completed in 15 minutes (the device code's
//! life) fails as expired.
//!
//! The issuer and the ChatGPT backend are codex's defaults (`auth.openai.com`, `chatgpt.com`)
//! unless [`CodexLoginConfig`] points the app-server elsewhere (`CODEX_APP_SERVER_LOGIN_ISSUER`,
//! `-c chatgpt_base_url=…`), as tests do with a loopback stand-in.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ar_core::secret::Secret;
use ar_process::{EnvPolicy, Process, ProcessSpec, StdinMode};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio::sync::{oneshot, Mutex as AsyncMutex};
use tokio_util::sync::CancellationToken;

use crate::providers::toml_string;

/// How long a device code lives.
pub const DEVICE_CODE_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// How long the app-server may take to answer a request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Where and how the app-server runs.
#[derive(Debug, Clone)]
pub struct CodexLoginConfig {
    /// The codex program.
    pub program: String,
    /// Parent of the logins' private homes.
    pub home_root: PathBuf,
    /// The issuer (`CODEX_APP_SERVER_LOGIN_ISSUER`); `None`: codex's own.
    pub issuer: Option<String>,
    /// The ChatGPT backend (`chatgpt_base_url`); `None`: codex's own.
    pub chatgpt_base_url: Option<String>,
}

/// Why a login could not start.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// The app-server could not be started.
    #[error("starting codex app-server: {0}")]
    Start(String),
    /// The app-server refused or did not answer.
    #[error("codex app-server: {0}")]
    Protocol(String),
}

/// A signed-in ChatGPT account, as the app-server left it.
#[derive(Clone)]
pub struct SignedIn {
    /// The whole `auth.json` codex wrote (tokens: a secret).
    pub auth_json: Secret,
    /// The ChatGPT plan (`plus`, `pro`, `team`, …; `unknown` when codex could not tell).
    pub plan_type: String,
    /// The ChatGPT account (workspace) id.
    pub account_id: String,
    /// The account's email, when codex read one.
    pub email: String,
}

impl std::fmt::Debug for SignedIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedIn")
            .field("plan_type", &self.plan_type)
            .field("account_id", &self.account_id)
            .finish()
    }
}

/// How a login ended.
#[derive(Debug, Clone)]
pub enum LoginOutcome {
    /// Signed in.
    Connected(SignedIn),
    /// The issuer refused, the code expired, or the app-server failed; why.
    Failed(String),
    /// Cancelled through [`DeviceLogin::cancel`].
    Cancelled,
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, String>>>>>;

/// A device-code login in progress.
pub struct DeviceLogin {
    /// The app-server's id of the login.
    pub login_id: String,
    /// Where the person signs in.
    pub verification_url: String,
    /// The code they enter there.
    pub user_code: String,
    client: Arc<RpcClient>,
    completed: Option<oneshot::Receiver<Result<(), String>>>,
    home: PathBuf,
    process: Option<Process>,
}

impl std::fmt::Debug for DeviceLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceLogin")
            .field("login_id", &self.login_id)
            .field("verification_url", &self.verification_url)
            .finish()
    }
}

/// The JSON-RPC side of one app-server.
struct RpcClient {
    stdin: AsyncMutex<ChildStdin>,
    pending: Pending,
    next_id: std::sync::atomic::AtomicU64,
}

impl RpcClient {
    async fn send(&self, message: &Value) -> Result<(), String> {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
        stdin.write_all(&line).await.map_err(|e| e.to_string())?;
        stdin.flush().await.map_err(|e| e.to_string())
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, String> {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        self.send(&json!({"method": method, "id": id, "params": params}))
            .await?;
        match tokio::time::timeout(REQUEST_TIMEOUT, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(format!("{method}: the app-server went away")),
            Err(_) => Err(format!(
                "{method}: no answer within {}s",
                REQUEST_TIMEOUT.as_secs()
            )),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl DeviceLogin {
    /// Starts the app-server and a device-code login; the code to show the person.
    pub async fn start(config: &CodexLoginConfig) -> Result<DeviceLogin, LoginError> {
        let home = config.home_root.join(format!(
            "codex-login-{}",
            ulid::Ulid::new().to_string().to_lowercase()
        ));
        create_private(&home).map_err(|e| LoginError::Start(format!("{}: {e}", home.display())))?;
        let started = Self::start_in(config, home.clone()).await;
        if started.is_err() {
            let _ = std::fs::remove_dir_all(&home);
        }
        started
    }

    async fn start_in(config: &CodexLoginConfig, home: PathBuf) -> Result<DeviceLogin, LoginError> {
        let mut process = ar_process::spawn(&app_server_spec(config, &home))
            .map_err(|e| LoginError::Start(e.to_string()))?;
        let stdin = process
            .take_stdin()
            .ok_or_else(|| LoginError::Start("no stdin".into()))?;
        let stdout = process
            .take_stdout()
            .ok_or_else(|| LoginError::Start("no stdout".into()))?;
        let client = Arc::new(RpcClient {
            stdin: AsyncMutex::new(stdin),
            pending: Arc::default(),
            next_id: std::sync::atomic::AtomicU64::new(1),
        });
        let (done_tx, done_rx) = oneshot::channel();
        tokio::spawn(read_messages(stdout, client.pending.clone(), done_tx));
        let protocol = LoginError::Protocol;
        client
            .request("initialize", json!({"clientInfo": {"name": "agent-runtime", "version": env!("CARGO_PKG_VERSION")}}))
            .await
            .map_err(protocol)?;
        client
            .send(&json!({"method": "initialized"}))
            .await
            .map_err(protocol)?;
        let started = client
            .request("account/login/start", json!({"type": "chatgptDeviceCode"}))
            .await
            .map_err(protocol)?;
        let field = |name: &str| {
            started
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let login = DeviceLogin {
            login_id: field("loginId"),
            verification_url: field("verificationUrl"),
            user_code: field("userCode"),
            client,
            completed: Some(done_rx),
            home,
            process: Some(process),
        };
        if login.login_id.is_empty()
            || login.user_code.is_empty()
            || login.verification_url.is_empty()
        {
            return Err(LoginError::Protocol(format!(
                "unexpected login answer: {started}"
            )));
        }
        Ok(login)
    }

    /// Cancels the login (the app-server stops polling); [`DeviceLogin::outcome`] then
    /// answers `Cancelled`.
    pub async fn cancel(&mut self) {
        let _ = self
            .client
            .request("account/login/cancel", json!({"loginId": self.login_id}))
            .await;
        self.completed = None;
    }

    /// Waits for the login's end (at most the device code's life).
    pub async fn outcome(self) -> LoginOutcome {
        self.outcome_until(CancellationToken::new()).await
    }

    /// [`DeviceLogin::outcome`], or cancels the login when `cancel` fires first.
    pub async fn outcome_until(mut self, cancel: CancellationToken) -> LoginOutcome {
        let outcome = match self.completed.take() {
            None => LoginOutcome::Cancelled,
            Some(done) => {
                let waited = tokio::select! {
                    waited = tokio::time::timeout(DEVICE_CODE_LIFETIME, done) => Some(waited),
                    () = cancel.cancelled() => None,
                };
                match waited {
                    None => {
                        self.cancel().await;
                        LoginOutcome::Cancelled
                    }
                    Some(Err(_)) => LoginOutcome::Failed(
                        "the device code expired before sign-in was completed".into(),
                    ),
                    Some(Ok(Err(_))) => LoginOutcome::Failed(
                        "codex app-server exited before the login completed".into(),
                    ),
                    Some(Ok(Ok(Err(error)))) => LoginOutcome::Failed(error),
                    Some(Ok(Ok(Ok(())))) => self.signed_in().await,
                }
            }
        };
        self.close().await;
        outcome
    }

    /// The account and the tokens codex wrote, after a successful login.
    async fn signed_in(&self) -> LoginOutcome {
        let account = match self.client.request("account/read", json!({})).await {
            Ok(account) => account,
            Err(error) => {
                return LoginOutcome::Failed(format!("reading the signed-in account: {error}"))
            }
        };
        let auth = match tokio::fs::read_to_string(self.home.join("auth.json")).await {
            Ok(text) => text,
            Err(error) => {
                return LoginOutcome::Failed(format!("codex wrote no auth.json: {error}"))
            }
        };
        let text = |pointer: &str| {
            account
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        LoginOutcome::Connected(SignedIn {
            auth_json: Secret::new(auth),
            plan_type: text("/account/planType"),
            account_id: text("/workspaceRouting/chatgptAccountId"),
            email: text("/account/email"),
        })
    }

    /// Stops the app-server and removes the login's home.
    async fn close(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill_group();
            let _ = process.wait().await;
        }
        let _ = tokio::fs::remove_dir_all(&self.home).await;
    }
}

impl Drop for DeviceLogin {
    fn drop(&mut self) {
        // The process group dies with `Process`; the home goes here.
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

/// `codex app-server` in `home` (its `CODEX_HOME`), with the issuer and backend overrides.
fn app_server_spec(config: &CodexLoginConfig, home: &std::path::Path) -> ProcessSpec {
    let mut args = vec!["app-server".to_string()];
    if let Some(base) = &config.chatgpt_base_url {
        args.extend([
            "-c".to_string(),
            format!("chatgpt_base_url={}", toml_string(base)),
        ]);
    }
    let mut env = EnvPolicy::standard()
        .with("HOME", home.display().to_string())
        .with("CODEX_HOME", home.display().to_string());
    if let Some(issuer) = &config.issuer {
        env = env.with("CODEX_APP_SERVER_LOGIN_ISSUER", issuer.clone());
    }
    ProcessSpec {
        program: config.program.clone(),
        args,
        workdir: home.to_path_buf(),
        create_workdir: false,
        workdir_mode: 0o700,
        env,
        stdin: StdinMode::Piped,
    }
}

/// Routes the app-server's answers to their requests, and reports the login's completion.
async fn read_messages(
    mut stdout: ar_process::LineReader<tokio::process::ChildStdout>,
    pending: Pending,
    done: oneshot::Sender<Result<(), String>>,
) {
    let mut done = Some(done);
    while let Ok(Some(line)) = stdout.next_line().await {
        let Ok(message) = serde_json::from_str::<Value>(&line.text) else {
            continue;
        };
        if let Some(id) = message.get("id").and_then(Value::as_u64) {
            if message.get("method").is_none() {
                if let Some(tx) = lock(&pending).remove(&id) {
                    let answer = match message.get("error") {
                        Some(error) => Err(error
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("error")
                            .to_string()),
                        None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
                    };
                    let _ = tx.send(answer);
                }
                continue;
            }
        }
        if message.get("method").and_then(Value::as_str) == Some("account/login/completed") {
            let params = message.get("params").cloned().unwrap_or_default();
            let result = if params.get("success").and_then(Value::as_bool) == Some(true) {
                Ok(())
            } else {
                Err(params
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("sign-in failed")
                    .to_string())
            };
            if let Some(tx) = done.take() {
                let _ = tx.send(result);
            }
        }
    }
}

fn create_private(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}
