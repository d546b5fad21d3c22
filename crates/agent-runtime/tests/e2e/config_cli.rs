//! `agent-runtime config validate`: exit 0 on a good configuration (inline, `@file`, or from
//! `AGENT_RUNTIME_APP_CONFIG`), non-zero with every diagnostic on a bad one; `serve` refuses a
//! bad configuration the same way before it listens. Both refuse, by name, every setting this
//! version does not support yet; the `log` event sink writes events to the log.

use ar_test_support::service::*;

use crate::BIN;

const GOOD: &str = r#"
apps:
  - app_id: host_app
    event_protocol: v2
    event_callbacks:
      - url: "http://127.0.0.1:9/hooks"
        token: cb-token
        event_types: [run.completed, run.failed]
    model_endpoints:
      - {id: local, base_url: "http://127.0.0.1:11434/v1", auth_mode: none, allow_http: true}
  - app_id: second_app
"#;

/// A configuration with six independent problems; each (path, fragment) must be reported.
const BAD: &str = r#"
apps:
  - app_id: "bad id"
    event_protocol: v3
    evnt_callbacks: []
    event_callbacks:
      - url: relative/path
      - token: no-url
    model_endpoints:
      - {id: remote, base_url: "http://models.example.com/v1", auth_mode: api_key}
"#;

const BAD_DIAGNOSTICS: &[(&str, &str)] = &[
    ("apps[0].app_id", "not allowed"),
    ("apps[0].event_protocol", "invalid event_protocol"),
    ("apps[0].evnt_callbacks", "did you mean `event_callbacks`"),
    ("apps[0].event_callbacks[0].url", "not a valid absolute URL"),
    ("apps[0].event_callbacks[1].url", "is required"),
    ("apps[0].model_endpoints[0].base_url", "allow_http"),
];

fn assert_every_diagnostic(output: &str) {
    for (path, fragment) in BAD_DIAGNOSTICS {
        assert!(
            output
                .lines()
                .any(|line| line.contains(&format!("{path}:")) && line.contains(fragment)),
            "missing diagnostic {path}: …{fragment}… in:\n{output}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_validate_accepts_a_good_configuration() {
    let dir = tempfile::tempdir().expect("tempdir");
    let env = base_env(dir.path());
    let (status, stdout, stderr) = run_command(BIN, &["config", "validate", GOOD], &env).await;
    assert!(status.success(), "inline: {status}\n{stderr}");
    assert_eq!(stdout.trim(), "ok: 2 app(s)");

    let file = dir.path().join("apps.yaml");
    std::fs::write(&file, GOOD).expect("write config");
    let source = format!("@{}", file.display());
    let (status, stdout, stderr) = run_command(BIN, &["config", "validate", &source], &env).await;
    assert!(status.success(), "@file: {status}\n{stderr}");
    assert_eq!(stdout.trim(), "ok: 2 app(s)");

    let mut from_env = env.clone();
    from_env.insert("AGENT_RUNTIME_APP_CONFIG".into(), source);
    let (status, stdout, stderr) = run_command(BIN, &["config", "validate"], &from_env).await;
    assert!(status.success(), "from the environment: {status}\n{stderr}");
    assert_eq!(stdout.trim(), "ok: 2 app(s)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_validate_reports_every_problem_of_a_bad_configuration() {
    let dir = tempfile::tempdir().expect("tempdir");
    let env = base_env(dir.path());
    let (status, stdout, stderr) = run_command(BIN, &["config", "validate", BAD], &env).await;
    assert!(
        !status.success(),
        "a bad configuration validated:\n{stdout}"
    );
    assert_eq!(status.code(), Some(1));
    assert!(!stdout.contains("ok:"), "{stdout}");
    assert_every_diagnostic(&stderr);
    let reported = stderr
        .lines()
        .filter(|line| line.trim_start().starts_with("apps"))
        .count();
    assert!(
        stderr.contains(&format!("{reported} problem(s)")),
        "the count matches the list:\n{stderr}"
    );

    // Nothing to validate, and a missing file, are errors too.
    let (status, _, stderr) = run_command(BIN, &["config", "validate"], &env).await;
    assert!(!status.success());
    assert!(stderr.contains("no configuration given"), "{stderr}");
    let missing = format!("@{}", dir.path().join("missing.yaml").display());
    let (status, _, stderr) = run_command(BIN, &["config", "validate", &missing], &env).await;
    assert!(!status.success());
    assert!(stderr.contains("AGENT_RUNTIME_APP_CONFIG"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_a_bad_configuration_with_every_problem() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = base_env(dir.path());
    env.insert("AGENT_RUNTIME_SERVICE_TOKEN".into(), TOKEN.into());
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), BAD.into());
    env.insert("AGENT_RUNTIME_STORE_DRIVER".into(), "nosuchdb".into());
    let (status, _, stderr) = run_command(BIN, &["serve"], &env).await;
    assert!(!status.success());
    assert!(stderr.contains("invalid configuration"), "{stderr}");
    assert_every_diagnostic(&stderr);
    assert!(
        stderr.contains("AGENT_RUNTIME_STORE_DRIVER"),
        "environment problems are reported with the app config's:\n{stderr}"
    );
    assert!(!stderr.contains("listening on"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_a_worker_thread_count_that_is_not_a_positive_number() {
    let dir = tempfile::tempdir().expect("tempdir");
    for bad in ["0", "two", "-1"] {
        let mut env = base_env(dir.path());
        env.insert("AGENT_RUNTIME_WORKER_THREADS".into(), bad.into());
        let (status, _, stderr) = run_command(BIN, &["serve"], &env).await;
        assert!(!status.success(), "{bad}: {status}");
        assert!(
            stderr.contains("AGENT_RUNTIME_WORKER_THREADS") && stderr.contains(bad),
            "{bad}: {stderr}"
        );
    }
}

/// Settings this version refuses, each with what the refusal must name: two refused by
/// design, and Temporal settings without `TEMPORAL_ADDRESS` (they would be ignored).
const UNSUPPORTED: &[(&str, &str, &str)] = &[
    (
        "AGENT_RUNTIME_ALLOW_DETERMINISTIC_FALLBACK",
        "true",
        "never answers with a stand-in model",
    ),
    (
        "TEMPORAL_NAMESPACE",
        "default",
        "is set but TEMPORAL_ADDRESS is not",
    ),
    (
        "TEMPORAL_TLS_SERVER_NAME",
        "temporal.example",
        "is set but TEMPORAL_ADDRESS is not",
    ),
    (
        "TEMPORAL_TLS_CA_DATA",
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
        "is set but TEMPORAL_ADDRESS is not",
    ),
    (
        "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION",
        "true",
        "never turns off verification of Temporal's server certificate",
    ),
];

/// An app that configures browser tools, which this version does not support yet.
const WITH_BROWSER: &str = r#"
apps:
  - app_id: host_app
    browser: {enabled: true}
"#;

fn assert_refused(output: &str, setting: &str, message: &str) {
    assert!(
        output
            .lines()
            .any(|line| line.contains(&format!("{setting}:")) && line.contains(message)),
        "{setting} is not refused with {message:?} in:\n{output}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_and_config_validate_refuse_each_setting_this_version_does_not_support() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, value, message) in UNSUPPORTED {
        let mut env = base_env(dir.path());
        env.insert("AGENT_RUNTIME_SERVICE_TOKEN".into(), TOKEN.into());
        env.insert(name.to_string(), value.to_string());

        let (status, _, stderr) = run_command(BIN, &["serve"], &env).await;
        assert_eq!(status.code(), Some(1), "serve with {name}: {stderr}");
        assert!(stderr.contains("invalid configuration"), "{stderr}");
        assert_refused(&stderr, name, message);
        assert!(!stderr.contains("listening on"), "{stderr}");

        let (status, stdout, stderr) = run_command(BIN, &["config", "validate", GOOD], &env).await;
        assert_eq!(status.code(), Some(1), "validate with {name}: {stdout}");
        assert!(!stdout.contains("ok:"), "{stdout}");
        assert_refused(&stderr, name, message);
    }

    // An app-config section of a capability not supported yet, in all three commands.
    let mut env = base_env(dir.path());
    env.insert("AGENT_RUNTIME_SERVICE_TOKEN".into(), TOKEN.into());
    let refusal = "does not support browser tools yet";
    for args in [
        vec!["config", "validate", WITH_BROWSER],
        vec!["config", "doctor", WITH_BROWSER, APP],
    ] {
        let (status, stdout, stderr) = run_command(BIN, &args, &env).await;
        assert_eq!(status.code(), Some(1), "{args:?}: {stdout}");
        assert_refused(&stderr, "apps[0].browser", refusal);
    }
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), WITH_BROWSER.into());
    let (status, _, stderr) = run_command(BIN, &["serve"], &env).await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_refused(&stderr, "apps[0].browser", refusal);
    assert!(!stderr.contains("listening on"), "{stderr}");
}

/// The MCP bridge's settings (and run MCP's key, now supported) are no reason for `config
/// validate` to refuse a configuration: they are read by `mcp-bridge` and run MCP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_validate_accepts_the_mcp_bridge_and_run_mcp_settings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = base_env(dir.path());
    env.insert("AGENT_RUNTIME_SERVICE_TOKEN".into(), TOKEN.into());
    for (name, value) in [
        ("AGENT_RUNTIME_API_BASE_URL", "http://127.0.0.1:8090"),
        ("AGENT_RUNTIME_APP_ID", APP),
        ("AGENT_RUNTIME_RUN_ID", "run_1"),
        ("AGENT_RUNTIME_MCP_BRIDGE_HTTP_TIMEOUT_SECONDS", "60"),
        (
            "AGENT_RUNTIME_MCP_CREDENTIAL_ENCRYPTION_KEY",
            CREDENTIAL_KEY,
        ),
    ] {
        env.insert(name.into(), value.into());
    }
    let (status, stdout, stderr) = run_command(BIN, &["config", "validate", GOOD], &env).await;
    assert!(status.success(), "{stdout}\n{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_validate_lists_every_unsupported_setting_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = base_env(dir.path());
    for (name, value, _) in UNSUPPORTED {
        env.insert(name.to_string(), value.to_string());
    }
    let (status, _, stderr) = run_command(BIN, &["config", "validate", WITH_BROWSER], &env).await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    for (name, _, message) in UNSUPPORTED {
        assert_refused(&stderr, name, message);
    }
    assert_refused(&stderr, "apps[0].browser", "browser");
    let problems = format!("{} problem(s)", UNSUPPORTED.len() + 1);
    assert!(stderr.contains(&problems), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_event_sink_writes_each_event_and_none_turns_it_off() {
    let mock = ar_test_support::mock_provider::MockProvider::start().await;
    mock.set_fallback(Some(ar_test_support::mock_provider::Reply::text(
        "reply-text-9f3a",
    )));
    for sink in ["log", "none"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut env = sqlite_env(dir.path(), &mock);
        env.insert("AGENT_RUNTIME_EVENT_SINK".into(), sink.into());
        env.insert(
            "AGENT_RUNTIME_LOG".into(),
            "info,agent_runtime::events=debug".into(),
        );
        let mut server = Server::start(BIN, &env).await;
        let agent = server.create_agent("logged", &[]).await;
        let run = server
            .start_run(
                &mock,
                agent["id"].as_str().expect("agent id"),
                serde_json::json!({}),
            )
            .await;
        let run_id = run["id"].as_str().expect("run id").to_string();
        server.wait_status(&run_id, &["completed"]).await;
        if sink == "log" {
            let line = server
                .process
                .wait_stderr_line("event_type=run.completed", WAIT)
                .await;
            assert!(
                line.contains("agent_runtime::events") && line.contains(&run_id),
                "{line}"
            );
            // The envelope only: never the payload (which may carry tool output or secrets).
            assert!(
                !server.process.stderr().contains("reply-text-9f3a"),
                "payload logged"
            );
        } else {
            // The completed run's events were published before its status was readable.
            let stderr = server.process.stderr();
            assert!(!stderr.contains("agent_runtime::events"), "{stderr}");
        }
    }
}

/// App MCP providers are a supported section: `config validate` accepts them and `config
/// doctor` lists each with its transport, without its token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_accepts_and_shows_app_mcp_providers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = base_env(dir.path());
    env.insert("AGENT_RUNTIME_SERVICE_TOKEN".into(), TOKEN.into());
    let config = r#"
apps:
  - app_id: host_app
    mcp_providers:
      - {name: crm, url: "https://mcp.example/api", token: crm-secret-token, startup_policy: required}
      - {name: files, transport: stdio, command: node, args: [server.js]}
"#;
    let (status, stdout, stderr) = run_command(BIN, &["config", "validate", config], &env).await;
    assert!(status.success(), "{stdout}\n{stderr}");
    let (status, stdout, stderr) = run_command(BIN, &["config", "doctor", config, APP], &env).await;
    assert!(status.success(), "{stdout}\n{stderr}");
    let shown = |name: &str, transport: &str| {
        stdout.lines().any(|line| {
            line.contains("mcp_provider") && line.contains(name) && line.contains(transport)
        })
    };
    assert!(shown("crm", "transport=http"), "{stdout}");
    assert!(shown("files", "transport=stdio"), "{stdout}");
    assert!(!stdout.contains("crm-secret-token") && !stderr.contains("crm-secret-token"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_an_unknown_event_sink_and_names_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = base_env(dir.path());
    env.insert("AGENT_RUNTIME_SERVICE_TOKEN".into(), TOKEN.into());
    env.insert("AGENT_RUNTIME_EVENT_SINK".into(), "log,kafka".into());
    let (status, _, stderr) = run_command(BIN, &["serve"], &env).await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|line| line.contains("AGENT_RUNTIME_EVENT_SINK")
                && line.contains("unknown event sink \"kafka\"")),
        "{stderr}"
    );
    assert!(!stderr.contains("listening on"), "{stderr}");
}
