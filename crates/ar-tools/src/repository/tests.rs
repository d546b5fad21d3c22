//! Repository workspaces with the real `git`: a repository and a bare "remote" made here, a
//! host answering `/repository-spec`, `/finalize` and `/cleanup`; clone, work branch, identity,
//! delivery by policy, and a local stand-in for the GitHub REST endpoint `open_pr` calls
//! (`POST /repos/{owner}/{repo}/pulls`, answered 201 with `number` and `html_url` as GitHub
//! documents it; GitHub itself cannot be reached from the test machines).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ar_core::workspace::{CleanupReason, WorkspaceRun};
use ar_core::TargetRef;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::json;

use super::*;

const TOKEN: &str = "tok-secret-123";

type Calls = Arc<Mutex<Vec<(String, Option<String>, Value)>>>;

#[derive(Clone)]
struct Host {
    spec: Arc<Mutex<Value>>,
    calls: Calls,
    base: String,
}

/// Runs the real git through this module's runner (`ar-process`), without credentials.
async fn sh(dir: &Path, args: &[&str]) -> String {
    git::run(dir, &GitAuth::default(), args)
        .await
        .unwrap_or_else(|e| panic!("git {args:?}: {e}"))
        .trim()
        .to_string()
}

/// A repository with one commit on `main`, and its bare clone as the remote `acme/app.git`.
async fn remote(root: &Path) -> PathBuf {
    let src = root.join("src");
    std::fs::create_dir_all(&src).unwrap();
    sh(&src, &["init", "--quiet", "-b", "main"]).await;
    std::fs::write(src.join("README.md"), "# App\n").unwrap();
    sh(&src, &["add", "."]).await;
    sh(
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
    )
    .await;
    let bare = root.join("acme").join("app.git");
    std::fs::create_dir_all(bare.parent().unwrap()).unwrap();
    sh(
        root,
        &[
            "clone",
            "--quiet",
            "--bare",
            src.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    )
    .await;
    bare
}

async fn step(
    State(host): State<Host>,
    UrlPath(step): UrlPath<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    host.calls.lock().unwrap().push((step.clone(), auth, body));
    match step.as_str() {
        "repository-spec" => (StatusCode::OK, Json(host.spec.lock().unwrap().clone())),
        "finalize" => (
            StatusCode::OK,
            Json(json!({"output_summary": {"host": "ok"}, "metadata": {}})),
        ),
        _ => (StatusCode::OK, Json(json!({}))),
    }
}

/// GitHub's `POST /repos/{owner}/{repo}/pulls` as documented: 201 with the pull request.
async fn pulls(
    State(host): State<Host>,
    UrlPath((owner, repo)): UrlPath<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    host.calls
        .lock()
        .unwrap()
        .push((format!("pulls {owner}/{repo}"), auth, body.clone()));
    let url = format!("{}/{owner}/{repo}/pull/17", host.base);
    (
        StatusCode::CREATED,
        Json(json!({"number": 17, "html_url": url, "state": "open",
        "head": {"ref": body["head"]}, "base": {"ref": body["base"]}})),
    )
}

async fn start(spec: Value, checkouts: &Path) -> (RepositoryWorkspaces, Host) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let host = Host {
        spec: Arc::new(Mutex::new(spec)),
        calls: Arc::default(),
        base: format!("http://{addr}"),
    };
    let app = Router::new()
        .route("/ws/{step}", post(step))
        .route("/api/repos/{owner}/{repo}/pulls", post(pulls))
        .with_state(host.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let text = format!(
        "apps: [{{app_id: a, workspace_provider: {{transport: repository, base_url: 'http://{addr}/ws', token: host-token, root_dir: '{}'}}}}]",
        checkouts.display()
    );
    let config = AppConfig::parse(&text, &|_| None).expect("config");
    let api = format!("http://{addr}/api");
    (
        RepositoryWorkspaces::from_app_config(&config, Some(&api)).unwrap(),
        host,
    )
}

fn run(id: &str) -> WorkspaceRun {
    WorkspaceRun {
        app_id: "a".into(),
        run_id: id.into(),
        agent_id: "agent_1".into(),
        runtime_kind: "native_sdk".into(),
        target: TargetRef {
            target_type: "ticket".into(),
            id: "T-1".into(),
            ..TargetRef::default()
        },
    }
}

fn prepare(id: &str) -> PrepareRequest {
    PrepareRequest {
        run: run(id),
        target_context: None,
        instructions: "fix".into(),
        trigger: JsonMap::new(),
        metadata: JsonMap::new(),
        mode: WorkspaceMode::Repository,
        execution_config: None,
    }
}

fn finalize(id: &str, lease: &WorkspaceLease, outcome: FinalizeOutcome) -> FinalizeRequest {
    FinalizeRequest {
        run: run(id),
        mode: WorkspaceMode::Repository,
        lease: lease.clone(),
        outcome,
        error_message: String::new(),
        output_summary: JsonMap::new(),
    }
}

fn spec(bare: &Path, policy: &str) -> Value {
    json!({
        "provider": "github", "clone_url": format!("file://{}", bare.display()),
        "auth": {"type": "token", "token": TOKEN},
        "base_branch": "main", "work_branch": "agent/fix-login",
        "commit_identity": {"name": "Fix Bot", "email": "bot@example.com"},
        "finalize_policy": policy, "metadata": {"commit_message": "Fix the login"}
    })
}

#[tokio::test]
async fn a_checkout_is_committed_pushed_and_opened_as_a_pull_request() {
    if !ar_test_support::require_cli("git") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let bare = remote(root.path()).await;
    let checkouts = root.path().join("checkouts");
    let (workspaces, host) = start(spec(&bare, "open_pr"), &checkouts).await;
    let lease = workspaces.prepare(&prepare("run_1")).await.expect("clone");
    let dir = PathBuf::from(&lease.root_path);
    assert_eq!(dir, checkouts.join("a").join("run_1"));
    assert_eq!(
        sh(&dir, &["branch", "--show-current"]).await,
        "agent/fix-login"
    );
    assert_eq!(sh(&dir, &["config", "user.name"]).await, "Fix Bot");
    let config = std::fs::read_to_string(dir.join(".git/config")).unwrap();
    assert!(
        !config.contains(TOKEN) && !config.contains("extraheader"),
        "{config}"
    );
    let recorded = serde_json::to_string(&lease).unwrap();
    assert!(!recorded.contains(TOKEN), "{recorded}");
    assert_eq!(lease.metadata["repository_spec"]["auth"]["type"], "token");

    std::fs::write(dir.join("login.rs"), "fn login() {}\n").unwrap();
    let done = workspaces
        .finalize(&finalize("run_1", &lease, FinalizeOutcome::Completed))
        .await
        .expect("delivered");
    let repo = &done.output_summary["repository"];
    assert_eq!(repo["pushed"], true, "{repo}");
    assert_eq!(repo["pull_request"]["number"], 17);
    assert_eq!(done.output_summary["host"], "ok");
    let log = sh(
        &bare,
        &["log", "-1", "--format=%an <%ae> %s", "agent/fix-login"],
    )
    .await;
    assert_eq!(log, "Fix Bot <bot@example.com> Fix the login");
    let files = sh(&bare, &["ls-tree", "--name-only", "agent/fix-login"]).await;
    assert!(files.contains("login.rs"), "{files}");

    let calls = host.calls.lock().unwrap().clone();
    let pr = calls
        .iter()
        .find(|(step, _, _)| step == "pulls acme/app")
        .expect("a pull request");
    assert_eq!(pr.1.as_deref(), Some(format!("Bearer {TOKEN}").as_str()));
    assert_eq!(
        (pr.2["head"].as_str(), pr.2["base"].as_str()),
        (Some("agent/fix-login"), Some("main"))
    );
    let finalize_body = &calls
        .iter()
        .find(|(step, _, _)| step == "finalize")
        .unwrap()
        .2;
    assert!(
        !finalize_body.to_string().contains(TOKEN),
        "{finalize_body}"
    );
    assert!(calls
        .iter()
        .filter(|(s, _, _)| !s.starts_with("pulls"))
        .all(|(_, auth, _)| auth.as_deref() == Some("Bearer host-token")));

    let cleanup = CleanupRequest {
        run: run("run_1"),
        mode: WorkspaceMode::Repository,
        lease,
        reason: CleanupReason::Completed,
    };
    workspaces.cleanup(&cleanup).await.unwrap();
    assert!(!dir.exists(), "the checkout is removed");
}

#[tokio::test]
async fn nothing_changed_pushes_nothing_and_a_failed_run_delivers_nothing() {
    if !ar_test_support::require_cli("git") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let bare = remote(root.path()).await;
    let (workspaces, _host) = start(spec(&bare, "push_branch"), &root.path().join("co")).await;
    let lease = workspaces.prepare(&prepare("run_2")).await.unwrap();
    let done = workspaces
        .finalize(&finalize("run_2", &lease, FinalizeOutcome::Completed))
        .await
        .unwrap();
    assert_eq!(done.output_summary["repository"]["changed"], false);
    let branches = sh(&bare, &["branch", "--list"]).await;
    assert!(
        !branches.contains("agent/fix-login"),
        "no remote branch: {branches}"
    );

    let lease = workspaces.prepare(&prepare("run_3")).await.unwrap();
    std::fs::write(Path::new(&lease.root_path).join("x.txt"), "x").unwrap();
    let done = workspaces
        .finalize(&finalize("run_3", &lease, FinalizeOutcome::Failed))
        .await
        .unwrap();
    assert!(done.output_summary.get("repository").is_none());
    assert!(!sh(&bare, &["branch", "--list"])
        .await
        .contains("agent/fix-login"));
}

#[tokio::test]
async fn a_clone_that_fails_or_a_url_with_credentials_leaves_nothing_behind() {
    if !ar_test_support::require_cli("git") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let checkouts = root.path().join("co");
    let missing = root.path().join("nowhere.git");
    let (workspaces, host) = start(spec(&missing, "none"), &checkouts).await;
    let error = workspaces.prepare(&prepare("run_4")).await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("repository workspace clone failed"),
        "{error}"
    );
    assert!(
        !checkouts.join("a").join("run_4").exists(),
        "no partial checkout"
    );

    *host.spec.lock().unwrap() = json!({"clone_url": "https://user:pw@git.example/acme/app.git"});
    let error = workspaces.prepare(&prepare("run_5")).await.unwrap_err();
    assert!(
        error.to_string().contains("must not contain credentials"),
        "{error}"
    );
}

#[tokio::test]
async fn the_git_tools_list_branch_commit_push_and_open_a_pull_request() {
    if !ar_test_support::require_cli("git") {
        return;
    }
    use ar_core::workspace::WorkspaceAccess;
    let root = tempfile::tempdir().unwrap();
    let bare = remote(root.path()).await;
    let (workspaces, host) = start(spec(&bare, "none"), &root.path().join("co")).await;
    let lease = workspaces.prepare(&prepare("run_6")).await.unwrap();
    let tools = workspaces
        .tools(&run("run_6"), &lease, WorkspaceAccess::ReadWrite)
        .expect("git tools");
    let names: Vec<_> = tools
        .definitions()
        .into_iter()
        .map(|t| (t.name, t.mutating))
        .collect();
    assert_eq!(
        names,
        [
            ("list_commits".into(), false),
            ("create_branch".into(), true),
            ("commit_and_push".into(), true),
            ("open_pr".into(), true)
        ]
    );
    let listed = tools.call("list_commits", json!({"limit": 5})).await;
    assert!(!listed.is_error, "{listed:?}");
    assert_eq!(listed.structured.unwrap()["commits"][0]["subject"], "init");

    let created = tools
        .call("create_branch", json!({"name": "feature/x"}))
        .await;
    assert!(!created.is_error, "{created:?}");
    let bad = tools
        .call("create_branch", json!({"name": "bad..name"}))
        .await;
    assert!(
        bad.is_error && bad.content.contains("not a valid branch name"),
        "{bad:?}"
    );
    std::fs::write(Path::new(&lease.root_path).join("x.rs"), "// x\n").unwrap();
    let pushed = tools
        .call("commit_and_push", json!({"message": "Add x"}))
        .await;
    assert!(!pushed.is_error, "{pushed:?}");
    assert_eq!(
        sh(&bare, &["log", "-1", "--format=%s", "feature/x"]).await,
        "Add x"
    );
    let pr = tools.call("open_pr", json!({"title": "Add x"})).await;
    assert!(!pr.is_error, "{pr:?}");
    assert_eq!(pr.structured.unwrap()["number"], 17);
    let calls = host.calls.lock().unwrap().clone();
    let (_, _, body) = calls
        .iter()
        .find(|(s, _, _)| s == "pulls acme/app")
        .unwrap();
    assert_eq!(
        (body["head"].as_str(), body["base"].as_str()),
        (Some("feature/x"), Some("main"))
    );

    let read_only = workspaces
        .tools(&run("run_6"), &lease, WorkspaceAccess::ReadOnly)
        .unwrap();
    assert_eq!(
        read_only.definitions().len(),
        1,
        "only list_commits when read-only"
    );
    let refused = read_only
        .call("commit_and_push", json!({"message": "m"}))
        .await;
    assert!(refused.is_error, "{refused:?}");
}

#[tokio::test]
async fn preview_delivery_blocks_pushes() {
    if !ar_test_support::require_cli("git") {
        return;
    }
    use ar_core::workspace::WorkspaceAccess;
    let root = tempfile::tempdir().unwrap();
    let bare = remote(root.path()).await;
    let mut preview = spec(&bare, "none");
    preview["metadata"]["delivery_mode"] = json!("preview");
    let (workspaces, _host) = start(preview, &root.path().join("co")).await;
    let lease = workspaces.prepare(&prepare("run_7")).await.unwrap();
    assert_eq!(
        lease.cleanup_policy, "manual",
        "a preview is left to the host"
    );
    let tools = workspaces
        .tools(&run("run_7"), &lease, WorkspaceAccess::ReadWrite)
        .unwrap();
    for (tool, input) in [
        ("commit_and_push", json!({"message": "m"})),
        ("open_pr", json!({"title": "t"})),
    ] {
        let out = tools.call(tool, input).await;
        assert!(
            out.is_error && out.content.contains("preview"),
            "{tool}: {out:?}"
        );
    }
    std::fs::write(Path::new(&lease.root_path).join("y.txt"), "y").unwrap();
    let done = workspaces
        .finalize(&finalize("run_7", &lease, FinalizeOutcome::Completed))
        .await
        .unwrap();
    assert_eq!(done.output_summary["repository"]["finalize_policy"], "none");
    assert!(!sh(&bare, &["branch", "--list"])
        .await
        .contains("agent/fix-login"));
}

#[tokio::test]
async fn the_router_offers_the_repository_tools() {
    use ar_core::workspace::WorkspaceAccess;
    let root = tempfile::tempdir().unwrap();
    let (workspaces, _host) = start(json!({}), &root.path().join("co")).await;
    let router = crate::WorkspaceRouter::default().with(std::sync::Arc::new(workspaces));
    let lease = WorkspaceLease {
        id: "l".into(),
        root_path: root.path().display().to_string(),
        ..WorkspaceLease::default()
    };
    let tools = router.tools(&run("run_8"), &lease, WorkspaceAccess::ReadWrite);
    assert_eq!(tools.map(|t| t.definitions().len()), Some(4));
}

/// `create_branch` (or any switch) and a detached HEAD are what `observe` reports; a lease
/// that records the branch the checkout is on validates, one whose checkout moved elsewhere,
/// lost its origin or vanished does not.
#[tokio::test]
async fn the_checkout_head_is_observed_and_revalidated() {
    if !ar_test_support::require_cli("git") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let bare = remote(root.path()).await;
    let checkouts = root.path().join("checkouts");
    let (workspaces, _host) = start(spec(&bare, "none"), &checkouts).await;
    let mut lease = workspaces.prepare(&prepare("run_o")).await.unwrap();
    let dir = PathBuf::from(&lease.root_path);
    let mode = WorkspaceMode::Repository;
    workspaces
        .validate(&run("run_o"), mode, &lease)
        .await
        .unwrap();
    let observed = workspaces.observe(&run("run_o"), &lease).await.unwrap();
    assert_eq!(observed["work_branch"], "agent/fix-login");
    assert_eq!(observed["detached_head"], false);

    sh(&dir, &["checkout", "--quiet", "-b", "agent/second-try"]).await;
    let error = workspaces
        .validate(&run("run_o"), mode, &lease)
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("not the run's agent/fix-login"),
        "{error}"
    );
    let observed = workspaces.observe(&run("run_o"), &lease).await.unwrap();
    assert_eq!(observed["work_branch"], "agent/second-try");
    lease.metadata.extend(observed);
    workspaces
        .validate(&run("run_o"), mode, &lease)
        .await
        .unwrap();

    sh(&dir, &["checkout", "--quiet", "--detach"]).await;
    let observed = workspaces.observe(&run("run_o"), &lease).await.unwrap();
    assert_eq!(observed["detached_head"], true);
    let head = sh(&dir, &["rev-parse", "HEAD"]).await;
    assert_eq!(observed["head_commit"], head.as_str());
    assert!(workspaces
        .validate(&run("run_o"), mode, &lease)
        .await
        .is_err());
    lease.metadata.extend(observed);
    workspaces
        .validate(&run("run_o"), mode, &lease)
        .await
        .unwrap();

    sh(
        &dir,
        &["remote", "set-url", "origin", "file:///elsewhere.git"],
    )
    .await;
    let error = workspaces
        .validate(&run("run_o"), mode, &lease)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("origin"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
    let error = workspaces
        .validate(&run("run_o"), mode, &lease)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("no longer exists"), "{error}");
}

/// A spec whose auth has no token opens the pull request with the deployment's GitHub token;
/// with neither, `open_pr` says which variables it looked for.
#[tokio::test]
async fn open_pr_falls_back_to_the_deployments_github_token() {
    if !ar_test_support::require_cli("git") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let bare = remote(root.path()).await;
    let checkouts = root.path().join("checkouts");
    let mut without_token = spec(&bare, "open_pr");
    without_token["auth"] = json!({"type": "none"});
    let (workspaces, host) = start(without_token, &checkouts).await;
    let lease = workspaces.prepare(&prepare("run_t")).await.unwrap();
    std::fs::write(Path::new(&lease.root_path).join("fix.rs"), "fn fix() {}\n").unwrap();
    let error = workspaces
        .finalize(&finalize("run_t", &lease, FinalizeOutcome::Completed))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("GITHUB_TOKEN"), "{error}");

    let workspaces =
        workspaces.with_github_token(Some(ar_core::secret::Secret::new("ghp-deployment")));
    // A branch of its own (the first run pushed agent/fix-login already).
    host.spec.lock().unwrap()["work_branch"] = json!("agent/second");
    let lease = workspaces.prepare(&prepare("run_t2")).await.unwrap();
    std::fs::write(Path::new(&lease.root_path).join("fix.rs"), "fn fix() {}\n").unwrap();
    let done = workspaces
        .finalize(&finalize("run_t2", &lease, FinalizeOutcome::Completed))
        .await
        .unwrap();
    assert_eq!(
        done.output_summary["repository"]["pull_request"]["number"],
        17
    );
    let calls = host.calls.lock().unwrap().clone();
    let (_, auth, _) = calls
        .iter()
        .find(|(step, _, _)| step.starts_with("pulls "))
        .expect("the pull request was opened");
    assert_eq!(auth.as_deref(), Some("Bearer ghp-deployment"));
}
