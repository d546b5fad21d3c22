//! The `git` CLI through `ar-process`: one command in a directory, bounded in time, with the
//! repository's credentials handed over in the environment (`GIT_CONFIG_COUNT` /
//! `GIT_CONFIG_KEY_n` / `GIT_CONFIG_VALUE_n`), so they reach neither the command line nor
//! `.git/config`.

use std::path::Path;
use std::time::Duration;

use ar_process::{EnvPolicy, ProcessSpec};
use ar_wire::host::RepositoryAuth;
use base64::Engine as _;

/// Why a git command failed (its stderr tail included; no credential is ever in it).
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("git {command} could not start: {source}")]
    Start {
        command: String,
        #[source]
        source: ar_process::ProcessError,
    },
    #[error("git {command} timed out after {seconds}s")]
    Timeout { command: String, seconds: u64 },
    #[error("git {command} failed (exit {code}): {stderr}")]
    Failed {
        command: String,
        code: i32,
        stderr: String,
    },
}

/// The credentials of one repository for git, as configuration given in the environment.
#[derive(Clone, Default)]
pub struct GitAuth {
    header: Option<String>,
    env: Vec<(String, String)>,
}

impl std::fmt::Debug for GitAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitAuth")
            .field("header", &self.header.as_ref().map(|_| "[redacted]"))
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .finish()
    }
}

impl GitAuth {
    /// `token` → HTTP basic with the token as password (what GitHub and GitLab accept for
    /// git over HTTPS); `basic` → username and password; `extra_header` → that header line.
    pub fn from_spec(auth: Option<&RepositoryAuth>) -> Self {
        let Some(auth) = auth else {
            return GitAuth::default();
        };
        let basic = |user: &str, password: &str| {
            let pair =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            format!("Authorization: Basic {pair}")
        };
        let header = if !auth.extra_header.is_empty() {
            Some(auth.extra_header.clone())
        } else if !auth.password.is_empty() {
            Some(basic(&auth.username, &auth.password))
        } else if !auth.token.is_empty() {
            let user = if auth.username.is_empty() {
                "x-access-token"
            } else {
                &auth.username
            };
            Some(basic(user, &auth.token))
        } else {
            None
        };
        let env = auth
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        GitAuth { header, env }
    }

    /// The secret values, for the caller's redactor.
    pub fn secrets(&self) -> Vec<String> {
        self.header
            .iter()
            .cloned()
            .chain(self.env.iter().map(|(_, v)| v.clone()))
            .collect()
    }

    fn environment(&self) -> EnvPolicy {
        let mut env = EnvPolicy::standard()
            .with("GIT_TERMINAL_PROMPT", "0")
            .with("GIT_ASKPASS", "/bin/false");
        if let Some(header) = &self.header {
            env = env
                .with("GIT_CONFIG_COUNT", "1")
                .with("GIT_CONFIG_KEY_0", "http.extraHeader")
                .with("GIT_CONFIG_VALUE_0", header.clone());
        }
        for (key, value) in &self.env {
            env = env.with(key.clone(), value.clone());
        }
        env
    }
}

/// How long one git command may take (a clone of a large repository included).
pub const GIT_TIMEOUT: Duration = Duration::from_secs(600);

/// Runs `git args` in `dir`; its stdout on success.
pub async fn run(dir: &Path, auth: &GitAuth, args: &[&str]) -> Result<String, GitError> {
    let command = args.first().copied().unwrap_or_default().to_string();
    let spec = ProcessSpec::new("git", dir)
        .args(args.iter().copied())
        .env(auth.environment());
    let mut child = ar_process::spawn(&spec).map_err(|source| GitError::Start {
        command: command.clone(),
        source,
    })?;
    let stdout = child.take_stdout();
    let tail = child.stderr_tail();
    let work = async {
        let mut out = String::new();
        if let Some(mut lines) = stdout {
            while let Ok(Some(line)) = lines.next_line().await {
                out.push_str(&line.text);
                out.push('\n');
            }
        }
        (out, child.wait().await)
    };
    let (out, exit) = match tokio::time::timeout(GIT_TIMEOUT, work).await {
        Ok(done) => done,
        // Dropping the child kills its process group.
        Err(_) => {
            return Err(GitError::Timeout {
                command,
                seconds: GIT_TIMEOUT.as_secs(),
            })
        }
    };
    let exit = exit.map_err(|source| GitError::Start {
        command: command.clone(),
        source,
    })?;
    if exit.success() {
        return Ok(out);
    }
    Err(GitError::Failed {
        command,
        code: exit.code_or_minus_one(),
        stderr: tail.snapshot().chars().take(600).collect(),
    })
}
