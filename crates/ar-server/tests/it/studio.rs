//! The service as a studio runtime, end to end through its embedded studio: enqueue through
//! the people API, a breakpoint parks a tool, approval, steering, a fork from step N with an
//! edit, scripted replay at zero tokens and a scripted miss, and the bad-input corpus.

use std::time::Duration;

use ar_test_support::mock_provider::{MockProvider, Reply, ToolCall, Usage};
use serde_json::{json, Value};

use ar_test_support::service::*;

const AGENT: &str = "host_app/helper";

/// A service whose OpenAI provider is the mock, so studio runs (no host credential) work.
async fn studio_server(mock: &MockProvider) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let dsn = dir.path().join("runtime.db").display().to_string();
    let mut env: Env = env_for(mock, &dsn);
    env.insert("OPENAI_API_KEY".into(), "sk-studio-test".into());
    env.insert("OPENAI_BASE_URL".into(), mock.base_url());
    env.insert("AGENT_RUNTIME_NATIVE_PROVIDER".into(), "openai".into());
    (TestServer::start_with(env).await, dir)
}

/// Waits until the service's runtime is registered with `agent`; returns the runtime id.
async fn runtime_with(server: &TestServer, agent: &str) -> String {
    let started = std::time::Instant::now();
    for _ in 0..400 {
        let (status, body) = server.get("/api/runtimes").await;
        assert_eq!(status, 200, "{body}");
        for rt in body["runtimes"].as_array().cloned().unwrap_or_default() {
            let has = rt["agents"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x["name"] == agent));
            if has && rt["connected"] == true {
                eprintln!("runtime registered after {:?}", started.elapsed());
                return rt["id"].as_str().unwrap_or_default().to_string();
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("runtime with {agent} never registered");
}

/// Polls a command until it reaches one of `states`.
async fn command_until(server: &TestServer, id: &str, states: &[&str]) -> Value {
    let mut last = Value::Null;
    for _ in 0..400 {
        let (status, body) = server.get(&format!("/api/playground/commands/{id}")).await;
        assert_eq!(status, 200, "{body}");
        if states.contains(&body["state"].as_str().unwrap_or_default()) {
            return body;
        }
        last = body;
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("command {id} never reached {states:?}: {last}");
}

async fn enqueue(server: &TestServer, body: Value) -> Value {
    let (status, answer) = server.post("/api/playground/runs", body).await;
    assert_eq!(status, 202, "{answer}");
    answer
}

/// Waits for a studio run to reach one of `statuses` (it may not exist yet right after the
/// accepted ack: its id is minted at admission, the run starts when the command executes).
async fn wait_run(server: &TestServer, run_id: &str, statuses: &[&str]) -> Value {
    for _ in 0..400 {
        let (status, run) = server.get(&format!("/v1/runs/{run_id}?app_id={APP}")).await;
        if status == 200 {
            return server.wait_status(run_id, statuses).await;
        }
        assert_eq!(status, 404, "{run}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("run {run_id} never appeared");
}

async fn run_view(server: &TestServer, run_id: &str) -> Value {
    let (status, body) = server.get(&format!("/studio/api/runs/{run_id}")).await;
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test]
async fn the_service_runs_studio_commands_end_to_end() {
    let mock = MockProvider::start().await;
    let (server, _dir) = studio_server(&mock).await;
    server
        .agent("helper", json!({"allowed_tools": ["get_context"]}))
        .await;
    let runtime = runtime_with(&server, AGENT).await;
    let (status, rt) = server.get(&format!("/api/runtimes/{runtime}")).await;
    assert_eq!(status, 200);
    let tools = &rt["agents"][0]["tools"];
    assert_eq!(tools[0]["name"], "get_context");
    assert_eq!(tools[0]["side_effects"], "safe", "{rt}");

    // A breakpoint parks the tool in studio-started runs.
    let (status, body) = server
        .put(
            &format!("/api/runtimes/{runtime}/breakpoints"),
            json!({"tools": ["get_context"]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    mock.push(Reply::tool_call("get_context", "{}").usage(Usage::new(10, 5)));
    mock.push(Reply::text("all done").usage(Usage::new(20, 5)));
    let cmd = enqueue(
        &server,
        json!({"runtime_id": runtime, "agent": AGENT, "input": "Look it up."}),
    )
    .await;
    let cmd_id = cmd["command_id"].as_str().unwrap().to_string();
    let accepted = command_until(&server, &cmd_id, &["accepted"]).await;
    let run_id = accepted["run_id"].as_str().unwrap().to_string();
    assert!(run_id.starts_with("run_"), "{accepted}");
    wait_run(&server, &run_id, &["paused"]).await;
    let view = run_view(&server, &run_id).await;
    let call_id = view["pending"][0]["call"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(view["studio"]["park_on"][0], "get_context");
    let interactions = server.list(&run_id, "interactions").await;
    assert_eq!(interactions[0]["status"], "pending");
    assert_eq!(interactions[0]["response_payload"], Value::Null);

    // Steering into the parked run waits for the call's result (pairing kept).
    let (status, body) = server
        .post(
            &format!("/api/runs/{run_id}/steer"),
            json!({"message": "Also mention the weather."}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Approve through the studio; a second decision on the same call is refused.
    let (status, decision) = server
        .post(
            &format!("/api/runs/{run_id}/approvals"),
            json!({"call_id": call_id, "decision": "approve"}),
        )
        .await;
    assert_eq!(status, 202, "{decision}");
    let (status, again) = server
        .post(
            &format!("/api/runs/{run_id}/approvals"),
            json!({"call_id": call_id, "decision": "deny", "reason": "no"}),
        )
        .await;
    assert_eq!(status, 409, "{again}");
    let done = server.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    let finished = command_until(&server, &cmd_id, &["finished"]).await;
    assert_eq!(finished["status"], "succeeded", "{finished}");
    let second = mock.model_requests()[1].body.to_string();
    let result_at = second
        .find("function_call_output")
        .expect("tool result sent");
    let steer_at = second
        .find("Also mention the weather.")
        .expect("steer sent");
    assert!(steer_at > result_at, "the steer follows the tool result");
    let source_requests = mock.model_requests().len();
    assert_eq!(source_requests, 2);

    // Scripted replay of the whole run: zero tokens, no model call.
    let (status, _) = server
        .put(
            &format!("/api/runtimes/{runtime}/breakpoints"),
            json!({"tools": []}),
        )
        .await;
    assert_eq!(status, 200);
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The steer changed the source's second request: replay it from step 1 with the steer
    // kept in the prefix, so every request matches its recording.
    let replay = enqueue(
        &server,
        json!({"runtime_id": runtime, "agent": AGENT, "engine": "scripted",
               "source": {"run_id": run_id, "from_step": 1}}),
    )
    .await;
    let replayed = command_until(
        &server,
        replay["command_id"].as_str().unwrap(),
        &["finished", "rejected"],
    )
    .await;
    assert_eq!(replayed["status"], "succeeded", "{replayed}");
    let replay_run = replayed["run_id"].as_str().unwrap().to_string();
    let replay_view = run_view(&server, &replay_run).await;
    assert_eq!(replay_view["usage"]["total_tokens"], 0);
    assert_eq!(
        replay_view["transcript"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["content"],
        "all done"
    );
    assert_eq!(
        mock.model_requests().len(),
        source_requests,
        "no model call"
    );

    // Fork from step 1 with an edited tool result: the prefix is kept, step 1 runs live.
    mock.push(Reply::text("forked answer").usage(Usage::new(7, 3)));
    let fork = enqueue(
        &server,
        json!({"runtime_id": runtime, "agent": AGENT,
               "source": {"run_id": run_id, "from_step": 1},
               "transcript_edits": [{"kind": "tool_result", "step": 0, "call_id": call_id,
                                     "tool_result": "EDITED CONTEXT"}]}),
    )
    .await;
    let forked = command_until(
        &server,
        fork["command_id"].as_str().unwrap(),
        &["finished", "rejected"],
    )
    .await;
    assert_eq!(forked["status"], "succeeded", "{forked}");
    let sent = mock.model_requests().last().unwrap().body.to_string();
    assert!(sent.contains("EDITED CONTEXT"), "{sent}");
    let fork_run = forked["run_id"].as_str().unwrap().to_string();
    let fork_view = run_view(&server, &fork_run).await;
    assert_eq!(fork_view["studio"]["source_run_id"], run_id.as_str());
    assert_eq!(fork_view["steps"], 2);
    assert_eq!(fork_view["usage"]["total_tokens"], 10);

    // The same edit under the scripted engine misses loudly at step 1.
    let miss = enqueue(
        &server,
        json!({"runtime_id": runtime, "agent": AGENT, "engine": "scripted",
               "source": {"run_id": run_id, "from_step": 1},
               "transcript_edits": [{"kind": "tool_result", "step": 0, "call_id": call_id,
                                     "tool_result": "EDITED CONTEXT"}]}),
    )
    .await;
    let missed = command_until(
        &server,
        miss["command_id"].as_str().unwrap(),
        &["finished", "rejected"],
    )
    .await;
    assert_eq!(missed["status"], "failed", "{missed}");
    assert_eq!(missed["reason"]["kind"], "scripted_miss", "{missed}");
    assert_eq!(missed["reason"]["step"], 1, "{missed}");
    assert_eq!(missed["reason"]["components"], json!(["input"]), "{missed}");

    // A fork naming a call outside the step passes the studio's check and is rejected by the
    // runtime's own.
    let outside = enqueue(
        &server,
        json!({"runtime_id": runtime, "agent": AGENT,
               "source": {"run_id": run_id, "from_step": 1},
               "transcript_edits": [{"kind": "tool_result", "step": 0, "call_id": "call_nope",
                                     "tool_result": "x"}]}),
    )
    .await;
    let refused = command_until(
        &server,
        outside["command_id"].as_str().unwrap(),
        &["rejected"],
    )
    .await;
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("not a call of step 0"),
        "{refused}"
    );
    server.stop().await;
}

#[tokio::test]
async fn bad_studio_commands_change_nothing() {
    let mock = MockProvider::start().await;
    let (server, _dir) = studio_server(&mock).await;
    server
        .agent("helper", json!({"allowed_tools": ["get_context"]}))
        .await;
    let runtime = runtime_with(&server, AGENT).await;
    let source = json!({"run_id": "run_source", "from_step": 2});
    let cases = [
        (
            json!({"input": "x", "source": source}),
            400,
            "input with from_step > 0",
        ),
        (
            json!({"engine": "scripted", "source": source, "overrides": {"instructions": "be brief"}}),
            400,
            "scripted with an instructions override",
        ),
        (
            json!({"input": "x", "overrides": {"options": {"max_steps": 100000}}}),
            403,
            "widened step limit",
        ),
        (
            json!({"source": source, "transcript_edits": [{"kind": "reply", "step": 2, "content": "x"}]}),
            400,
            "edit outside the kept prefix",
        ),
        (
            json!({"input": "x", "overrides": {"only_tools": ["rm_rf"]}}),
            400,
            "unknown tool",
        ),
        (
            json!({"input": "x", "engine": "warp"}),
            400,
            "unsupported engine",
        ),
    ];
    for (extra, code, what) in cases {
        let mut body = json!({"runtime_id": runtime, "agent": AGENT});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (status, answer) = server.post("/api/playground/runs", body).await;
        assert_eq!(status, code, "{what}: {answer}");
        assert!(answer["error"]["code"].is_string(), "{what}: {answer}");
    }
    // Approvals for runs the app started itself are view-only; unknown runtimes are 404.
    let (status, _) = server
        .post(
            "/api/runs/run_app_own/approvals",
            json!({"call_id": "c", "decision": "approve"}),
        )
        .await;
    assert_eq!(status, 403);
    let (status, _) = server
        .post(
            "/api/playground/runs",
            json!({"runtime_id": "nope", "agent": AGENT, "input": "x"}),
        )
        .await;
    assert_eq!(status, 404);
    // An unknown source run is 404 at the studio (it looks runs up in the service's store).
    let (status, answer) = server
        .post(
            "/api/playground/runs",
            json!({"runtime_id": runtime, "agent": AGENT, "source": {"run_id": "run_missing", "from_step": 0}}),
        )
        .await;
    assert_eq!(status, 404, "{answer}");
    // Nothing ran: no run exists and the mock saw no request.
    let (status, view) = server.get("/studio/api/runs").await;
    assert_eq!(status, 200);
    assert_eq!(view["runs"], json!([]), "{view}");
    assert_eq!(mock.model_requests().len(), 0);
    server.stop().await;
}

#[tokio::test]
async fn the_console_is_served_offline() {
    let mock = MockProvider::start().await;
    let (server, _dir) = studio_server(&mock).await;
    let page = server
        .client
        .get(server.url("/studio"))
        .send()
        .await
        .expect("page");
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap_or_default();
    assert!(html.contains("/studio/app.js"));
    assert!(!html.contains("https://"));
    // The run views need the token; the page itself carries no data.
    let anonymous = server
        .client
        .get(server.url("/studio/api/runs"))
        .send()
        .await
        .expect("runs");
    assert_eq!(anonymous.status(), 401);
    let with_query = server
        .client
        .get(server.url(&format!("/studio/api/runs?token={TOKEN}")))
        .send()
        .await
        .expect("runs");
    assert_eq!(with_query.status(), 200);
    server.stop().await;
}

#[tokio::test]
async fn deny_resolve_and_cancel_parked_calls() {
    let mock = MockProvider::start().await;
    let (server, _dir) = studio_server(&mock).await;
    server
        .agent("helper", json!({"allowed_tools": ["get_context"]}))
        .await;
    let runtime = runtime_with(&server, AGENT).await;
    let (status, _) = server
        .put(
            &format!("/api/runtimes/{runtime}/breakpoints"),
            json!({"tools": ["get_context"]}),
        )
        .await;
    assert_eq!(status, 200);
    mock.push(Reply::tool_calls([
        ToolCall::new("get_context", r#"{"a":1}"#),
        ToolCall::new("get_context", r#"{"b":2}"#),
    ]));
    mock.push(Reply::text("decided"));
    let cmd = enqueue(
        &server,
        json!({"runtime_id": runtime, "agent": AGENT, "input": "Two lookups."}),
    )
    .await;
    let accepted = command_until(&server, cmd["command_id"].as_str().unwrap(), &["accepted"]).await;
    let run_id = accepted["run_id"].as_str().unwrap().to_string();
    wait_run(&server, &run_id, &["paused"]).await;
    let view = run_view(&server, &run_id).await;
    let first = view["pending"][0]["call"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let second = view["pending"][1]["call"]["id"]
        .as_str()
        .unwrap()
        .to_string();

    // Deny the first: the run stays parked until every call has a decision.
    let (status, denied) = server
        .post(
            &format!("/api/runs/{run_id}/approvals"),
            json!({"call_id": first, "decision": "deny", "reason": "NOT THIS ONE"}),
        )
        .await;
    assert_eq!(status, 202, "{denied}");
    let done = command_until(
        &server,
        denied["command_id"].as_str().unwrap(),
        &["finished"],
    )
    .await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(server.run(&run_id).await["status"], "paused");
    assert_eq!(mock.model_requests().len(), 1);

    // Resolve the second with content: the run resumes once and both answers reach the model.
    let (status, resolved) = server
        .post(
            &format!("/api/runs/{run_id}/approvals"),
            json!({"call_id": second, "decision": "resolve", "content": "RESOLVED CONTENT"}),
        )
        .await;
    assert_eq!(status, 202, "{resolved}");
    let run = server.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(run["status"], "completed", "{run}");
    let sent = mock.model_requests()[1].body.to_string();
    assert!(sent.contains("NOT THIS ONE"), "{sent}");
    assert!(sent.contains("RESOLVED CONTENT"), "{sent}");
    let calls = server.list(&run_id, "tool-calls").await;
    assert!(
        calls.iter().all(|c| c["output"].is_null()),
        "no handler ran: {calls:?}"
    );

    // Cancel a parked run through the studio: its command finishes failed.
    mock.push(Reply::tool_call("get_context", "{}"));
    let cmd = enqueue(
        &server,
        json!({"runtime_id": runtime, "agent": AGENT, "input": "Wait for me."}),
    )
    .await;
    let cmd_id = cmd["command_id"].as_str().unwrap().to_string();
    let accepted = command_until(&server, &cmd_id, &["accepted"]).await;
    let run_id = accepted["run_id"].as_str().unwrap().to_string();
    wait_run(&server, &run_id, &["paused"]).await;
    let (status, body) = server
        .post(&format!("/api/runs/{run_id}/cancel"), json!({}))
        .await;
    assert!(status == 200 || status == 202, "{status} {body}");
    server.wait_status(&run_id, &["cancelled"]).await;
    let finished = command_until(&server, &cmd_id, &["finished"]).await;
    assert_eq!(finished["status"], "failed", "{finished}");
    server.stop().await;
}

#[tokio::test]
async fn steering_a_running_run_lands_after_the_tool_results() {
    let mock = MockProvider::start().await;
    let (server, _dir) = studio_server(&mock).await;
    server
        .agent("helper", json!({"allowed_tools": ["get_context"]}))
        .await;
    let runtime = runtime_with(&server, AGENT).await;
    mock.push(Reply::tool_call("get_context", "{}").delay(Duration::from_millis(800)));
    mock.push(Reply::text("steered"));
    let cmd = enqueue(
        &server,
        json!({"runtime_id": runtime, "agent": AGENT, "input": "Go."}),
    )
    .await;
    let accepted = command_until(&server, cmd["command_id"].as_str().unwrap(), &["accepted"]).await;
    let run_id = accepted["run_id"].as_str().unwrap().to_string();
    wait_run(&server, &run_id, &["running"]).await;
    // The first call is in flight (the mock holds it): the steer must wait for the next one.
    wait_model_requests(&mock, 1).await;
    let (status, body) = server
        .post(
            &format!("/api/runs/{run_id}/steer"),
            json!({"message": "STEER WHILE RUNNING"}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let run = server.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(run["status"], "completed", "{run}");
    let first = mock.model_requests()[0].body.to_string();
    assert!(!first.contains("STEER WHILE RUNNING"));
    let second = mock.model_requests()[1].body.to_string();
    let result_at = second.find("function_call_output").expect("tool result");
    let steer_at = second.find("STEER WHILE RUNNING").expect("steer");
    assert!(steer_at > result_at, "{second}");
    server.stop().await;
}

#[tokio::test]
async fn experiment_budgets_are_reserved_at_admission_and_the_runtime_rechecks() {
    let mock = MockProvider::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let dsn = dir.path().join("runtime.db").display().to_string();
    let mut env = env_for(&mock, &dsn);
    env.insert("OPENAI_API_KEY".into(), "sk-studio-test".into());
    env.insert("OPENAI_BASE_URL".into(), mock.base_url());
    env.insert("AGENT_RUNTIME_NATIVE_PROVIDER".into(), "openai".into());
    let settings = ar_config::ServiceSettings::from_env(|name| env.get(name).cloned())
        .unwrap_or_else(|d| panic!("settings: {d:?}"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let service = ar_server::Service::build(settings, addr)
        .await
        .expect("build");
    service.studio.runtime.set_budget(0, 1);
    let runtime_side = service.studio.runtime.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(service.serve(listener, async move {
        let _ = stopped.await;
    }));
    let http = reqwest::Client::new();
    let url = |p: &str| format!("http://{addr}{p}");
    let put = http
        .put(url("/v1/agents/helper?app_id=host_app"))
        .bearer_auth(TOKEN)
        .json(&json!({"app_id": "host_app", "name": "helper", "allowed_tools": ["get_context"]}))
        .send()
        .await
        .expect("agent");
    assert!(put.status().is_success());
    let mut runtime = String::new();
    for _ in 0..200 {
        let body: Value = http
            .get(url("/api/runtimes"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("runtimes")
            .json()
            .await
            .unwrap_or_default();
        if let Some(rt) = body["runtimes"].as_array().and_then(|r| r.first()) {
            if rt["connected"] == true && rt["agents"].as_array().is_some_and(|a| !a.is_empty()) {
                runtime = rt["id"].as_str().unwrap_or_default().to_string();
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!runtime.is_empty(), "runtime registered");
    mock.set_fallback(Some(Reply::text("fine")));
    let mut states = Vec::new();
    for _ in 0..2 {
        let answer: Value = http
            .post(url("/api/playground/runs"))
            .bearer_auth(TOKEN)
            .json(&json!({"runtime_id": runtime, "agent": AGENT, "input": "x", "experiment_id": "exp-1"}))
            .send()
            .await
            .expect("enqueue")
            .json()
            .await
            .unwrap_or_default();
        let id = answer["command_id"]
            .as_str()
            .expect("command id")
            .to_string();
        let mut last = Value::Null;
        for _ in 0..400 {
            last = http
                .get(url(&format!("/api/playground/commands/{id}")))
                .bearer_auth(TOKEN)
                .send()
                .await
                .expect("status")
                .json()
                .await
                .unwrap_or_default();
            if matches!(last["state"].as_str(), Some("finished" | "rejected")) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        states.push(last);
    }
    assert_eq!(states[0]["state"], "finished", "{:?}", states[0]);
    assert_eq!(states[1]["state"], "rejected", "{:?}", states[1]);
    assert_eq!(
        states[1]["reason"]["kind"], "budget_exceeded",
        "{:?}",
        states[1]
    );

    // The runtime re-checks what the studio checked: a run the app started itself is
    // view-only, and a decision on a call that is not parked is refused.
    mock.set_fallback(None);
    mock.push(Reply::text("own run"));
    let own: Value = http
        .post(url("/v1/runs"))
        .bearer_auth(TOKEN)
        .json(&json!({"app_id": APP, "agent_id": "helper", "target": {"type": "ticket", "id": "T-9"},
                      "instructions": "x",
                      "model": {"provider": "openai_compatible", "model": "mock-model",
                                "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}},
                      "model_credential": {"type": "api_key", "api_key": "sk-own"}}))
        .send()
        .await
        .expect("own run")
        .json()
        .await
        .unwrap_or_default();
    let own_id = own["id"].as_str().expect("own run id").to_string();
    use ar_studio::link::{CommandHandler as _, Work};
    let decision = |run_id: &str| {
        Work::Approve(ar_studio::wire::ApprovalDecision {
            command_id: "cmd_manual".into(),
            run_id: run_id.to_string(),
            call_id: "call_x".into(),
            decision: "approve".into(),
            ..Default::default()
        })
    };
    let refused = runtime_side
        .admit(&decision(&own_id))
        .await
        .expect_err("view-only");
    assert_eq!(refused.reason.map(|r| r.kind).as_deref(), Some("forbidden"));
    let studio_run = states[0]["run_id"]
        .as_str()
        .expect("studio run")
        .to_string();
    let refused = runtime_side
        .admit(&decision(&studio_run))
        .await
        .expect_err("not parked");
    assert_eq!(refused.reason.map(|r| r.kind).as_deref(), Some("not_found"));
    let refused = runtime_side
        .admit(&decision("run_unknown"))
        .await
        .expect_err("unknown");
    assert_eq!(refused.reason.map(|r| r.kind).as_deref(), Some("not_found"));
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
}

#[tokio::test]
async fn the_console_pages_and_filters_runs_in_the_store() {
    let mock = MockProvider::start().await;
    let (server, _dir) = studio_server(&mock).await;
    server
        .agent("helper", json!({"allowed_tools": ["get_context"]}))
        .await;
    let mut ids = Vec::new();
    for n in 0..5 {
        mock.push(Reply::text("done").usage(Usage::new(3, 1)));
        let run = server
            .start_run(
                &mock,
                "helper",
                json!({"target": {"type": "ticket", "id": format!("PAGE-{n}")}}),
            )
            .await;
        let id = run["id"].as_str().expect("id").to_string();
        wait_run(&server, &id, &["completed"]).await;
        ids.push(id);
    }
    ids.reverse(); // newest first, as the console lists them
    let page = |query: &str| {
        let server = &server;
        let path = format!("/studio/api/runs?{query}");
        async move {
            let (status, body) = server.get(&path).await;
            assert_eq!(status, 200, "{path}: {body}");
            let listed: Vec<String> = body["runs"]
                .as_array()
                .expect("runs")
                .iter()
                .map(|r| r["id"].as_str().unwrap_or_default().to_string())
                .collect();
            (listed, body["total"].as_i64().unwrap_or(-1))
        }
    };
    assert_eq!(page("limit=2").await, (ids[..2].to_vec(), 5));
    assert_eq!(page("limit=2&offset=2").await, (ids[2..4].to_vec(), 5));
    assert_eq!(
        page("limit=2&offset=4&app=host_app").await,
        (ids[4..].to_vec(), 5)
    );
    assert_eq!(page("q=PAGE-3").await, (vec![ids[1].clone()], 1));
    assert_eq!(page("status=completed&limit=1").await.1, 5);
    assert_eq!(page("status=paused").await, (vec![], 0));
    let (status, body) = server.get("/studio/api/runs?status=sleeping").await;
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("sleeping"), "{body}");
    let (status, _) = server.get("/studio/api/runs?app=nope").await;
    assert_eq!(status, 404);
    let (_, info) = server.get("/studio/api/info").await;
    assert_eq!(info["apps"], json!(["host_app", "v2_app"]), "{info}");
    assert_eq!(info["demo"], false, "{info}");
    server.stop().await;
}
