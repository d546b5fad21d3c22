//! `agent-runtime agents …` and `agent-runtime runs …`: the service's API from a terminal, on
//! `ar-client`. Where the service is (`--url`, `AGENT_RUNTIME_URL`), which app (`--app`,
//! `AGENT_RUNTIME_APP_ID`) and the token (`AGENT_RUNTIME_SERVICE_TOKEN`, `--token-file`, else
//! the development token `serve` saved in its data directory) are read here; every command
//! prints for people, or JSON with `--json`, and exits with an [`Exit`] code.

mod agents;
mod output;
mod runs;
mod timeline;

use std::path::PathBuf;
use std::process::ExitCode;

use ar_client::Client;
use ar_config::env::{self, process_env};

pub use agents::AgentsArgs;
pub use runs::RunsArgs;

/// Where the service is and how to talk to it (shared by every client command).
#[derive(Debug, clap::Args)]
pub struct Remote {
    /// The service's base URL [env: AGENT_RUNTIME_URL; default: http://127.0.0.1:8090].
    #[arg(long, global = true)]
    url: Option<String>,
    /// The app to work in [env: AGENT_RUNTIME_APP_ID].
    #[arg(long, global = true)]
    app: Option<String>,
    /// A file holding the service token (when AGENT_RUNTIME_SERVICE_TOKEN is not set; default:
    /// the token `serve` generated in its data directory, if there is one).
    #[arg(long, global = true)]
    token_file: Option<PathBuf>,
    /// Print JSON (one document, or one event per line) instead of text.
    #[arg(long, global = true)]
    json: bool,
}

/// What the process's exit status says. Documented in the README ("The CLI").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Done; for `watch` and `start --watch`, the run completed.
    Ok = 0,
    /// Anything else: an answer that could not be read, a file that could not be read.
    Error = 1,
    /// The command line was wrong (clap's own code too).
    Usage = 2,
    /// The agent or run does not exist (404).
    NotFound = 3,
    /// The service refused the request (another 4xx): bad input, a run in the wrong state.
    Refused = 4,
    /// The token was missing or wrong (401, 403).
    Unauthorized = 5,
    /// The service could not be reached or failed (connection, timeout, 5xx).
    Unavailable = 6,
    /// The run failed.
    RunFailed = 7,
    /// The run was cancelled.
    RunCancelled = 8,
    /// The run is paused waiting for someone (`watch --exit-on-pause`).
    RunPaused = 9,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit as u8)
    }
}

/// A failed command: what to say and how to exit.
#[derive(Debug)]
pub struct Failure {
    exit: Exit,
    message: String,
}

impl Failure {
    fn new(exit: Exit, message: impl Into<String>) -> Self {
        Self {
            exit,
            message: message.into(),
        }
    }
}

impl From<ar_client::Error> for Failure {
    fn from(error: ar_client::Error) -> Self {
        let exit = match &error {
            ar_client::Error::Status(status) => match status.status {
                404 => Exit::NotFound,
                401 | 403 => Exit::Unauthorized,
                400..=499 => Exit::Refused,
                _ => Exit::Unavailable,
            },
            ar_client::Error::Transport { .. } | ar_client::Error::StreamGaveUp { .. } => {
                Exit::Unavailable
            }
            _ => Exit::Error,
        };
        let message = match error.http_status() {
            Some(status) => format!(
                "{} {} answered {}: {}",
                status.method,
                status.path,
                status.status,
                status.message()
            ),
            None => error.to_string(),
        };
        Failure::new(exit, message)
    }
}

type Outcome = Result<Exit, Failure>;

impl Remote {
    /// The client the flags and the environment describe.
    fn client(&self) -> Result<Client, Failure> {
        let url = self
            .url
            .clone()
            .or_else(|| process_env(env::URL.name))
            .or_else(|| env::URL.default.map(str::to_string))
            .unwrap_or_default();
        let app = self
            .app
            .clone()
            .or_else(|| process_env(env::APP_ID.name))
            .filter(|app| !app.trim().is_empty())
            .ok_or_else(|| {
                Failure::new(
                    Exit::Usage,
                    format!("no app: give --app or set {}", env::APP_ID.name),
                )
            })?;
        let mut builder = Client::builder(url).app_id(app);
        if let Some(token) = self.token()? {
            builder = builder.service_token(token);
        }
        builder
            .build()
            .map_err(|error| Failure::new(Exit::Usage, error.to_string()))
    }

    /// `AGENT_RUNTIME_SERVICE_TOKEN`, else `--token-file`, else the token `serve` generated.
    fn token(&self) -> Result<Option<String>, Failure> {
        if let Some(token) = process_env(env::SERVICE_TOKEN.name).filter(|t| !t.trim().is_empty()) {
            return Ok(Some(token));
        }
        if let Some(path) = &self.token_file {
            let text = std::fs::read_to_string(path).map_err(|error| {
                Failure::new(
                    Exit::Usage,
                    format!("token file {}: {error}", path.display()),
                )
            })?;
            let token = text.trim();
            if token.is_empty() {
                let message = format!("token file {} is empty", path.display());
                return Err(Failure::new(Exit::Usage, message));
            }
            return Ok(Some(token.to_string()));
        }
        let store = env::store_settings(process_env);
        let generated = env::data_dir(&store, process_env).join(env::GENERATED_TOKEN_FILE);
        Ok(std::fs::read_to_string(generated)
            .ok()
            .map(|text| text.trim().to_string())
            .filter(|token| !token.is_empty()))
    }
}

/// Runs a client command and turns its outcome into the exit status, saying why on stderr.
async fn finish(json: bool, outcome: impl std::future::Future<Output = Outcome>) -> ExitCode {
    match outcome.await {
        Ok(exit) => exit.into(),
        Err(failure) => {
            if json {
                let body =
                    serde_json::json!({"error": failure.message, "exit": failure.exit as u8});
                eprintln!("{body}");
            } else {
                eprintln!("error: {}", failure.message);
            }
            failure.exit.into()
        }
    }
}

/// `agent-runtime agents …`.
pub async fn agents(args: AgentsArgs) -> ExitCode {
    let json = args.remote.json;
    finish(json, agents::run(args)).await
}

/// `agent-runtime runs …`.
pub async fn runs(args: RunsArgs) -> ExitCode {
    let json = args.remote.json;
    finish(json, runs::run(args)).await
}
