//! Skills and the agent's execution policy: the built-in catalogue in capabilities, skill
//! instructions in the system prompt the model receives, the skill tools, refusals at
//! admission, `completion.required_tools` and the skill-policy corrective turn.

use ar_test_support::mock_provider::{MockProvider, Reply};
use serde_json::{json, Value};

use ar_test_support::service::*;

/// The system prompt of the `index`th model request.
fn system_prompt(mock: &MockProvider, index: usize) -> String {
    let requests = mock.model_requests();
    let body = &requests[index].body;
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Every message text of the `index`th model request, joined.
fn transcript(mock: &MockProvider, index: usize) -> String {
    let requests = mock.model_requests();
    let messages = requests[index].body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    messages
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

async fn finished(server: &TestServer, run: &Value) -> Value {
    let run_id = run["id"].as_str().unwrap();
    server
        .wait_status(run_id, &["completed", "failed", "paused"])
        .await
}

#[tokio::test]
async fn capabilities_list_the_built_in_skills() {
    let mock = MockProvider::start().await;
    let server = TestServer::start(&mock).await;
    let (status, caps) = server.get("/v1/capabilities").await;
    assert_eq!(status, 200);
    let skills = caps["skills"].as_array().expect("skills listed");
    let keys: Vec<&str> = skills.iter().filter_map(|s| s["key"].as_str()).collect();
    for key in [
        "approval_protocol",
        "code_builder",
        "review_agent",
        "dependency_auditor",
        "epic_planner",
        "task_planner",
        "documentation_agent",
    ] {
        assert!(keys.contains(&key), "{key} in {keys:?}");
    }
    let approval = skills
        .iter()
        .find(|s| s["key"] == "approval_protocol")
        .unwrap();
    assert_eq!(approval["title"], "Approval Protocol");
    assert!(approval["description"].as_str().unwrap().len() > 10);
    assert_eq!(
        approval.as_object().unwrap().len(),
        3,
        "SkillInfo shape: {approval}"
    );
}

#[tokio::test]
async fn skill_instructions_reach_the_system_prompt_and_a_manifest_is_recorded() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("done"));
    let server = TestServer::start(&mock).await;
    let agent = server
        .agent(
            "skilled",
            json!({"skills": [{"key": "general_agent_behavior"}]}),
        )
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let done = finished(&server, &run).await;
    assert_eq!(done["status"], "completed", "{done}");
    let prompt = system_prompt(&mock, 0);
    assert!(prompt.starts_with("You help."), "{prompt}");
    assert!(
        prompt.contains("## Skill: General Agent Behaviour"),
        "{prompt}"
    );
    assert!(
        prompt.contains("Answer the request that was made"),
        "{prompt}"
    );
    let artifacts = server.list(run["id"].as_str().unwrap(), "artifacts").await;
    let manifest = artifacts
        .iter()
        .find(|a| a["artifact_type"] == "runtime_skill_manifest")
        .expect("manifest artifact");
    let content: Value =
        serde_json::from_str(manifest["inline_content"].as_str().unwrap()).unwrap();
    assert_eq!(content["skills"][0]["key"], "general_agent_behavior");
    assert_eq!(content["skills"][0]["source_kind"], "built_in");
}

#[tokio::test]
async fn available_skills_are_read_through_the_skill_tools() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call("list_available_skills", "{}"));
    mock.push(Reply::tool_call(
        "read_skill",
        r#"{"key":"api_doc_writing"}"#,
    ));
    mock.push(Reply::text("read it"));
    let server = TestServer::start(&mock).await;
    let skills = json!([
        {"key": "general_agent_behavior", "config": {"runtime_skill_role": "instruction"}},
        {"key": "api_doc_writing", "config": {"runtime_skill_role": "available"}}
    ]);
    let agent = server.agent("split", json!({"skills": skills})).await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let done = finished(&server, &run).await;
    assert_eq!(done["status"], "completed", "{done}");
    let prompt = system_prompt(&mock, 0);
    assert!(
        !prompt.contains("Answer the request that was made"),
        "instruction role is the host's: {prompt}"
    );
    assert!(prompt.contains("list_available_skills"), "{prompt}");
    let tools = &mock.model_requests()[0].body["tools"];
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    for name in [
        "list_available_skills",
        "search_available_skills",
        "read_skill",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    let second = transcript(&mock, 1);
    assert!(second.contains("\"key\":\"api_doc_writing\""), "{second}");
    assert!(
        !second.contains("\"key\":\"general_agent_behavior\""),
        "{second}"
    );
    let third = transcript(&mock, 2);
    assert!(third.contains("# API Documentation Writing"), "{third}");
    let calls = server.list(run["id"].as_str().unwrap(), "tool-calls").await;
    let called: Vec<&str> = calls
        .iter()
        .filter_map(|c| c["tool_name"].as_str())
        .collect();
    assert_eq!(called, ["list_available_skills", "read_skill"]);
}

#[tokio::test]
async fn admission_refuses_what_cannot_be_honoured() {
    let mock = MockProvider::start().await;
    let server = TestServer::start(&mock).await;
    let body = |agent: &str| {
        json!({
            "app_id": APP, "agent_id": agent, "target": {"type": "ticket", "id": "T-1"},
            "model": {"provider": "openai_compatible", "model": "m",
                      "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}},
            "model_credential": {"type": "api_key", "api_key": RUN_API_KEY}
        })
    };
    let cases = [
        (
            json!({"skills": [{"key": "ghost"}]}),
            "unknown skill \"ghost\"",
        ),
        (
            json!({"skills": [{"key": "approval_protocol"}]}),
            "skill \"approval_protocol\" requires tool \"request_approval\"",
        ),
        (
            json!({"skills": [{"skill_id": "sk_1"}]}),
            "workspace skill lookup is not configured",
        ),
        (
            json!({"skills": [{"key": "code_builder"}, {"key": "code_builder"}]}),
            "duplicate skill reference \"builtin:code_builder\"",
        ),
        (
            json!({"execution_config": {"completion": {"required": ["x"]}}}),
            "execution_config.completion: unknown field `required`",
        ),
    ];
    let before = server.run_count().await;
    for (index, (extra, expected)) in cases.into_iter().enumerate() {
        let agent = server.agent(&format!("refused-{index}"), extra).await;
        let (status, answer) = server.post("/v1/runs", body(&agent)).await;
        assert_eq!(status, 400, "{answer}");
        let error = answer["error"].as_str().unwrap();
        assert!(
            error.starts_with(expected),
            "{error:?} should start with {expected:?}"
        );
    }
    assert_eq!(
        server.run_count().await,
        before,
        "refused runs are not stored"
    );
}

#[tokio::test]
async fn a_run_without_a_successful_call_of_a_required_tool_fails() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("finished without it"));
    let server = TestServer::start(&mock).await;
    let policy = json!({"allowed_tools": ["get_context"], "execution_config": {"completion": {"required_tools": ["get_context"]}}});
    let agent = server.agent("strict", policy).await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let done = finished(&server, &run).await;
    assert_eq!(done["status"], "failed", "{done}");
    let error = done["error_message"].as_str().unwrap();
    assert!(error.contains("required tool(s) get_context"), "{error}");

    mock.push(Reply::tool_call("get_context", "{}"));
    mock.push(Reply::text("done with it"));
    let run = server.start_run(&mock, &agent, json!({})).await;
    let done = finished(&server, &run).await;
    assert_eq!(done["status"], "completed", "{done}");
}

#[tokio::test]
async fn a_required_interaction_earns_one_corrective_turn_then_fails() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("all done"));
    mock.push(Reply::text("still done"));
    let server = TestServer::start(&mock).await;
    let policy = json!({"execution_config": {"runtime_policy": {"completion_requires_interaction_kinds": ["approval_request"]}}});
    let agent = server.agent("needs-approval", policy).await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let done = finished(&server, &run).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert!(
        done["error_message"]
            .as_str()
            .unwrap()
            .contains("[approval_request]"),
        "{done}"
    );
    assert_eq!(
        mock.model_requests().len(),
        2,
        "exactly one corrective turn"
    );
    assert!(transcript(&mock, 1).contains("Runtime skill policy correction"));
}

#[tokio::test]
async fn the_corrective_turn_can_satisfy_the_policy() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("all done"));
    mock.push(Reply::tool_call(
        "request_approval",
        r#"{"title":"Ship it?"}"#,
    ));
    let server = TestServer::start(&mock).await;
    let extra =
        json!({"allowed_tools": ["request_approval"], "skills": [{"key": "approval_protocol"}]});
    let agent = server.agent("approver", extra).await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let done = finished(&server, &run).await;
    assert_eq!(done["status"], "paused", "{done}");
    assert_eq!(done["pause_reason"], "human_approval");
    assert!(system_prompt(&mock, 0).contains("## Skill: Approval Protocol"));
}

/// The service with [`APP`]'s `skill_provider` at `host` (token `skill-token`).
async fn server_with_skill_host(
    mock: &MockProvider,
    host: &ar_test_support::skill_host::SkillHost,
) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut env = env_for(mock, &dir.path().join("skills.db").display().to_string());
    let provider = json!({"skill_provider": {
        "transport": "http", "base_url": host.base_url(), "token": "skill-token"
    }});
    let config = app_config(mock, provider);
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), config.to_string());
    (TestServer::start_with(env).await, dir)
}

#[tokio::test]
async fn host_skills_come_from_the_apps_skill_provider() {
    use ar_test_support::skill_host::{workspace_skill, SkillHost};
    let host = SkillHost::start(Some("skill-token")).await;
    host.add(workspace_skill(
        "sk_1",
        "github_triage",
        "v3",
        "Label every new issue by area.",
    ));
    let mut pinned = workspace_skill(
        "sk_2",
        "release_notes",
        "v1",
        "Write release notes from merged pull requests.",
    );
    pinned["policy"]["completion_requires_interaction_kinds"] = json!(["approval_request"]);
    host.add(pinned);
    let mut packaged = workspace_skill("sk_3", "packaged", "v1", "x");
    packaged["package_object_key"] = json!("skills/packaged.zip");
    host.add(packaged);
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call(
        "request_approval",
        r#"{"title":"Notes ok?"}"#,
    ));
    let (server, _dir) = server_with_skill_host(&mock, &host).await;
    let skills = json!([{"key": "github_triage"}, {"skill_id": "sk_2", "version_key": "v1"}, {"key": "approval_protocol"}]);
    let agent = server
        .agent(
            "hosted",
            json!({"skills": skills, "allowed_tools": ["request_approval"]}),
        )
        .await;
    let run = server
        .start_run(
            &mock,
            &agent,
            json!({"trigger": {"kind": "manual"}, "metadata": {"team": "core"}}),
        )
        .await;
    let done = finished(&server, &run).await;
    assert_eq!(done["status"], "paused", "{done}");
    let prompt = system_prompt(&mock, 0);
    assert!(
        prompt.contains("## Skill: Skill github_triage\n\nLabel every new issue by area."),
        "{prompt}"
    );
    assert!(
        prompt.contains("Write release notes from merged pull requests."),
        "{prompt}"
    );
    assert!(
        prompt.contains("## Skill: Approval Protocol"),
        "built-ins need no lookup: {prompt}"
    );

    // The SDK router's request shape, with the run's context, and the bearer token.
    let requests = host.requests();
    let (route, body) = &requests[0];
    assert_eq!(route, "active-by-key");
    assert_eq!(body["key"], "github_triage");
    assert_eq!(body["app_id"], APP);
    assert_eq!(body["agent_id"], agent);
    assert_eq!(body["run_id"], run["id"]);
    assert_eq!(body["target"]["type"], "ticket");
    assert_eq!(body["trigger"]["kind"], "manual");
    assert_eq!(body["metadata"]["team"], "core");
    assert!(requests
        .iter()
        .any(|(route, body)| route == "by-id" && body["skill_id"] == "sk_2"));
    assert!(requests
        .iter()
        .all(|(_, body)| body["key"] != "approval_protocol"));
    let asked = |key: &str| {
        requests
            .iter()
            .filter(|(_, body)| body["key"] == key)
            .count()
    };
    assert_eq!(
        asked("github_triage"),
        1,
        "the first turn reuses admission's lookup"
    );

    // Refusals at admission: unknown to the provider (204), a version the provider does not
    // have, a package this version cannot unpack.
    let cases = [
        (json!([{"key": "ghost"}]), "unknown skill \"ghost\""),
        (
            json!([{"key": "github_triage", "version": "v2"}]),
            "workspace skill \"github_triage\" version mismatch",
        ),
        (json!([{"skill_id": "sk_404"}]), "workspace skill not found"),
        (
            json!([{"key": "packaged"}]),
            "workspace skill \"packaged\" package \"skills/packaged.zip\" could not be fetched: app \"host_app\" has no skill package store (skill_provider.package_base_url)",
        ),
    ];
    for (index, (skills, expected)) in cases.into_iter().enumerate() {
        let agent = server
            .agent(&format!("hosted-{index}"), json!({"skills": skills}))
            .await;
        let mut body =
            json!({"app_id": APP, "agent_id": agent, "target": {"type": "ticket", "id": "T-1"}});
        merge(
            &mut body,
            &json!({"model": {"provider": "openai_compatible", "model": "m",
            "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}},
            "model_credential": {"type": "api_key", "api_key": RUN_API_KEY}}),
        );
        let (status, answer) = server.post("/v1/runs", body).await;
        assert_eq!(status, 400, "{answer}");
        assert!(
            answer["error"].as_str().unwrap().starts_with(expected),
            "{answer}"
        );
    }
}

#[tokio::test]
async fn a_skill_provider_that_refuses_the_token_fails_admission_clearly() {
    use ar_test_support::skill_host::{workspace_skill, SkillHost};
    let host = SkillHost::start(Some("another-token")).await;
    host.add(workspace_skill("sk_1", "github_triage", "v3", "Label."));
    let mock = MockProvider::start().await;
    let (server, _dir) = server_with_skill_host(&mock, &host).await;
    let agent = server
        .agent("denied", json!({"skills": [{"key": "github_triage"}]}))
        .await;
    let body = json!({"app_id": APP, "agent_id": agent, "target": {"type": "ticket", "id": "T-1"},
        "model": {"provider": "openai_compatible", "model": "m",
                  "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}},
        "model_credential": {"type": "api_key", "api_key": RUN_API_KEY}});
    let (status, answer) = server.post("/v1/runs", body).await;
    assert_eq!(status, 400, "{answer}");
    let error = answer["error"].as_str().unwrap();
    assert!(
        error.starts_with("skill provider failed: active-by-key returned HTTP 401"),
        "{error}"
    );
    assert!(
        !error.contains("skill-token"),
        "no secret in errors: {error}"
    );
    assert!(host.requests().is_empty());
}

#[tokio::test]
async fn skills_on_a_run_mcp_server_are_resolved_with_the_runs() {
    let mock = MockProvider::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut env = env_for(&mock, &dir.path().join("mcp.db").display().to_string());
    env.insert(
        "AGENT_RUNTIME_MCP_CREDENTIAL_ENCRYPTION_KEY".into(),
        CREDENTIAL_KEY.into(),
    );
    let server = TestServer::start_with(env).await;
    let agent = server.agent("mcp-skills", json!({})).await;
    let attach = |skills: Value| {
        json!({
            "app_id": APP, "agent_id": agent, "target": {"type": "ticket", "id": "T-1"},
            "model": {"provider": "openai_compatible", "model": "m",
                      "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}},
            "model_credential": {"type": "api_key", "api_key": RUN_API_KEY},
            "mcp_servers": [{"server_id": "gh-1", "server_name": "github", "transport": "streamable_http",
                             "url": "https://mcp.example.com/mcp",
                             "tools": [{"name": "get_issue", "access": "read"}], "skills": skills}]
        })
    };
    for (skills, expected) in [
        (
            json!([{"key": "github_triage"}]),
            "unknown skill \"github_triage\"",
        ),
        (
            json!([{"key": "approval_protocol"}]),
            "skill \"approval_protocol\" requires tool \"request_approval\"",
        ),
    ] {
        let (status, answer) = server.post("/v1/runs", attach(skills)).await;
        assert_eq!(status, 400, "{answer}");
        assert_eq!(answer["error"], expected);
    }
    assert_eq!(server.run_count().await, 0);
}

#[tokio::test]
async fn explicit_completion_passes_the_skill_policy_gate_too() {
    let mock = MockProvider::start().await;
    let finish = r#"{"outcome":"completed","summary":"done"}"#;
    mock.push(Reply::tool_call("finish_turn", finish));
    mock.push(Reply::tool_call("finish_turn", finish));
    let server = TestServer::start(&mock).await;
    let policy = json!({"execution_config": {"runtime_policy": {"completion_requires_interaction_kinds": ["review_checkpoint"]}}});
    let agent = server.agent("explicit", policy).await;
    let run = server
        .start_run(
            &mock,
            &agent,
            json!({"turn_policy": {"completion_mode": "explicit"}}),
        )
        .await;
    let done = finished(&server, &run).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert!(done["error_message"]
        .as_str()
        .unwrap()
        .contains("[review_checkpoint]"));
    let second = &mock.model_requests()[1].body["messages"];
    let last = second.as_array().unwrap().last().unwrap();
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .contains("Runtime skill policy correction"),
        "{last}"
    );
    let results: Vec<&Value> = second
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(
        results.len(),
        1,
        "the refused finish_turn got its result: {second}"
    );
}

#[tokio::test]
async fn skills_are_resolved_again_when_a_paused_run_resumes() {
    use ar_test_support::skill_host::{workspace_skill, SkillHost};
    let host = SkillHost::start(Some("skill-token")).await;
    host.add(workspace_skill(
        "sk_1",
        "github_triage",
        "v3",
        "Label every new issue by area.",
    ));
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call(
        "request_approval",
        r#"{"title":"Labels ok?"}"#,
    ));
    let (server, _dir) = server_with_skill_host(&mock, &host).await;
    let extra =
        json!({"skills": [{"key": "github_triage"}], "allowed_tools": ["request_approval"]});
    let agent = server.agent("resumed", extra).await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let paused = finished(&server, &run).await;
    assert_eq!(paused["status"], "paused", "{paused}");
    let lookups = host.requests().len();

    host.archive("github_triage");
    let run_id = run["id"].as_str().unwrap();
    let (status, _) = server
        .post(
            &format!("/v1/runs/{run_id}/approve?app_id={APP}"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200);
    let done = server.wait_status(run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(done["error_message"], "unknown skill \"github_triage\"");
    assert!(
        host.requests().len() > lookups,
        "the resumed turn asked the provider again"
    );
    assert_eq!(
        mock.model_requests().len(),
        1,
        "no model call without the skill"
    );
}

#[tokio::test]
async fn the_runs_preset_and_target_choose_the_active_documentation_skills() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("drafted"));
    let server = TestServer::start(&mock).await;
    let skills = json!([
        {"key": "docs_information_architecture"},
        {"key": "api_doc_writing"},
        {"key": "support_gap_to_docs"}
    ]);
    let agent = server.agent("docs", json!({"skills": skills})).await;
    let extra = json!({
        "target": {"type": "support_conversation", "id": "C-7"},
        "metadata": {"preset_key": "documentation_agent"}
    });
    let run = server.start_run(&mock, &agent, extra).await;
    let done = finished(&server, &run).await;
    assert_eq!(done["status"], "completed", "{done}");
    let prompt = system_prompt(&mock, 0);
    assert!(
        prompt.contains("## Skill: Docs Information Architecture"),
        "{prompt}"
    );
    assert!(prompt.contains("## Skill: Support Gap to Docs"), "{prompt}");
    assert!(
        !prompt.contains("## Skill: API Documentation Writing"),
        "not this target's: {prompt}"
    );
    let artifacts = server.list(run["id"].as_str().unwrap(), "artifacts").await;
    let manifest = artifacts
        .iter()
        .find(|a| a["artifact_type"] == "runtime_skill_manifest")
        .expect("manifest artifact");
    let content: Value =
        serde_json::from_str(manifest["inline_content"].as_str().unwrap()).unwrap();
    let roles: Vec<(&str, &str)> = content["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["key"].as_str().unwrap(), s["role"].as_str().unwrap()))
        .collect();
    assert_eq!(
        roles,
        [
            ("docs_information_architecture", "default"),
            ("api_doc_writing", "available"),
            ("support_gap_to_docs", "default")
        ]
    );
}
