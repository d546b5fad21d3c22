//! Coding agents on a fleet: the real binary serving with two or three real `agent-runtime
//! node` processes on loopback ports (`AGENT_RUNTIME_NODES`), the real CLIs on the nodes against
//! the mock model (the vendors' stand-in) through each node's egress proxy.
//!
//! - a run goes where its agent's placement says (labels, a machine), its records and events are
//!   those of a local run, and its CLI calls the run's tools through the MCP bridge from the node;
//! - capabilities and app health show each node's health and seed 000 inventory;
//! - kill -9 of the node running a turn: the turn runs again on the other node; with no other
//!   node the run pauses saying why, and resumes once the node is back;
//! - cancel and pause of a remote run behave as for a local one; per-node limits hold;
//! - bad nodes (garbage NDJSON, a wrong token) give clear reasons and no run is stuck.
//!
//! A missing CLI skips its test loudly; under `CI=true` it fails instead.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ar_test_support::mock_provider::{Conversation, MockProvider, Reply};
use ar_test_support::require_cli;
use ar_test_support::service::*;
use serde_json::{json, Value};

use crate::cli_bridge::{call_bridged, run_processes, script_step};
use crate::BIN;

const NODE_TOKEN: &str = "fleet-node-token-0123456789";
const LONG: Duration = Duration::from_secs(180);

/// A running `agent-runtime node`.
struct Node {
    name: String,
    url: String,
    root: PathBuf,
    process: ChildGuard,
}

impl Node {
    async fn start(dir: &Path, name: &str, addr: &str) -> Node {
        let root = dir.join(format!("node-{name}"));
        let mut env = base_env(dir);
        env.insert("AGENT_RUNTIME_NODE_TOKEN".into(), NODE_TOKEN.into());
        let root_arg = root.display().to_string();
        let args = [
            "node",
            "--addr",
            addr,
            "--name",
            name,
            "--root",
            &root_arg,
            "--max-runs",
            "8",
            "--shutdown-grace-seconds",
            "2",
        ];
        let mut process = ChildGuard::spawn(BIN, &args, &env);
        let line = process.wait_stderr_line("listening on http://", WAIT).await;
        let url = line
            .split_once("listening on ")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .expect("node url")
            .to_string();
        Node {
            name: name.to_string(),
            url,
            root,
            process,
        }
    }

    /// Whether this node made the run's workdir (it ran a turn of it).
    fn ran(&self, run_id: &str) -> bool {
        self.root.join(run_id).exists()
    }

    fn addr(&self) -> String {
        self.url.trim_start_matches("http://").to_string()
    }
}

/// The service with `nodes` as its fleet (health every second).
async fn fleet_service(dir: &Path, mock: &MockProvider, nodes: Value) -> Server {
    let mut env = sqlite_env(dir, mock);
    env.insert(
        "AGENT_RUNTIME_NODES".into(),
        json!({"health_interval_seconds": 1, "nodes": nodes}).to_string(),
    );
    Server::start(BIN, &env).await
}

fn node_entry(node: &Node, labels: Value) -> Value {
    json!({"name": node.name, "url": node.url, "token": NODE_TOKEN, "labels": labels,
           "max_concurrent_runs": 4})
}

/// Waits until capabilities show every node of `names` ready with codex.
async fn wait_ready(server: &Server, names: &[&str]) -> Value {
    wait_for("the nodes to be ready", LONG, || async {
        let (_, caps) = server.get("/v1/capabilities").await;
        let nodes = caps["nodes"].as_array().cloned().unwrap_or_default();
        let ready = names.iter().all(|name| {
            nodes.iter().any(|node| {
                node["name"] == *name
                    && node["ready"] == true
                    && node["agents"]
                        .as_array()
                        .is_some_and(|a| a.contains(&json!("codex")))
            })
        });
        ready.then_some(caps)
    })
    .await
}

fn codex_run(mock: &MockProvider, instructions: &str) -> Value {
    json!({"instructions": instructions,
           "model": {"provider": "openai_compatible", "model": "mock-model",
                     "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}}})
}

fn model_for(kind: &str) -> &'static str {
    match kind {
        "claude_code" => "claude-sonnet-4-5",
        _ => "mock-model",
    }
}

/// The model's script for a bridged run: `get_context` through the bridge, then an answer.
fn context_then_answer(conv: &Conversation<'_>) -> Option<Reply> {
    if !conv.declares_tools() {
        return Some(Reply::text("ok"));
    }
    Some(match script_step(conv) {
        0 => call_bridged(conv, "get_context", "{}"),
        _ => Reply::text("answered from the node"),
    })
}

/// Each CLI runs on the node its placement labels choose, calls the run's `get_context`
/// through the bridge started on that node, and the run's records are a local run's.
async fn runs_on_the_labelled_node(program: &str, kind: &str) {
    if !require_cli(program) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockProvider::start().await;
    mock.respond_with(context_then_answer);
    let a = Node::start(dir.path(), "a", "127.0.0.1:0").await;
    let b = Node::start(dir.path(), "b", "127.0.0.1:0").await;
    let nodes = json!([
        node_entry(&a, json!({"pool": "a"})),
        node_entry(&b, json!({"pool": "b"}))
    ]);
    let server = fleet_service(dir.path(), &mock, nodes).await;
    wait_ready(&server, &["a", "b"]).await;
    let agent = server
        .agent(
            &format!("{kind}-on-b"),
            json!({"runtime_kind": kind, "allowed_tools": ["get_context"],
                   "execution_config": {"placement": {"labels": {"pool": "b"}}}}),
        )
        .await;
    let run = server
        .start_run(
            &mock,
            &agent,
            json!({"model": {"provider": "openai_compatible", "model": model_for(kind),
                   "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key"}}}),
        )
        .await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    let done = server
        .wait_status(&run_id, &["completed", "failed", "paused"])
        .await;
    let events = server.events(&run_id).await;
    assert_eq!(done["status"], "completed", "{done} {events:?}");
    assert_eq!(done["output_summary"]["machine"], "b", "{done}");
    assert!(b.ran(&run_id) && !a.ran(&run_id));
    let rows = server.list(&run_id, "tool-calls").await;
    let context: Vec<&Value> = rows
        .iter()
        .filter(|r| r["tool_name"] == "get_context")
        .collect();
    assert_eq!(
        context.len(),
        1,
        "the bridged call, recorded once: {rows:?}"
    );
    assert!(context[0]["output"].to_string().contains("T-42"));
    let kinds = event_types(&events);
    for expected in [
        "run.started",
        "assistant_message_completed",
        "tool_call_finished",
        "run.completed",
    ] {
        assert!(
            kinds.iter().any(|k| k == expected),
            "{expected} in {kinds:?}"
        );
    }
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "assistant_message_completed"
                && e["data"]["content"] == "answered from the node"),
        "{events:?}"
    );
    // The key went to the model (swapped in by the node's proxy), never to the node's CLI.
    for request in mock.model_requests() {
        let key = request
            .header("authorization")
            .map(|v| v.trim_start_matches("Bearer ").to_string())
            .or_else(|| request.header("x-api-key").map(str::to_string));
        assert_eq!(key.as_deref(), Some(RUN_API_KEY));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn codex_runs_on_the_labelled_node_with_the_bridge() {
    runs_on_the_labelled_node("codex", "codex").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claude_code_runs_on_the_labelled_node_with_the_bridge() {
    runs_on_the_labelled_node("claude", "claude_code").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn opencode_runs_on_the_labelled_node_with_the_bridge() {
    runs_on_the_labelled_node("opencode", "opencode").await;
}

/// Capabilities list the nodes with their seed 000 inventory; app health has a component per
/// node, which turns unreachable when its node dies.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn capabilities_and_app_health_show_the_nodes() {
    if !require_cli("codex") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockProvider::start().await;
    let a = Node::start(dir.path(), "a", "127.0.0.1:0").await;
    let mut b = Node::start(dir.path(), "b", "127.0.0.1:0").await;
    let nodes = json!([
        node_entry(&a, json!({"gpu": "none"})),
        node_entry(&b, json!({}))
    ]);
    let server = fleet_service(dir.path(), &mock, nodes).await;
    let caps = wait_ready(&server, &["a", "b"]).await;
    assert!(caps["runtime_kinds"]
        .as_array()
        .unwrap()
        .contains(&json!("codex")));
    let node_a = caps["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "a")
        .unwrap();
    assert_eq!(node_a["labels"]["gpu"], "none");
    assert_eq!(node_a["max_concurrent_runs"], 4);
    let inventory = &node_a["inventory"];
    assert_eq!(inventory["execution_source"]["id"], "node:a", "{inventory}");
    let codex = inventory["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|agent| agent["source_agent"]["opaque_source_agent_id"] == "codex")
        .expect("codex in the inventory");
    assert_eq!(codex["readiness"]["ready"], true);
    assert_eq!(codex["readiness"]["contract_id"], "agent-runtime.cli-turn");
    let evidence = codex["readiness"]["evidence"].to_string();
    assert!(evidence.contains("version: codex-cli"), "{evidence}");
    let (status, health) = server.get(&format!("/v1/app-health?app_id={APP}")).await;
    assert_eq!(status, 200);
    let node_components = |health: &Value| -> Vec<Value> {
        health["components"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["kind"] == "node")
            .cloned()
            .collect()
    };
    let components = node_components(&health);
    assert_eq!(components.len(), 2, "{health}");
    assert!(components.iter().all(|c| c["status"] == "ok"), "{health}");

    b.process.kill_hard();
    let health = wait_for("node b unreachable", LONG, || async {
        let (_, health) = server.get(&format!("/v1/app-health?app_id={APP}")).await;
        let b = node_components(&health)
            .into_iter()
            .find(|c| c["name"] == "b")?;
        (b["status"] == "unreachable").then_some(b)
    })
    .await;
    assert!(
        health["error"]
            .as_str()
            .unwrap()
            .contains("could not be reached"),
        "{health}"
    );
    drop(a);
}

/// The model's script for the failover tests: the first attempt's answer hangs (the test
/// kills its node meanwhile), later ones answer at once.
fn slow_first(
    attempts: Arc<AtomicUsize>,
) -> impl Fn(&Conversation<'_>) -> Option<Reply> + Send + Sync {
    move |conv| {
        if !conv.declares_tools() {
            return Some(Reply::text("ok"));
        }
        Some(match attempts.fetch_add(1, Ordering::SeqCst) {
            0 => Reply::text("too late").delay(Duration::from_secs(120)),
            _ => Reply::text("done after the failover"),
        })
    }
}

/// Waits until the run's first model call is in flight; the node running it.
async fn node_running<'a>(
    mock: &MockProvider,
    nodes: &'a mut [Node],
    run_id: &str,
) -> &'a mut Node {
    wait_for("the first model call", LONG, || async {
        (!mock.model_requests().is_empty()).then_some(())
    })
    .await;
    nodes
        .iter_mut()
        .find(|node| node.ran(run_id))
        .expect("a node runs the turn")
}

/// kill -9 of the node running a turn: the turn runs again, from its checkpoint, on the
/// other node, and the run completes there.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_node_fails_its_turn_over_to_the_other_node() {
    if !require_cli("codex") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockProvider::start().await;
    mock.respond_with(slow_first(Arc::new(AtomicUsize::new(0))));
    let mut nodes = vec![
        Node::start(dir.path(), "a", "127.0.0.1:0").await,
        Node::start(dir.path(), "b", "127.0.0.1:0").await,
    ];
    let entries = json!([
        node_entry(&nodes[0], json!({})),
        node_entry(&nodes[1], json!({}))
    ]);
    let server = fleet_service(dir.path(), &mock, entries).await;
    wait_ready(&server, &["a", "b"]).await;
    let agent = server
        .agent("codex-anywhere", json!({"runtime_kind": "codex"}))
        .await;
    let run = server
        .start_run(&mock, &agent, codex_run(&mock, "Fix the flaky test."))
        .await;
    let run_id = run["id"].as_str().unwrap().to_string();
    let victim = node_running(&mock, &mut nodes, &run_id).await;
    let killed = victim.name.clone();
    victim.process.kill_hard();
    let done = server
        .wait_status(&run_id, &["completed", "failed", "paused"])
        .await;
    let events = server.events(&run_id).await;
    assert_eq!(done["status"], "completed", "{done} {events:?}");
    let failovers = done["output_summary"]["failovers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(failovers.len(), 1, "{done}");
    assert_eq!(failovers[0]["machine"], killed.as_str());
    let other = if killed == "a" { "b" } else { "a" };
    assert_eq!(done["output_summary"]["machine"], other, "{done}");
    assert_eq!(
        done["output_summary"]["last_message"],
        "done after the failover"
    );
    // The turn restarted from the run's conversation: the instructions went to the other node.
    let last = mock.model_requests().last().unwrap().body.to_string();
    assert!(last.contains("Fix the flaky test."), "{last}");
    // Nothing of the run is left running anywhere (the orphan on the dead node lost its proxy).
    wait_for("the run's processes to end", LONG, || async {
        run_processes(&run_id).is_empty().then_some(())
    })
    .await;
}

/// kill -9 of the only node a run may use: the run pauses saying why; once the node is back,
/// resuming runs the turn there.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_no_node_left_the_run_pauses_and_resumes_when_one_is_back() {
    if !require_cli("codex") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockProvider::start().await;
    mock.respond_with(slow_first(Arc::new(AtomicUsize::new(0))));
    let mut nodes = vec![Node::start(dir.path(), "solo", "127.0.0.1:0").await];
    let addr = nodes[0].addr();
    let server = fleet_service(dir.path(), &mock, json!([node_entry(&nodes[0], json!({}))])).await;
    wait_ready(&server, &["solo"]).await;
    let agent = server
        .agent(
            "codex-solo",
            json!({"runtime_kind": "codex", "execution_config": {"placement": {"machine": "solo"}}}),
        )
        .await;
    let run = server
        .start_run(&mock, &agent, codex_run(&mock, "Refactor the parser."))
        .await;
    let run_id = run["id"].as_str().unwrap().to_string();
    node_running(&mock, &mut nodes, &run_id)
        .await
        .process
        .kill_hard();
    let paused = server
        .wait_status(&run_id, &["paused", "completed", "failed"])
        .await;
    assert_eq!(paused["status"], "paused", "{paused}");
    assert_eq!(paused["pause_reason"], "manual");
    let detail = paused["output_summary"]["pause_detail"]
        .as_str()
        .unwrap_or_default();
    assert!(detail.contains("solo"), "{paused}");

    let _back = Node::start(dir.path(), "solo", &addr).await;
    wait_ready(&server, &["solo"]).await;
    let (status, body) = server
        .post(
            &format!("/v1/runs/{run_id}/resume?app_id={APP}"),
            json!({"intent": "continue"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let done = server
        .wait_status(&run_id, &["completed", "failed", "paused"])
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["output_summary"]["machine"], "solo");
}

/// Cancel reaches the node at once (its CLI is killed); pause takes effect at the turn's end,
/// as for a local run; a node's limit of runs holds (the second run waits for the first).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_pause_and_limits_of_remote_runs() {
    if !require_cli("codex") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockProvider::start().await;
    mock.respond_with(|conv: &Conversation<'_>| {
        let text = conv.body.to_string();
        Some(if text.contains("hang here") {
            Reply::text("never").delay(Duration::from_secs(120))
        } else {
            Reply::text("answer").delay(Duration::from_secs(2))
        })
    });
    let node = Node::start(dir.path(), "one", "127.0.0.1:0").await;
    let mut entry = node_entry(&node, json!({}));
    entry["max_concurrent_runs"] = json!(1);
    let server = fleet_service(dir.path(), &mock, json!([entry])).await;
    wait_ready(&server, &["one"]).await;
    let agent = server
        .agent(
            "codex-one",
            json!({"runtime_kind": "codex",
                                   "execution_config": {"placement": {"machine": "one"}}}),
        )
        .await;

    let hanging = server
        .start_run(&mock, &agent, codex_run(&mock, "hang here"))
        .await;
    let hanging = hanging["id"].as_str().unwrap().to_string();
    wait_for("the hanging run's model call", LONG, || async {
        (!run_processes(&hanging).is_empty() && mock.model_requests().len() == 1).then_some(())
    })
    .await;
    // The node's one place is taken: a second run waits for it.
    let queued = server
        .start_run(&mock, &agent, codex_run(&mock, "then me"))
        .await;
    let queued = queued["id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        mock.model_requests().len(),
        1,
        "the second run did not wait for the place"
    );
    let (status, _) = server
        .post(
            &format!("/v1/runs/{hanging}/cancel?app_id={APP}"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200);
    let cancelled = server
        .wait_status(&hanging, &["cancelled", "failed", "completed"])
        .await;
    assert_eq!(cancelled["status"], "cancelled");
    wait_for("the cancelled CLI to die on the node", LONG, || async {
        run_processes(&hanging).is_empty().then_some(())
    })
    .await;
    // The place is free: the second run goes; pause it while its answer is on its way.
    wait_for("the second run's model call", LONG, || async {
        (mock.model_requests().len() == 2).then_some(())
    })
    .await;
    let (status, _) = server
        .post(&format!("/v1/runs/{queued}/pause?app_id={APP}"), json!({}))
        .await;
    assert_eq!(status, 200);
    let paused = server
        .wait_status(&queued, &["paused", "completed", "failed"])
        .await;
    assert_eq!(paused["status"], "paused", "{paused}");
    assert_eq!(
        paused["output_summary"]["last_message"], "answer",
        "the turn finished first"
    );
}

/// A stand-in for a broken node: capabilities say it is ready, `/api/exec` answers 200 and
/// then a line that is not an event.
async fn garbage_node() -> String {
    use axum::routing::{get, post};
    let now = "2026-01-01T00:00:00Z";
    let inventory = json!({
        "execution_source": {"id": "node:junk", "account_id": "a", "framework": "f",
            "instance_id": "i", "display_name": "junk", "last_seen_at": now,
            "resource_sharing": {"provider_credentials": "unknown", "filesystem": "unknown",
                "browser_sessions": "unknown", "framework_sessions": "unknown",
                "source_memory": "unknown", "tool_configuration": "unknown"}},
        "agents": [{"source_agent": {"id": "node:junk/codex", "execution_source_id": "node:junk",
                "opaque_source_agent_id": "codex", "display_name": "codex", "last_seen_at": now},
            "capabilities": ["cli_turn"],
            "readiness": {"ready": true, "contract_id": "c", "contract_revision": "1", "evidence": ["e"]}}],
        "observed_at": now
    });
    let caps = json!({"name": "junk", "agents": ["codex"], "accepting": true,
                      "max_concurrent_runs": 4, "inventory": inventory});
    let app = axum::Router::new()
        .route("/api/node/capabilities", get(move || async move { axum::Json(caps.clone()) }))
        .route(
            "/api/exec",
            post(|| async {
                ([("content-type", "application/x-ndjson")], "{\"run_id\":\"x\",\"type\":\"started\",\"time\":\"2026-01-01T00:00:00Z\"}\n<html>oops</html>\n")
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// A node that answers garbage NDJSON and a node whose token is wrong: each run pinned to one
/// pauses with a clear reason (never stuck running), nothing of the key leaks.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_nodes_give_clear_reasons() {
    if !require_cli("codex") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockProvider::start().await;
    mock.set_fallback(Some(Reply::text("unused")));
    let junk = garbage_node().await;
    let real = Node::start(dir.path(), "real", "127.0.0.1:0").await;
    let nodes = json!([
        {"name": "junk", "url": junk, "token": NODE_TOKEN},
        {"name": "wrongtoken", "url": real.url, "token": "not-the-token"}
    ]);
    let server = fleet_service(dir.path(), &mock, nodes).await;
    let caps = wait_for("the wrong token to be noticed", LONG, || async {
        let (_, caps) = server.get("/v1/capabilities").await;
        let wrong = caps["nodes"]
            .as_array()?
            .iter()
            .find(|n| n["name"] == "wrongtoken")?
            .clone();
        wrong["error"].as_str().filter(|e| !e.is_empty())?;
        Some(wrong)
    })
    .await;
    assert_eq!(caps["ready"], false);
    assert!(caps["error"].as_str().unwrap().contains("401"), "{caps}");
    for (agent, machine, expected) in [
        ("codex-junk", "junk", "not an event"),
        ("codex-wrong", "wrongtoken", "401"),
    ] {
        server
            .agent(
                agent,
                json!({"runtime_kind": "codex",
                                  "execution_config": {"placement": {"machine": machine}}}),
            )
            .await;
        let run = server
            .start_run(&mock, agent, codex_run(&mock, "anything"))
            .await;
        let run_id = run["id"].as_str().unwrap().to_string();
        let paused = server
            .wait_status(&run_id, &["paused", "failed", "completed"])
            .await;
        assert_eq!(paused["status"], "paused", "{paused}");
        let detail = paused["output_summary"]["pause_detail"].to_string();
        assert!(detail.contains(expected), "{machine}: {paused}");
        assert!(!paused.to_string().contains(RUN_API_KEY));
    }
    // An unknown machine is refused at admission, naming it.
    server
        .agent(
            "codex-ghost",
            json!({"runtime_kind": "codex",
                                      "execution_config": {"placement": {"machine": "ghost"}}}),
        )
        .await;
    let mut body = json!({"app_id": APP, "agent_id": "codex-ghost", "target": {"type": "ticket", "id": "T-1"}});
    merge(&mut body, &codex_run(&mock, "x"));
    body["model_credential"] = json!({"type": "api_key", "api_key": RUN_API_KEY});
    let (status, refused) = server.post("/v1/runs", body).await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused
            .to_string()
            .contains("unknown machine \\\"ghost\\\""),
        "{refused}"
    );
}
