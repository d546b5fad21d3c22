//! Run-scoped MCP servers over HTTP: admission's rules (400 naming the field, nothing stored),
//! the host_run_id lookup before them, and the credential rotation route.

use ar_test_support::mock_provider::MockProvider;
use serde_json::{json, Value};

use ar_test_support::service::*;

/// A service with run MCP configured (a credential key; plain HTTP and loopback allowed so the
/// tests' own servers are reachable).
async fn mcp_service(mock: &MockProvider) -> TestServer {
    let dir = tempfile::tempdir().expect("tempdir");
    let dsn = dir.path().join("runtime.db").display().to_string();
    let mut env = env_for(mock, &dsn);
    env.insert(
        "AGENT_RUNTIME_MCP_CREDENTIAL_ENCRYPTION_KEY".into(),
        CREDENTIAL_KEY.into(),
    );
    env.insert("AGENT_RUNTIME_MCP_ALLOW_HTTP".into(), "true".into());
    env.insert(
        "AGENT_RUNTIME_MCP_ALLOW_PRIVATE_NETWORKS".into(),
        "true".into(),
    );
    let mut server = TestServer::start_with(env).await;
    server.dir = Some(dir);
    server
}

fn valid_server() -> Value {
    json!({
        "server_id": "docs-1",
        "server_name": "docs",
        "transport": "streamable_http",
        "url": "https://mcp.example.com/mcp",
        "tools": [{"name": "search", "access": "read"}],
        "credential": {"type": "bearer_token", "access_token": "mcp-secret-token"}
    })
}

fn with(mut base: Value, path: &[&str], value: Value) -> Value {
    let mut at = &mut base;
    for key in &path[..path.len() - 1] {
        at = &mut at[*key];
    }
    at[path[path.len() - 1]] = value;
    base
}

fn start_body(mock: &MockProvider, agent: &str, servers: Value) -> Value {
    json!({
        "app_id": APP,
        "agent_id": agent,
        "target": {"type": "ticket", "id": "T-1"},
        "instructions": "Use the docs.",
        "model": {"provider": "openai_compatible", "model": "mock-model",
                  "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}},
        "model_credential": {"type": "api_key", "api_key": RUN_API_KEY},
        "mcp_servers": servers
    })
}

async fn run_count(server: &TestServer) -> usize {
    let (status, runs) = server.get(&format!("/v1/runs?app_id={APP}")).await;
    assert_eq!(status, 200, "{runs}");
    runs.as_array().map_or(0, Vec::len)
}

#[tokio::test]
async fn every_admission_rule_is_a_400_naming_the_field_and_stores_nothing() {
    let mock = MockProvider::start().await;
    let server = mcp_service(&mock).await;
    let agent = server.agent("mcp-agent", json!({})).await;
    let cases: Vec<(Value, &str)> = vec![
        (
            json!([with(valid_server(), &["server_id"], json!(""))]),
            "mcp_servers[0].server_id",
        ),
        (
            json!([with(valid_server(), &["server_name"], json!("a b"))]),
            "mcp_servers[0].server_name",
        ),
        (
            json!([with(valid_server(), &["transport"], json!("stdio"))]),
            "mcp_servers[0].transport",
        ),
        (
            json!([with(valid_server(), &["url"], json!("ftp://x/"))]),
            "mcp_servers[0].url",
        ),
        (
            json!([with(
                valid_server(),
                &["url"],
                json!("https://u:p@x.example/")
            )]),
            "userinfo",
        ),
        (
            json!([with(
                valid_server(),
                &["url"],
                json!("https://x.example/?a=1")
            )]),
            "query",
        ),
        (
            json!([with(valid_server(), &["tools"], json!([]))]),
            "mcp_servers[0].tools",
        ),
        (
            json!([with(
                valid_server(),
                &["tools"],
                json!([{"name": "-x", "access": "read"}])
            )]),
            "tools[0].name",
        ),
        (
            json!([with(
                valid_server(),
                &["tools"],
                json!([{"name": "x", "access": "all"}])
            )]),
            "tools[0].access",
        ),
        (
            json!([with(
                valid_server(),
                &["credential", "type"],
                json!("oauth")
            )]),
            "credential.type",
        ),
        (
            json!([with(
                valid_server(),
                &["credential", "expires_at"],
                json!("2001-01-01T00:00:00Z")
            )]),
            "credential.expires_at",
        ),
        (
            json!([with(
                valid_server(),
                &["credential"],
                json!({"type": "headers", "headers": {"Mcp-Session-Id": "x"}})
            )]),
            "may not be set",
        ),
        (
            json!([valid_server(), valid_server()]),
            "duplicate server_id",
        ),
        (
            json!((0..17)
                .map(|i| with(
                    with(valid_server(), &["server_id"], json!(format!("s{i}"))),
                    &["server_name"],
                    json!(format!("n{i}"))
                ))
                .collect::<Vec<_>>()),
            "at most 16",
        ),
        // Strict decoding: an unknown field or an array where an object belongs.
        (json!([with(valid_server(), &["extra"], json!(1))]), "extra"),
        (json!([["docs-1", "docs"]]), "mcp_servers"),
    ];
    for (servers, wanted) in cases {
        let (status, body) = server
            .post("/v1/runs", start_body(&mock, &agent, servers.clone()))
            .await;
        assert_eq!(status, 400, "{servers} -> {body}");
        let message = body.to_string();
        assert!(
            message.contains(wanted),
            "{servers}: {message} should name {wanted}"
        );
        assert!(
            !message.contains("mcp-secret-token"),
            "the secret is echoed: {message}"
        );
    }
    assert_eq!(run_count(&server).await, 0, "a refused run was stored");
    server.stop().await;
}

#[tokio::test]
async fn a_retried_start_returns_the_existing_run_before_checking_servers() {
    let mock = MockProvider::start().await;
    let server = mcp_service(&mock).await;
    let agent = server.agent("mcp-agent", json!({})).await;
    let mut first = start_body(&mock, &agent, json!([]));
    first["host_run_id"] = json!("host-1");
    first.as_object_mut().unwrap().remove("mcp_servers");
    let (status, run) = server.post("/v1/runs", first.clone()).await;
    assert_eq!(status, 202, "{run}");
    let mut retry = first;
    retry["mcp_servers"] = json!([with(valid_server(), &["transport"], json!("stdio"))]);
    let (status, again) = server.post("/v1/runs", retry).await;
    assert!(status < 300, "{status} {again}");
    assert_eq!(again["id"], run["id"]);
    server.stop().await;
}

#[tokio::test]
async fn rotating_a_credential_needs_an_attached_server_and_never_echoes_it() {
    let mock = MockProvider::start().await;
    let server = mcp_service(&mock).await;
    let agent = server.agent("mcp-agent", json!({})).await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let id = run["id"].as_str().unwrap();
    let (status, body) = server
        .put(
            &format!("/v1/runs/{id}/mcp-servers/ghost/credential?app_id={APP}"),
            json!({"credential": {"type": "bearer_token", "access_token": "new-secret"}}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("not attached"), "{body}");
    assert!(!body.to_string().contains("new-secret"));
    server.stop().await;
}

#[tokio::test]
async fn capabilities_report_run_mcp_when_a_key_is_set() {
    let mock = MockProvider::start().await;
    let server = mcp_service(&mock).await;
    let (status, caps) = server.get("/v1/capabilities").await;
    assert_eq!(status, 200, "{caps}");
    assert_eq!(caps["run_mcp"]["supported"], true);
    assert_eq!(caps["run_mcp"]["credential_encryption_configured"], true);
    assert_eq!(caps["run_mcp"]["transports"], json!(["streamable_http"]));
    server.stop().await;
}
