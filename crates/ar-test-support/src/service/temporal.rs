//! A Temporal dev server of a test's own: `temporal server start-dev --headless` on a free
//! loopback port with a SQLite file in a temporary directory, killed when its guard drops.
//!
//! The CLI and the server's arguments are [`crate::temporal_dev`]'s. When there is no CLI the
//! test is skipped with a loud message, unless `CI=true`, where that fails.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::binary::ChildGuard;
use super::Env;
use crate::temporal_dev::{cli, start_dev_args};

/// A running dev server.
pub struct TemporalDev {
    /// `127.0.0.1:<port>` of its frontend (what `TEMPORAL_ADDRESS` takes).
    pub address: String,
    /// The CLI, for `temporal workflow …` commands against it.
    pub cli: PathBuf,
    pub process: ChildGuard,
    /// `server start-dev`'s arguments (the same port and file on a restart).
    args: Vec<String>,
    dir: tempfile::TempDir,
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value.eq_ignore_ascii_case("true") || value == "1")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free loopback port")
}

fn spawn(cli: &Path, args: &[String], dir: &Path) -> ChildGuard {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ChildGuard::spawn(cli.to_str().expect("utf-8 path"), &args, &cli_env(dir))
}

/// The environment the CLI runs with (a pyenv shim needs its own variables).
fn cli_env(dir: &Path) -> Env {
    let mut env = Env::new();
    for name in ["PATH", "PYENV_ROOT", "PYENV_VERSION"] {
        if let Ok(value) = std::env::var(name) {
            env.insert(name.to_string(), value);
        }
    }
    env.insert(
        "HOME".to_string(),
        std::env::var("HOME").unwrap_or_else(|_| dir.display().to_string()),
    );
    env
}

impl TemporalDev {
    /// Starts a dev server for `case` and waits (bounded) until its frontend answers. `None`
    /// (after a loud message) when the CLI is missing outside CI.
    pub async fn start(case: &str) -> Option<TemporalDev> {
        let Some(cli) = cli() else {
            let message = "the Temporal CLI is missing (install with .ci/steps/install-temporal.sh or set AR_TEST_TEMPORAL_BIN)";
            if in_ci() {
                panic!("{message}; CI=true: a missing peer fails the suite");
            }
            eprintln!("\n!!!!! SKIPPING {case}: {message}; under CI=true this fails.\n");
            return None;
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let args = start_dev_args(port, &dir.path().join("temporal.db"), "warn");
        let process = spawn(&cli, &args, dir.path());
        let dev = TemporalDev {
            address: format!("127.0.0.1:{port}"),
            cli,
            process,
            args,
            dir,
        };
        dev.wait_ready().await;
        Some(dev)
    }

    /// Kills the server (as a crash or an outage would); its state stays in its file.
    pub fn stop(&mut self) {
        self.process.kill_hard();
    }

    /// Starts the server again on the same port and file, and waits until it answers.
    pub async fn restart(&mut self) {
        self.process = spawn(&self.cli, &self.args, self.dir.path());
        self.wait_ready().await;
    }

    /// Waits until `temporal operator namespace describe default` succeeds (the frontend
    /// answers and the default namespace exists).
    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (ok, _, _) = self
                .command(&[
                    "operator",
                    "namespace",
                    "describe",
                    "--namespace",
                    "default",
                ])
                .await;
            if ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the Temporal dev server at {} did not come up: {}",
                self.address,
                self.process.stderr()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Runs `temporal <args> --address <this server>`; (success, stdout, stderr).
    pub async fn command(&self, args: &[&str]) -> (bool, String, String) {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--address", &self.address]);
        let output = tokio::process::Command::new(&self.cli)
            .args(&all)
            .envs(cli_env(Path::new("/tmp")))
            .env_remove("TEMPORAL_ADDRESS")
            .output()
            .await
            .unwrap_or_else(|error| panic!("running {}: {error}", self.cli.display()));
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// `temporal workflow describe --workflow-id <id> --output json`, parsed.
    pub async fn describe_workflow(&self, workflow_id: &str) -> serde_json::Value {
        let (ok, stdout, stderr) = self
            .command(&[
                "workflow",
                "describe",
                "--workflow-id",
                workflow_id,
                "--output",
                "json",
            ])
            .await;
        assert!(ok, "describe {workflow_id}: {stderr}");
        serde_json::from_str(&stdout).unwrap_or_else(|error| panic!("{error}: {stdout}"))
    }

    /// The events of a workflow's current run, as `temporal workflow show --output json`
    /// prints them.
    pub async fn history(&self, workflow_id: &str) -> serde_json::Value {
        let (ok, stdout, stderr) = self
            .command(&[
                "workflow",
                "show",
                "--workflow-id",
                workflow_id,
                "--output",
                "json",
            ])
            .await;
        assert!(ok, "show {workflow_id}: {stderr}");
        serde_json::from_str(&stdout).unwrap_or_else(|error| panic!("{error}: {stdout}"))
    }
}
