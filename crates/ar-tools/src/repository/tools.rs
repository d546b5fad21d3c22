//! The git tools of a run in a repository workspace: `list_commits` (read), `create_branch`,
//! `commit_and_push` and `open_pr` (mutating, so the approval gate sees them; the two that
//! deliver are refused in preview delivery and in a read-only workspace).

use std::path::PathBuf;

use ar_core::tool::{ToolDefinition, ToolOutput};
use ar_core::workspace::{RunToolHost, WorkspaceAccess, WorkspaceLease, WorkspaceRun};
use ar_core::RiskLevel;
use async_trait::async_trait;
use serde_json::{json, Value};

use super::{commit_all, git, recorded_spec, GitAuth, RepositoryWorkspaces};

/// Most commits `list_commits` returns.
const MAX_COMMITS: u64 = 200;

/// The git tools over one checkout.
pub(crate) struct GitTools {
    provider: RepositoryWorkspaces,
    run: WorkspaceRun,
    dir: PathBuf,
    base_branch: String,
    preview: bool,
    access: WorkspaceAccess,
}

fn def(name: &str, description: &str, risk: Option<RiskLevel>, schema: Value) -> ToolDefinition {
    ToolDefinition {
        name: name.to_string(),
        description: description.to_string(),
        category: "Workspace".to_string(),
        input_schema: schema,
        mutating: risk.is_some(),
        risk_level: risk,
        supported_target_types: Vec::new(),
    }
}

fn text(input: &Value, key: &str) -> String {
    input
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim()
        .to_string()
}

impl GitTools {
    pub(crate) fn new(
        provider: RepositoryWorkspaces,
        run: WorkspaceRun,
        lease: &WorkspaceLease,
        access: WorkspaceAccess,
    ) -> Self {
        let spec = recorded_spec(lease);
        let preview = spec.metadata.get("delivery_mode").and_then(Value::as_str) == Some("preview");
        GitTools {
            provider,
            run,
            dir: PathBuf::from(&lease.root_path),
            base_branch: spec.base_branch,
            preview,
            access,
        }
    }

    async fn git(&self, args: &[&str]) -> Result<String, String> {
        git::run(&self.dir, &GitAuth::default(), args)
            .await
            .map_err(|e| e.to_string())
    }

    async fn list_commits(&self, input: &Value) -> Result<Value, String> {
        let limit = input
            .get("limit")
            .and_then(Value::as_u64)
            .unwrap_or(50)
            .clamp(1, MAX_COMMITS);
        let count = format!("--max-count={limit}");
        let mut args = vec![
            "log".to_string(),
            "--format=%H%x1f%an%x1f%ae%x1f%aI%x1f%s".into(),
            count,
        ];
        for (key, flag) in [("since", "--since"), ("until", "--until")] {
            let value = text(input, key);
            if !value.is_empty() {
                args.push(format!("{flag}={value}"));
            }
        }
        let branch = text(input, "branch");
        if branch.starts_with('-') {
            return Err("branch must not start with '-'".into());
        }
        if !branch.is_empty() {
            args.push(branch);
        }
        args.push("--".into());
        let path = text(input, "path");
        if !path.is_empty() {
            args.push(path);
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.git(&refs).await?;
        let commits: Vec<Value> = out
            .lines()
            .filter_map(|line| {
                let f: Vec<&str> = line.split('\u{1f}').collect();
                (f.len() == 5).then(|| json!({"sha": f[0], "author": f[1], "email": f[2], "date": f[3], "subject": f[4]}))
            })
            .collect();
        Ok(json!({ "commits": commits }))
    }

    async fn create_branch(&self, input: &Value) -> Result<Value, String> {
        let name = text(input, "name");
        self.git(&["check-ref-format", "--branch", &name])
            .await
            .map_err(|_| format!("{name:?} is not a valid branch name"))?;
        let from = text(input, "from");
        let mut args = vec!["checkout", "--quiet", "-b", name.as_str()];
        if !from.is_empty() {
            if from.starts_with('-') {
                return Err("from must not start with '-'".into());
            }
            args.push(from.as_str());
        }
        self.git(&args).await?;
        Ok(json!({ "branch": name }))
    }

    fn deliverable(&self, tool: &str) -> Result<(), String> {
        if self.preview {
            return Err(format!(
                "{tool} is blocked: this run's delivery is a preview"
            ));
        }
        if self.access == WorkspaceAccess::ReadOnly {
            return Err(format!("{tool} is not available in a read-only workspace"));
        }
        Ok(())
    }

    async fn current_branch(&self) -> Result<String, String> {
        let branch = self.git(&["branch", "--show-current"]).await?;
        let branch = branch.trim().to_string();
        if branch.is_empty() {
            return Err("the checkout is on a detached HEAD; create a branch first".into());
        }
        Ok(branch)
    }

    async fn commit_and_push(&self, input: &Value) -> Result<Value, String> {
        self.deliverable("commit_and_push")?;
        let message = text(input, "message");
        if message.is_empty() {
            return Err("message is required".into());
        }
        let commit = commit_all(&self.dir, &message)
            .await
            .map_err(|e| e.to_string())?;
        let branch = self.current_branch().await?;
        let spec = self
            .provider
            .fresh_spec(&self.run)
            .await
            .map_err(|e| e.to_string())?;
        let auth = GitAuth::from_spec(spec.auth.as_ref());
        let refspec = format!("HEAD:refs/heads/{branch}");
        git::run(&self.dir, &auth, &["push", "--quiet", "origin", &refspec])
            .await
            .map_err(|e| e.to_string())?;
        Ok(json!({"branch": branch, "commit": commit, "pushed": true}))
    }

    async fn open_pr(&self, input: &Value) -> Result<Value, String> {
        self.deliverable("open_pr")?;
        let title = text(input, "title");
        if title.is_empty() {
            return Err("title is required".into());
        }
        let branch = self.current_branch().await?;
        let mut spec = self
            .provider
            .fresh_spec(&self.run)
            .await
            .map_err(|e| e.to_string())?;
        let base = text(input, "base");
        spec.base_branch = if base.is_empty() {
            self.base_branch.clone()
        } else {
            base
        };
        self.provider
            .github(&spec)
            .open_pr(&spec, &branch, &title)
            .await
            .map_err(|e| e.to_string())
    }
}

#[async_trait]
impl RunToolHost for GitTools {
    fn definitions(&self) -> Vec<ToolDefinition> {
        let mut tools = vec![def(
            "list_commits",
            "List commits of the repository (newest first).",
            None,
            json!({"type": "object", "properties": {
                "branch": {"type": "string"}, "since": {"type": "string"}, "until": {"type": "string"},
                "path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": MAX_COMMITS}}}),
        )];
        if self.access == WorkspaceAccess::ReadOnly {
            return tools;
        }
        tools.push(def(
            "create_branch",
            "Create a branch (from the current HEAD or `from`) and switch to it.",
            Some(RiskLevel::RoutineMutation),
            json!({"type": "object", "properties": {"name": {"type": "string"}, "from": {"type": "string"}}, "required": ["name"]}),
        ));
        tools.push(def(
            "commit_and_push",
            "Commit every change of the checkout with `message` and push the current branch.",
            Some(RiskLevel::SensitiveMutation),
            json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
        ));
        tools.push(def(
            "open_pr",
            "Open a pull request of the current (pushed) branch into the base branch.",
            Some(RiskLevel::SensitiveMutation),
            json!({"type": "object", "properties": {"title": {"type": "string"}, "body": {"type": "string"}, "base": {"type": "string"}}, "required": ["title"]}),
        ));
        tools
    }

    async fn call(&self, name: &str, input: Value) -> ToolOutput {
        let result = match name {
            "list_commits" => self.list_commits(&input).await,
            "create_branch" if self.access == WorkspaceAccess::ReadWrite => {
                self.create_branch(&input).await
            }
            "commit_and_push" => self.commit_and_push(&input).await,
            "open_pr" => self.open_pr(&input).await,
            other => Err(format!("{other:?} is not a git tool of this workspace")),
        };
        match result {
            Ok(value) => ToolOutput {
                content: value.to_string(),
                structured: Some(value),
                is_error: false,
            },
            Err(message) => ToolOutput::error(message),
        }
    }
}
