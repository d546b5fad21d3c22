//! `Opener`: the engine's `WorkspaceOpener` port over [`WorkspaceTools`], so the engine builds
//! a run's workspace tools from its lease without knowing this crate.

use std::sync::Arc;

use ar_core::tool::{ToolDefinition, ToolOutput};
use ar_core::workspace::{
    self as port, OpenOptions, RunToolHost, WorkspaceAccess, WorkspaceOpener,
};
use async_trait::async_trait;
use serde_json::Value;

use crate::{Access, CommandPolicy, WorkspaceTools};

/// Opens [`WorkspaceTools`] over a lease's root with one command policy for every run.
#[derive(Debug, Clone, Default)]
pub struct Opener {
    policy: CommandPolicy,
}

impl Opener {
    pub fn with_policy(policy: CommandPolicy) -> Self {
        Self { policy }
    }
}

impl WorkspaceOpener for Opener {
    fn open(
        &self,
        root: &str,
        access: WorkspaceAccess,
        options: OpenOptions,
    ) -> Result<Arc<dyn RunToolHost>, port::WorkspaceError> {
        let access = match access {
            WorkspaceAccess::ReadOnly => Access::ReadOnly,
            WorkspaceAccess::ReadWrite => Access::ReadWrite,
        };
        let policy = CommandPolicy {
            deny_git_push: options.deny_git_push,
            ..self.policy.clone()
        };
        let tools = WorkspaceTools::with_policy(root, access, policy).map_err(|error| {
            port::WorkspaceError::Root {
                root: root.to_string(),
                reason: ar_core::error_chain(&error),
            }
        })?;
        Ok(Arc::new(tools))
    }
}

#[async_trait]
impl RunToolHost for WorkspaceTools {
    fn definitions(&self) -> Vec<ToolDefinition> {
        WorkspaceTools::definitions(self)
    }

    async fn call(&self, name: &str, input: Value) -> ToolOutput {
        self.call_tool(name, input).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn opens_an_existing_root_and_refuses_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
        let opener = Opener::default();
        let tools = opener
            .open(
                dir.path().to_str().unwrap(),
                WorkspaceAccess::ReadOnly,
                OpenOptions::default(),
            )
            .expect("an existing root opens");
        assert!(tools.definitions().iter().all(|t| t.name != "write_file"));
        let out = tools
            .call("read_file", serde_json::json!({"path": "a.txt"}))
            .await;
        assert!(!out.is_error && out.content.contains("hello"), "{out:?}");
        let missing = dir.path().join("gone");
        let error = opener
            .open(
                missing.to_str().unwrap(),
                WorkspaceAccess::ReadWrite,
                OpenOptions::default(),
            )
            .err()
            .expect("a missing root is refused");
        assert!(error.to_string().contains("gone"), "{error}");
    }
}
