//! Two replicas on one database: a run owned by a live replica is left alone while its lease is
//! renewed by the heartbeat (even through a step longer than the lease), and taken over by the
//! other replica once its owner is killed; nothing is executed twice.

use std::collections::BTreeMap;
use std::time::Duration;

use ar_test_support::mock_provider::{MockProvider, Reply};
use serde_json::json;

use ar_test_support::service::*;

use crate::BIN;

fn replica_env(base: &BTreeMap<String, String>, instance: &str) -> BTreeMap<String, String> {
    let mut env = base.clone();
    env.insert("AGENT_RUNTIME_INSTANCE_ID".into(), instance.into());
    // Long enough that a heartbeat delayed by a loaded machine (the suite runs in parallel)
    // does not lose the lease; the delayed step below is longer still.
    env.insert("AGENT_RUNTIME_LEASE_TTL_SECONDS".into(), "4".into());
    env.insert("AGENT_RUNTIME_SWEEP_INTERVAL_SECONDS".into(), "1".into());
    env
}

/// Runs the scenario with `base` (a store shared by both replicas).
pub async fn takeover_scenario(base: &BTreeMap<String, String>, mock: &MockProvider) {
    mock.push(Reply::tool_call("get_context", "{}"));
    // Longer than the 4 s lease: only the heartbeat keeps the run with its owner.
    mock.push(
        Reply::tool_call("get_context", json!({"part": 2}).to_string())
            .delay(Duration::from_secs(6)),
    );
    mock.push(Reply::hang());

    let mut owner = Server::start(BIN, &replica_env(base, "inst_owner")).await;
    let standby = Server::start(BIN, &replica_env(base, "inst_standby")).await;
    let agent = owner.create_agent("replicated", &["get_context"]).await;
    let run = owner
        .start_run(mock, agent["id"].as_str().expect("agent id"), json!({}))
        .await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    wait_model_requests(mock, 3).await;
    assert!(
        !standby.process.stderr().contains("taking over run"),
        "the standby took a run whose owner was alive:\n{}",
        standby.process.stderr()
    );
    assert_eq!(standby.run(&run_id).await["status"], "running");

    owner.process.kill_hard();
    drop(owner);
    mock.push(Reply::text("finished by the standby"));
    let done = standby.wait_status(&run_id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(standby.process.stderr().contains("taking over run"));

    let events = standby.events(&run_id).await;
    assert_contiguous(&events);
    assert_eq!(
        event_types(&events)
            .iter()
            .filter(|t| *t == "run.completed")
            .count(),
        1
    );
    let requests = mock.model_requests();
    assert_eq!(requests.len(), 4, "no model round was run twice");
    let tool_results = requests[3].body["messages"]
        .as_array()
        .map(|messages| messages.iter().filter(|m| m["role"] == "tool").count());
    assert_eq!(tool_results, Some(2));
    assert_eq!(standby.list(&run_id, "tool-calls").await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_replica_on_the_same_sqlite_file_takes_over_a_dead_owners_run() {
    let mock = MockProvider::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    takeover_scenario(&sqlite_env(dir.path(), &mock), &mock).await;
}
