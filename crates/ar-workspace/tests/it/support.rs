//! Shared fixtures: a workspace root beside an "outside" directory the tools must never
//! reach, and helpers to call tools.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ar_core::tool::ToolOutput;
use ar_workspace::{Access, CommandPolicy, WorkspaceTools};
use serde_json::{json, Value};

/// The text only files outside the root contain.
pub const SECRET: &str = "outside_secret_7f3a";

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub tools: WorkspaceTools,
}

impl Fixture {
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    pub fn outside(&self) -> PathBuf {
        self.dir.path().join("outside")
    }

    pub async fn call(&self, tool: &str, input: Value) -> ToolOutput {
        self.tools.call_tool(tool, input).await
    }

    /// Every file under `outside/` with its content, to compare before and after.
    pub fn outside_snapshot(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        snapshot(&self.outside(), &mut out);
        out.sort();
        out
    }
}

fn snapshot(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            snapshot(&path, out);
        } else {
            out.push((path.clone(), std::fs::read(&path).unwrap_or_default()));
        }
    }
}

/// A policy for tests: system programs only (no toolchain shims), python3 allowed in
/// both modes so the kernel's refusals can be seen.
pub fn test_policy() -> CommandPolicy {
    let mut policy = CommandPolicy {
        path: Some("/usr/local/bin:/usr/bin:/bin".to_string()),
        default_timeout: Duration::from_secs(30),
        ..CommandPolicy::default()
    };
    policy.read_only_programs.push("python3".to_string());
    policy
}

pub fn fixture(access: Access) -> Fixture {
    fixture_with(access, test_policy())
}

pub fn fixture_with(access: Access, policy: CommandPolicy) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.rs"), format!("fn {SECRET}() {{}}\n")).unwrap();
    std::fs::write(
        root.join("src/main.rs"),
        "fn main() {\n    println!(\"hi\");\n}\n",
    )
    .unwrap();
    let tools = WorkspaceTools::with_policy(&root, access, policy).unwrap();
    Fixture { dir, tools }
}

pub fn ok(output: &ToolOutput) -> &str {
    assert!(
        !output.is_error,
        "expected success, got: {}",
        output.content
    );
    &output.content
}

pub fn err(output: &ToolOutput) -> &str {
    assert!(
        output.is_error,
        "expected a tool error, got: {}",
        output.content
    );
    &output.content
}

/// Whether Landlock confines commands here. Missing, the sandbox tests skip with a loud
/// message locally and fail under CI=true.
pub async fn landlock_enforced(fx: &Fixture) -> bool {
    let out = fx
        .call("run_command", json!({"program": "echo", "args": ["probe"]}))
        .await;
    let full = out
        .structured
        .as_ref()
        .and_then(|s| s["sandbox"]["state"].as_str())
        == Some("full");
    if !full {
        let why = format!(
            "Landlock is not fully enforced on this kernel: {}",
            out.content
        );
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{why}");
        }
        eprintln!("SKIPPED (sandbox test): {why}");
    }
    full
}

/// Pids of live processes whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rfind(')')
            .is_some_and(|i| stat[i + 1..].trim_start().starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
            out.push(pid);
        }
    }
    out
}

/// Polls until no process carries `marker` (the kernel needs a moment after SIGKILL).
pub async fn wait_gone(marker: &str) -> Vec<u32> {
    for _ in 0..300 {
        let left = processes_with(marker);
        if left.is_empty() {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    processes_with(marker)
}
