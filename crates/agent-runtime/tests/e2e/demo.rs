//! Demo mode: `agent-runtime serve --demo` with no key and no configuration gives a newcomer a
//! run that streams text, updates its plan, calls a tool and pauses for approval, on the
//! built-in demo model, labelled as such; approving it completes the run. The demo model is
//! refused beside a real provider and never served without `--demo`.

use std::time::Duration;

use serde_json::{json, Value};

use ar_test_support::service::*;

use crate::BIN;

/// The value printed after `label` on a line of stderr.
fn printed(stderr: &str, label: &str) -> String {
    stderr
        .lines()
        .find_map(|line| {
            line.split_once(label)
                .map(|(_, rest)| rest.trim().to_string())
        })
        .unwrap_or_else(|| panic!("nothing printed after {label:?}; stderr:\n{stderr}"))
}

/// A `serve --demo` as a newcomer starts it: nothing configured but a private data directory.
async fn demo_server(dir: &std::path::Path) -> (Server, String, String) {
    let env = base_env(dir);
    let mut server = Server::start_with_args(BIN, &["serve", "--demo"], &env).await;
    server
        .process
        .wait_stderr_line("start a demo run:", WAIT)
        .await;
    let stderr = server.process.stderr();
    let console = printed(&stderr, "open the console:");
    let token = console
        .split_once("#token=")
        .map(|(_, token)| token.to_string())
        .unwrap_or_else(|| panic!("the console link carries the dev token: {console}"));
    let run = printed(&stderr, "demo run ")
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .trim_end_matches(';')
        .to_string();
    assert!(run.starts_with("run_"), "{stderr}");
    (server.with_token(Some(token.clone())), token, run)
}

async fn wait_demo_status(server: &Server, run: &str, status: &str) -> Value {
    wait_for(&format!("run {run} {status}"), WAIT, || async {
        let (code, body) = server.get(&format!("/v1/runs/{run}?app_id=demo")).await;
        (code == 200 && body["status"] == status).then_some(body)
    })
    .await
}

/// Reads the run's live stream until it pauses; returns the event types seen.
async fn stream_until_paused(server: &Server, run: &str) -> Vec<String> {
    let mut response = server
        .client
        .get(server.url(&format!("/v1/runs/{run}/events?app_id=demo")))
        .bearer_auth(server.token.as_deref().unwrap_or_default())
        .send()
        .await
        .expect("SSE");
    assert_eq!(response.status(), 200);
    let mut text = String::new();
    let read = async {
        while let Ok(Some(chunk)) = response.chunk().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
            if text.contains("event: run.paused") {
                break;
            }
        }
    };
    tokio::time::timeout(WAIT, read)
        .await
        .expect("paused in time");
    text.lines()
        .filter_map(|line| line.strip_prefix("event: "))
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_demo_runs_a_first_run_without_any_key_and_approving_completes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, _token, run) = demo_server(dir.path()).await;

    // The run serve started pauses for approval after a plan update and a tool call.
    let paused = wait_demo_status(&server, &run, "paused").await;
    assert_eq!(paused["pause_reason"], "human_approval", "{paused}");
    assert_eq!(paused["input"]["model"]["provider"], "demo", "{paused}");
    assert_eq!(
        paused["input"]["model"]["model"], "demo-deterministic",
        "{paused}"
    );
    let (_, history) = server
        .get(&format!("/v1/runs/{run}/events/history?app_id=demo"))
        .await;
    let types = event_types(history.as_array().expect("a list"));
    for kind in [
        "plan_updated",
        "tool_call_started",
        "tool_call_result",
        "run.paused",
    ] {
        assert!(types.iter().any(|t| t == kind), "{kind} in {types:?}");
    }
    let (_, calls) = server
        .get(&format!("/v1/runs/{run}/tool-calls?app_id=demo"))
        .await;
    assert!(
        calls.to_string().contains("get_context") && calls.to_string().contains("DEMO-1"),
        "{calls}"
    );

    // Approving it as the printed line does completes it; the answer says what it is.
    let (status, body) = server
        .post(&format!("/v1/runs/{run}/approve?app_id=demo"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    wait_demo_status(&server, &run, "completed").await;
    let (_, messages) = server
        .get(&format!("/v1/runs/{run}/messages?app_id=demo"))
        .await;
    let last = messages
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "assistant"))
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    assert!(
        last.starts_with("[demo model]") && last.contains("demo run is complete"),
        "{messages}"
    );

    // A second run, started as the printed line does, streams its text live.
    let (status, started) = server
        .post(
            "/v1/runs",
            json!({"app_id": "demo", "agent_id": "demo",
                   "target": {"type": "ticket", "id": "DEMO-2"}, "instructions": "Show me."}),
        )
        .await;
    assert_eq!(status, 202, "{started}");
    let second = started["id"].as_str().expect("id").to_string();
    let streamed = stream_until_paused(&server, &second).await;
    assert!(
        streamed.iter().any(|t| t == "assistant_message_delta"),
        "{streamed:?}"
    );

    // Labelled in the capabilities and the console's run list.
    let (_, capabilities) = server.get("/v1/capabilities").await;
    let demo = capabilities["providers"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "demo"))
        .cloned()
        .unwrap_or_else(|| panic!("demo listed: {capabilities}"));
    assert_eq!(demo["protocols"], json!(["built_in_deterministic_demo"]));
    let (_, info) = server.get("/studio/api/info").await;
    assert_eq!(info["demo"], true, "{info}");
    let (_, runs) = server.get("/studio/api/runs").await;
    let rows = runs["runs"].as_array().expect("runs");
    assert_eq!(rows.len(), 2, "{runs}");
    assert!(rows.iter().all(|r| r["demo_model"] == true), "{runs}");
    assert!(
        server.process.stderr().contains("DEMO MODE"),
        "the log says so"
    );
    let (status, metrics) = server.get("/metrics").await;
    assert_eq!(status, 200);
    assert!(
        metrics.to_string().contains(r#"provider=\"demo\""#),
        "model calls counted under provider demo: {metrics}"
    );

    // A restart on the same store starts no second demo run of its own.
    drop(server);
    let again = restart_without_new_run(dir.path()).await;
    let (_, runs) = again.get("/studio/api/runs").await;
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(2), "{runs}");
}

/// `serve --demo` on a store whose demo app has runs: it says so instead of starting one.
async fn restart_without_new_run(dir: &std::path::Path) -> Server {
    let mut server = Server::start_with_args(BIN, &["serve", "--demo"], &base_env(dir)).await;
    server
        .process
        .wait_stderr_line("the demo app has runs already", WAIT)
        .await;
    let console = printed(&server.process.stderr(), "open the console:");
    let token = console.split_once("#token=").map(|(_, t)| t.to_string());
    server.with_token(token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_mode_is_refused_beside_a_real_provider() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = base_env(dir.path());
    env.insert("OPENAI_API_KEY".into(), "sk-real-key".into());
    let (status, _, stderr) = run_command(BIN, &["serve", "--demo"], &env).await;
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("--demo") && stderr.contains("openai") && !stderr.contains("sk-real-key"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_demo_the_demo_model_is_never_served() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = base_env(dir.path());
    env.insert("AGENT_RUNTIME_SERVICE_TOKEN".into(), TOKEN.into());
    env.insert(
        "AGENT_RUNTIME_APP_CONFIG".into(),
        json!({"apps": [{"app_id": APP}]}).to_string(),
    );
    let server = Server::start(BIN, &env).await;
    let (status, body) = server
        .put(
            &format!("/v1/agents/demo?app_id={APP}"),
            json!({"app_id": APP, "name": "Demo", "provider": "demo", "allowed_tools": ["get_context"]}),
        )
        .await;
    assert!(status < 300, "{body}");
    for request in [
        json!({"app_id": APP, "agent_id": "demo", "target": {"type": "ticket", "id": "T-1"}}),
        json!({"app_id": APP, "agent_id": "demo", "target": {"type": "ticket", "id": "T-2"},
               "model": {"provider": "demo", "model": "demo-deterministic"}}),
    ] {
        let (status, body) = server.post("/v1/runs", request).await;
        assert_eq!(status, 400, "{body}");
        assert!(body.to_string().contains("serve --demo"), "{body}");
    }
    let (_, capabilities) = server.get("/v1/capabilities").await;
    assert!(
        !capabilities
            .to_string()
            .contains("built_in_deterministic_demo"),
        "{capabilities}"
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(server.run_count().await, 0);
}
