//! The studio faces of the binary: `agent-runtime studio` (standalone, console at /studio) and
//! `agent-runtime serve` registering with it through AGENT_RUNTIME_STUDIO_URL (besides its own
//! embedded studio), running a command the standalone studio enqueues.

use std::net::SocketAddr;

use ar_test_support::mock_provider::{MockProvider, Reply, Usage};
use serde_json::{json, Value};

use ar_test_support::service::*;

use crate::BIN;

/// Starts `agent-runtime studio` with `args`; returns the process and its address.
async fn start_studio(
    args: &[&str],
    env: &std::collections::BTreeMap<String, String>,
) -> (ChildGuard, SocketAddr) {
    let mut process = ChildGuard::spawn(BIN, args, env);
    const LISTENING: &str = "studio listening on http://";
    let line = process.wait_stderr_line(LISTENING, WAIT).await;
    let addr: SocketAddr = line
        .split_once(LISTENING)
        .and_then(|(_, rest)| rest.split(|c: char| c.is_whitespace()).next())
        .and_then(|addr| addr.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    (process, addr)
}

async fn get_json(client: &reqwest::Client, url: &str) -> Value {
    client
        .get(url)
        .send()
        .await
        .expect("request")
        .json()
        .await
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn serve_registers_with_a_standalone_studio_that_runs_commands_on_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = http_client();

    // The listen address comes from AGENT_RUNTIME_STUDIO_ADDR when --addr is absent.
    let mut studio_env = base_env(dir.path());
    studio_env.insert("AGENT_RUNTIME_STUDIO_ADDR".into(), "127.0.0.1:0".into());
    let (_studio, studio_addr) = start_studio(&["studio"], &studio_env).await;
    let studio_url = format!("http://{studio_addr}");
    let page = client
        .get(format!("{studio_url}/studio"))
        .send()
        .await
        .expect("console");
    assert_eq!(page.status(), 200);
    assert!(page
        .text()
        .await
        .unwrap_or_default()
        .contains("/studio/app.js"));
    assert_eq!(
        get_json(&client, &format!("{studio_url}/api/runtimes")).await,
        json!({"runtimes": []})
    );

    let mock = MockProvider::start().await;
    let mut env = sqlite_env(dir.path(), &mock);
    env.insert("AGENT_RUNTIME_STUDIO_URL".into(), studio_url.clone());
    env.insert("OPENAI_API_KEY".into(), "sk-e2e-studio".into());
    env.insert("OPENAI_BASE_URL".into(), mock.base_url());
    env.insert("AGENT_RUNTIME_NATIVE_PROVIDER".into(), "openai".into());
    let server = Server::start(BIN, &env).await;
    let agent = server.create_agent("studio helper", &["get_context"]).await;
    let name = format!("{APP}/{}", agent["id"].as_str().expect("agent id"));

    let runtime = wait_for("the service in the standalone studio", WAIT, || {
        let client = client.clone();
        let url = format!("{studio_url}/api/runtimes");
        let name = name.clone();
        async move {
            let body = get_json(&client, &url).await;
            body["runtimes"].as_array()?.iter().find_map(|rt| {
                let has = rt["agents"].as_array()?.iter().any(|a| a["name"] == name);
                (has && rt["connected"] == true).then(|| rt["id"].as_str().map(str::to_string))?
            })
        }
    })
    .await;
    // The service is in its own embedded studio too (its link there registers on its own
    // schedule, so wait for it rather than race it).
    let own = wait_for("the service in its embedded studio", WAIT, || async {
        let (status, own) = server.get("/api/runtimes").await;
        assert_eq!(status, 200, "{own}");
        own["runtimes"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
            .then_some(own)
    })
    .await;
    assert_eq!(own["runtimes"][0]["id"], runtime.as_str());

    mock.push(Reply::text("hello from the studio").usage(Usage::new(5, 2)));
    let enqueued: Value = client
        .post(format!("{studio_url}/api/playground/runs"))
        .json(&json!({"runtime_id": runtime, "agent": name, "input": "Say hello."}))
        .send()
        .await
        .expect("enqueue")
        .json()
        .await
        .expect("json");
    let command = enqueued["command_id"]
        .as_str()
        .expect("command id")
        .to_string();
    let finished = wait_for("the command to finish", WAIT, || {
        let client = client.clone();
        let url = format!("{studio_url}/api/playground/commands/{command}");
        async move {
            let body = get_json(&client, &url).await;
            (body["state"] == "finished").then_some(body)
        }
    })
    .await;
    assert_eq!(finished["status"], "succeeded", "{finished}");
    let run_id = finished["run_id"].as_str().expect("run id");
    let run = server.run(run_id).await;
    assert_eq!(run["status"], "completed", "{run}");
}
