//! The fixed providers as the original serves them: run credentials without a global key,
//! `openrouter_responses` as `openrouter`, and model controls normalised (request or agent).

use ar_test_support::mock_provider::{MockProvider, Reply};
use serde_json::{json, Value};

use ar_test_support::service::*;

/// A service whose `openai` and `openrouter` URLs point at `mock`, with no global key.
async fn keyless_server(mock: &MockProvider, dir: &tempfile::TempDir) -> TestServer {
    let mut env = env_for(mock, &dir.path().join("providers.db").display().to_string());
    env.insert("OPENAI_BASE_URL".into(), mock.base_url());
    env.insert("OPENROUTER_BASE_URL".into(), mock.base_url());
    TestServer::start_with(env).await
}

async fn run_to_end(server: &TestServer, agent: &str, extra: Value) -> (u16, Value) {
    let mut body = json!({"app_id": APP, "agent_id": agent,
                          "target": {"type": "ticket", "id": "T-1"}, "instructions": "Say hello."});
    merge(&mut body, &extra);
    let (status, run) = server.post("/v1/runs", body).await;
    if status == 202 {
        let ended = server
            .wait_status(
                run["id"].as_str().unwrap(),
                &["completed", "failed", "paused"],
            )
            .await;
        return (status, ended);
    }
    (status, run)
}

fn credential(key: &str) -> Value {
    json!({"type": "api_key", "api_key": key})
}

#[tokio::test]
async fn a_run_credential_needs_no_global_key_and_openrouter_responses_is_served() {
    let mock = MockProvider::start().await;
    let dir = tempfile::tempdir().unwrap();
    let server = keyless_server(&mock, &dir).await;
    let agent = server.agent("keyless", json!({})).await;
    for (provider, key) in [
        ("openai", "sk-run-openai"),
        ("openrouter_responses", "sk-run-or"),
    ] {
        mock.clear_requests();
        mock.push(Reply::text("hello"));
        let (status, run) = run_to_end(
            &server,
            &agent,
            json!({"model": {"provider": provider, "model": "m-1"}, "model_credential": credential(key)}),
        )
        .await;
        assert_eq!(status, 202, "{provider}: {run}");
        assert_eq!(run["status"], "completed", "{provider}: {run}");
        let requests = mock.model_requests();
        assert_eq!(requests.len(), 1, "{provider}");
        assert_eq!(requests[0].path, "/v1/responses", "{provider}");
        let bearer = format!("Bearer {key}");
        assert_eq!(requests[0].header("authorization"), Some(bearer.as_str()));
    }
    // Without a credential and without a global key there is nothing to call with.
    let (status, refused) = run_to_end(
        &server,
        &agent,
        json!({"model": {"provider": "openai", "model": "m-1"}}),
    )
    .await;
    assert!(
        status == 400 || refused["status"] == "failed",
        "{status} {refused}"
    );
    let (_, caps) = server.get("/v1/capabilities").await;
    let names: Vec<&str> = caps["providers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(names.contains(&"openrouter_responses"), "{caps}");
    server.stop().await;
}

#[tokio::test]
async fn controls_are_normalised_and_an_explicit_object_replaces_the_agents() {
    let mock = MockProvider::start().await;
    let dir = tempfile::tempdir().unwrap();
    let server = keyless_server(&mock, &dir).await;
    let openai = json!({"model": {"provider": "openai", "model": "m-1"}, "model_credential": credential("sk-run")});
    // Agent-level (legacy) controls, in any case: fast is OpenAI's priority.
    let legacy = server
        .agent(
            "legacy_controls",
            json!({"execution_config": {"reasoning_effort": " HIGH ", "service_tier": "Fast"}}),
        )
        .await;
    mock.push(Reply::text("one"));
    let (status, run) = run_to_end(&server, &legacy, openai.clone()).await;
    assert_eq!(
        (status, run["status"].as_str()),
        (202, Some("completed")),
        "{run}"
    );
    let body = mock.model_requests()[0].body.clone();
    assert_eq!(body["reasoning"], json!({"effort": "high"}), "{body}");
    assert_eq!(body["service_tier"], "priority", "{body}");
    assert_eq!(body["max_output_tokens"], 16384, "{body}");
    assert_eq!(
        run["input"]["model"]["controls"]["service_tier"], "fast",
        "{run}"
    );

    // An explicit controls object, even an empty one, replaces them.
    mock.clear_requests();
    mock.push(Reply::text("two"));
    let mut explicit = openai.clone();
    explicit["model"]["controls"] = json!({});
    run_to_end(&server, &legacy, explicit).await;
    let body = mock.model_requests()[0].body.clone();
    assert!(
        body.get("reasoning").is_none() && body.get("service_tier").is_none(),
        "{body}"
    );
    mock.clear_requests();
    mock.push(Reply::text("three"));
    let mut standard = openai.clone();
    standard["model"]["controls"] = json!({"service_tier": " default "});
    run_to_end(&server, &legacy, standard).await;
    assert_eq!(mock.model_requests()[0].body["service_tier"], "default");

    // OpenRouter quantizations, trimmed, lower-cased and deduplicated.
    mock.clear_requests();
    mock.push(Reply::text("four"));
    let plain = server.agent("plain", json!({})).await;
    let routed = json!({"model": {"provider": "openrouter", "model": "m-1",
                        "controls": {"openrouter": {"provider": {"quantizations": [" FP8", "fp8", "int4"]}}}},
                        "model_credential": credential("sk-or")});
    run_to_end(&server, &plain, routed).await;
    assert_eq!(
        mock.model_requests()[0].body["provider"],
        json!({"quantizations": ["fp8", "int4"]})
    );

    // Controls a provider does not take are refused at admission, from either source.
    let anthropic_legacy = server
        .agent(
            "anthropic_effort",
            json!({"provider": "anthropic", "model": "claude-x",
                   "execution_config": {"reasoning_effort": "low"}}),
        )
        .await;
    let anthropic = json!({"model": {"provider": "anthropic", "model": "claude-x"},
                           "model_credential": credential("sk-ant")});
    for (agent, extra, needle) in [
        (
            &anthropic_legacy,
            anthropic.clone(),
            "execution_config.reasoning_effort",
        ),
        (
            &plain,
            {
                let mut o = openai.clone();
                o["model"]["controls"] = json!({"service_tier": "turbo"});
                o
            },
            "model.controls.service_tier",
        ),
        (
            &plain,
            {
                let mut o = openai.clone();
                o["model"]["controls"] =
                    json!({"openrouter": {"provider": {"quantizations": ["fp8"]}}});
                o
            },
            "model.controls.openrouter",
        ),
    ] {
        let (status, body) = run_to_end(&server, agent, extra).await;
        assert_eq!(status, 400, "{body}");
        assert!(body["error"].as_str().unwrap().contains(needle), "{body}");
    }
    server.stop().await;
}

/// An `oauth` credential for `openai_chatgpt`, expiring in an hour.
fn chatgpt_credential() -> Value {
    json!({"type": "oauth", "access_token": "at-1",
           "expires_at": (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339(),
           "connection_id": "conn_1", "account_id": "acct-1"})
}

#[tokio::test]
async fn chatgpt_runs_are_refused_until_enabled_and_need_the_callback_and_an_oauth_credential() {
    let mock = MockProvider::start().await;
    mock.set_fallback(Some(Reply::text("not reached")));
    let chatgpt = |credential: Value| json!({"model": {"provider": "openai_chatgpt", "model": "gpt-sub"}, "model_credential": credential});
    // Not enabled: refused by name.
    let dir = tempfile::tempdir().unwrap();
    let server = keyless_server(&mock, &dir).await;
    let agent = server.agent("subscriber", json!({})).await;
    let (status, refused) = run_to_end(&server, &agent, chatgpt(chatgpt_credential())).await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("AGENT_RUNTIME_CHATGPT_ENABLED"),
        "{refused}"
    );
    let (_, caps) = server.get("/v1/capabilities").await;
    let listed = caps["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "openai_chatgpt")
        .cloned()
        .expect("listed even when off");
    assert_eq!(listed["configured"], false, "{listed}");
    server.stop().await;

    // Enabled, but the app has no refresh callback: the token could never be renewed.
    let dir = tempfile::tempdir().unwrap();
    let mut env = env_for(&mock, &dir.path().join("gpt.db").display().to_string());
    env.insert("AGENT_RUNTIME_CHATGPT_ENABLED".into(), "true".into());
    env.insert("AGENT_RUNTIME_CHATGPT_BASE_URL".into(), mock.chatgpt_url());
    let server = TestServer::start_with(env.clone()).await;
    let agent = server.agent("subscriber", json!({})).await;
    let (status, refused) = run_to_end(&server, &agent, chatgpt(chatgpt_credential())).await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("model_credential_callback"),
        "{refused}"
    );
    server.stop().await;

    // With a callback: only an oauth credential bound to an account and a connection, and
    // only for openai_chatgpt.
    let apps = json!({"apps": [{"app_id": APP,
        "model_credential_callback": {"url": "http://127.0.0.1:9/refresh", "token": "t"}}]});
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), apps.to_string());
    let server = TestServer::start_with(env).await;
    let agent = server.agent("subscriber", json!({})).await;
    let mut unbound = chatgpt_credential();
    unbound.as_object_mut().unwrap().remove("account_id");
    let mut undated = chatgpt_credential();
    undated.as_object_mut().unwrap().remove("expires_at");
    for (body, wanted) in [
        (chatgpt(credential("sk-key")), "oauth"),
        (chatgpt(unbound), "account_id"),
        (chatgpt(undated), "expires_at"),
        (
            json!({"model": {"provider": "openai", "model": "m"}, "model_credential": chatgpt_credential()}),
            "only valid for provider openai_chatgpt",
        ),
    ] {
        let (status, refused) = run_to_end(&server, &agent, body).await;
        assert_eq!(status, 400, "{refused}");
        let error = refused["error"].as_str().unwrap_or_default();
        assert!(error.contains(wanted), "{wanted}: {refused}");
    }
    assert_eq!(mock.request_count(), 0);
    server.stop().await;
}

#[tokio::test]
async fn a_rejected_or_revoked_run_credential_never_falls_back_to_the_runtimes_key() {
    let mock = MockProvider::start().await;
    mock.reject_key("sk-run-bad");
    mock.set_fallback(Some(Reply::text("answered")));
    let dir = tempfile::tempdir().unwrap();
    let mut env = env_for(&mock, &dir.path().join("fallback.db").display().to_string());
    env.insert("OPENAI_BASE_URL".into(), mock.base_url());
    env.insert("OPENAI_API_KEY".into(), "sk-runtime-global".into());
    let server = TestServer::start_with(env).await;
    let agent = server.agent("keyed", json!({})).await;
    let openai = json!({"model": {"provider": "openai", "model": "m-1"}});
    // Without a run credential the runtime's key is used.
    let (_, run) = run_to_end(&server, &agent, openai.clone()).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(mock.bearers(), vec!["Bearer sk-runtime-global"]);
    // A run credential the vendor refuses pauses the run; the runtime's key is never tried.
    mock.clear_requests();
    let mut with_key = openai.clone();
    with_key["model_credential"] = credential("sk-run-bad");
    let (_, run) = run_to_end(&server, &agent, with_key).await;
    assert_eq!(
        (run["status"].as_str(), run["pause_reason"].as_str()),
        (Some("paused"), Some("authentication")),
        "{run}"
    );
    assert_eq!(mock.bearers(), vec!["Bearer sk-run-bad"]);
    // Revoked and resumed: still no fallback, the run pauses again before any call.
    let run_id = run["id"].as_str().unwrap();
    let (status, body) = server.revoke_model_credential(run_id).await;
    assert_eq!(status, 204, "{body}");
    let (status, body) = server
        .post(
            &format!("/v1/runs/{run_id}/resume?app_id={APP}"),
            json!({"intent": "auth_completed"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    wait_for("the run to pause again", WAIT, || async {
        let events = server.events(run_id).await;
        let pauses = events.iter().filter(|e| e["type"] == "run.paused").count();
        (pauses == 2).then_some(())
    })
    .await;
    assert_eq!(server.run(run_id).await["pause_reason"], "authentication");
    assert_eq!(mock.bearers(), vec!["Bearer sk-run-bad"]);
    server.stop().await;
}

#[tokio::test]
async fn a_spent_quota_fails_the_run_at_once_saying_so() {
    let mock = MockProvider::start().await;
    mock.push(Reply::quota_exhausted());
    mock.set_fallback(Some(Reply::text("not reached")));
    let dir = tempfile::tempdir().unwrap();
    let server = keyless_server(&mock, &dir).await;
    let agent = server.agent("spent", json!({})).await;
    let (status, run) = run_to_end(
        &server,
        &agent,
        json!({"model": {"provider": "openai", "model": "m-1"}, "model_credential": credential("sk-run")}),
    )
    .await;
    assert_eq!(status, 202, "{run}");
    assert_eq!(run["status"], "failed", "{run}");
    let error = run["error_message"].as_str().unwrap_or_default();
    assert!(error.contains("quota exhausted"), "{run}");
    assert_eq!(mock.model_requests().len(), 1, "not retried");
    server.stop().await;
}

#[tokio::test]
async fn capabilities_list_every_provider_with_its_protocol_controls_and_auth_modes() {
    let mock = MockProvider::start().await;
    let dir = tempfile::tempdir().unwrap();
    let server = keyless_server(&mock, &dir).await;
    let (status, caps) = server.get("/v1/capabilities").await;
    assert_eq!(status, 200, "{caps}");
    let listed = caps["providers"].as_array().unwrap();
    let expected = [
        (
            "openai",
            "responses",
            json!(["reasoning_effort", "service_tier"]),
            json!(["api_key"]),
        ),
        (
            "anthropic",
            "anthropic_messages",
            json!(null),
            json!(["api_key"]),
        ),
        (
            "openrouter",
            "responses",
            json!(["reasoning_effort", "openrouter"]),
            json!(["api_key"]),
        ),
        (
            "openrouter_responses",
            "responses",
            json!(["reasoning_effort", "openrouter"]),
            json!(["api_key"]),
        ),
        (
            "openai_compatible",
            "chat_completions",
            json!(null),
            json!(["api_key", "none"]),
        ),
        (
            "openai_chatgpt",
            "responses",
            json!(["reasoning_effort", "service_tier"]),
            json!(["oauth"]),
        ),
    ];
    assert_eq!(listed.len(), expected.len(), "{caps}");
    for (name, protocol, controls, auth_modes) in expected {
        let provider = listed
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not listed: {caps}"));
        assert_eq!(provider["protocols"], json!([protocol]), "{provider}");
        assert_eq!(provider["controls"], controls, "{provider}");
        assert_eq!(provider["auth_modes"], auth_modes, "{provider}");
        assert_eq!(provider["run_credentials_configured"], true, "{provider}");
    }
    server.stop().await;
}
