//! Every domain event kind's `data`, pinned: a snapshot of the JSON the runtime emits, and a
//! check that each key is a field of the Go SDK's payload struct for that kind (seed 001), of
//! the same type, so SDK clients decode everything the runtime sends.

use ar_core::event::{self as ev, EventKind, RunEvent};
use ar_core::{PauseReason, Usage};
use ar_wire::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};

fn text(s: &str) -> String {
    s.to_string()
}

/// One event of every kind, every field filled.
fn samples() -> Vec<RunEvent> {
    let usage = Usage {
        input_tokens: 10,
        cached_input_tokens: 2,
        output_tokens: 5,
        reasoning_output_tokens: 1,
        total_tokens: 15,
    };
    let gauge = Some(ev::UsageGauge::cumulative(usage));
    let started = || ev::MessageStarted {
        message_id: text("msg_1"),
    };
    let delta = || ev::MessageDelta {
        message_id: text("msg_1"),
        text: text("Hel"),
    };
    let completed = || ev::MessageCompleted {
        message_id: text("msg_1"),
        content: text("Hello"),
        encrypted_value: text("enc"),
    };
    let mut metadata = Map::new();
    metadata.insert("branch".into(), json!("work"));
    vec![
        RunEvent::RunQueued(ev::RunQueued::default()),
        RunEvent::RunStarted(ev::RunStarted {}),
        RunEvent::RunPaused(ev::RunPaused {
            pause_reason: PauseReason::Authentication,
            authentication: Some(ev::PauseAuthentication {
                provider: text("mcp"),
                server_id: text("srv"),
                server_name: text("tracker"),
                reason: text("expired"),
            }),
            provider: text("openai"),
            connection_id: text("conn_1"),
        }),
        RunEvent::RunResumed(ev::RunResumed {
            resume_id: text("res_1"),
            interaction_id: text("int_1"),
        }),
        RunEvent::RunCompleted(ev::RunCompleted {
            reason: text("idle_timeout"),
            usage: gauge,
            interrupted_external_effects: Some(json!([{"tool": "deploy"}])),
        }),
        RunEvent::RunFailed(ev::RunFailed {
            error: text("boom"),
            usage: gauge,
        }),
        RunEvent::RunCancelled(ev::RunCancelled {}),
        RunEvent::RunMcpCredentialUpdated(ev::RunMcpCredentialUpdated {
            server_id: text("srv"),
            expires_at: chrono::DateTime::from_timestamp(1_800_000_000, 0),
        }),
        RunEvent::UsageCheckpoint(ev::UsageGauge::cumulative(usage)),
        RunEvent::WorkspacePrepared(ev::WorkspacePrepared {
            lease_id: text("lease_1"),
            provider: text("repository"),
            metadata,
            primary: Some(true),
            alias: text("main"),
        }),
        RunEvent::WorkspaceFinalized(ev::WorkspaceFinalized {
            lease_id: text("lease_1"),
            outcome: text("completed"),
        }),
        RunEvent::WorkspaceCleaned(ev::WorkspaceCleaned {
            lease_id: text("lease_1"),
            reason: text("completed"),
        }),
        RunEvent::AssistantMessageStarted(started()),
        RunEvent::AssistantMessageDelta(delta()),
        RunEvent::AssistantMessageCompleted(ev::MessageCompleted {
            encrypted_value: String::new(),
            ..completed()
        }),
        RunEvent::ReasoningMessageStarted(started()),
        RunEvent::ReasoningMessageDelta(delta()),
        RunEvent::ReasoningMessageCompleted(completed()),
        RunEvent::ToolCallStarted(ev::ToolCallStarted {
            tool_call_id: text("call_1"),
            tool_name: text("lookup"),
            parent_message_id: text("msg_1"),
        }),
        RunEvent::ToolCallArgsDelta(ev::ToolCallArgsDelta {
            tool_call_id: text("call_1"),
            args_delta: text("{\"q\""),
        }),
        RunEvent::ToolCallResult(ev::ToolCallResult {
            tool_call_id: text("call_1"),
            tool_name: text("lookup"),
            content: text("found"),
            result_message_id: text("msg_2"),
        }),
        RunEvent::ToolCallFinished(ev::ToolCallFinished {
            tool_call_id: text("call_1"),
            tool_name: text("lookup"),
            tool_input: text("{\"q\":\"a\"}"),
            output_summary: text("found"),
            duration_ms: 12,
            error: text("nope"),
        }),
        RunEvent::PlanUpdated(ev::PlanUpdated {
            content: text("{\"plan\":[]}"),
            plan: json!([{"step": "read", "status": "in_progress"}]),
            note: text("first read"),
            data: json!({"tool_call_id": "call_1"})
                .as_object()
                .cloned()
                .unwrap(),
        }),
        RunEvent::ActivitySnapshot(ev::ActivitySnapshot {
            activity_id: text("act_1"),
            activity_type: text("search"),
            content: json!({"found": 3}).as_object().cloned().unwrap(),
        }),
        RunEvent::ActivityDelta(ev::ActivityDelta {
            activity_id: text("act_1"),
            delta: json!({"found": 4}).as_object().cloned().unwrap(),
        }),
        RunEvent::A2aTask(ev::A2aTask {
            external_agent_id: text("ext"),
            context_id: text("ctx"),
            task_id: text("task"),
            state: text("completed"),
            message: text("done"),
            files: vec![ev::A2aFile {
                name: text("a.txt"),
                media_type: text("text/plain"),
                url: text("https://files.example/a.txt"),
            }],
            message_id: text("m1"),
        }),
        RunEvent::CodexAuthStateChanged(ev::CodexAuthStateChanged {
            provider: text("openai"),
            auth_mode: text("device_code"),
            state: text("pending"),
            login_id: text("login"),
            auth_url: text("https://auth.example/"),
            verification_url: text("https://auth.example/device"),
            user_code: text("ABCD"),
            plan_type: text("plus"),
            error: text("none"),
        }),
        RunEvent::ContextCompactionStarted(ev::ContextCompactionStarted {
            generation: 2,
            estimated_input_tokens: 6100,
        }),
        RunEvent::ContextCompactionCompleted(ev::ContextCompactionCompleted {
            generation: 2,
            estimated_before: 6100,
            estimated_after: 1900,
            trimmed_tool_outputs: 3,
            summarized_messages: 14,
        }),
        RunEvent::ContextCompactionFailed(ev::ContextCompactionFailed {
            generation: 3,
            error: text("the summary turn returned no text"),
        }),
    ]
}

#[test]
fn every_kind_has_a_sample() {
    let kinds: Vec<EventKind> = samples().iter().map(RunEvent::kind).collect();
    assert_eq!(kinds, EventKind::ALL.to_vec());
}

#[test]
fn the_wire_json_of_every_kind() {
    let mut out = String::new();
    for event in samples() {
        let host = if event.is_transient() { "" } else { "h-1" };
        let data = serde_json::to_string(&event.data(host)).unwrap();
        out.push_str(&format!("{}: {data}\n", event.kind()));
    }
    expect_test::expect_file!["event_shapes.snap"].assert_eq(&out);
}

/// Removes what Go's `omitempty` would leave out, so both sides compare alike.
fn without_empty(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, without_empty(v)))
                .filter(|(_, v)| !is_empty(v))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_empty).collect()),
        other => other,
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

/// `data` decoded into the SDK's struct and encoded again keeps every key and value.
fn survives<T: DeserializeOwned + Serialize>(event: &RunEvent) {
    let data = Value::Object(event.data(""));
    let typed: T = serde_json::from_value(data.clone())
        .unwrap_or_else(|e| panic!("{}: the SDK struct cannot read {data}: {e}", event.kind()));
    let back = without_empty(serde_json::to_value(&typed).unwrap());
    assert_eq!(back, without_empty(data), "{}", event.kind());
}

#[test]
fn every_key_is_a_field_of_the_sdk_payload() {
    for event in samples() {
        match event.kind() {
            EventKind::RunPaused => survives::<RunPausedEventData>(&event),
            EventKind::RunResumed => survives::<RunResumedEventData>(&event),
            EventKind::RunCompleted => survives::<RunCompletedEventData>(&event),
            EventKind::RunFailed => survives::<RunFailedEventData>(&event),
            EventKind::RunMcpCredentialUpdated => {
                survives::<RunMCPCredentialUpdatedEventData>(&event)
            }
            EventKind::UsageCheckpoint => survives::<UsageCheckpointEventData>(&event),
            EventKind::WorkspacePrepared => survives::<WorkspacePreparedEventData>(&event),
            EventKind::WorkspaceFinalized => survives::<WorkspaceFinalizedEventData>(&event),
            EventKind::WorkspaceCleaned => survives::<WorkspaceCleanedEventData>(&event),
            EventKind::AssistantMessageStarted
            | EventKind::AssistantMessageDelta
            | EventKind::AssistantMessageCompleted => survives::<AssistantMessageEventData>(&event),
            EventKind::ReasoningMessageStarted
            | EventKind::ReasoningMessageDelta
            | EventKind::ReasoningMessageCompleted => survives::<ReasoningMessageEventData>(&event),
            EventKind::ToolCallStarted
            | EventKind::ToolCallArgsDelta
            | EventKind::ToolCallResult
            | EventKind::ToolCallFinished => survives::<ToolCallEventData>(&event),
            EventKind::PlanUpdated => survives::<PlanUpdatedEventData>(&event),
            EventKind::A2aTask => survives::<A2ATaskEventData>(&event),
            EventKind::CodexAuthStateChanged => survives::<CodexAuthStateEventData>(&event),
            // No SDK struct: the contract gives their keys (run.queued carries the status).
            EventKind::RunQueued => {
                assert_eq!(Value::Object(event.data("")), json!({"status": "queued"}))
            }
            EventKind::RunStarted | EventKind::RunCancelled => {
                assert!(event.data("").is_empty())
            }
            EventKind::ActivitySnapshot | EventKind::ActivityDelta => {
                assert!(event.data("").contains_key("activity_id"))
            }
            // The original's context events (emitted by its native loop, no SDK struct).
            EventKind::ContextCompactionStarted
            | EventKind::ContextCompactionCompleted
            | EventKind::ContextCompactionFailed => {
                assert!(event.data("").contains_key("generation"))
            }
        }
    }
}

#[test]
fn persisted_data_carries_the_host_run_id_and_transient_data_does_not() {
    let event = RunEvent::RunStarted(ev::RunStarted {});
    assert_eq!(
        Value::Object(event.data("h-1")),
        json!({"host_run_id": "h-1"})
    );
    assert_eq!(Value::Object(event.data("")), json!({}));
}
