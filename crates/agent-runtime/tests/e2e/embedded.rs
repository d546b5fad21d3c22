//! The embedded default: no token configured → a development token printed on stderr and kept
//! (mode 0600) beside the SQLite database; anonymous serving only on loopback.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;

use ar_test_support::service::*;

use crate::BIN;

/// The token printed on the line after "development service token".
fn printed_token(stderr: &str) -> String {
    let mut lines = stderr.lines();
    lines
        .find(|line| line.contains("development service token"))
        .unwrap_or_else(|| panic!("no development token announced; stderr:\n{stderr}"));
    lines
        .next()
        .map(|line| line.trim().to_string())
        .filter(|token| !token.is_empty())
        .unwrap_or_else(|| panic!("no token after the announcement; stderr:\n{stderr}"))
}

#[cfg(unix)]
fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// Asserts the token works and nothing else does.
async fn assert_only_token_works(server: &Server, token: &str) {
    let agents = format!("/v1/agents?app_id={APP}");
    let (status, body) = server
        .send_as(Some(token), reqwest::Method::GET, &agents, None)
        .await;
    assert_eq!(status, 200, "{body}");
    let unauthorized = json!({"error": "unauthorized"});
    for wrong in [None, Some("wrong-token"), Some(&token[..token.len() - 1])] {
        let (status, body) = server
            .send_as(wrong, reqwest::Method::GET, &agents, None)
            .await;
        assert_eq!((status, &body), (401, &unauthorized), "token {wrong:?}");
    }
    // The embedded studio's people API and the console's run views are guarded too.
    for path in [
        "/api/runtimes",
        "/api/manifests",
        "/studio/api/info",
        "/studio/api/runs",
    ] {
        let (status, body) = server.send_as(None, reqwest::Method::GET, path, None).await;
        assert_eq!(status, 401, "{path} without a token: {body}");
        let (status, body) = server
            .send_as(Some(token), reqwest::Method::GET, path, None)
            .await;
        assert_eq!(status, 200, "{path} with the token: {body}");
    }
    // The legacy /internal alias is guarded too; /healthz is not.
    let (status, _) = server
        .send_as(None, reqwest::Method::GET, "/internal/capabilities", None)
        .await;
    assert_eq!(status, 401);
    let (status, _) = server
        .send_as(None, reqwest::Method::GET, "/healthz", None)
        .await;
    assert_eq!(status, 200);
}

fn embedded_env(dir: &Path) -> BTreeMap<String, String> {
    let mut env = base_env(dir);
    env.insert(
        "AGENT_RUNTIME_SQLITE_DSN".into(),
        dir.join("db").join("runtime.db").display().to_string(),
    );
    env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_a_development_token_is_generated_and_kept_beside_the_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let env = embedded_env(dir.path());
    let mut server = Server::start(BIN, &env).await;
    let token = printed_token(&server.process.stderr());
    let token_file = dir.path().join("db").join("service-token");
    let saved = std::fs::read_to_string(&token_file).expect("service-token beside the database");
    assert_eq!(saved.trim(), token);
    #[cfg(unix)]
    assert_eq!(mode_of(&token_file), 0o600, "the token file is private");
    assert!(
        server
            .process
            .stderr()
            .contains(&token_file.display().to_string()),
        "the announcement names the file"
    );
    assert!(dir.path().join("db").join("runtime.db").exists());
    assert!(
        !dir.path().join("xdg").join("agent-runtime").exists(),
        "nothing written to the default data directory when a DSN is given"
    );
    assert_only_token_works(&server, &token).await;

    // Ctrl-C stops it cleanly; a restart reuses the same token.
    server.process.interrupt();
    assert!(server.process.wait_exit(WAIT).await.success());
    let again = Server::start(BIN, &env).await;
    assert_eq!(printed_token(&again.process.stderr()), token);
    assert_only_token_works(&again, &token).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_database_lives_in_the_user_data_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(BIN, &base_env(dir.path())).await;
    let token = printed_token(&server.process.stderr());
    let data = dir.path().join("xdg").join("agent-runtime");
    assert!(data.join("agent-runtime.db").exists(), "default database");
    assert_eq!(
        std::fs::read_to_string(data.join("service-token"))
            .expect("token file")
            .trim(),
        token
    );
    assert_only_token_works(&server, &token).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_access_is_refused_on_a_non_loopback_address() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The port is held on loopback by this test: a binary that bound before refusing would
    // fail with "address in use" instead of the refusal, and none opens a public socket.
    let held = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = held.local_addr().expect("addr").port();
    // Go-style ":PORT" means every interface, like 0.0.0.0.
    for addr in [format!("0.0.0.0:{port}"), format!(":{port}")] {
        let mut env = embedded_env(dir.path());
        env.insert("AGENT_RUNTIME_ALLOW_ANONYMOUS".into(), "1".into());
        env.insert("AGENT_RUNTIME_ADDR".into(), addr.clone());
        let (status, _, stderr) = run_command(BIN, &["serve"], &env).await;
        assert!(
            !status.success(),
            "{addr}: started anyway; stderr:\n{stderr}"
        );
        assert!(
            stderr.contains("refusing to serve anonymously")
                && stderr.contains("AGENT_RUNTIME_SERVICE_TOKEN"),
            "{addr}: unclear refusal:\n{stderr}"
        );
        assert!(
            !stderr.contains("listening on"),
            "{addr}: it listened:\n{stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_access_is_served_on_loopback_without_a_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = embedded_env(dir.path());
    env.insert("AGENT_RUNTIME_ALLOW_ANONYMOUS".into(), "true".into());
    let server = Server::start(BIN, &env).await;
    assert!(server.token.is_none());
    let (status, body) = server.get(&format!("/v1/agents?app_id={APP}")).await;
    assert_eq!((status, body), (200, json!([])));
    let (status, agent) = server
        .post("/v1/agents", json!({"app_id": APP, "name": "anonymous"}))
        .await;
    assert_eq!(status, 201, "{agent}");
    assert!(
        !server
            .process
            .stderr()
            .contains("development service token"),
        "no token is generated in anonymous mode"
    );
    assert!(!dir.path().join("db").join("service-token").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_in_use_is_a_clear_startup_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let mut env = embedded_env(dir.path());
    env.insert("AGENT_RUNTIME_ADDR".into(), addr.clone());
    let (status, _, stderr) = run_command(BIN, &["serve"], &env).await;
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains(&format!("binding {addr}")), "{stderr}");
}
