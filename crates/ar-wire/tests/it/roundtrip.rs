//! Every fixture decodes into its type and re-encodes to the identical JSON value.

use std::collections::BTreeSet;

use ar_wire::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::{fixture, fixture_value, fixtures_dir};

fn round_trip<T: DeserializeOwned + Serialize>(name: &str) {
    let expected = fixture_value(name);
    let typed: T = serde_json::from_str(&fixture(name))
        .unwrap_or_else(|e| panic!("{name}: decode as {}: {e}", std::any::type_name::<T>()));
    let actual: Value = serde_json::to_value(&typed).expect("encode");
    assert_eq!(
        actual,
        expected,
        "{name}: re-encoded JSON differs\nactual:   {}\nexpected: {}",
        serde_json::to_string(&actual).unwrap_or_default(),
        serde_json::to_string(&expected).unwrap_or_default()
    );
    // A second pass is stable too.
    let again: T = serde_json::from_value(actual.clone()).expect("decode again");
    assert_eq!(
        serde_json::to_value(&again).expect("encode again"),
        actual,
        "{name}: unstable"
    );
}

macro_rules! fixtures {
    ($($file:literal => $ty:ty),+ $(,)?) => {
        /// Fixture file → type, for the coverage check.
        const FIXTURES: &[&str] = &[$($file),+];

        #[test]
        fn all_fixtures_round_trip() {
            $( round_trip::<$ty>($file); )+
        }
    };
}

fixtures! {
    "agent.json" => Agent,
    "agent_minimal.json" => Agent,
    "agent_run.json" => AgentRun,
    "agent_run_queued.json" => AgentRun,
    "run_page.json" => RunPage,
    "run_page_empty.json" => RunPage,
    "start_run_request.json" => StartRunRequest,
    "start_run_request_minimal.json" => StartRunRequest,
    "resume_run_request.json" => ResumeRunRequest,
    "run_execution_info.json" => RunExecutionInfo,
    "append_message_request.json" => AppendMessageRequest,
    "agent_run_message.json" => AgentRunMessage,
    "append_artifact_request.json" => AppendArtifactRequest,
    "agent_run_artifact.json" => AgentRunArtifact,
    "agent_run_interaction.json" => AgentRunInteraction,
    "tool_list_response.json" => ToolListResponse,
    "tool_call.json" => ToolCall,
    "tool_call_error.json" => ToolCall,
    "run_tool_call_request.json" => RunToolCallRequest,
    "tool_call_result.json" => ToolCallResult,
    "tool_call_result_error.json" => ToolCallResult,
    "event_envelope_v1.json" => EventEnvelope,
    "event_envelope_v2.json" => EventEnvelope,
    "event_envelope_no_data.json" => EventEnvelope,
    "event_transient.json" => Event,
    "event_list_response.json" => EventListResponse,
    "event_list_response_empty.json" => EventListResponse,
    "stream_state_snapshot.json" => StreamStateSnapshot,
    "assistant_message_event_data.json" => AssistantMessageEventData,
    "reasoning_message_event_data.json" => ReasoningMessageEventData,
    "tool_call_event_data.json" => ToolCallEventData,
    "plan_updated_event_data.json" => PlanUpdatedEventData,
    "usage_checkpoint_event_data.json" => UsageCheckpointEventData,
    "usage_checkpoint_event_data_empty.json" => UsageCheckpointEventData,
    "codex_auth_state_event_data.json" => CodexAuthStateEventData,
    "codex_auth_state.json" => CodexAuthState,
    "capabilities.json" => Capabilities,
    "capabilities_minimal.json" => Capabilities,
    "app_summary.json" => AppSummary,
    "update_run_model_credential_request.json" => UpdateRunModelCredentialRequest,
    "run_model_credential_update.json" => RunModelCredentialUpdate,
    "update_run_mcp_credential_request.json" => UpdateRunMCPCredentialRequest,
    "run_mcp_credential_update.json" => RunMCPCredentialUpdate,
    "run_mcp_server.json" => RunMCPServer,
    "model_credential_refresh_request.json" => ModelCredentialRefreshRequest,
    "target_context_request.json" => TargetContextRequest,
    "target_context.json" => TargetContext,
    "command_execution_request.json" => CommandExecutionRequest,
    "command_execution_response.json" => CommandExecutionResponse,
    "command_execution_response_error.json" => CommandExecutionResponse,
    "provider_tool_call_request.json" => ProviderToolCallRequest,
    "prepare_workspace_request.json" => PrepareWorkspaceRequest,
    "workspace_lease.json" => WorkspaceLease,
    "repository_workspace_spec.json" => RepositoryWorkspaceSpec,
    "finalize_workspace_request.json" => FinalizeWorkspaceRequest,
    "finalize_workspace_result.json" => FinalizeWorkspaceResult,
    "cleanup_workspace_request.json" => CleanupWorkspaceRequest,
    "error_body.json" => ErrorBody,
    "health_response.json" => HealthResponse,
    "run_paused_event_data.json" => RunPausedEventData,
    "run_paused_event_data_model.json" => RunPausedEventData,
    "run_resumed_event_data.json" => RunResumedEventData,
    "run_completed_event_data.json" => RunCompletedEventData,
    "run_failed_event_data.json" => RunFailedEventData,
    "run_mcp_credential_updated_event_data.json" => RunMCPCredentialUpdatedEventData,
    "workspace_prepared_event_data.json" => WorkspacePreparedEventData,
    "workspace_finalized_event_data.json" => WorkspaceFinalizedEventData,
    "workspace_cleaned_event_data.json" => WorkspaceCleanedEventData,
    "a2a_task_event_data.json" => A2ATaskEventData,
}

#[test]
fn every_fixture_file_is_covered() {
    let listed: BTreeSet<&str> = FIXTURES.iter().copied().collect();
    let on_disk: BTreeSet<String> = std::fs::read_dir(fixtures_dir())
        .expect("fixtures dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    let missing: Vec<&String> = on_disk
        .iter()
        .filter(|n| !listed.contains(n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "fixtures without a round-trip entry: {missing:?}"
    );
    assert_eq!(listed.len(), FIXTURES.len(), "a fixture is listed twice");
}

#[test]
fn typed_event_payloads_decode_from_envelopes() {
    let v2: EventEnvelope = serde_json::from_str(&fixture("event_envelope_v2.json")).expect("v2");
    let msg = v2
        .assistant_message()
        .expect("assistant type")
        .expect("payload");
    assert_eq!(msg.message_id, "msg_9");
    assert_eq!(msg.content, "I found the failing request.");
    assert!(v2.tool_call().is_none());
    assert!(v2.usage_checkpoint().is_none());

    let list: EventListResponse =
        serde_json::from_str(&fixture("event_list_response.json")).expect("list");
    let call = list.events[1]
        .tool_call()
        .expect("tool type")
        .expect("payload");
    assert_eq!(call.tool_call_id, "call_1");
    assert_eq!(call.tool_name, "read_file");

    let envelope = EventEnvelope {
        event_type: events::EventKind::UsageCheckpoint.as_str().to_owned(),
        data: serde_json::from_str(&fixture("usage_checkpoint_event_data.json")).expect("data"),
        ..EventEnvelope::default()
    };
    let usage = envelope
        .usage_checkpoint()
        .expect("usage type")
        .expect("payload");
    assert_eq!(usage.usage.total_tokens, 1540);
    assert_eq!(usage.usage_semantic, events::usage_semantic::CUMULATIVE);

    let transient = envelope.to_event();
    assert_eq!(transient.event_type, "usage.checkpoint");
}

#[test]
fn nulls_decode_like_go_zero_values() {
    let run: AgentRun = serde_json::from_str(
        r#"{"id":"run_1","host_run_id":null,"target":null,"input":{"allowed_tools":null,"metadata":null,"turn_policy":null},
            "started_at":null,"created_at":null,"output_summary":null,"pause_reason":null}"#,
    )
    .expect("nulls accepted");
    assert_eq!(run.id, "run_1");
    assert_eq!(run.host_run_id, "");
    assert!(run.input.allowed_tools.is_empty());
    assert!(run.started_at.is_none());
    assert!(ar_wire::time::is_go_zero(&run.created_at));
    // Go keeps a present `null` RawMessage and writes it back.
    assert_eq!(run.output_summary, Some(Value::Null));
    let json = serde_json::to_value(&run).expect("encode");
    assert_eq!(json["output_summary"], Value::Null);
    assert_eq!(json["created_at"], "0001-01-01T00:00:00Z");
}

#[test]
fn missing_fields_decode_to_defaults() {
    let run: AgentRun = serde_json::from_str("{}").expect("empty object");
    assert_eq!(run.status, "");
    assert!(ar_wire::time::is_go_zero(&run.updated_at));
    let caps: Capabilities = serde_json::from_str("{}").expect("empty object");
    assert!(caps.tools.is_empty());
}

#[test]
fn response_types_ignore_unknown_fields() {
    let run: AgentRun = serde_json::from_str(
        r#"{"id":"run_1","future_field":1,"target":{"type":"t","id":"1","future":true},"input":{"model":{"provider":"openai","model":"m","future":1}}}"#,
    )
    .expect("lenient");
    assert_eq!(run.target.id, "1");
    let ctx: TargetContext =
        serde_json::from_str(r#"{"target":{"type":"t","id":"1","extra":"x"},"extra":1}"#)
            .expect("lenient");
    assert_eq!(ctx.target.target_type, "t");
}

#[test]
fn lifecycle_payloads_build_and_read_event_data() {
    let data = ar_wire::event_data::to_data(&RunPausedEventData {
        pause_reason: "human_approval".into(),
        ..RunPausedEventData::default()
    })
    .expect("object");
    let mut envelope = EventEnvelope {
        event_type: "run.paused".into(),
        data,
        ..EventEnvelope::default()
    };
    // The sink adds host_run_id to every payload; typed decoding ignores it.
    envelope
        .data
        .insert("host_run_id".into(), Value::from("hr_1"));
    let back: RunPausedEventData = envelope.decode_data().expect("decode");
    assert_eq!(back.pause_reason, "human_approval");
    assert!(ar_wire::event_data::to_data(&1).is_err());
}
