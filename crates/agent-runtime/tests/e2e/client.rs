//! `ar-client` against the real binary: every method of the Go SDK's client on a live service
//! (agents, runs, search, records, tools, resume / approve / request changes / cancel / pause,
//! credentials, capabilities, app health, v1 and v2 events), its typed errors, and its event
//! stream resuming through cut connections and a server restart without losing or repeating
//! an event.

use std::time::Duration;

use ar_client::{Client, Error, RunSearch, StreamItem, StreamOptions};
use ar_test_support::mock_provider::{MockProvider, Reply, Usage};
use ar_test_support::service::*;
use ar_wire::{
    Agent, AppendArtifactRequest, AppendMessageRequest, EventEnvelope, ModelCredential,
    ModelEndpoint, RunModel, RunToolCallRequest, StartRunRequest, TargetRef,
    UpdateRunMCPCredentialRequest, UpdateRunModelCredentialRequest,
};
use serde_json::json;

use crate::BIN;

fn client(url: &str, app: &str) -> Client {
    Client::builder(url)
        .app_id(app)
        .service_token(TOKEN)
        .build()
        .expect("client")
}

fn base_url(server: &Server) -> String {
    format!("http://{}", server.addr)
}

/// A service whose [`APP`] (v1) and [`V2_APP`] (v2) both approve `mock`.
async fn start_server(dir: &std::path::Path, mock: &MockProvider) -> Server {
    let mut env = sqlite_env(dir, mock);
    let mut apps = app_config(mock, json!({}));
    if let Some(list) = apps["apps"].as_array_mut() {
        list.push(json!({
            "app_id": V2_APP, "event_protocol": "v2",
            "model_endpoints": [{"id": "mock", "base_url": mock.base_url(), "auth_mode": "none", "allow_http": true}]
        }));
    }
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), apps.to_string());
    Server::start(BIN, &env).await
}

/// A run of `agent_id` against the mock endpoint with the run key.
fn run_request(mock: &MockProvider, agent_id: &str) -> StartRunRequest {
    StartRunRequest {
        agent_id: agent_id.into(),
        target: TargetRef::new("ticket", "T-7"),
        instructions: "Look at the ticket.".into(),
        model: Some(RunModel {
            provider: "openai_compatible".into(),
            model: "mock-model".into(),
            endpoint: Some(ModelEndpoint {
                id: "mock".into(),
                base_url: mock.base_url(),
                auth_mode: "api_key".into(),
            }),
            controls: None,
        }),
        model_credential: Some(ModelCredential {
            credential_type: "api_key".into(),
            api_key: RUN_API_KEY.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn agent(name: &str, tools: &[&str]) -> Agent {
    Agent {
        name: name.into(),
        system_prompt: "You help with tickets.".into(),
        allowed_tools: tools.iter().map(|tool| tool.to_string()).collect(),
        ..Default::default()
    }
}

/// Polls the run (bounded) until its status is `status`.
async fn wait_status(client: &Client, run_id: &str, status: &str) -> ar_wire::AgentRun {
    wait_for(&format!("{run_id} {status}"), WAIT, || async {
        let run = client.get_run(run_id).await.expect("get run");
        (run.status == status).then_some(run)
    })
    .await
}

/// Sequence numbers and ids of persisted events.
fn keys(events: &[EventEnvelope]) -> Vec<(i64, String)> {
    events
        .iter()
        .map(|event| (event.sequence_no, event.event_id.clone()))
        .collect()
}

#[tokio::test]
async fn the_client_covers_every_method_of_the_sdk_client() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockProvider::start().await;
    let server = start_server(dir.path(), &mock).await;
    let client = client(&base_url(&server), APP);

    assert_eq!(client.health().await.expect("health").status, "ok");
    let capabilities = client.get_capabilities().await.expect("capabilities");
    assert!(capabilities
        .providers
        .iter()
        .any(|p| p.name == "openai_compatible" && p.configured));
    let app = client.get_app_health().await.expect("app health");
    assert_eq!(app.app_id, APP);
    assert_eq!(app.model_endpoints[0].id, "mock");

    // Agents: create (the client's app filled in), get, list, update, upsert.
    let created = client
        .create_agent(agent("Support", &["get_context", "request_approval"]))
        .await
        .expect("create agent");
    assert_eq!(created.app_id, APP);
    assert_eq!(client.get_agent(&created.id).await.expect("get"), created);
    assert!(client.list_agents().await.expect("list").contains(&created));
    let mut renamed = created.clone();
    renamed.name = "Support v2".into();
    let updated = client
        .update_agent(&created.id, renamed)
        .await
        .expect("update");
    assert_eq!(updated.name, "Support v2");
    let upserted = client
        .upsert_agent(Agent {
            id: "triage".into(),
            ..agent("Triage", &["get_context"])
        })
        .await
        .expect("upsert");
    assert_eq!(
        (upserted.id.as_str(), upserted.app_id.as_str()),
        ("triage", APP)
    );

    approval_flow(&client, &mock, &created.id).await;
    control_flow(&client, &mock, &created.id).await;
    pause_flow(&client, &mock).await;
    typed_errors(&client, &base_url(&server)).await;
    v2_methods(&base_url(&server), &mock).await;
}

/// Start, stream through an approval pause, approve, and read every record of the run.
async fn approval_flow(client: &Client, mock: &MockProvider, agent_id: &str) {
    mock.push(Reply::tool_call("get_context", "{}").usage(Usage::new(100, 10)));
    mock.push(Reply::tool_call(
        "request_approval",
        json!({"title": "Close the ticket?", "summary": "It is fixed."}).to_string(),
    ));
    mock.push(Reply::text_deltas(["Closed", "."]).chunk_delay(Duration::from_millis(20)));
    let run = client
        .start_run(run_request(mock, agent_id))
        .await
        .expect("start run");
    assert_eq!(run.app_id, APP);

    let mut stream = client.events(&run.id, StreamOptions::default());
    let mut persisted = Vec::new();
    while let Some(item) = stream.next().await {
        match item.expect("stream item") {
            StreamItem::Event(event) => {
                if event.event_type == "run.paused" {
                    let interactions = client.list_interactions(&run.id).await.expect("list");
                    assert_eq!(interactions[0].title, "Close the ticket?");
                    let approved = client
                        .approve_run(&run.id, Some("user-1"))
                        .await
                        .expect("approve");
                    assert_eq!(approved.id, run.id);
                }
                persisted.push(event);
            }
            StreamItem::Delta(_) => {}
            StreamItem::Reconnecting { reason, .. } => panic!("no cut here: {reason}"),
        }
    }
    let history = client.list_run_events(&run.id).await.expect("history");
    assert_eq!(
        keys(&persisted),
        keys(&history),
        "the stream is the history"
    );
    assert_eq!(
        history.last().map(|e| e.event_type.as_str()),
        Some("run.completed")
    );

    let messages = client.list_messages(&run.id).await.expect("messages");
    assert!(
        messages.iter().any(|m| m.content == "Closed."),
        "{messages:?}"
    );
    let calls = client.list_tool_calls(&run.id).await.expect("tool calls");
    assert!(calls.iter().any(|c| c.tool_name == "get_context"));
    assert!(client.list_artifacts(&run.id).await.is_ok());
    let execution = client.get_run_execution(&run.id).await.expect("execution");
    assert_eq!(execution.state, "completed");
    assert!(client
        .list_runs()
        .await
        .expect("runs")
        .iter()
        .any(|r| r.id == run.id));
    let page = client
        .search_runs(&RunSearch {
            status: "completed".into(),
            limit: 5,
            ..Default::default()
        })
        .await
        .expect("search");
    assert_eq!(
        (page.limit, page.items[0].id.as_str()),
        (5, run.id.as_str())
    );
}

/// On a paused run: tools, records, credentials, request changes, revoke, cancel.
async fn control_flow(client: &Client, mock: &MockProvider, agent_id: &str) {
    let ask = json!({"title": "Ship it?", "summary": "Ready."}).to_string();
    mock.push(Reply::tool_call("request_approval", ask.clone()));
    mock.push(Reply::tool_call("request_approval", ask));
    let run = client
        .start_run(run_request(mock, agent_id))
        .await
        .expect("start run");
    wait_status(client, &run.id, "paused").await;

    let tools = client.list_run_tools(&run.id).await.expect("run tools");
    assert!(
        tools.iter().any(|tool| tool.name == "get_context"),
        "{tools:?}"
    );
    let result = client
        .call_run_tool(
            &run.id,
            &RunToolCallRequest {
                tool_name: "get_context".into(),
                input: json!({}),
            },
        )
        .await
        .expect("call tool");
    assert!(!result.is_error, "{result:?}");
    let message = client
        .append_message(
            &run.id,
            &AppendMessageRequest {
                role: "user".into(),
                content: "Mind the release notes.".into(),
                ..Default::default()
            },
        )
        .await
        .expect("append message");
    assert_eq!(message.content, "Mind the release notes.");
    let artifact = client
        .append_artifact(
            &run.id,
            &AppendArtifactRequest {
                artifact_type: "note".into(),
                inline_content: "draft".into(),
                ..Default::default()
            },
        )
        .await
        .expect("append artifact");
    assert_eq!(artifact.inline_content, "draft");

    let rotated = client
        .update_run_model_credential(
            &run.id,
            &UpdateRunModelCredentialRequest {
                credential: ModelCredential {
                    credential_type: "api_key".into(),
                    api_key: "sk-rotated".into(),
                    ..Default::default()
                },
            },
        )
        .await
        .expect("rotate model credential");
    assert_eq!(rotated.run_id, run.id);
    let no_server = client
        .update_run_mcp_credential(&run.id, "absent", &UpdateRunMCPCredentialRequest::default())
        .await
        .expect_err("no such MCP server");
    assert!(no_server.client_error(), "{no_server}");

    let resumed = client
        .request_changes(&run.id, "Add a changelog entry.", None)
        .await
        .expect("request changes");
    assert_eq!(resumed.id, run.id);
    wait_status(client, &run.id, "paused").await;
    client
        .revoke_run_model_credential(&run.id)
        .await
        .expect("revoke");
    let cancelled = client.cancel_run(&run.id).await.expect("cancel");
    assert_eq!(cancelled.status, "cancelled");
}

/// Pause a run in the middle of a model call, then continue it.
async fn pause_flow(client: &Client, mock: &MockProvider) {
    mock.push(Reply::tool_call("get_context", "{}").delay(Duration::from_secs(20)));
    mock.push(Reply::text("finished"));
    let run = client
        .start_run(run_request(mock, "triage"))
        .await
        .expect("start run");
    wait_for("the model call", WAIT, || async {
        (!mock.model_requests().is_empty()).then_some(())
    })
    .await;
    client.pause_run(&run.id).await.expect("pause");
    let paused = wait_status(client, &run.id, "paused").await;
    assert_eq!(paused.pause_reason, "manual");
    let request = ar_wire::ResumeRunRequest {
        intent: "continue".into(),
        ..Default::default()
    };
    client.resume_run(&run.id, &request).await.expect("resume");
    wait_status(client, &run.id, "completed").await;
}

/// 4xx answers are client errors carrying the contract's body; transport failures are not.
async fn typed_errors(client: &Client, url: &str) {
    let missing = client.get_run("run_missing").await.expect_err("404");
    assert!(missing.client_error());
    assert_eq!(missing.status(), Some(404));
    let status = missing.http_status().expect("status error");
    assert_eq!(status.message(), "run not found");
    assert_eq!(
        (status.method.as_str(), status.path.as_str()),
        ("GET", "/v1/runs/run_missing")
    );

    let stranger = Client::builder(url)
        .app_id(APP)
        .service_token("wrong-token")
        .build()
        .expect("client");
    let refused = stranger.list_runs().await.expect_err("401");
    assert!(refused.client_error());
    assert_eq!(refused.status(), Some(401));

    let nowhere = Client::builder("http://127.0.0.1:9")
        .build()
        .expect("client");
    let unreachable = nowhere.health().await.expect_err("refused connection");
    assert!(
        matches!(unreachable, Error::Transport { .. }),
        "{unreachable}"
    );
    assert!(!unreachable.client_error());
    assert!(Client::builder("").build().is_err());
    assert!(Client::builder("ftp://host").build().is_err());
    let debug = format!(
        "{:?}",
        Client::builder(url).service_token(TOKEN).build().unwrap()
    );
    assert!(!debug.contains(TOKEN), "{debug}");
}

/// The v2 event pages and stream state of a v2 app.
async fn v2_methods(url: &str, mock: &MockProvider) {
    let client = client(url, V2_APP);
    let agent = client
        .upsert_agent(Agent {
            id: "v2-agent".into(),
            ..agent("V2", &[])
        })
        .await
        .expect("v2 agent");
    mock.push(Reply::text("v2 answer"));
    let mut request = run_request(mock, &agent.id);
    request
        .model
        .as_mut()
        .and_then(|m| m.endpoint.as_mut())
        .unwrap()
        .auth_mode = "none".into();
    request.model_credential = Some(ModelCredential {
        credential_type: "none".into(),
        ..Default::default()
    });
    let run = client.start_run(request).await.expect("start v2 run");
    wait_status(&client, &run.id, "completed").await;
    let page = client.list_v2_events(&run.id, 0).await.expect("v2 events");
    assert!(page.events.iter().all(|e| e.schema_version == "2"));
    assert_eq!(page.next_sequence_no, page.events.len() as i64);
    assert!(page.stream_state_snapshot.is_some());
    let after = client.list_v2_events(&run.id, 2).await.expect("v2 page");
    assert_eq!(after.events[0].sequence_no, 3);
    let state = client.get_v2_stream_state(&run.id).await.expect("state");
    assert_eq!(state.through_sequence, page.next_sequence_no);
    let v1 = self::client(url, APP);
    let refused = v1.list_v2_events("any", 0).await.expect_err("v1 app");
    assert_eq!(refused.status(), Some(404));
}

/// Collects a run's persisted events through `stream` while `cut` breaks its connections.
async fn collect(mut stream: ar_client::EventStream) -> (Vec<EventEnvelope>, usize) {
    let mut events = Vec::new();
    let mut reconnections = 0;
    while let Some(item) = stream.next().await {
        match item.expect("the stream recovers") {
            StreamItem::Event(event) => events.push(event),
            StreamItem::Delta(_) => {}
            StreamItem::Reconnecting { .. } => reconnections += 1,
        }
    }
    (events, reconnections)
}

#[tokio::test]
async fn the_event_stream_loses_and_repeats_nothing_through_cut_connections() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockProvider::start().await;
    let server = start_server(dir.path(), &mock).await;
    let proxy = CutProxy::start(server.addr).await;
    let client = client(&proxy.url(), APP);
    client
        .upsert_agent(Agent {
            id: "worker".into(),
            ..agent("Worker", &["get_context"])
        })
        .await
        .expect("agent");
    // Twelve steps, each a little slow, so the cuts land while events flow.
    for _ in 0..12 {
        mock.push(Reply::tool_call("get_context", "{}").delay(Duration::from_millis(80)));
    }
    mock.push(Reply::text_deltas(["all ", "done"]).chunk_delay(Duration::from_millis(40)));
    let run = client
        .start_run(run_request(&mock, "worker"))
        .await
        .expect("start");
    let options = StreamOptions {
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(200),
        ..Default::default()
    };
    let reader = tokio::spawn(collect(client.events(&run.id, options)));
    let cutter = async {
        while !reader.is_finished() {
            tokio::time::sleep(Duration::from_millis(90)).await;
            proxy.cut();
        }
    };
    tokio::time::timeout(WAIT, cutter)
        .await
        .expect("the run ends");
    let (events, reconnections) = reader.await.expect("reader");
    // Read past the proxy: its last cut may have reset a pooled connection.
    let direct = self::client(&base_url(&server), APP);
    let history = direct.list_run_events(&run.id).await.expect("history");
    assert_contiguous(
        &serde_json::to_value(&history)
            .unwrap()
            .as_array()
            .unwrap()
            .clone(),
    );
    assert_eq!(keys(&events), keys(&history), "every event once, in order");
    assert!(reconnections >= 3, "only {reconnections} reconnections");
    assert!(
        proxy.accepted() > reconnections,
        "each reconnection is a new connection"
    );
}

#[tokio::test]
async fn the_event_stream_resumes_across_a_server_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockProvider::start().await;
    let mut server = start_server(dir.path(), &mock).await;
    let proxy = CutProxy::start(server.addr).await;
    let client = client(&proxy.url(), APP);
    client
        .upsert_agent(Agent {
            id: "asker".into(),
            ..agent("Asker", &["get_context", "request_approval"])
        })
        .await
        .expect("agent");
    mock.push(Reply::tool_call("get_context", "{}"));
    mock.push(Reply::tool_call(
        "request_approval",
        json!({"title": "Go on?"}).to_string(),
    ));
    mock.push(Reply::text("done after the restart"));
    let run = client
        .start_run(run_request(&mock, "asker"))
        .await
        .expect("start");
    let mut stream = client.events(&run.id, StreamOptions::default());
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        if let StreamItem::Event(event) = item.expect("item") {
            let paused = event.event_type == "run.paused";
            events.push(event);
            if paused {
                break;
            }
        }
    }
    // The server goes away while the stream is open, and comes back on another port.
    server.process.kill_hard();
    drop(server);
    let server = start_server(dir.path(), &mock).await;
    proxy.set_upstream(server.addr);
    let direct = self::client(&base_url(&server), APP);
    direct.approve_run(&run.id, None).await.expect("approve");
    let mut reconnections = 0;
    while let Some(item) = stream.next().await {
        match item.expect("the stream resumes") {
            StreamItem::Event(event) => events.push(event),
            StreamItem::Delta(_) => {}
            StreamItem::Reconnecting { .. } => reconnections += 1,
        }
    }
    let history = direct.list_run_events(&run.id).await.expect("history");
    assert_eq!(keys(&events), keys(&history), "every event once, in order");
    assert_eq!(history.last().unwrap().event_type, "run.completed");
    assert!(reconnections >= 1);
}
