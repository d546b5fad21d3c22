//! Auth, agents, admission checks and app scoping.

use ar_test_support::mock_provider::{MockProvider, Reply};
use serde_json::json;

use ar_test_support::service::*;

#[tokio::test]
async fn auth_is_required_and_compared_exactly() {
    let mock = MockProvider::start().await;
    let server = TestServer::start(&mock).await;
    let health = server
        .client
        .get(server.url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(
        health.json::<serde_json::Value>().await.unwrap()["status"],
        "ok"
    );
    for header in [
        None,
        Some("Bearer wrong"),
        Some("Basic abc"),
        Some("Bearer"),
    ] {
        let mut request = server
            .client
            .get(server.url(&format!("/v1/agents?app_id={APP}")));
        if let Some(value) = header {
            request = request.header("Authorization", value);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 401, "{header:?}");
        assert_eq!(
            response.json::<serde_json::Value>().await.unwrap()["error"],
            "unauthorized"
        );
    }
    let ok = server
        .client
        .get(server.url(&format!("/internal/agents?app_id={APP}")))
        .header("Authorization", format!("bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        ok.status(),
        200,
        "scheme is case-insensitive and /internal aliases /v1"
    );
    server.stop().await;
}

#[tokio::test]
async fn agents_are_created_updated_and_scoped_by_app() {
    let mock = MockProvider::start().await;
    let server = TestServer::start(&mock).await;
    let (status, created) = server
        .post(
            "/v1/agents",
            json!({"app_id": APP, "name": "Writer", "approval_mode": "mutating_tools"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert!(created["id"].as_str().unwrap().starts_with("agt_"));
    assert_eq!(created["runtime_kind"], "native_sdk");
    assert_eq!(created["default_invocation_mode"], "autonomous");
    let id = created["id"].as_str().unwrap();
    let (status, _) = server
        .get(&format!("/v1/agents/{id}?app_id=other_app"))
        .await;
    assert_eq!(status, 404, "another app's agent is not found");
    let (status, updated) = server
        .put(
            &format!("/v1/agents/{id}?app_id={APP}"),
            json!({"name": "Writer 2"}),
        )
        .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["name"], "Writer 2");
    assert_eq!(updated["created_at"], created["created_at"]);
    let (_, list) = server.get(&format!("/v1/agents?app_id={APP}")).await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    let (_, other) = server.get("/v1/agents?app_id=other_app").await;
    assert_eq!(other.as_array().unwrap().len(), 0);
    server.stop().await;
}

#[tokio::test]
async fn admission_checks_in_order_and_idempotent_start() {
    let mock = MockProvider::start().await;
    mock.set_fallback(Some(Reply::text("ok")));
    let server = TestServer::start(&mock).await;
    let agent = server
        .agent(
            "adm",
            json!({"allowed_tools": ["get_context"], "allowed_targets": ["ticket"]}),
        )
        .await;
    let base = |extra: serde_json::Value| {
        let mut body = json!({
            "app_id": APP, "agent_id": "adm", "target": {"type": "ticket", "id": "T"},
            "model": {"provider": "openai_compatible", "model": "m", "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}},
            "model_credential": {"type": "api_key", "api_key": "k"}
        });
        for (key, value) in extra.as_object().unwrap() {
            body[key] = value.clone();
        }
        body
    };
    let cases = [
        (json!({"agent_id": "missing"}), 400, "agent not found"),
        (
            json!({"target": {"type": "page", "id": "P"}}),
            400,
            "target type",
        ),
        (
            json!({"allowed_tools": ["run_command"]}),
            400,
            "may only narrow",
        ),
        (
            json!({"target": {"type": "ticket", "id": ""}}),
            400,
            "target.id is required",
        ),
        (
            json!({"model_credential": {"type": "none"}}),
            400,
            "does not match the endpoint auth_mode",
        ),
        (
            json!({"model": {"provider": "openai_compatible", "model": "m", "endpoint": {"id": "mock", "base_url": "https://evil.example/v1", "auth_mode": "api_key"}}}),
            400,
            "approved model endpoint",
        ),
        (
            json!({"turn_policy": {"mode": "forever"}}),
            400,
            "turn_policy.mode",
        ),
        (json!({"execution_mode": "durable"}), 400, "durable"),
        (json!({"surprise": true}), 400, "unknown field"),
        (
            json!({"model": {"provider": "openai_compatible", "model": "m", "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}, "controls": {"reasoning_effort": "high"}}}),
            400,
            "reasoning_effort",
        ),
    ];
    for (extra, status, needle) in cases {
        let (got, body) = server.post("/v1/runs", base(extra.clone())).await;
        assert_eq!(got, status, "{extra}: {body}");
        let said = format!("{} {}", body["error"], body["detail"]);
        assert!(said.contains(needle), "{extra}: {body}");
    }
    let (_, runs) = server.get(&format!("/v1/runs?app_id={APP}")).await;
    assert_eq!(
        runs.as_array().unwrap().len(),
        0,
        "rejected admissions change nothing"
    );

    let (first_status, first) = server
        .post("/v1/runs", base(json!({"host_run_id": "same"})))
        .await;
    let (second_status, second) = server
        .post("/v1/runs", base(json!({"host_run_id": "same"})))
        .await;
    assert_eq!((first_status, second_status), (202, 202));
    assert_eq!(first["id"], second["id"], "idempotent by host_run_id");
    let _ = agent;
    let (_, page) = server
        .get(&format!("/v1/runs/search?app_id={APP}&q=same&limit=5"))
        .await;
    assert_eq!(page["total"], 1);
    assert_eq!(page["limit"], 5);
    assert_eq!(page["items"][0]["host_run_id"], "same");
    let (status, _) = server
        .get(&format!(
            "/v1/runs/{}?app_id=other_app",
            first["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(status, 404);
    server.stop().await;
}

#[tokio::test]
async fn capabilities_and_app_health_describe_the_runtime() {
    let mock = MockProvider::start().await;
    let server = TestServer::start(&mock).await;
    let (status, caps) = server.get(&format!("/v1/capabilities?app_id={APP}")).await;
    assert_eq!(status, 200, "{caps}");
    assert!(caps["runtime_kinds"]
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k == "native_sdk"));
    assert_eq!(caps["store"]["driver"], "sqlite");
    assert_eq!(caps["service_auth_enabled"], true);
    assert_eq!(caps["apps"][0]["app_id"], APP);
    assert_eq!(caps["apps"][0]["model_endpoints"][0]["id"], "mock");
    assert!(caps["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "get_context"));
    // Durable execution and run-scoped MCP are not supported by this version (their settings
    // are refused), and capabilities say so.
    assert_eq!(caps["durable"], json!({"enabled": false}), "{caps}");
    assert_eq!(caps["run_mcp"]["supported"], false);
    assert_eq!(caps["run_mcp"]["credential_encryption_configured"], false);
    let (status, health) = server.get(&format!("/v1/app-health?app_id={APP}")).await;
    assert_eq!(status, 200, "{health}");
    assert!(health["components"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "store" && c["status"] == "ok"));
    server.stop().await;
}

#[tokio::test]
async fn app_health_probes_exactly_the_components_the_runtime_calls() {
    let mock = MockProvider::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut env = env_for(&mock, &dir.path().join("health.db").display().to_string());
    // Every host component this version calls; the mock answers each probe (< 500 is ok).
    let host = mock.root_url();
    let config = json!({"apps": [{
        "app_id": APP,
        "context_endpoint": format!("{host}/context?tenant=1"),
        "context_token": "ctx-token",
        "event_callbacks": [{"url": format!("{host}/hooks")}],
        "command_provider": {"base_url": format!("{host}/commands"), "commands": [{"name": "close_ticket"}]},
        "mcp_providers": [],
        "browser": null,
    }]});
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), config.to_string());
    let server = TestServer::start_with(env).await;
    let (status, health) = server.get(&format!("/v1/app-health?app_id={APP}")).await;
    assert_eq!(status, 200, "{health}");
    let components: Vec<(String, String, String)> = health["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let text = |key: &str| c[key].as_str().unwrap_or_default().to_string();
            (text("kind"), text("name"), text("status"))
        })
        .collect();
    let expected = [
        ("target_context", "target_context"),
        ("event_callback", "event_callback[0]"),
        ("command_provider", "command_provider"),
        ("store", "store"),
    ];
    assert_eq!(
        components,
        expected
            .iter()
            .map(|(kind, name)| (kind.to_string(), name.to_string(), "ok".to_string()))
            .collect::<Vec<_>>(),
        "{health}"
    );
    // The context URL is shown without its query string, and its token never.
    assert_eq!(health["components"][0]["url"], format!("{host}/context"));
    assert_eq!(health["components"][0]["auth_configured"], true);
    assert!(!health.to_string().contains("ctx-token"));
    server.stop().await;
}

#[tokio::test]
async fn the_native_model_setting_is_the_default_providers_model() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("hello"));
    let dir = tempfile::tempdir().unwrap();
    let mut env = env_for(&mock, &dir.path().join("model.db").display().to_string());
    env.insert("OPENAI_API_KEY".into(), "sk-global-test".into());
    env.insert("OPENAI_BASE_URL".into(), mock.base_url());
    env.insert("AGENT_RUNTIME_NATIVE_PROVIDER".into(), "openai".into());
    env.insert(
        "AGENT_RUNTIME_NATIVE_MODEL".into(),
        "gpt-native-test".into(),
    );
    let server = TestServer::start_with(env).await;
    let (_, caps) = server.get("/v1/capabilities").await;
    let openai = caps["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "openai")
        .cloned()
        .unwrap();
    assert_eq!(openai["default_model"], "gpt-native-test", "{caps}");

    // An agent and a run that name no model use it.
    let agent = server.agent("defaults", json!({})).await;
    let (status, run) = server
        .post(
            "/v1/runs",
            json!({"app_id": APP, "agent_id": agent, "target": {"type": "ticket", "id": "T-1"},
                   "instructions": "Say hello."}),
        )
        .await;
    assert_eq!(status, 202, "{run}");
    server
        .wait_status(run["id"].as_str().unwrap(), &["completed"])
        .await;
    let requests = mock.model_requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["model"], "gpt-native-test");
    server.stop().await;
}

/// As in the original service, the app configuration does not gate agents: an agent may be
/// created (`POST`) or upserted (`PUT`) for an app the configuration does not list, and with no
/// app configuration at all (a newcomer's first run), for any app.
#[tokio::test]
async fn agents_of_apps_outside_the_app_configuration_are_created() {
    let mock = MockProvider::start().await;
    for with_app_config in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut env = env_for(&mock, &dir.path().join("runtime.db").display().to_string());
        if !with_app_config {
            env.remove("AGENT_RUNTIME_APP_CONFIG");
        }
        let server = TestServer::start_with(env).await;
        let (status, created) = server
            .post(
                "/v1/agents",
                json!({"app_id": "unlisted_app", "name": "outsider"}),
            )
            .await;
        assert_eq!(status, 201, "{created}");
        let (status, upserted) = server
            .put(
                "/v1/agents/outsider_2?app_id=unlisted_app",
                json!({"name": "outsider 2"}),
            )
            .await;
        assert_eq!(status, 201, "{upserted}");
        let (status, listed) = server.get("/v1/agents?app_id=unlisted_app").await;
        assert_eq!(status, 200);
        assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
        server.stop().await;
    }
}
