//! The workspace opt-in, the cleanup policies, and what an observation of the workspace records.

use ar_core::workspace::{CleanupPolicy, CleanupReason, WorkspaceAccess, WorkspaceMode};
use ar_core::{Agent, Run, RunStatus};
use serde_json::json;

use super::{apply_observed, cleanup_due, observed_changes, requested};

fn agent(config: Option<serde_json::Value>) -> Agent {
    Agent {
        id: "agent_1".into(),
        app_id: "a".into(),
        name: "a".into(),
        runtime_kind: ar_core::RuntimeKind::NativeSdk,
        provider: String::new(),
        model: String::new(),
        system_prompt: String::new(),
        skills: vec![],
        allowed_tools: vec![],
        allowed_targets: vec![],
        approval_mode: ar_core::ApprovalMode::Never,
        default_invocation_mode: ar_core::InvocationMode::Autonomous,
        execution_config: config,
        created_at: chrono::Utc::now(),
        updated_at: chrono::Utc::now(),
    }
}

fn run(metadata: serde_json::Value) -> Run {
    let now = chrono::Utc::now();
    Run {
        id: "run_1".into(),
        app_id: "a".into(),
        host_run_id: String::new(),
        agent_id: "agent_1".into(),
        target: ar_core::TargetRef::default(),
        runtime_kind: ar_core::RuntimeKind::NativeSdk,
        execution_mode: ar_core::ExecutionMode::Lightweight,
        invocation_mode: ar_core::InvocationMode::Autonomous,
        external_actor_id: String::new(),
        state: ar_core::RunState::queued(false),
        input: ar_core::RunInput {
            metadata: metadata.as_object().cloned(),
            ..ar_core::RunInput::default()
        },
        output_summary: ar_core::JsonMap::new(),
        workspace_lease: None,
        error_message: String::new(),
        started_at: None,
        completed_at: None,
        created_at: now,
        updated_at: now,
        version: 1,
        engine: ar_core::EngineState::default(),
    }
}

#[test]
fn the_agent_config_or_the_run_metadata_opts_in() {
    let none = requested(&agent(None), &run(json!({}))).unwrap();
    assert_eq!(none, None, "no mode, no workspace");
    let spec = requested(
        &agent(Some(
            json!({"workspace": {"mode": "host_prepared", "access": "read_only"}}),
        )),
        &run(json!({})),
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (spec.mode, spec.access),
        (WorkspaceMode::HostPrepared, WorkspaceAccess::ReadOnly)
    );
    for metadata in [
        json!({"workspace_mode": "host_prepared"}),
        json!({"workspace.mode": "host_prepared"}),
        json!({"workspace": {"mode": "host_prepared"}}),
    ] {
        let spec = requested(&agent(None), &run(metadata.clone()))
            .unwrap()
            .unwrap();
        assert_eq!(spec.mode, WorkspaceMode::HostPrepared, "{metadata}");
        assert_eq!(spec.access, WorkspaceAccess::ReadWrite);
    }
    let error = requested(
        &agent(Some(json!({"workspace": {"mode": "cloud"}}))),
        &run(json!({})),
    )
    .unwrap_err();
    assert!(error.contains("cloud"), "{error}");
    let error = requested(
        &agent(Some(
            json!({"workspace": {"mode": "host_prepared", "access": "all"}}),
        )),
        &run(json!({})),
    )
    .unwrap_err();
    assert!(error.contains("all"), "{error}");
}

#[test]
fn cleanup_follows_the_policy() {
    use CleanupPolicy::*;
    assert_eq!(
        cleanup_due(OnTerminal, RunStatus::Completed),
        Some(CleanupReason::Completed)
    );
    assert_eq!(
        cleanup_due(OnTerminal, RunStatus::Cancelled),
        Some(CleanupReason::Cancelled)
    );
    assert_eq!(cleanup_due(OnTerminal, RunStatus::Paused), None);
    assert_eq!(
        cleanup_due(Always, RunStatus::Paused),
        Some(CleanupReason::Paused)
    );
    assert_eq!(
        cleanup_due(Always, RunStatus::Failed),
        Some(CleanupReason::Failed)
    );
    assert_eq!(cleanup_due(Manual, RunStatus::Completed), None);
    assert_eq!(cleanup_due(Always, RunStatus::Running), None);
}

/// Only what differs from the lease is recorded (a lease silent on `detached_head` is on its
/// branch), on the lease and in the run's metadata alike.
#[test]
fn an_observation_records_what_changed_on_the_lease_and_the_run() {
    let lease = ar_core::workspace::WorkspaceLease {
        id: "repo_run_1".into(),
        root_path: "/ws/run_1".into(),
        metadata: json!({"work_branch": "agent/fix", "base_branch": "main"})
            .as_object()
            .cloned()
            .unwrap(),
        ..Default::default()
    };
    let same = json!({"work_branch": "agent/fix", "detached_head": false});
    assert!(observed_changes(&lease, same.as_object().cloned().unwrap()).is_empty());
    let moved = json!({"work_branch": "agent/second", "detached_head": false});
    let changes = observed_changes(&lease, moved.as_object().cloned().unwrap());
    assert_eq!(
        serde_json::Value::Object(changes.clone()),
        json!({"work_branch": "agent/second"})
    );

    let mut run = run(json!({"ticket": "T-1"}));
    run.workspace_lease = Some(lease.to_value());
    apply_observed(&mut run, &changes);
    let recorded = run.workspace_lease.as_ref().unwrap();
    assert_eq!(recorded["metadata"]["work_branch"], "agent/second");
    assert_eq!(recorded["metadata"]["base_branch"], "main");
    let metadata = run.input.metadata.as_ref().unwrap();
    assert_eq!(metadata["work_branch"], "agent/second");
    assert_eq!(metadata["ticket"], "T-1");

    let detached = json!({"detached_head": true, "head_commit": "abc123"});
    let changes = observed_changes(&lease, detached.as_object().cloned().unwrap());
    assert_eq!(changes.len(), 2);
}
