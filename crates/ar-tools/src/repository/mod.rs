//! `RepositoryWorkspaces`: the apps' `repository` workspace providers. The host describes the
//! repository (`POST {base_url}/repository-spec`); the runtime clones it with the real `git`
//! CLI under the app's `root_dir`, checks out the work branch from the base branch with the
//! commit identity, and at a successful finalize delivers by the spec's policy (`none`,
//! `local_commit`, `push_branch`, `open_pr`) before telling the host (`/finalize`, `/cleanup`
//! with the redacted spec).
//!
//! Credentials live only in this process's memory for one git command: they go to git in its
//! environment (`git.rs`), never in the clone URL, `.git/config`, the lease, logs or events;
//! a push asks the host for the spec again instead of keeping them.

pub mod bench;
mod git;
mod github;
mod tools;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ar_config::app::{WorkspaceProvider as ProviderConfig, WorkspaceTransport};
use ar_config::AppConfig;
use ar_core::workspace::{
    CleanupRequest, FinalizeOutcome, FinalizeRequest, FinalizeResult, PrepareRequest,
    WorkspaceError, WorkspaceLease, WorkspaceMode, WorkspaceProvider,
};
use ar_core::JsonMap;
use ar_wire::host::RepositoryWorkspaceSpec;
use async_trait::async_trait;
use serde_json::{json, Value};

pub use git::{GitAuth, GitError};

use crate::http::{self, ToolsError};
use crate::workspaces::{cleanup_body, finalize_body, prepare_body, Endpoint};

const CALL_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone)]
struct RepoApp {
    endpoint: Endpoint,
    root_dir: PathBuf,
}

/// Every app's `repository` workspace provider (cheap to clone: its git tools hold one).
#[derive(Clone)]
pub struct RepositoryWorkspaces {
    client: reqwest::Client,
    apps: std::sync::Arc<HashMap<String, RepoApp>>,
    /// `AGENT_RUNTIME_GITHUB_API_BASE` (default `https://api.github.com`), for `open_pr`.
    github_api: String,
    /// The deployment's GitHub token (`AGENT_RUNTIME_GITHUB_TOKEN|GITHUB_TOKEN|GH_TOKEN`),
    /// for REST calls whose spec's auth carries no token.
    github_token: Option<ar_core::secret::Secret>,
}

impl std::fmt::Debug for RepositoryWorkspaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut apps: Vec<_> = self.apps.keys().collect();
        apps.sort();
        f.debug_struct("RepositoryWorkspaces")
            .field("apps", &apps)
            .finish_non_exhaustive()
    }
}

fn failed(step: &'static str, reason: impl std::fmt::Display) -> WorkspaceError {
    WorkspaceError::Repository {
        step,
        reason: reason.to_string(),
    }
}

/// The spec as it may be recorded: every credential dropped, the auth type kept.
pub fn redacted(spec: &RepositoryWorkspaceSpec) -> RepositoryWorkspaceSpec {
    let mut spec = spec.clone();
    spec.auth = spec.auth.map(|auth| ar_wire::host::RepositoryAuth {
        auth_type: auth.auth_type,
        username: auth.username,
        ..Default::default()
    });
    spec
}

/// Refuses a clone URL git would record with credentials in `.git/config`.
fn check_clone_url(url: &str) -> Result<(), WorkspaceError> {
    let bad = |reason: &str| WorkspaceError::BadAnswer {
        step: "repository-spec",
        reason: reason.to_string(),
    };
    if url.trim().is_empty() {
        return Err(bad("clone_url is required"));
    }
    if url.starts_with('-') {
        return Err(bad("clone_url must not start with '-'"));
    }
    if let Ok(parsed) = reqwest::Url::parse(url) {
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(bad(
                "clone_url must not contain credentials; send them in auth",
            ));
        }
    }
    Ok(())
}

impl RepositoryWorkspaces {
    /// The providers of every app that configures the `repository` transport.
    pub fn from_app_config(
        config: &AppConfig,
        github_api: Option<&str>,
    ) -> Result<Self, ToolsError> {
        let mut workspaces = RepositoryWorkspaces {
            client: http::client()?,
            apps: std::sync::Arc::default(),
            github_api: github_api
                .unwrap_or(github::DEFAULT_API_BASE)
                .trim_end_matches('/')
                .to_string(),
            github_token: None,
        };
        for (app_id, app) in &config.apps {
            if let Some(provider) = &app.workspace_provider {
                workspaces.add(app_id, provider);
            }
        }
        Ok(workspaces)
    }

    /// The deployment's GitHub token, used when a spec's auth carries none.
    pub fn with_github_token(mut self, token: Option<ar_core::secret::Secret>) -> Self {
        self.github_token = token.filter(|token| !token.expose().is_empty());
        self
    }

    /// The GitHub API client of `spec`: its own token, else the deployment's.
    fn github<'a>(&'a self, spec: &'a RepositoryWorkspaceSpec) -> github::GitHub<'a> {
        let own = spec.auth.as_ref().map(|auth| auth.token.as_str());
        let token = own
            .filter(|token| !token.is_empty())
            .or(self.github_token.as_ref().map(|token| token.expose()));
        github::GitHub {
            client: &self.client,
            api: &self.github_api,
            token: token.unwrap_or_default(),
        }
    }

    /// Registers an app's provider; the `http` transport is served elsewhere.
    pub fn add(&mut self, app_id: &str, provider: &ProviderConfig) {
        let (WorkspaceTransport::Repository, Some(root_dir)) =
            (provider.transport, provider.root_dir.as_ref())
        else {
            return;
        };
        let app = RepoApp {
            endpoint: Endpoint::new(provider),
            root_dir: root_dir.clone(),
        };
        std::sync::Arc::make_mut(&mut self.apps).insert(app_id.to_string(), app);
    }

    pub fn is_empty(&self) -> bool {
        self.apps.is_empty()
    }

    fn app(&self, app_id: &str) -> Result<&RepoApp, WorkspaceError> {
        self.apps.get(app_id).ok_or(WorkspaceError::NoProvider {
            app_id: app_id.to_string(),
            mode: WorkspaceMode::Repository.as_str(),
        })
    }

    async fn spec(
        &self,
        request: &PrepareRequest,
    ) -> Result<RepositoryWorkspaceSpec, WorkspaceError> {
        let app = self.app(&request.run.app_id)?;
        let body = prepare_body(request);
        let spec: RepositoryWorkspaceSpec = app
            .endpoint
            .post(&self.client, "repository-spec", CALL_TIMEOUT, &body)
            .await?;
        check_clone_url(&spec.clone_url)?;
        Ok(spec)
    }

    /// The checkout of one run: `root_dir/{app_id}/{run_id}`.
    fn checkout_dir(app: &RepoApp, request: &PrepareRequest) -> Result<PathBuf, WorkspaceError> {
        let safe = |part: &str| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                && part != "."
                && part != ".."
        };
        if !safe(&request.run.app_id) || !safe(&request.run.run_id) {
            return Err(failed("clone", "app and run ids must be plain names"));
        }
        Ok(app
            .root_dir
            .join(&request.run.app_id)
            .join(&request.run.run_id))
    }
}

/// What the lease records of a checkout (no secret: the spec is redacted).
fn lease_of(
    spec: &RepositoryWorkspaceSpec,
    dir: &Path,
    run_id: &str,
    base_commit: &str,
) -> WorkspaceLease {
    let preview = spec.metadata.get("delivery_mode").and_then(Value::as_str) == Some("preview");
    let mut metadata = JsonMap::new();
    metadata.insert("repository_spec".into(), json!(redacted(spec)));
    metadata.insert("work_branch".into(), json!(work_branch(spec, run_id)));
    metadata.insert("base_branch".into(), json!(spec.base_branch));
    metadata.insert("base_commit".into(), json!(base_commit));
    WorkspaceLease {
        id: format!("repo_{run_id}"),
        provider: if spec.provider.is_empty() {
            "repository".into()
        } else {
            spec.provider.clone()
        },
        root_path: dir.to_string_lossy().into_owned(),
        cleanup_policy: if preview {
            "manual".into()
        } else {
            String::new()
        },
        metadata,
    }
}

fn work_branch(spec: &RepositoryWorkspaceSpec, run_id: &str) -> String {
    if spec.work_branch.is_empty() {
        format!("agent-runtime/{run_id}")
    } else {
        spec.work_branch.clone()
    }
}

/// Clones `spec` into `dir`, on the work branch from the base branch, with the identity.
async fn clone_into(
    spec: &RepositoryWorkspaceSpec,
    dir: &Path,
    run_id: &str,
) -> Result<String, WorkspaceError> {
    let auth = GitAuth::from_spec(spec.auth.as_ref());
    let parent = dir
        .parent()
        .ok_or_else(|| failed("clone", "checkout has no parent"))?;
    std::fs::create_dir_all(parent).map_err(|e| failed("clone", e))?;
    let target = dir.to_string_lossy().into_owned();
    let mut args = vec!["clone", "--quiet"];
    if !spec.base_branch.is_empty() {
        args.extend(["--branch", spec.base_branch.as_str()]);
    }
    args.extend(["--", spec.clone_url.as_str(), target.as_str()]);
    git::run(parent, &auth, &args)
        .await
        .map_err(|e| failed("clone", e))?;
    let none = GitAuth::default();
    let branch = work_branch(spec, run_id);
    git::run(dir, &none, &["checkout", "--quiet", "-B", &branch])
        .await
        .map_err(|e| failed("checkout", e))?;
    let identity = spec.commit_identity.clone().unwrap_or_default();
    let name = if identity.name.is_empty() {
        "Agent Runtime"
    } else {
        &identity.name
    };
    let email = if identity.email.is_empty() {
        "agent-runtime@localhost"
    } else {
        &identity.email
    };
    for (key, value) in [("user.name", name), ("user.email", email)] {
        git::run(dir, &none, &["config", key, value])
            .await
            .map_err(|e| failed("identity", e))?;
    }
    let head = git::run(dir, &none, &["rev-parse", "HEAD"])
        .await
        .map_err(|e| failed("clone", e))?;
    Ok(head.trim().to_string())
}

#[async_trait]
impl WorkspaceProvider for RepositoryWorkspaces {
    fn supports(&self, app_id: &str, mode: WorkspaceMode) -> bool {
        mode == WorkspaceMode::Repository && self.apps.contains_key(app_id)
    }

    async fn prepare(&self, request: &PrepareRequest) -> Result<WorkspaceLease, WorkspaceError> {
        let app = self.app(&request.run.app_id)?;
        let spec = self.spec(request).await?;
        let dir = Self::checkout_dir(app, request)?;
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| failed("clone", e))?;
        }
        match clone_into(&spec, &dir, &request.run.run_id).await {
            Ok(base) => Ok(lease_of(&spec, &dir, &request.run.run_id, &base)),
            Err(error) => {
                // Nothing half-done: a partial checkout is removed.
                let _ = std::fs::remove_dir_all(&dir);
                Err(error)
            }
        }
    }

    async fn finalize(&self, request: &FinalizeRequest) -> Result<FinalizeResult, WorkspaceError> {
        let app = self.app(&request.run.app_id)?;
        let spec = recorded_spec(&request.lease);
        let mut summary = JsonMap::new();
        if request.outcome == FinalizeOutcome::Completed {
            let delivered = self.deliver(request, &spec).await?;
            summary.insert("repository".into(), delivered);
        }
        let mut output_summary = request.output_summary.clone();
        output_summary.extend(summary.clone());
        let body = finalize_body(request, Some(spec), output_summary);
        let answer: ar_wire::host::FinalizeWorkspaceResult = app
            .endpoint
            .post(&self.client, "finalize", CALL_TIMEOUT, &body)
            .await?;
        if let Some(Value::Object(host)) = answer.output_summary {
            summary.extend(host);
        }
        Ok(FinalizeResult {
            output_summary: summary,
            metadata: answer.metadata,
        })
    }

    async fn observe(
        &self,
        _run: &ar_core::workspace::WorkspaceRun,
        lease: &WorkspaceLease,
    ) -> Option<JsonMap> {
        let head = checkout_head(Path::new(&lease.root_path)).await.ok()?;
        let mut observed = JsonMap::new();
        match head {
            Head::Branch(branch) => {
                observed.insert("work_branch".into(), json!(branch));
                observed.insert("detached_head".into(), json!(false));
            }
            Head::Detached(commit) => {
                observed.insert("detached_head".into(), json!(true));
                observed.insert("head_commit".into(), json!(commit));
            }
        }
        Some(observed)
    }

    async fn validate(
        &self,
        _run: &ar_core::workspace::WorkspaceRun,
        _mode: WorkspaceMode,
        lease: &WorkspaceLease,
    ) -> Result<(), WorkspaceError> {
        validate_checkout(lease).await
    }

    fn tools(
        &self,
        run: &ar_core::workspace::WorkspaceRun,
        lease: &WorkspaceLease,
        access: ar_core::workspace::WorkspaceAccess,
    ) -> Option<std::sync::Arc<dyn ar_core::workspace::RunToolHost>> {
        let tools = tools::GitTools::new(self.clone(), run.clone(), lease, access);
        Some(std::sync::Arc::new(tools))
    }

    async fn cleanup(&self, request: &CleanupRequest) -> Result<(), WorkspaceError> {
        let app = self.app(&request.run.app_id)?;
        let dir = PathBuf::from(&request.lease.root_path);
        // Only a checkout this provider made is removed.
        if dir.starts_with(&app.root_dir) && dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| failed("cleanup", e))?;
        }
        let body = cleanup_body(request, Some(recorded_spec(&request.lease)));
        let _: Value = app
            .endpoint
            .post(&self.client, "cleanup", CALL_TIMEOUT, &body)
            .await?;
        Ok(())
    }
}

/// Where a checkout's HEAD is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Head {
    Branch(String),
    /// Detached at this commit.
    Detached(String),
}

async fn checkout_head(dir: &Path) -> Result<Head, GitError> {
    let none = GitAuth::default();
    let branch = git::run(dir, &none, &["branch", "--show-current"]).await?;
    let branch = branch.trim();
    if !branch.is_empty() {
        return Ok(Head::Branch(branch.to_string()));
    }
    let commit = git::run(dir, &none, &["rev-parse", "HEAD"]).await?;
    Ok(Head::Detached(commit.trim().to_string()))
}

/// A recorded checkout can be used again when its root is still a git checkout of the
/// recorded remote, on the recorded branch (or detached, when the lease says it is).
async fn validate_checkout(lease: &WorkspaceLease) -> Result<(), WorkspaceError> {
    let gone = |reason: String| WorkspaceError::Root {
        root: lease.root_path.clone(),
        reason,
    };
    let dir = Path::new(&lease.root_path);
    if !dir.is_dir() {
        return Err(gone("it no longer exists".into()));
    }
    let none = GitAuth::default();
    let top = git::run(dir, &none, &["rev-parse", "--show-toplevel"])
        .await
        .map_err(|_| gone("it is not a git checkout".into()))?;
    if std::fs::canonicalize(top.trim()).ok() != std::fs::canonicalize(dir).ok() {
        return Err(gone("it is not the top of a git checkout".into()));
    }
    let spec = recorded_spec(lease);
    let origin = git::run(dir, &none, &["remote", "get-url", "origin"])
        .await
        .unwrap_or_default();
    if !spec.clone_url.is_empty() && origin.trim() != spec.clone_url {
        return Err(gone("its origin is not the recorded repository".into()));
    }
    let text = |key: &str| lease.metadata.get(key).and_then(Value::as_str);
    let detached = lease.metadata.get("detached_head") == Some(&Value::Bool(true));
    let head = checkout_head(dir)
        .await
        .map_err(|error| gone(error.to_string()))?;
    match head {
        Head::Branch(branch) if detached => Err(gone(format!(
            "it is on branch {branch}, the run left it detached"
        ))),
        Head::Branch(branch) => match text("work_branch") {
            Some(recorded) if recorded != branch => Err(gone(format!(
                "it is on branch {branch}, not the run's {recorded}"
            ))),
            _ => Ok(()),
        },
        Head::Detached(_) if !detached => Err(gone(format!(
            "its HEAD is detached, not on the run's branch {}",
            text("work_branch").unwrap_or_default()
        ))),
        Head::Detached(_) => Ok(()),
    }
}

/// The redacted spec the lease recorded.
fn recorded_spec(lease: &WorkspaceLease) -> RepositoryWorkspaceSpec {
    lease
        .metadata
        .get("repository_spec")
        .and_then(|value| serde_json::from_value(value.clone()).ok())
        .unwrap_or_default()
}

impl RepositoryWorkspaces {
    /// Delivery at a successful finalize, by the spec's policy; what was done, for the summary.
    async fn deliver(
        &self,
        request: &FinalizeRequest,
        spec: &RepositoryWorkspaceSpec,
    ) -> Result<Value, WorkspaceError> {
        let dir = PathBuf::from(&request.lease.root_path);
        let meta = &request.lease.metadata;
        let text = |key: &str| {
            meta.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let (branch, base_commit) = (text("work_branch"), text("base_commit"));
        let preview = spec.metadata.get("delivery_mode").and_then(Value::as_str) == Some("preview");
        let policy = if preview {
            "none"
        } else {
            spec.finalize_policy.as_str()
        };
        let mut done = json!({"finalize_policy": policy, "work_branch": branch});
        if matches!(policy, "" | "none") {
            return Ok(done);
        }
        let message = spec
            .metadata
            .get("commit_message")
            .and_then(Value::as_str)
            .map_or_else(
                || format!("Agent run {}", request.run.run_id),
                str::to_string,
            );
        let commit = commit_all(&dir, &message).await?;
        done["commit"] = json!(commit);
        let head = git::run(&dir, &GitAuth::default(), &["rev-parse", "HEAD"])
            .await
            .map_err(|e| failed("commit", e))?;
        let changed = head.trim() != base_commit;
        done["changed"] = json!(changed);
        if policy == "local_commit" || !changed {
            // No remote branch when nothing changed.
            return Ok(done);
        }
        let fresh = self.fresh_spec(&request.run).await?;
        let auth = GitAuth::from_spec(fresh.auth.as_ref());
        let refspec = format!("HEAD:refs/heads/{branch}");
        git::run(&dir, &auth, &["push", "--quiet", "origin", &refspec])
            .await
            .map_err(|e| failed("push", e))?;
        done["pushed"] = json!(true);
        if policy == "open_pr" {
            let pr = self
                .github(&fresh)
                .open_pr(&fresh, &branch, &message)
                .await?;
            done["pull_request"] = pr;
        }
        Ok(done)
    }

    /// The spec asked for again, for the credentials of a push (never kept between calls).
    async fn fresh_spec(
        &self,
        run: &ar_core::workspace::WorkspaceRun,
    ) -> Result<RepositoryWorkspaceSpec, WorkspaceError> {
        let prepare = PrepareRequest {
            run: run.clone(),
            target_context: None,
            instructions: String::new(),
            trigger: JsonMap::new(),
            metadata: JsonMap::new(),
            mode: WorkspaceMode::Repository,
            execution_config: None,
        };
        self.spec(&prepare).await
    }
}

/// Commits every change of the checkout; the new commit's id, or `None` when nothing changed.
async fn commit_all(dir: &Path, message: &str) -> Result<Option<String>, WorkspaceError> {
    let none = GitAuth::default();
    git::run(dir, &none, &["add", "--all"])
        .await
        .map_err(|e| failed("commit", e))?;
    let status = git::run(dir, &none, &["status", "--porcelain"])
        .await
        .map_err(|e| failed("commit", e))?;
    if status.trim().is_empty() {
        return Ok(None);
    }
    git::run(dir, &none, &["commit", "--quiet", "-m", message])
        .await
        .map_err(|e| failed("commit", e))?;
    let head = git::run(dir, &none, &["rev-parse", "HEAD"])
        .await
        .map_err(|e| failed("commit", e))?;
    Ok(Some(head.trim().to_string()))
}

#[cfg(test)]
mod tests;
