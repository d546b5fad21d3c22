//! Record builders for the conformance cases: realistic values with every field populated.

use ar_core::agent::{Agent, SkillRef};
use ar_core::ids::{new_id, prefix};
use ar_core::records::{Artifact, Interaction, Message, ToolCallRecord};
use ar_core::run::{ModelEndpoint, TargetDisplay};
use ar_core::store::{Committed, CreateRun, RunChange, Store};
use ar_core::*;
use chrono::{DateTime, Duration, TimeZone, Timelike, Utc};
use serde_json::json;

/// A fixed instant plus `seconds`, with sub-microsecond digits that a store must truncate.
pub fn at(seconds: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 4, 5, 6, 7)
        .single()
        .expect("valid date")
        + Duration::seconds(seconds)
        + Duration::nanoseconds(123_456_789)
}

/// What a store keeps of a timestamp.
pub fn micros(at: DateTime<Utc>) -> DateTime<Utc> {
    at.with_nanosecond(at.timestamp_subsec_nanos() / 1_000 * 1_000)
        .expect("valid nanos")
}

pub fn map(value: serde_json::Value) -> JsonMap {
    match value {
        serde_json::Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

pub fn agent(app_id: &str, id: &str, created: i64) -> Agent {
    Agent {
        id: id.to_string(),
        app_id: app_id.to_string(),
        name: format!("Agent {id}"),
        runtime_kind: RuntimeKind::NativeSdk,
        provider: "openai".to_string(),
        model: "gpt-test".to_string(),
        system_prompt: "You help.".to_string(),
        skills: vec![SkillRef {
            skill_id: "sk_1".to_string(),
            key: "search".to_string(),
            version: "3".to_string(),
            version_key: "search@3".to_string(),
            config: Some(json!({"depth": 2, "nested": {"ok": true}})),
        }],
        allowed_tools: vec!["read_file".to_string(), "write_file".to_string()],
        allowed_targets: vec!["ticket".to_string()],
        approval_mode: ApprovalMode::MutatingTools,
        default_invocation_mode: InvocationMode::Interactive,
        execution_config: Some(json!({"workspace": {"kind": "git"}, "ratio": 0.25})),
        created_at: micros(at(created)),
        updated_at: micros(at(created + 1)),
    }
}

/// A queued run with every field populated; timestamps keep sub-microsecond digits.
pub fn run(app_id: &str, host_run_id: &str, created: i64) -> Run {
    Run {
        id: new_id(prefix::RUN),
        app_id: app_id.to_string(),
        host_run_id: host_run_id.to_string(),
        agent_id: "agent-alpha".to_string(),
        target: TargetRef {
            target_type: "Ticket".to_string(),
            id: "TCK-42".to_string(),
            display: Some(TargetDisplay {
                title: "Fix the login page".to_string(),
                url: "https://example.test/t/42".to_string(),
            }),
            metadata: Some(map(json!({"priority": "high", "labels": ["a", "b"]}))),
        },
        runtime_kind: RuntimeKind::NativeSdk,
        execution_mode: ExecutionMode::Lightweight,
        invocation_mode: InvocationMode::Autonomous,
        external_actor_id: "user-7".to_string(),
        state: RunState::queued(false),
        input: RunInput {
            model: Some(RunModel {
                provider: "openai_compatible".to_string(),
                model: "m-1".to_string(),
                endpoint: Some(ModelEndpoint {
                    id: "ep".to_string(),
                    base_url: "http://127.0.0.1:9/v1".to_string(),
                    auth_mode: "bearer".to_string(),
                }),
                controls: Some(json!({"reasoning_effort": "low", "temperature": 0.7})),
            }),
            credential_source: Some(CredentialSource::App),
            instructions: "Do the thing — carefully. ✓".to_string(),
            allowed_tools: vec!["read_file".to_string()],
            trigger: Some(map(json!({"kind": "webhook", "id": 9}))),
            metadata: Some(map(
                json!({"team": "core", "big": 9_007_199_254_740_993_i64}),
            )),
            context_summary: "summary".to_string(),
            turn_policy: TurnPolicy {
                mode: Some(TurnMode::PauseAfterAssistant),
                idle_timeout_seconds: 300,
                expired_resume_strategy: "restart".to_string(),
                completion_mode: Some(CompletionMode::Explicit),
                max_completion_corrections: 2,
            },
            mcp_servers: vec![ar_core::mcp::McpServer {
                server_id: "docs-1".to_string(),
                server_name: "docs".to_string(),
                url: "https://mcp.example.com/mcp".to_string(),
                tools: vec![ar_core::mcp::McpToolGrant {
                    name: "search".to_string(),
                    access: ar_core::mcp::McpAccess::Read,
                }],
                has_credential: true,
                skills: Vec::new(),
            }],
        },
        output_summary: map(json!({"files": 3})),
        workspace_lease: Some(json!({"path": "/tmp/ws", "ttl": 60})),
        error_message: String::new(),
        started_at: Some(at(created + 2)),
        completed_at: None,
        created_at: at(created),
        updated_at: at(created + 1),
        version: 1,
        engine: EngineState {
            turn_started_at: Some(micros(at(created + 2))),
            workdir: Some("/tmp/ws".to_string()),
            ..EngineState::default()
        },
    }
}

/// The run as a store returns it after creation.
pub fn stored(run: &Run) -> Run {
    Run {
        started_at: run.started_at.map(micros),
        completed_at: run.completed_at.map(micros),
        created_at: micros(run.created_at),
        updated_at: micros(run.updated_at),
        version: 1,
        ..run.clone()
    }
}

pub fn message(role: &str, content: &str) -> Message {
    let role = MessageRole::parse(role).expect("a message role");
    Message {
        id: new_id(prefix::MESSAGE),
        app_id: String::new(),
        run_id: String::new(),
        runtime_message_id: format!("rt-{content}"),
        role,
        content: content.to_string(),
        message_type: ar_core::records::message_type::MESSAGE.to_string(),
        content_blocks: Some(json!([{"type": "text", "text": content}])),
        tool_invocations: None,
        sequence_no: 0,
        created_at: at(100),
    }
}

pub fn artifact(content: &str) -> Artifact {
    Artifact {
        id: new_id(prefix::ARTIFACT),
        app_id: String::new(),
        run_id: String::new(),
        artifact_type: "report".to_string(),
        format: "markdown".to_string(),
        storage_mode: "inline".to_string(),
        inline_content: content.to_string(),
        metadata: Some(json!({"words": 3})),
        sequence_no: 0,
        created_at: at(101),
    }
}

pub fn interaction(id: &str, status: InteractionStatus) -> Interaction {
    let resolved = status == InteractionStatus::Resolved;
    Interaction {
        id: id.to_string(),
        app_id: String::new(),
        run_id: String::new(),
        runtime_kind: RuntimeKind::NativeSdk,
        interaction_kind: ar_core::records::interaction_kind::APPROVAL_REQUEST.to_string(),
        status,
        title: "Approve write".to_string(),
        summary: "The agent wants to write a file".to_string(),
        request_payload: Some(json!({"tool": "write_file", "args": {"path": "a.txt"}})),
        response_payload: resolved.then(|| json!({"approved": true})),
        resolved_by_external_id: if resolved {
            "user-7".to_string()
        } else {
            String::new()
        },
        resolved_at: resolved.then(|| at(200)),
        created_at: at(150),
        updated_at: at(if resolved { 200 } else { 150 }),
    }
}

pub fn tool_call(id: &str, output: Option<serde_json::Value>) -> ToolCallRecord {
    ToolCallRecord {
        id: id.to_string(),
        app_id: String::new(),
        run_id: String::new(),
        tool_name: "write_file".to_string(),
        input: json!({"path": "a.txt", "content": "hi"}),
        output,
        error: String::new(),
        mutating: true,
        approval_required: false,
        created_at: at(160),
    }
}

/// An event of `kind` whose payload names `n` wherever the kind has text to carry it.
pub fn event(kind: EventKind, n: i64) -> RunEvent {
    use ar_core::event as ev;
    let text = format!("event {n}");
    match kind {
        EventKind::RunQueued => RunEvent::RunQueued(ev::RunQueued::default()),
        EventKind::RunStarted => RunEvent::RunStarted(ev::RunStarted {}),
        EventKind::RunFailed => RunEvent::RunFailed(ev::RunFailed {
            error: text,
            usage: None,
        }),
        EventKind::RunCompleted => RunEvent::RunCompleted(ev::RunCompleted {
            reason: text,
            ..ev::RunCompleted::default()
        }),
        EventKind::UsageCheckpoint => {
            RunEvent::UsageCheckpoint(ev::UsageGauge::cumulative(Usage {
                input_tokens: n,
                ..Usage::default()
            }))
        }
        EventKind::AssistantMessageStarted => {
            RunEvent::AssistantMessageStarted(ev::MessageStarted { message_id: text })
        }
        EventKind::AssistantMessageCompleted => {
            RunEvent::AssistantMessageCompleted(ev::MessageCompleted {
                message_id: text.clone(),
                content: text,
                encrypted_value: String::new(),
            })
        }
        EventKind::ToolCallStarted => RunEvent::ToolCallStarted(ev::ToolCallStarted {
            tool_call_id: text,
            ..ev::ToolCallStarted::default()
        }),
        EventKind::ToolCallResult => RunEvent::ToolCallResult(ev::ToolCallResult {
            tool_call_id: text,
            ..ev::ToolCallResult::default()
        }),
        EventKind::ToolCallFinished => RunEvent::ToolCallFinished(ev::ToolCallFinished {
            tool_call_id: text,
            ..ev::ToolCallFinished::default()
        }),
        _ => RunEvent::PlanUpdated(ev::PlanUpdated {
            content: text,
            plan: json!(n),
            ..ev::PlanUpdated::default()
        }),
    }
}

/// Puts a run in `status` directly (store tests write any state; the state machine is the
/// engine's concern).
pub fn set_status(run: &mut Run, status: RunStatus) {
    run.state = RunState::restore(
        status,
        run.pause_reason(),
        run.approval_state(),
        run.state.pause_requested(),
    );
}

/// Creates `run` (which must be new) with one `run.queued` event.
pub async fn create(store: &dyn Store, run: &Run) -> Committed {
    let change = RunChange {
        run: Some(run.clone()),
        ..RunChange::for_run(run)
    }
    .with_event(event(EventKind::RunQueued, 0));
    match store.create_run(change).await.expect("create run") {
        CreateRun::Created(committed) => committed,
        CreateRun::HostRunIdTaken(existing) => panic!("host run id taken by {}", existing.id),
    }
}

/// Record expectations: what a store returns for a record it was given.
pub fn expect_message(message: &Message, app_id: &str, run_id: &str, sequence_no: i64) -> Message {
    Message {
        app_id: app_id.to_string(),
        run_id: run_id.to_string(),
        sequence_no,
        created_at: micros(message.created_at),
        ..message.clone()
    }
}

pub fn expect_artifact(
    artifact: &Artifact,
    app_id: &str,
    run_id: &str,
    sequence_no: i64,
) -> Artifact {
    Artifact {
        app_id: app_id.to_string(),
        run_id: run_id.to_string(),
        sequence_no,
        created_at: micros(artifact.created_at),
        ..artifact.clone()
    }
}

pub fn expect_interaction(interaction: &Interaction, app_id: &str, run_id: &str) -> Interaction {
    Interaction {
        app_id: app_id.to_string(),
        run_id: run_id.to_string(),
        resolved_at: interaction.resolved_at.map(micros),
        created_at: micros(interaction.created_at),
        updated_at: micros(interaction.updated_at),
        ..interaction.clone()
    }
}

pub fn expect_tool_call(call: &ToolCallRecord, app_id: &str, run_id: &str) -> ToolCallRecord {
    ToolCallRecord {
        app_id: app_id.to_string(),
        run_id: run_id.to_string(),
        created_at: micros(call.created_at),
        ..call.clone()
    }
}
