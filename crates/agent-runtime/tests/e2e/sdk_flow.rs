//! The Go SDK's flow over HTTP against the real binary: create an agent, start a run against the
//! mock as an approved `openai_compatible` endpoint, follow the SSE stream to its end through a
//! `request_approval` pause and `POST /approve`, then read every history list and check each
//! JSON shape against the SDK's types. [`sdk_flow`] is shared with the PostgreSQL test.

use ar_test_support::mock_provider::{MockProvider, Reply, Usage};
use serde_json::{json, Value};

use ar_test_support::service::*;

use crate::shapes;
use crate::BIN;

/// Runs the whole flow against `server` (any store) and `mock`.
pub async fn sdk_flow(server: &Server, mock: &MockProvider) {
    // Step 1 reads context, step 2 asks for approval, step 3 (after approval) answers.
    mock.push(Reply::tool_call("get_context", "{}").usage(Usage::new(100, 10)));
    mock.push(
        Reply::tool_call(
            "request_approval",
            json!({"title": "Reset the password?", "summary": "The user is locked out."})
                .to_string(),
        )
        .usage(Usage::new(120, 12)),
    );
    // Streamed slowly enough that the deltas reach live subscribers as transient frames.
    mock.push(
        Reply::text_deltas(["Password ", "reset", "."])
            .chunk_delay(std::time::Duration::from_millis(30))
            .usage(Usage::new(140, 14)),
    );

    // Health is unauthenticated; capabilities list the OpenAI-compatible provider.
    let (status, health) = server
        .send_as(None, reqwest::Method::GET, "/healthz", None)
        .await;
    assert_eq!((status, &health), (200, &json!({"status": "ok"})));
    let (status, capabilities) = server.get(&format!("/v1/capabilities?app_id={APP}")).await;
    assert_eq!(status, 200, "{capabilities}");
    let providers = capabilities["providers"].as_array().expect("providers");
    assert!(
        providers
            .iter()
            .any(|p| p["name"] == "openai_compatible" && p["configured"] == true),
        "{capabilities}"
    );

    // CreateAgent: POST /v1/agents → 201 Agent.
    let agent = server
        .create_agent("Support agent", &["get_context", "request_approval"])
        .await;
    shapes::check("agent", shapes::AGENT, &agent);
    assert_eq!(agent["app_id"], APP);
    assert_eq!(agent["runtime_kind"], "native_sdk");
    let agent_id = agent["id"].as_str().expect("agent id").to_string();
    let (status, fetched) = server
        .get(&format!("/v1/agents/{agent_id}?app_id={APP}"))
        .await;
    assert_eq!(status, 200, "{fetched}");
    assert_eq!(fetched, agent);
    let (status, agents) = server.get(&format!("/v1/agents?app_id={APP}")).await;
    assert_eq!(status, 200);
    assert!(agents.as_array().is_some_and(|list| list.contains(&agent)));

    // StartRun: POST /v1/runs → 202 AgentRun; the run credential is never returned.
    let extra = json!({"host_run_id": "host-e2e-1", "metadata": {"source": "e2e"}});
    let run = server.start_run(mock, &agent_id, extra.clone()).await;
    shapes::check_run("started run", &run);
    assert_eq!(run["host_run_id"], "host-e2e-1");
    assert!(
        matches!(run["status"].as_str(), Some("queued" | "running")),
        "{run}"
    );
    let run_id = run["id"].as_str().expect("run id").to_string();
    // Starting again with the same host_run_id is idempotent.
    let again = server.start_run(mock, &agent_id, extra).await;
    assert_eq!(again["id"], run["id"], "idempotent start by host_run_id");

    // StreamRunEvents: follow the SSE stream live, across the pause, to its end.
    let stream = server.open_stream(&run_id, None).await;
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let reader = tokio::spawn(read_frames(stream));

    let paused = server.wait_status(&run_id, &["paused"]).await;
    shapes::check_run("paused run", &paused);
    assert_eq!(paused["pause_reason"], "human_approval", "{paused}");
    let interactions = server.list(&run_id, "interactions").await;
    shapes::check_all("interactions", shapes::INTERACTION, &interactions);
    assert_eq!(interactions.len(), 1, "{interactions:?}");
    assert_eq!(interactions[0]["interaction_kind"], "approval_request");
    assert_eq!(interactions[0]["status"], "pending");
    assert_eq!(interactions[0]["title"], "Reset the password?");

    // ApproveRun: POST /v1/runs/{id}/approve → 200 AgentRun.
    let (status, approved) = server
        .post(
            &format!("/v1/runs/{run_id}/approve?app_id={APP}"),
            json!({"external_actor_id": "user-7"}),
        )
        .await;
    assert_eq!(status, 200, "{approved}");
    shapes::check_run("approved run", &approved);
    assert_eq!(approved["approval_state"], "approved");

    let done = server.wait_status(&run_id, &["completed", "failed"]).await;
    shapes::check_run("completed run", &done);
    assert_eq!(done["status"], "completed", "{done}");
    assert!(done["completed_at"].is_string() && done["started_at"].is_string());
    assert_eq!(done["input"]["credential_source"], "app");
    assert_eq!(
        done["output_summary"]["usage"]["input_tokens"], 360,
        "{done}"
    );

    // The stream carried every persisted event once, in order, and closed after the end.
    let frames = reader.await.expect("SSE reader");
    let persisted: Vec<&Frame> = frames.iter().filter(|frame| frame.id.is_some()).collect();
    let ids: Vec<i64> = persisted.iter().filter_map(|frame| frame.id).collect();
    assert_eq!(ids, (1..=ids.len() as i64).collect::<Vec<_>>(), "SSE ids");
    assert_eq!(
        persisted.last().map(|frame| frame.event.as_str()),
        Some("run.completed")
    );
    for frame in &persisted {
        shapes::check(&format!("SSE {}", frame.event), shapes::EVENT, &frame.data);
        assert_eq!(frame.data["type"], frame.event.as_str());
        assert_eq!(frame.data["sequence_no"].as_i64(), frame.id);
    }

    // Deltas are live-only frames without an id, in the SDK's `Event` shape.
    let deltas: Vec<&Frame> = frames
        .iter()
        .filter(|frame| frame.event == "assistant_message_delta")
        .collect();
    assert!(!deltas.is_empty(), "no live deltas: {frames:?}");
    for frame in &deltas {
        assert_eq!(frame.id, None, "deltas carry no id");
        shapes::check("delta frame", shapes::TRANSIENT, &frame.data);
        shapes::check(
            "delta data",
            shapes::ASSISTANT_MESSAGE_DATA,
            &frame.data["data"],
        );
    }
    let completed = persisted
        .iter()
        .find(|frame| frame.event == "assistant_message_completed")
        .expect("assistant_message_completed");
    shapes::check(
        "assistant_message_completed data",
        shapes::ASSISTANT_MESSAGE_DATA,
        &completed.data["data"],
    );

    // ListRunEvents: the same events, with the same ids.
    let history = server.events(&run_id).await;
    shapes::check_all("history", shapes::EVENT, &history);
    assert_contiguous(&history);
    let streamed: Vec<&Value> = persisted
        .iter()
        .map(|frame| &frame.data["event_id"])
        .collect();
    let stored: Vec<&Value> = history.iter().map(|event| &event["event_id"]).collect();
    assert_eq!(streamed, stored, "stream and history agree");
    let types = event_types(&history);
    for expected in [
        "run.queued",
        "run.started",
        "tool_call_started",
        "tool_call_finished",
        "run.paused",
        "run.resumed",
        "run.completed",
    ] {
        assert!(
            types.iter().any(|t| t == expected),
            "{expected} in {types:?}"
        );
    }
    assert!(
        types.iter().all(|t| !t.ends_with("_delta")),
        "deltas are never persisted: {types:?}"
    );
    for event in &history {
        assert_eq!(event["run_id"], run_id.as_str());
        assert_eq!(event["app_id"], APP);
        assert_eq!(event["host_run_id"], "host-e2e-1");
    }

    // ListMessages, ListToolCalls, ListInteractions.
    let messages = server.list(&run_id, "messages").await;
    shapes::check_all("messages", shapes::MESSAGE, &messages);
    let sequence: Vec<i64> = messages
        .iter()
        .filter_map(|message| message["sequence_no"].as_i64())
        .collect();
    assert_eq!(sequence, (1..=messages.len() as i64).collect::<Vec<_>>());
    assert!(
        messages
            .iter()
            .any(|m| m["role"] == "assistant" && m["content"] == "Password reset."),
        "{messages:?}"
    );
    let calls = server.list(&run_id, "tool-calls").await;
    shapes::check_all("tool calls", shapes::TOOL_CALL, &calls);
    let names: Vec<&str> = calls
        .iter()
        .filter_map(|call| call["tool_name"].as_str())
        .collect();
    assert!(names.contains(&"get_context"), "{names:?}");
    let interactions = server.list(&run_id, "interactions").await;
    shapes::check_all("interactions", shapes::INTERACTION, &interactions);
    assert_eq!(interactions[0]["status"], "resolved");
    assert!(interactions[0]["resolved_at"].is_string());

    // GetRunExecution, ListRuns, SearchRuns.
    let (status, execution) = server
        .get(&format!("/v1/runs/{run_id}/execution?app_id={APP}"))
        .await;
    assert_eq!(status, 200, "{execution}");
    shapes::check("execution", shapes::EXECUTION, &execution);
    assert_eq!(execution["state"], "completed");
    let (status, runs) = server.get(&format!("/v1/runs?app_id={APP}")).await;
    assert_eq!(status, 200);
    let runs = runs.as_array().expect("run list").clone();
    shapes::check_all("runs", shapes::RUN, &runs);
    assert!(runs.iter().any(|r| r["id"] == run_id.as_str()));
    let (status, page) = server
        .get(&format!("/v1/runs/search?app_id={APP}&status=completed"))
        .await;
    assert_eq!(status, 200, "{page}");
    assert!(page["total"].as_i64() >= Some(1), "{page}");
    assert!(page["items"].is_array() && page["limit"].is_i64() && page["offset"].is_i64());

    // Another app sees none of it; no token, no access.
    let (status, body) = server
        .get(&format!("/v1/runs/{run_id}?app_id=other_app"))
        .await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = server
        .send_as(
            None,
            reqwest::Method::GET,
            &format!("/v1/runs/{run_id}?app_id={APP}"),
            None,
        )
        .await;
    assert_eq!((status, body), (401, json!({"error": "unauthorized"})));

    // The run credential went to the model endpoint and appears in no response.
    let requests = mock.model_requests();
    assert_eq!(requests.len(), 3, "one model request per step");
    let bearer = format!("Bearer {RUN_API_KEY}");
    assert!(requests
        .iter()
        .all(|r| r.header("authorization") == Some(bearer.as_str())));
    let everything = serde_json::to_string(&json!([
        run,
        done,
        history,
        messages,
        calls,
        interactions,
        runs
    ]))
    .expect("serialize");
    assert!(
        !everything.contains(RUN_API_KEY),
        "the run credential leaked"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_flow_on_sqlite() {
    let mock = MockProvider::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(BIN, &sqlite_env(dir.path(), &mock)).await;
    sdk_flow(&server, &mock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_flow_on_the_memory_store() {
    let mock = MockProvider::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = sqlite_env(dir.path(), &mock);
    env.remove("AGENT_RUNTIME_SQLITE_DSN");
    env.insert("AGENT_RUNTIME_STORE_DRIVER".into(), "memory".into());
    let server = Server::start(BIN, &env).await;
    sdk_flow(&server, &mock).await;
    let (status, capabilities) = server.get("/v1/capabilities").await;
    assert_eq!(status, 200);
    assert_eq!(
        capabilities["store"],
        json!({"driver": "memory", "in_memory": true}),
        "{capabilities}"
    );
}
