//! Skill packages end to end: the real binary against a host serving what the Python SDK's
//! `create_fastapi_workspace_skill_lookup_router` and `create_fastapi_skill_package_router`
//! serve (ar-test-support's `SkillHost`) and a `host_prepared` workspace. A packaged skill's
//! `SKILL.md` reaches the model's system prompt, its files are staged under the workspace's
//! `.agent-runtime/skills` and read back through `read_skill`, the repository's
//! `.agents/skills` join the run, and a package that fails its checksum fails the run with a
//! message naming the skill, the object and the mismatch.

use std::collections::BTreeMap;

use ar_test_support::mock_provider::{MockProvider, Reply};
use ar_test_support::service::*;
use ar_test_support::skill_host::{sha256_hex, skill_package, workspace_skill, SkillHost};
use ar_test_support::workspace_host::{PrepareAnswer, WorkspaceHost};
use serde_json::{json, Value};

use crate::BIN;

const WS_TOKEN: &str = "workspace-token-skills";
const SKILL_TOKEN: &str = "skill-token-e2e";
const PACKAGE_TOKEN: &str = "package-token-e2e";
const OBJECT_KEY: &str = "ws 1/triage v1.zip";

fn env_with(
    dir: &std::path::Path,
    mock: &MockProvider,
    skills: &SkillHost,
    workspace: Option<&WorkspaceHost>,
) -> BTreeMap<String, String> {
    let mut env = sqlite_env(dir, mock);
    let mut extra = json!({"skill_provider": {
        "transport": "http", "base_url": skills.base_url(), "token": SKILL_TOKEN,
        "package_base_url": skills.package_base_url(), "package_token": PACKAGE_TOKEN,
    }});
    if let Some(host) = workspace {
        extra["workspace_provider"] = json!({"base_url": host.url(), "token": WS_TOKEN});
    }
    env.insert(
        "AGENT_RUNTIME_APP_CONFIG".into(),
        app_config(mock, extra).to_string(),
    );
    env
}

/// The provider's `triage` skill, delivered as a package (checksum and size as declared).
fn packaged_triage(host: &SkillHost) -> Vec<u8> {
    let archive = skill_package(&[
        (
            "triage/SKILL.md",
            "---\nname: triage\ndescription: Triage an issue from the package.\n---\nLabel the issue with one of the labels in scripts/labels.md.",
        ),
        ("triage/scripts/labels.md", "bug, feature, question"),
    ]);
    let mut skill = workspace_skill("sk_1", "triage", "v1", "The provider's own text.");
    skill["package_object_key"] = json!(OBJECT_KEY);
    skill["package_file_name"] = json!("triage.zip");
    skill["package_size"] = json!(archive.len());
    skill["package_checksum"] = json!(sha256_hex(&archive));
    host.add(skill);
    host.add_package(OBJECT_KEY, archive.clone());
    archive
}

fn messages(mock: &MockProvider, index: usize) -> Vec<Value> {
    mock.model_requests()[index].body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn all_text(mock: &MockProvider, index: usize) -> String {
    messages(mock, index)
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

async fn manifest(server: &Server, run_id: &str) -> Value {
    let artifacts = server.list(run_id, "artifacts").await;
    let manifest = artifacts
        .iter()
        .find(|a| a["artifact_type"] == "runtime_skill_manifest")
        .expect("manifest artifact");
    serde_json::from_str(manifest["inline_content"].as_str().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_packaged_skill_is_prompted_staged_and_read_and_repository_skills_join() {
    let mock = MockProvider::start().await;
    let skills = SkillHost::start_with(Some(SKILL_TOKEN), Some(PACKAGE_TOKEN)).await;
    packaged_triage(&skills);
    let roots = tempfile::tempdir().expect("tempdir");
    let workspace = WorkspaceHost::start(Some(WS_TOKEN), roots.path()).await;
    workspace.set_prepare(PrepareAnswer::Directory {
        cleanup_policy: Some("manual".into()),
    });
    workspace.seed(
        ".agents/skills/lint/SKILL.md",
        "---\nname: lint\ndescription: Lint before finishing.\n---\nRun the linter before you finish.",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(BIN, &env_with(dir.path(), &mock, &skills, Some(&workspace))).await;
    let agent = server
        .agent(
            "triager",
            json!({
                "allowed_tools": ["read_file"],
                "skills": [{"key": "triage"}],
                "execution_config": {"workspace": {"mode": "host_prepared", "access": "read_write"}},
            }),
        )
        .await;
    mock.push(Reply::tool_call(
        "read_skill",
        r#"{"key": "triage", "path": "scripts/labels.md"}"#,
    ));
    mock.push(Reply::tool_call("read_skill", r#"{"key": "lint"}"#));
    mock.push(Reply::tool_call(
        "read_skill",
        r#"{"key": "triage", "path": "../../README.md"}"#,
    ));
    mock.push(Reply::text("Labelled: bug"));
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    let done = server.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");

    // The package's SKILL.md, not the provider's text, is in the system prompt.
    let system = messages(&mock, 0)[0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        system.contains("Label the issue with one of the labels in scripts/labels.md."),
        "{system}"
    );
    assert!(!system.contains("The provider's own text."), "{system}");
    assert!(
        all_text(&mock, 1).contains("bug, feature, question"),
        "read_skill read the staged file"
    );
    assert!(
        all_text(&mock, 2).contains("Run the linter before you finish."),
        "the repository skill"
    );
    let refused = all_text(&mock, 3);
    assert!(refused.contains("leads outside the skill"), "{refused}");

    // The staged files are in the workspace, where the manifest says.
    let root = workspace.workspace_of(&run_id);
    let staged = root.join(".agent-runtime/skills");
    assert_eq!(
        std::fs::read_to_string(staged.join("triage/scripts/labels.md")).unwrap(),
        "bug, feature, question"
    );
    assert!(staged.join("lint/SKILL.md").is_file());
    let manifest = manifest(&server, &run_id).await;
    assert_eq!(manifest["staging"]["kind"], "workspace", "{manifest}");
    assert_eq!(manifest["staging"]["root"], staged.to_str().unwrap());
    let triage = &manifest["staging"]["skills"][0];
    assert_eq!(triage["key"], "triage");
    assert_eq!(triage["files"], json!(["SKILL.md", "scripts/labels.md"]));
    let keys: Vec<(&str, &str)> = manifest["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["key"].as_str().unwrap(),
                s["source_kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(keys, [("triage", "workspace"), ("lint", "repository")]);
    assert_eq!(manifest["skills"][0]["packaged"], true);
    assert!(skills
        .package_requests()
        .iter()
        .all(|key| key == OBJECT_KEY));
    assert!(!skills.package_requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_workspace_skills_are_staged_in_a_temp_dir_removed_at_the_end() {
    let mock = MockProvider::start().await;
    let skills = SkillHost::start_with(Some(SKILL_TOKEN), Some(PACKAGE_TOKEN)).await;
    packaged_triage(&skills);
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(BIN, &env_with(dir.path(), &mock, &skills, None)).await;
    let agent = server
        .agent("plain", json!({"skills": [{"key": "triage"}]}))
        .await;
    mock.push(Reply::tool_call(
        "read_skill",
        r#"{"key": "triage", "path": "scripts/labels.md"}"#,
    ));
    mock.push(Reply::text("done"));
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    let done = server.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(all_text(&mock, 1).contains("bug, feature, question"));
    let manifest = manifest(&server, &run_id).await;
    assert_eq!(manifest["staging"]["kind"], "temporary", "{manifest}");
    let staged = std::path::PathBuf::from(manifest["staging"]["root"].as_str().unwrap());
    assert!(
        staged.ends_with(format!("agent-runtime-skills/{run_id}")),
        "{staged:?}"
    );
    wait_for("temporary staging removed", WAIT, || async {
        (!staged.exists()).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_package_failing_its_checksum_is_refused_and_fails_a_resumed_run() {
    let mock = MockProvider::start().await;
    let skills = SkillHost::start_with(Some(SKILL_TOKEN), Some(PACKAGE_TOKEN)).await;
    let archive = packaged_triage(&skills);
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(BIN, &env_with(dir.path(), &mock, &skills, None)).await;
    let extra = json!({"skills": [{"key": "triage"}], "allowed_tools": ["request_approval"]});
    let agent = server.agent("checked", extra).await;
    mock.push(Reply::tool_call(
        "request_approval",
        r#"{"title": "Labels ok?"}"#,
    ));
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    let paused = server
        .wait_status(&run_id, &["paused", "failed", "completed"])
        .await;
    assert_eq!(paused["status"], "paused", "{paused}");

    // The host's store now serves other bytes than the skill declares.
    let mut tampered = archive.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0xff;
    skills.add_package(OBJECT_KEY, tampered);
    let (status, _) = server
        .post(
            &format!("/v1/runs/{run_id}/approve?app_id={APP}"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200);
    let failed = server.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let message = failed["error_message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "workspace skill \"triage\" package \"{OBJECT_KEY}\" cannot be used: checksum mismatch: the provider declared {}",
            sha256_hex(&archive)
        )),
        "{message}"
    );
    assert_eq!(
        mock.model_requests().len(),
        1,
        "no model call without the skill"
    );

    // A new run is refused at admission with the same message.
    let body = json!({
        "app_id": APP, "agent_id": agent, "target": {"type": "ticket", "id": "T-1"},
        "instructions": "x",
        "model": {"provider": "openai_compatible", "model": "mock-model",
                  "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}},
        "model_credential": {"type": "api_key", "api_key": RUN_API_KEY}
    });
    let (status, refused) = server.post("/v1/runs", body).await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused.to_string().contains("checksum mismatch"),
        "{refused}"
    );
}
