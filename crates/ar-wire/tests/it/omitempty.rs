//! Go `omitempty` parity: which fields are written when empty and which are not.

use ar_wire::*;
use serde_json::{json, Value};

fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn default_agent_run_omits_optional_and_keeps_required() {
    let v = serde_json::to_value(AgentRun::default()).expect("encode");
    let obj = v.as_object().expect("object");
    for omitted in [
        "host_run_id",
        "external_actor_id",
        "output_summary",
        "workspace_lease",
        "error_message",
        "started_at",
        "completed_at",
    ] {
        assert!(!obj.contains_key(omitted), "{omitted} must be omitted: {v}");
    }
    for kept in [
        "id",
        "app_id",
        "agent_id",
        "target",
        "runtime_kind",
        "execution_mode",
        "invocation_mode",
        "status",
        "pause_reason",
        "approval_state",
        "input",
        "created_at",
        "updated_at",
    ] {
        assert!(obj.contains_key(kept), "{kept} must be written: {v}");
    }
    assert_eq!(v["pause_reason"], "");
    // Struct values are never omitted by Go, even with omitempty.
    assert_eq!(v["target"], json!({"type": "", "id": ""}));
    assert_eq!(v["input"], json!({"turn_policy": {}}));
}

#[test]
fn agent_always_writes_approval_mode() {
    let v = serde_json::to_value(Agent::default()).expect("encode");
    assert_eq!(v["approval_mode"], "");
    assert_eq!(v["default_invocation_mode"], "");
    assert!(v.get("skills").is_none());
    assert!(v.get("execution_config").is_none());
}

#[test]
fn non_omitempty_raw_messages_write_null() {
    let tool = serde_json::to_value(Tool::default()).expect("encode");
    assert_eq!(
        tool,
        json!({"name": "", "description": "", "input_schema": null})
    );
    let call = serde_json::to_value(ToolCall::default()).expect("encode");
    assert_eq!(call["input"], Value::Null);
    assert_eq!(call["mutating"], false);
    assert_eq!(call["approval_required"], false);
    assert!(call.get("output").is_none());
    let req = serde_json::to_value(RunToolCallRequest::default()).expect("encode");
    assert_eq!(req, json!({"tool_name": "", "input": null}));
}

#[test]
fn non_omitempty_collections_are_written_empty() {
    let page = serde_json::to_value(RunPage::default()).expect("encode");
    assert_eq!(
        page,
        json!({"items": [], "total": 0, "limit": 0, "offset": 0})
    );
    let caps = serde_json::to_value(Capabilities::default()).expect("encode");
    assert_eq!(caps["tools"], json!([]));
    assert_eq!(caps["runtime_kinds"], json!([]));
    assert_eq!(caps["run_mcp"]["transports"], json!([]));
    assert!(caps.get("skills").is_none() && caps.get("apps").is_none());
    let result = serde_json::to_value(ToolCallResult::default()).expect("encode");
    assert_eq!(result, json!({"content": []}));
    let snapshot = serde_json::to_value(StreamStateSnapshot::default()).expect("encode");
    assert_eq!(snapshot["state"], json!({}));
    let events = serde_json::to_value(EventListResponse::default()).expect("encode");
    assert_eq!(events, json!({"events": [], "next_sequence_no": 0}));
}

#[test]
fn zero_numbers_and_false_bools_follow_tags() {
    let policy = TurnPolicy {
        idle_timeout_seconds: 0,
        ..TurnPolicy::default()
    };
    assert_eq!(serde_json::to_value(policy).expect("encode"), json!({}));
    let usage = UsageCheckpointEventData::default();
    assert_eq!(
        serde_json::to_value(usage).expect("encode"),
        json!({"usage": {}})
    );
    let env = serde_json::to_value(EventEnvelope::default()).expect("encode");
    assert_eq!(
        keys(&env),
        vec![
            "app_id",
            "event_id",
            "run_id",
            "sent_at",
            "sequence_no",
            "type"
        ]
    );
    let comp = serde_json::to_value(AppComponent::default()).expect("encode");
    assert_eq!(comp, json!({"configured": false, "auth_configured": false}));
    let provider = serde_json::to_value(ProviderCapability::default()).expect("encode");
    assert_eq!(
        provider,
        json!({"transcript_continuation": false, "lossless_response_replay": false,
               "run_credentials_configured": false, "name": "", "configured": false,
               "base_url_overridden": false})
    );
}

#[test]
fn pointer_fields_keep_explicit_empty_values() {
    let controls = ModelControls {
        reasoning_effort: Some(String::new()),
        ..ModelControls::default()
    };
    assert_eq!(
        serde_json::to_value(&controls).expect("encode"),
        json!({"reasoning_effort": ""})
    );
    // An explicit empty controls object is meaningful (replaces legacy controls) and is kept.
    let model = RunModel {
        provider: "openai".into(),
        model: "gpt-5.6-terra".into(),
        controls: Some(ModelControls::default()),
        ..RunModel::default()
    };
    assert_eq!(
        serde_json::to_value(&model).expect("encode"),
        json!({"provider": "openai", "model": "gpt-5.6-terra", "controls": {}})
    );
    let codex = CodexAuthState {
        auth_url: Some(String::new()),
        ..CodexAuthState::default()
    };
    let v = serde_json::to_value(&codex).expect("encode");
    assert_eq!(v["auth_url"], "");
    assert!(v.get("login_id").is_none());
}

#[test]
fn start_run_request_writes_target_and_turn_policy() {
    let req = StartRunRequest {
        app_id: "helpin".into(),
        agent_id: "agent_1".into(),
        target: TargetRef::new("workspace", "ws_1"),
        ..StartRunRequest::default()
    };
    assert_eq!(
        serde_json::to_value(&req).expect("encode"),
        json!({"app_id": "helpin", "agent_id": "agent_1", "target": {"type": "workspace", "id": "ws_1"}, "turn_policy": {}})
    );
}

#[test]
fn mcp_server_always_writes_tools() {
    let v = serde_json::to_value(RunMCPServer::default()).expect("encode");
    assert_eq!(
        v,
        json!({"server_id": "", "server_name": "", "transport": "", "url": "", "tools": []})
    );
}
