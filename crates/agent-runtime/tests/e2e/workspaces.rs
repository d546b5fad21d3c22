//! `host_prepared` workspaces end to end: the real binary against a host serving what the
//! Python SDK's `create_fastapi_workspace_provider_router` serves (ar-test-support's
//! `WorkspaceHost`), and the mock model scripting workspace tool calls. The run's edit lands in
//! the host's directory, finalize's summary is merged into the run's, cleanup follows the
//! lease's policy, and a provider that answers garbage or a root that is not there fails the run
//! with a clear message.

use std::collections::BTreeMap;

use ar_test_support::mock_provider::{MockProvider, Reply};
use ar_test_support::service::*;
use ar_test_support::workspace_host::{PrepareAnswer, WorkspaceHost};
use serde_json::{json, Value};

use crate::BIN;

pub(crate) const WS_TOKEN: &str = "workspace-token-e2e";

pub(crate) fn env_with(
    dir: &std::path::Path,
    mock: &MockProvider,
    host: &WorkspaceHost,
) -> BTreeMap<String, String> {
    let mut env = sqlite_env(dir, mock);
    let extra = json!({"workspace_provider": {"base_url": host.url(), "token": WS_TOKEN}});
    env.insert(
        "AGENT_RUNTIME_APP_CONFIG".into(),
        app_config(mock, extra).to_string(),
    );
    env
}

async fn workspace_agent(server: &Server, id: &str, access: &str, approval: &str) -> String {
    server
        .agent(
            id,
            json!({
                "allowed_tools": ["read_file", "list_directory", "write_file"],
                "approval_mode": approval,
                "execution_config": {"workspace": {"mode": "host_prepared", "access": access}},
            }),
        )
        .await
}

fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default().to_string())
        .collect()
}

async fn wait_event(server: &Server, run_id: &str, kind: &str) -> Vec<Value> {
    wait_for(kind, WAIT, || async {
        let events = server.events(run_id).await;
        types(&events).iter().any(|t| t == kind).then_some(events)
    })
    .await
}

/// A context endpoint answering every target with a summary and data of its own.
async fn context_endpoint() -> String {
    let answer = axum::routing::post(|axum::Json(body): axum::Json<Value>| async move {
        axum::Json(
            json!({"target": body["target"], "summary": "Login broken since Tuesday",
                          "data": {"priority": "high"}}),
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/context", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        axum::serve(listener, axum::Router::new().route("/context", answer)).await
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_edits_the_host_workspace_and_the_host_finalizes_and_cleans_it() {
    let mock = MockProvider::start().await;
    let roots = tempfile::tempdir().expect("tempdir");
    let host = WorkspaceHost::start(Some(WS_TOKEN), roots.path()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = env_with(dir.path(), &mock, &host);
    let extra = json!({"workspace_provider": {"base_url": host.url(), "token": WS_TOKEN},
                       "context_endpoint": context_endpoint().await});
    env.insert(
        "AGENT_RUNTIME_APP_CONFIG".into(),
        app_config(&mock, extra).to_string(),
    );
    let server = Server::start(BIN, &env).await;
    let agent = workspace_agent(&server, "editor", "read_write", "never").await;

    mock.push(Reply::tool_call("list_directory", r#"{"path": "."}"#));
    mock.push(Reply::tool_call(
        "write_file",
        r#"{"path": "notes.txt", "content": "fixed the login\n"}"#,
    ));
    mock.push(Reply::text("Wrote notes.txt"));
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    let done = server.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");

    // The host saw the edit at finalize and its summary is the run's.
    let summary = &done["output_summary"];
    assert_eq!(summary["files"]["notes.txt"], "fixed the login\n", "{done}");
    assert_eq!(summary["finalized_outcome"], "completed");
    let lease = &done["workspace_lease"];
    assert_eq!(lease["id"], format!("lease-{run_id}"));
    assert_eq!(
        lease["root_path"],
        host.workspace_of(&run_id).to_str().unwrap()
    );
    assert_eq!(
        lease["metadata"]["finalized"], true,
        "finalize's metadata on the lease"
    );

    let events = wait_event(&server, &run_id, "workspace.cleaned").await;
    let kinds = types(&events);
    let at = |kind: &str| {
        kinds
            .iter()
            .position(|k| k == kind)
            .unwrap_or_else(|| panic!("{kind} in {kinds:?}"))
    };
    assert!(at("run.started") < at("workspace.prepared"));
    assert!(at("workspace.prepared") < at("tool_call_started"));
    assert!(at("workspace.finalized") < at("run.completed"));
    assert!(at("run.completed") < at("workspace.cleaned"));
    let prepared = &events[at("workspace.prepared")]["data"];
    assert_eq!(prepared["lease_id"], format!("lease-{run_id}"));
    assert_eq!(prepared["provider"], "host");
    assert_eq!(
        events[at("workspace.cleaned")]["data"]["reason"],
        "completed"
    );

    let steps: Vec<String> = host.calls().into_iter().map(|(step, _)| step).collect();
    assert_eq!(steps, ["prepare", "finalize", "cleanup"]);
    let prepare = &host.calls_of("prepare")[0];
    assert_eq!(prepare["workspace_mode"], "host_prepared");
    assert_eq!(prepare["runtime_kind"], "native_sdk");
    // The run's target context, as the host's context endpoint gave it.
    let context = &prepare["target_context"];
    assert_eq!(
        context["summary"], "Login broken since Tuesday",
        "{prepare}"
    );
    assert_eq!(context["data"]["priority"], "high");
    assert_eq!(context["target"]["id"], "T-42");
    assert_eq!(
        prepare["execution_config"]["workspace"]["access"],
        "read_write"
    );
    assert_eq!(host.calls_of("finalize")[0]["outcome"], "completed");
    assert!(
        !host.workspace_of(&run_id).exists(),
        "cleanup removed the directory"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutations_wait_for_approval_and_a_manual_lease_is_left_to_the_host() {
    let mock = MockProvider::start().await;
    let roots = tempfile::tempdir().expect("tempdir");
    let host = WorkspaceHost::start(Some(WS_TOKEN), roots.path()).await;
    host.set_prepare(PrepareAnswer::Directory {
        cleanup_policy: Some("manual".into()),
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(BIN, &env_with(dir.path(), &mock, &host)).await;
    let agent = workspace_agent(&server, "careful", "read_write", "mutating_tools").await;

    mock.push(Reply::tool_call(
        "write_file",
        r#"{"path": "plan.md", "content": "step 1\n"}"#,
    ));
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    let paused = server.wait_status(&run_id, &["paused", "failed"]).await;
    assert_eq!(paused["pause_reason"], "human_approval", "{paused}");
    let workspace = host.workspace_of(&run_id);
    assert!(
        !workspace.join("plan.md").exists(),
        "nothing written before the approval"
    );
    assert_eq!(host.calls_of("finalize")[0]["outcome"], "paused");

    mock.push(Reply::text("Planned"));
    let (status, body) = server
        .post(
            &format!("/v1/runs/{run_id}/approve?app_id={APP}"),
            json!({}),
        )
        .await;
    assert!(status == 200 || status == 202, "approve: {status} {body}");
    let done = server.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        std::fs::read_to_string(workspace.join("plan.md")).unwrap(),
        "step 1\n"
    );
    let prepares = host.calls_of("prepare").len();
    assert_eq!(prepares, 1, "the resumed run reused its lease");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        host.calls_of("cleanup").is_empty(),
        "manual: the runtime never cleans"
    );
    assert!(workspace.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_answering_garbage_or_a_missing_root_fails_the_run_clearly() {
    let mock = MockProvider::start().await;
    let roots = tempfile::tempdir().expect("tempdir");
    let host = WorkspaceHost::start(Some(WS_TOKEN), roots.path()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(BIN, &env_with(dir.path(), &mock, &host)).await;
    let agent = workspace_agent(&server, "fragile", "read_only", "never").await;

    let cases = [
        (
            PrepareAnswer::Raw(json!({"lease": "soon"})),
            "workspace provider prepare returned an unusable answer",
        ),
        (
            PrepareAnswer::Raw(json!({"id": "l", "root_path": "relative"})),
            "not an absolute path",
        ),
        (PrepareAnswer::MissingRoot, "cannot be used"),
    ];
    for (answer, message) in cases {
        host.set_prepare(answer);
        let run = server.start_run(&mock, &agent, json!({})).await;
        let run_id = run["id"].as_str().expect("run id").to_string();
        let failed = server.wait_status(&run_id, &["failed", "completed"]).await;
        assert_eq!(failed["status"], "failed", "{failed}");
        let error = failed["error_message"].as_str().unwrap_or_default();
        assert!(error.contains(message), "{message:?} in {error:?}");
        assert!(!error.contains(WS_TOKEN), "{error}");
        assert!(
            failed.get("workspace_lease").is_none_or(Value::is_null),
            "{failed}"
        );
    }
    // The lease whose root was missing was handed back.
    let cleanups = host.calls_of("cleanup");
    assert_eq!(cleanups.len(), 1, "{cleanups:?}");
    assert_eq!(cleanups[0]["reason"], "failed");
    assert_eq!(
        mock.model_requests().len(),
        0,
        "no model call without a workspace"
    );
}

fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A bare "remote" with one commit on `main`, made with the real git.
fn bare_remote(root: &std::path::Path) -> std::path::PathBuf {
    let src = root.join("src");
    std::fs::create_dir_all(&src).unwrap();
    git(&src, &["init", "--quiet", "-b", "main"]);
    std::fs::write(src.join("README.md"), "# Login service\n").unwrap();
    git(&src, &["add", "."]);
    git(
        &src,
        &[
            "-c",
            "user.name=Dev",
            "-c",
            "user.email=dev@x",
            "commit",
            "--quiet",
            "-m",
            "init",
        ],
    );
    let bare = root.join("acme").join("login.git");
    std::fs::create_dir_all(bare.parent().unwrap()).unwrap();
    git(
        root,
        &[
            "clone",
            "--quiet",
            "--bare",
            src.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    bare
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_edits_a_cloned_repository_and_the_run_commits_and_pushes_it() {
    if !ar_test_support::require_cli("git") {
        return;
    }
    let mock = MockProvider::start().await;
    let roots = tempfile::tempdir().expect("tempdir");
    let bare = bare_remote(roots.path());
    const REPO_TOKEN: &str = "ghp-repo-secret-e2e";
    let spec = json!({
        "provider": "github", "clone_url": format!("file://{}", bare.display()),
        "auth": {"type": "token", "token": REPO_TOKEN},
        "base_branch": "main", "work_branch": "agent/fix-login",
        "commit_identity": {"name": "Fix Bot", "email": "bot@example.com"},
        "finalize_policy": "push_branch", "metadata": {"commit_message": "Fix the login"}
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, host, checkouts) = repository_service(dir.path(), roots.path(), &mock, spec).await;
    let agent = server
        .agent(
            "committer",
            json!({
                "allowed_tools": ["read_file", "write_file", "list_commits"],
                "execution_config": {"workspace": {"mode": "repository"}},
            }),
        )
        .await;

    mock.push(Reply::tool_call("list_commits", r#"{"limit": 5}"#));
    mock.push(Reply::tool_call("read_file", r#"{"path": "README.md"}"#));
    mock.push(Reply::tool_call(
        "write_file",
        r#"{"path": "FIX.md", "content": "Login fixed.\n"}"#,
    ));
    mock.push(Reply::text("Committed the fix"));
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    let done = server.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    let delivered = &done["output_summary"]["repository"];
    assert_eq!(delivered["pushed"], true, "{done}");
    let log = git(&bare, &["log", "-1", "--format=%an %s", "agent/fix-login"]);
    assert_eq!(log, "Fix Bot Fix the login");
    assert_eq!(
        git(&bare, &["show", "agent/fix-login:FIX.md"]),
        "Login fixed."
    );

    let lease = &done["workspace_lease"];
    assert_eq!(lease["metadata"]["work_branch"], "agent/fix-login");
    let events = wait_event(&server, &run_id, "workspace.cleaned").await;
    for text in [done.to_string(), Value::from(events.clone()).to_string()] {
        assert!(
            !text.contains(REPO_TOKEN),
            "the repository token leaked: {text}"
        );
    }
    let listed = events
        .iter()
        .find(|e| e["type"] == "tool_call_finished" && e["data"]["tool_name"] == "list_commits")
        .expect("the git tool ran");
    assert!(
        listed["data"]["error"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "{listed}"
    );
    let finalize = &host.calls_of("finalize")[0];
    assert_eq!(finalize["repository"]["auth"]["type"], "token");
    assert!(!finalize.to_string().contains(REPO_TOKEN));
    let checkout = checkouts.join(APP).join(&run_id);
    assert!(!checkout.exists(), "the checkout is cleaned up");
}

/// `fetch_url` with an `output_path` in a workspace run: the engine hands the tool the run's
/// lease, the page lands beneath its root, and the host reads it at finalize.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_url_writes_its_output_path_into_the_runs_workspace() {
    let page = axum::Router::new().route(
        "/notes",
        axum::routing::get(|| async { "release notes, version 2\n" }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/notes", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, page).await });

    let mock = MockProvider::start().await;
    let roots = tempfile::tempdir().expect("tempdir");
    let host = WorkspaceHost::start(Some(WS_TOKEN), roots.path()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = env_with(dir.path(), &mock, &host);
    // The page is on loopback over plain HTTP: allowed for this deployment only.
    env.insert("AGENT_RUNTIME_MCP_ALLOW_HTTP".into(), "true".into());
    env.insert(
        "AGENT_RUNTIME_MCP_ALLOW_PRIVATE_NETWORKS".into(),
        "true".into(),
    );
    let server = Server::start(BIN, &env).await;
    let agent = server
        .agent(
            "fetcher",
            json!({
                "allowed_tools": ["fetch_url"],
                "execution_config": {"workspace": {"mode": "host_prepared"}},
            }),
        )
        .await;
    mock.push(Reply::tool_call(
        "fetch_url",
        json!({"url": url, "output_path": "page.txt"}).to_string(),
    ));
    mock.push(Reply::text("saved the page"));
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    let done = server.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["output_summary"]["files"]["page.txt"], "release notes, version 2\n",
        "{done}"
    );
}

/// A run that breaks inside the engine (here: the store refuses the tool call's row, a
/// trigger the test installs) fails with an internal error, and its workspace is still
/// finalized `failed` and cleaned by policy: nothing is left half-done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_internal_error_still_finalizes_and_cleans_the_workspace() {
    let mock = MockProvider::start().await;
    let roots = tempfile::tempdir().expect("tempdir");
    let host = WorkspaceHost::start(Some(WS_TOKEN), roots.path()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(BIN, &env_with(dir.path(), &mock, &host)).await;
    let agent = workspace_agent(&server, "doomed", "read_write", "never").await;
    sqlite_execute(
        dir.path(),
        "CREATE TRIGGER refuse_tool_calls BEFORE INSERT ON tool_calls \
         BEGIN SELECT RAISE(ABORT, 'injected store failure'); END;",
    )
    .await;

    mock.push(Reply::tool_call("list_directory", r#"{"path": "."}"#));
    mock.push(Reply::text("not reached"));
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    let failed = server.wait_status(&run_id, &["failed", "completed"]).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let error = failed["error_message"].as_str().unwrap_or_default();
    assert!(error.starts_with("internal error:"), "{error}");
    assert_eq!(
        failed["output_summary"]["finalized_outcome"], "failed",
        "finalize's summary merged: {failed}"
    );

    let events = wait_event(&server, &run_id, "workspace.cleaned").await;
    let kinds = types(&events);
    let at = |kind: &str| kinds.iter().position(|k| k == kind).unwrap();
    assert!(at("workspace.finalized") < at("run.failed"), "{kinds:?}");
    assert!(at("run.failed") < at("workspace.cleaned"), "{kinds:?}");
    let steps: Vec<String> = host.calls().into_iter().map(|(step, _)| step).collect();
    assert_eq!(steps, ["prepare", "finalize", "cleanup"]);
    assert_eq!(host.calls_of("finalize")[0]["outcome"], "failed");
    assert_eq!(host.calls_of("cleanup")[0]["reason"], "failed");
    assert!(!host.workspace_of(&run_id).exists());
}

/// A repository app whose host answers `spec`; the server, the host and the checkouts' root.
async fn repository_service(
    dir: &std::path::Path,
    roots: &std::path::Path,
    mock: &MockProvider,
    spec: Value,
) -> (Server, WorkspaceHost, std::path::PathBuf) {
    let host = WorkspaceHost::start(Some(WS_TOKEN), roots).await;
    host.set_repository_spec(spec);
    let checkouts = roots.join("checkouts");
    let mut env = sqlite_env(dir, mock);
    let extra = json!({"workspace_provider": {"transport": "repository", "base_url": host.url(),
                       "token": WS_TOKEN, "root_dir": checkouts}});
    env.insert(
        "AGENT_RUNTIME_APP_CONFIG".into(),
        app_config(mock, extra).to_string(),
    );
    (Server::start(BIN, &env).await, host, checkouts)
}

async fn approve(server: &Server, run_id: &str) {
    let (status, body) = server
        .post(
            &format!("/v1/runs/{run_id}/approve?app_id={APP}"),
            json!({}),
        )
        .await;
    assert!(status == 200 || status == 202, "approve: {status} {body}");
}

/// `create_branch` moves the run to a branch of its own: the lease and the run's metadata
/// record it, the resume checks the checkout against it (and passes), and a checkout that was
/// switched to another branch behind the run's back fails the resume with the contract's
/// message — the workspace is finalized `failed` and cleaned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_branch_is_recorded_and_a_resume_revalidates_the_checkout() {
    if !ar_test_support::require_cli("git") {
        return;
    }
    let mock = MockProvider::start().await;
    let roots = tempfile::tempdir().expect("tempdir");
    let bare = bare_remote(roots.path());
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = json!({
        "provider": "github", "clone_url": format!("file://{}", bare.display()),
        "base_branch": "main", "work_branch": "agent/fix-login", "finalize_policy": "none"
    });
    let (server, host, checkouts) = repository_service(dir.path(), roots.path(), &mock, spec).await;
    let agent = server
        .agent(
            "brancher",
            json!({
                "allowed_tools": ["create_branch", "write_file"],
                "approval_mode": "mutating_tools",
                "execution_config": {"workspace": {"mode": "repository"}},
            }),
        )
        .await;
    mock.push(Reply::tool_call(
        "create_branch",
        r#"{"name": "agent/second-try"}"#,
    ));
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    let paused = server.wait_status(&run_id, &["paused", "failed"]).await;
    assert_eq!(paused["pause_reason"], "human_approval", "{paused}");

    // Approved: the resume finds the checkout on agent/fix-login, as recorded; the branch is
    // created and recorded before the next mutation waits.
    mock.push(Reply::tool_call(
        "write_file",
        r#"{"path": "NOTES.md", "content": "try two\n"}"#,
    ));
    approve(&server, &run_id).await;
    let paused = wait_for("the second approval", WAIT, || async {
        let run = server.run(&run_id).await;
        let waiting = run["status"] == "paused"
            && run["workspace_lease"]["metadata"]["work_branch"] == "agent/second-try";
        (waiting || run["status"] == "failed").then_some(run)
    })
    .await;
    assert_eq!(paused["status"], "paused", "{paused}");
    assert_eq!(
        paused["input"]["metadata"]["work_branch"],
        "agent/second-try"
    );
    let checkout = checkouts.join(APP).join(&run_id);
    assert_eq!(
        git(&checkout, &["branch", "--show-current"]),
        "agent/second-try"
    );

    // Someone switches the checkout back: the next resume refuses it.
    git(&checkout, &["checkout", "--quiet", "agent/fix-login"]);
    mock.push(Reply::text("not reached"));
    approve(&server, &run_id).await;
    let failed = server.wait_status(&run_id, &["failed", "completed"]).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let error = failed["error_message"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("workspace for this run is unavailable"),
        "{error}"
    );
    assert!(error.contains("not the run's agent/second-try"), "{error}");
    let events = wait_event(&server, &run_id, "workspace.cleaned").await;
    assert!(types(&events).contains(&"workspace.finalized".to_string()));
    let outcomes: Vec<Value> = host
        .calls_of("finalize")
        .iter()
        .map(|call| call["outcome"].clone())
        .collect();
    assert_eq!(outcomes.last(), Some(&json!("failed")), "{outcomes:?}");
    assert!(!checkout.exists(), "the checkout is cleaned up");
}

/// A read-only repository run whose checkout is gone when it resumes (another worker, a
/// cleaned disk) clones it again instead of failing: it holds nothing of the run's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_run_whose_checkout_is_gone_clones_it_again_on_resume() {
    if !ar_test_support::require_cli("git") {
        return;
    }
    let mock = MockProvider::start().await;
    let roots = tempfile::tempdir().expect("tempdir");
    let bare = bare_remote(roots.path());
    let dir = tempfile::tempdir().expect("tempdir");
    let spec = json!({"clone_url": format!("file://{}", bare.display()), "base_branch": "main"});
    let (server, host, checkouts) = repository_service(dir.path(), roots.path(), &mock, spec).await;
    let agent = server
        .agent(
            "reader",
            json!({
                "allowed_tools": ["read_file", "request_user_input"],
                "execution_config": {"workspace": {"mode": "repository", "access": "read_only"}},
            }),
        )
        .await;
    mock.push(Reply::tool_call(
        "request_user_input",
        json!({"questions": [{"id": "q", "question": "Which file?"}]}).to_string(),
    ));
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    let paused = server.wait_status(&run_id, &["paused", "failed"]).await;
    assert_eq!(paused["status"], "paused", "{paused}");
    let checkout = checkouts.join(APP).join(&run_id);
    std::fs::remove_dir_all(&checkout).expect("the checkout was there");

    mock.push(Reply::tool_call("read_file", r#"{"path": "README.md"}"#));
    mock.push(Reply::text("It is the login service"));
    let (status, body) = server
        .post(
            &format!("/v1/runs/{run_id}/resume?app_id={APP}"),
            json!({"intent": "reply", "content": "README.md"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let done = server.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    let events = server.events(&run_id).await;
    let prepared = types(&events)
        .iter()
        .filter(|kind| *kind == "workspace.prepared")
        .count();
    assert_eq!(prepared, 2, "cloned again: {:?}", types(&events));
    assert_eq!(host.calls_of("repository-spec").len(), 2);
    let read = events
        .iter()
        .find(|e| e["type"] == "tool_call_finished" && e["data"]["tool_name"] == "read_file")
        .expect("read_file ran");
    assert!(
        read["data"]["error"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "{read}"
    );
}
