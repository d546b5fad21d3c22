//! The workspace opt-in and the cleanup policies.

use ar_core::workspace::{CleanupPolicy, CleanupReason, WorkspaceAccess, WorkspaceMode};
use ar_core::{Agent, Run, RunStatus};
use serde_json::json;

use super::{cleanup_due, requested};

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
