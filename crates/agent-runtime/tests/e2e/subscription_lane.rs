//! The ChatGPT-subscription text-only lane in the product: an agent whose `execution_config`
//! asks for `chat_subscription_isolated_v1` runs its turns through seed 000's subscription lane
//! (the pinned real codex, the exact argv, the strict JSONL machine), signed in as the app's
//! ChatGPT account — a sign-in made first through `POST …/codex-auth/device-code/start` with a
//! real `codex app-server` against the mock provider. The service is then restarted on the
//! same store (the sign-in outlives it) with its ChatGPT backend at the mock's Responses
//! endpoint, which stands in for the backend the lane's codex talks to (codex 0.171 pointed at
//! a loopback backend sends no `instructions`, which the mock's ChatGPT dialect refuses as the
//! real backend does; in production the lane uses codex's own provider and backend, which this
//! test cannot reach). The answer's validated `ResponseMetadata` is on the run's message; a lane agent with tools, a workspace, a run model route, a placement elsewhere or
//! an account the app has not signed in is refused at `POST /v1/runs` naming the rule.
//!
//! A missing codex skips loudly; under `CI=true` it fails instead.

use std::time::Duration;

use ar_test_support::mock_provider::{DeviceLoginScript, MockProvider, Reply, Usage};
use ar_test_support::require_cli;
use ar_test_support::service::*;
use serde_json::{json, Value};

use crate::codex_auth::{env, sign_in};
use crate::BIN;

const MODEL: &str = "gpt-5.5";

fn lane_agent(extra: Value) -> Value {
    let mut agent = json!({"runtime_kind": "codex", "model": MODEL,
        "execution_config": {"authority": "chat_subscription_isolated_v1",
                             "chatgpt_account_id": "acct_mock_1"}});
    merge(&mut agent, &extra);
    agent
}

fn run_body(agent: &str, extra: Value) -> Value {
    let mut body = json!({"app_id": APP, "agent_id": agent,
        "target": {"type": "ticket", "id": "T-7"}, "instructions": "Say hello."});
    merge(&mut body, &extra);
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_agent_answers_through_the_subscription_lane_with_response_metadata() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.device_login(DeviceLoginScript::default());
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(BIN, &env(dir.path(), &mock)).await;
    let agent = server.agent("lane", lane_agent(json!({}))).await;

    // Before the app has signed in, the lane refuses the run by name.
    let (status, body) = server.post("/v1/runs", run_body(&agent, json!({}))).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("no codex sign-in for ChatGPT account acct_mock_1"),
        "{body}"
    );

    sign_in(&server, &mock).await;
    drop(server);
    let mut lane_env = env(dir.path(), &mock);
    lane_env.insert("AGENT_RUNTIME_CHATGPT_BASE_URL".into(), mock.base_url());
    let server = Server::start(BIN, &lane_env).await;
    mock.push(Reply::text("Hello from the lane").usage(Usage::new(30, 9)));
    let (status, run) = server.post("/v1/runs", run_body(&agent, json!({}))).await;
    assert_eq!(status, 202, "{run}");
    let run_id = run["id"].as_str().expect("run id").to_string();
    let done = server.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(
        done["status"],
        "completed",
        "{done} {:?}",
        server.events(&run_id).await
    );

    let messages = server.list(&run_id, "messages").await;
    let answer = messages
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap_or_else(|| panic!("no answer: {messages:?}"));
    assert_eq!(answer["content"], "Hello from the lane");
    let blocks = answer["content_blocks"].as_array().expect("content blocks");
    let meta = blocks
        .iter()
        .find(|b| b["type"] == "response_metadata")
        .map(|b| b["response_metadata"].clone())
        .unwrap_or_else(|| panic!("no response metadata: {blocks:?}"));
    assert_eq!(meta["requested_model"], MODEL);
    assert_eq!(meta["terminal_status"], "completed");
    assert_eq!(meta["usage_source"], "codex_exec_jsonl");
    assert_eq!(meta["usage"]["output_tokens"], 9);
    assert_eq!(
        meta["observed_adapter_revision"],
        meta["selected_adapter_revision"]
    );
    assert!(meta["observed_codex_version"]
        .as_str()
        .unwrap_or_default()
        .starts_with("codex-cli"));

    // The lane's codex talked to the ChatGPT backend stand-in as the signed-in account, and
    // was offered no tool that runs commands (codex still declares `apply_patch`: a file
    // change it reports is an active item, which the lane's state machine fails the turn on).
    let request = mock
        .model_requests()
        .into_iter()
        .rfind(|r| r.path == "/v1/responses")
        .expect("a request at the ChatGPT backend's stand-in");
    let tokens = mock.issued_chatgpt_tokens();
    let bearer = request
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(
        tokens.iter().any(|t| bearer == format!("Bearer {t}")),
        "the sign-in's access token"
    );
    assert_eq!(
        request
            .headers
            .get("chatgpt-account-id")
            .and_then(|v| v.to_str().ok()),
        Some("acct_mock_1")
    );
    let tools: Vec<String> = request.body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        !tools
            .iter()
            .any(|t| t == "shell" || t == "exec_command" || t == "unified_exec"),
        "{tools:?}"
    );
    // No token in what the service says or logs.
    let history = server.events(&run_id).await;
    for token in &tokens {
        assert!(!format!("{history:?}{messages:?}").contains(token.as_str()));
        assert!(!server.process.stderr().contains(token.as_str()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_would_break_the_lane_is_refused_naming_the_rule() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.device_login(DeviceLoginScript::default());
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(BIN, &env(dir.path(), &mock)).await;
    sign_in(&server, &mock).await;
    let before = server.run_count().await;
    let cases: Vec<(Value, Value, &str)> = vec![
        (
            json!({"allowed_tools": ["get_context"]}),
            json!({}),
            "the agent's tools would break it (allowed_tools: get_context)",
        ),
        (
            json!({"execution_config": {"authority": "chat_subscription_isolated_v1", "chatgpt_account_id": "acct_mock_1", "workspace": {"mode": "host_prepared"}}}),
            json!({}),
            "a workspace would break it",
        ),
        (
            json!({}),
            json!({"model": {"provider": "openai_compatible", "model": "m", "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}}, "model_credential": {"type": "api_key", "api_key": "k"}}),
            "a run model route does not apply",
        ),
        (
            json!({"execution_config": {"authority": "chat_subscription_isolated_v1", "chatgpt_account_id": "acct_mock_1", "placement": {"machine": "gpu-1"}}}),
            json!({}),
            "remove execution_config.placement",
        ),
        (
            json!({"execution_config": {"authority": "chat_subscription_isolated_v1", "chatgpt_account_id": "acct_other"}}),
            json!({}),
            "no codex sign-in for ChatGPT account acct_other",
        ),
        (
            json!({"execution_config": {"authority": "chat_subscription_isolated_v1"}}),
            json!({}),
            "needs execution_config.chatgpt_account_id",
        ),
        (
            json!({"execution_config": {"authority": "root"}}),
            json!({}),
            "is not supported",
        ),
        (
            json!({"runtime_kind": "claude_code"}),
            json!({}),
            "the lane runs codex agents, not claude_code",
        ),
    ];
    for (i, (agent_extra, run_extra, needle)) in cases.into_iter().enumerate() {
        let agent = server
            .agent(&format!("lane-{i}"), lane_agent(agent_extra))
            .await;
        let (status, body) = server.post("/v1/runs", run_body(&agent, run_extra)).await;
        assert_eq!(status, 400, "case {i}: {body}");
        let error = body["error"].as_str().unwrap_or_default();
        assert!(error.contains(needle), "case {i}: {error}");
    }
    assert_eq!(server.run_count().await, before, "nothing was stored");
    let _ = Duration::ZERO;
}
