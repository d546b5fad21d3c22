//! Collaboration contracts: handoff emission, routine inspection and fencing, agent inventory.

use ar_dispatch::contracts::*;
use chrono::{Duration, Utc};

fn handoff_request(payload: serde_json::Value) -> HandoffEmitterRequest {
    HandoffEmitterRequest {
        adapter_id: "hermes".into(),
        adapter_revision: "r1".into(),
        invocation_id: "inv1".into(),
        account_id: "acct".into(),
        source_agent_id: "agent-a".into(),
        source_behavior_revision_id: "beh1".into(),
        source_binding_revision_id: "bind1".into(),
        structured_payload: payload.to_string().into_bytes(),
    }
}

#[tokio::test]
async fn handoff_emission_echoes_and_validates() {
    let em = InMemoryHandoffEmitter::default();
    let req = handoff_request(serde_json::json!({
        "recipient_agent_id": "agent-b", "context_record_ids": ["c1", "c2"],
        "requested_result": "summary", "requested_authority": ["read"]
    }));
    let out = em.emit_handoff(req.clone()).await.unwrap();
    out.validate_for(&req).unwrap();
    assert_eq!(out.recipient_agent_id, "agent-b");
    assert_eq!(em.emitted().len(), 1);

    for bad in [
        serde_json::json!({"recipient_agent_id": "agent-a", "requested_result": "x"}),
        serde_json::json!({"recipient_agent_id": "agent-b", "requested_result": "x", "context_record_ids": ["c", "c"]}),
        serde_json::json!({"recipient_agent_id": "agent-b", "requested_result": "x", "requested_authority": [" read"]}),
        serde_json::json!({"recipient_agent_id": "agent-b", "requested_result": ""}),
        serde_json::json!({"recipient_agent_id": "agent-b", "requested_result": "x", "extra": 1}),
    ] {
        assert!(
            em.emit_handoff(handoff_request(bad.clone())).await.is_err(),
            "{bad}"
        );
    }
    let mut other = out.clone();
    other.invocation_id = "inv2".into();
    assert!(other.validate_for(&req).is_err());
    // lists must be present on the wire
    let mut v = serde_json::to_value(&out).unwrap();
    v["context_record_ids"] = serde_json::Value::Null;
    assert!(serde_json::from_value::<StructuredHandoffEmission>(v).is_err());
    let mut empty = req.clone();
    empty.account_id = String::new();
    assert!(empty.validate().is_err());
}

fn key() -> RoutineAuthorityInspectionRequest {
    RoutineAuthorityInspectionRequest {
        account_id: "acct".into(),
        execution_source_id: "src".into(),
        source_agent_id: "agent".into(),
        opaque_source_routine_id: "cron-1".into(),
    }
}

#[tokio::test]
async fn routine_inspect_and_fence_with_time_rules() {
    let auth = InMemoryRoutineAuthority::default();
    let now = Utc::now();
    auth.put(
        key(),
        InMemoryRoutine {
            enabled: true,
            projection_revision: 1,
            last_occurrence: now - Duration::hours(1),
            next_occurrence: now + Duration::hours(1),
        },
    );
    let ev = auth.inspect_source_routine(key()).await.unwrap();
    ev.validate_for(&key()).unwrap();
    assert!(ev.enabled);

    // requested before the observation → refused
    let early = RoutineAuthorityFenceRequest {
        inspection: ev.clone(),
        requested_at: ev.observed_at - Duration::seconds(1),
    };
    assert!(auth.fence_source_routine(early).await.is_err());
    // requested at/after the next occurrence → refused
    let late = RoutineAuthorityFenceRequest {
        inspection: ev.clone(),
        requested_at: ev.next_occurrence,
    };
    assert!(auth.fence_source_routine(late).await.is_err());

    let req = RoutineAuthorityFenceRequest {
        inspection: ev.clone(),
        requested_at: ev.observed_at,
    };
    let receipt = auth.fence_source_routine(req).await.unwrap();
    receipt.validate_for(&ev).unwrap();
    assert!(!auth.get(&key()).unwrap().enabled);
    assert_eq!(receipt.projection_revision, 2);
    let mut shifted = receipt.clone();
    shifted.next_occurrence += Duration::seconds(1);
    assert!(shifted.validate_for(&ev).is_err());

    // stale inspection (revision moved on) cannot fence again
    let stale = RoutineAuthorityFenceRequest {
        inspection: ev.clone(),
        requested_at: ev.observed_at,
    };
    assert!(auth.fence_source_routine(stale).await.is_err());

    let mut bad = ev.clone();
    bad.last_occurrence = bad.next_occurrence;
    assert!(bad.validate_for(&key()).is_err());
    let mut bad = ev.clone();
    bad.projection_revision = 0;
    assert!(bad.validate_for(&key()).is_err());
    let mut other = key();
    other.source_agent_id = "x".into();
    assert!(ev.validate_for(&other).is_err());
    assert!(matches!(
        auth.inspect_source_routine(other).await,
        Err(ContractError::NotFound(_))
    ));
}

fn source() -> ExecutionSource {
    ExecutionSource {
        id: "src".into(),
        account_id: "acct".into(),
        framework: "hermes".into(),
        instance_id: "i1".into(),
        gateway_id: String::new(),
        display_name: "Hermes".into(),
        resource_sharing: ResourceSharing {
            filesystem: SharingScope::MachineShared,
            ..Default::default()
        },
        last_seen_at: Utc::now(),
    }
}

fn agent(id: &str, opaque: &str) -> SourceAgentInventory {
    SourceAgentInventory {
        source_agent: SourceAgent {
            id: id.into(),
            execution_source_id: "src".into(),
            opaque_source_agent_id: opaque.into(),
            display_name: id.into(),
            last_seen_at: Utc::now(),
        },
        capabilities: vec!["chat".into()],
        readiness: SourceAgentReadiness {
            ready: true,
            contract_id: "c".into(),
            contract_revision: "1".into(),
            evidence: vec!["probe ok".into()],
        },
    }
}

#[tokio::test]
async fn inventory_rules() {
    let inv = InMemoryAgentSourceInventory::default();
    let snap = AgentSourceInventorySnapshot {
        execution_source: source(),
        agents: vec![agent("a", "o1"), agent("b", "o2")],
        observed_at: Utc::now(),
    };
    inv.put(snap.clone()).unwrap();
    let got = inv
        .inventory(AgentSourceInventoryRequest {
            execution_source_id: "src".into(),
        })
        .await
        .unwrap();
    assert_eq!(got, snap);
    assert_eq!(
        serde_json::to_value(&got).unwrap()["execution_source"]["resource_sharing"]["filesystem"],
        "machine_shared"
    );

    let mut dup = snap.clone();
    dup.agents.push(agent("c", "o1"));
    assert!(inv.put(dup).is_err());
    let mut foreign = snap.clone();
    foreign.agents[0].source_agent.execution_source_id = "other".into();
    assert!(inv.put(foreign).is_err());
    let mut nocap = snap.clone();
    nocap.agents[0].capabilities.clear();
    assert!(inv.put(nocap).is_err());
    let mut dupcap = snap.clone();
    dupcap.agents[0].capabilities = vec!["x".into(), "x".into()];
    assert!(inv.put(dupcap).is_err());
    let mut noev = snap;
    noev.agents[0].readiness.evidence.clear();
    assert!(inv.put(noev).is_err());
    assert!(inv
        .inventory(AgentSourceInventoryRequest {
            execution_source_id: "zzz".into()
        })
        .await
        .is_err());
}

#[test]
fn subscription_policy_and_target_types() {
    let p = crate::wire::policy("gpt-5.5");
    let sp = SubscriptionPolicy {
        policy_id: p.policy_id.clone(),
        policy_revision: p.policy_revision.clone(),
        model: p.model.clone(),
        reasoning_effort: p.reasoning_effort.clone(),
        reasoning_context: p.reasoning_context.clone(),
        request_timeout_millis: p.request_timeout_millis,
        developer_instruction_revision: p.developer_instruction_revision.clone(),
        account_type: p.account_type.clone(),
        account_plan: p.account_plan.clone(),
        adapter_id: p.selected_adapter_id.clone(),
        adapter_revision: p.selected_adapter_revision.clone(),
        codex_version: "v".into(),
        codex_executable_revision: p.selected_codex_executable_revision.clone(),
        codex_schema_revision: p.selected_codex_schema_revision.clone(),
        thread_mode: p.thread_mode.clone(),
        sandbox_mode: p.sandbox_mode.clone(),
        approval_policy: p.approval_policy.clone(),
        workdir_mode: p.workdir_mode.clone(),
        dynamic_tools_mode: p.dynamic_tools_mode.clone(),
        mcp_mode: p.mcp_mode.clone(),
        command_policy: p.command_policy.clone(),
        file_read_policy: p.file_read_policy.clone(),
        isolation_revision: p.isolation_revision.clone(),
    };
    sp.validate().unwrap();
    let ta = TargetAuthority {
        authority: "chat_subscription_isolated_v1".into(),
        policy: sp.clone(),
        requested_model: "gpt-5.5".into(),
    };
    ta.validate().unwrap();
    let receipt = TargetReceipt::from_response(&crate::wire::metadata());
    receipt.validate_for(&ta).unwrap();
    let mut wrong = sp;
    wrong.mcp_mode = "all".into();
    assert!(wrong.validate().is_err());
    let mut r2 = receipt;
    r2.observed_codex_version = "w".into();
    assert!(r2.validate_for(&ta).is_err());
}
