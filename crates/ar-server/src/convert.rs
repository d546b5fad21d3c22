//! Explicit conversions between domain records (`ar-core`) and the wire contract (`ar-wire`).

use ar_core::agent::{Agent, SkillRef};
use ar_core::event::{EventKind, StoredEvent, TransientEvent};
use ar_core::records::{Artifact, Interaction, Message, ToolCallRecord};
use ar_core::run::{ModelEndpoint, RunModel, TargetDisplay, TargetRef, TurnPolicy};
use ar_core::tool::ToolDefinition;
use ar_core::{JsonMap, Run};
use ar_engine::{AgentInput, ResumeRun, RunCredential, StartRun, TurnPolicyRequest};
use serde_json::Value;

fn option_map(map: JsonMap) -> Option<JsonMap> {
    if map.is_empty() {
        None
    } else {
        Some(map)
    }
}

pub fn target_to_wire(target: &TargetRef) -> ar_wire::TargetRef {
    ar_wire::TargetRef {
        target_type: target.target_type.clone(),
        id: target.id.clone(),
        display: target
            .display
            .as_ref()
            .map(|display| ar_wire::TargetDisplay {
                title: display.title.clone(),
                url: display.url.clone(),
            }),
        metadata: target.metadata.clone().unwrap_or_default(),
    }
}

pub fn target_from_wire(target: ar_wire::TargetRef) -> TargetRef {
    TargetRef {
        target_type: target.target_type,
        id: target.id,
        display: target.display.map(|display| TargetDisplay {
            title: display.title,
            url: display.url,
        }),
        metadata: option_map(target.metadata),
    }
}

fn skill_to_wire(skill: &SkillRef) -> ar_wire::SkillRef {
    ar_wire::SkillRef {
        skill_id: skill.skill_id.clone(),
        key: skill.key.clone(),
        version: skill.version.clone(),
        version_key: skill.version_key.clone(),
        config: skill.config.clone(),
    }
}

fn skill_from_wire(skill: ar_wire::SkillRef) -> SkillRef {
    SkillRef {
        skill_id: skill.skill_id,
        key: skill.key,
        version: skill.version,
        version_key: skill.version_key,
        config: skill.config,
    }
}

pub fn agent_to_wire(agent: &Agent) -> ar_wire::Agent {
    ar_wire::Agent {
        id: agent.id.clone(),
        app_id: agent.app_id.clone(),
        name: agent.name.clone(),
        runtime_kind: agent.runtime_kind.as_str().to_string(),
        provider: agent.provider.clone(),
        model: agent.model.clone(),
        system_prompt: agent.system_prompt.clone(),
        skills: agent.skills.iter().map(skill_to_wire).collect(),
        allowed_tools: agent.allowed_tools.clone(),
        allowed_targets: agent.allowed_targets.clone(),
        approval_mode: agent.approval_mode.as_str().to_string(),
        default_invocation_mode: agent.default_invocation_mode.as_str().to_string(),
        execution_config: agent.execution_config.clone(),
        created_at: agent.created_at,
        updated_at: agent.updated_at,
    }
}

pub fn agent_from_wire(agent: ar_wire::Agent) -> AgentInput {
    AgentInput {
        id: agent.id,
        app_id: agent.app_id,
        name: agent.name,
        runtime_kind: agent.runtime_kind,
        provider: agent.provider,
        model: agent.model,
        system_prompt: agent.system_prompt,
        skills: agent.skills.into_iter().map(skill_from_wire).collect(),
        allowed_tools: agent.allowed_tools,
        allowed_targets: agent.allowed_targets,
        approval_mode: agent.approval_mode,
        default_invocation_mode: agent.default_invocation_mode,
        execution_config: agent.execution_config,
    }
}

fn turn_policy_to_wire(policy: &TurnPolicy) -> ar_wire::TurnPolicy {
    ar_wire::TurnPolicy {
        mode: policy
            .mode
            .map(|mode| mode.as_str().to_string())
            .unwrap_or_default(),
        idle_timeout_seconds: policy.idle_timeout_seconds,
        expired_resume_strategy: policy.expired_resume_strategy.clone(),
        completion_mode: policy
            .completion_mode
            .map(|mode| mode.as_str().to_string())
            .unwrap_or_default(),
        max_completion_corrections: policy.max_completion_corrections,
    }
}

pub fn turn_policy_from_wire(policy: ar_wire::TurnPolicy) -> TurnPolicyRequest {
    TurnPolicyRequest {
        mode: policy.mode,
        idle_timeout_seconds: policy.idle_timeout_seconds,
        expired_resume_strategy: policy.expired_resume_strategy,
        completion_mode: policy.completion_mode,
        max_completion_corrections: policy.max_completion_corrections,
    }
}

fn model_to_wire(model: &RunModel) -> ar_wire::RunModel {
    ar_wire::RunModel {
        provider: model.provider.clone(),
        model: model.model.clone(),
        endpoint: model
            .endpoint
            .as_ref()
            .map(|endpoint| ar_wire::ModelEndpoint {
                id: endpoint.id.clone(),
                base_url: endpoint.base_url.clone(),
                auth_mode: endpoint.auth_mode.clone(),
            }),
        controls: model
            .controls
            .as_ref()
            .and_then(|controls| serde_json::from_value(controls.clone()).ok()),
    }
}

fn model_from_wire(model: ar_wire::RunModel) -> RunModel {
    RunModel {
        provider: model.provider,
        model: model.model,
        endpoint: model.endpoint.map(|endpoint| ModelEndpoint {
            id: endpoint.id,
            base_url: endpoint.base_url,
            auth_mode: endpoint.auth_mode,
        }),
        controls: model
            .controls
            .and_then(|controls| serde_json::to_value(controls).ok()),
    }
}

pub fn credential_from_wire(credential: ar_wire::ModelCredential) -> RunCredential {
    RunCredential {
        credential_type: credential.credential_type.trim().to_string(),
        api_key: credential.api_key,
        access_token: credential.access_token,
        expires_at: credential.expires_at,
        connection_id: credential.connection_id,
        account_id: credential.account_id,
    }
}

pub fn run_to_wire(run: &Run) -> ar_wire::AgentRun {
    ar_wire::AgentRun {
        id: run.id.clone(),
        app_id: run.app_id.clone(),
        host_run_id: run.host_run_id.clone(),
        agent_id: run.agent_id.clone(),
        target: target_to_wire(&run.target),
        runtime_kind: run.runtime_kind.as_str().to_string(),
        execution_mode: run.execution_mode.as_str().to_string(),
        invocation_mode: run.invocation_mode.as_str().to_string(),
        external_actor_id: run.external_actor_id.clone(),
        status: run.status().as_str().to_string(),
        pause_reason: run.pause_reason().as_str().to_string(),
        approval_state: run.approval_state().as_str().to_string(),
        input: ar_wire::RunInput {
            model: run.input.model.as_ref().map(model_to_wire),
            credential_source: run
                .input
                .credential_source
                .map(|source| source.as_str().to_string())
                .unwrap_or_default(),
            instructions: run.input.instructions.clone(),
            allowed_tools: run.input.allowed_tools.clone(),
            trigger: run.input.trigger.clone().unwrap_or_default(),
            metadata: run.input.metadata.clone().unwrap_or_default(),
            context_summary: run.input.context_summary.clone(),
            turn_policy: turn_policy_to_wire(&run.input.turn_policy),
        },
        output_summary: Some(Value::Object(run.output_summary.clone())),
        workspace_lease: run
            .workspace_lease
            .as_ref()
            .and_then(|lease| serde_json::from_value(lease.clone()).ok()),
        error_message: run.error_message.clone(),
        started_at: run.started_at,
        completed_at: run.completed_at,
        created_at: run.created_at,
        updated_at: run.updated_at,
    }
}

pub fn start_run_from_wire(request: ar_wire::StartRunRequest) -> StartRun {
    StartRun {
        app_id: request.app_id,
        host_run_id: request.host_run_id,
        agent_id: request.agent_id,
        target: target_from_wire(request.target),
        instructions: request.instructions,
        allowed_tools: request.allowed_tools,
        external_actor_id: request.external_actor_id,
        mode: request.mode,
        execution_mode: request.execution_mode,
        trigger: option_map(request.trigger),
        metadata: option_map(request.metadata),
        turn_policy: turn_policy_from_wire(request.turn_policy),
        mcp_servers: request
            .mcp_servers
            .into_iter()
            .map(mcp_server_from_wire)
            .collect(),
        model: request.model.map(model_from_wire),
        model_credential: request.model_credential.map(credential_from_wire),
        seed: None,
    }
}

fn mcp_server_from_wire(server: ar_wire::RunMCPServer) -> ar_engine::mcp::McpServerRequest {
    ar_engine::mcp::McpServerRequest {
        server_id: server.server_id,
        server_name: server.server_name,
        transport: server.transport,
        url: server.url,
        tools: server
            .tools
            .into_iter()
            .map(|tool| (tool.name, tool.access))
            .collect(),
        skills: server.skills.into_iter().map(skill_from_wire).collect(),
        credential: server.credential.map(mcp_credential_from_wire),
    }
}

/// A run MCP credential as the engine takes it (its secrets wrapped at once).
pub fn mcp_credential_from_wire(
    credential: ar_wire::RunMCPCredential,
) -> ar_engine::mcp::McpCredentialRequest {
    ar_engine::mcp::McpCredentialRequest {
        credential_type: credential.credential_type,
        access_token: ar_core::secret::Secret::new(credential.access_token),
        headers: credential
            .headers
            .into_iter()
            .map(|(name, value)| (name, ar_core::secret::Secret::new(value)))
            .collect(),
        expires_at: credential.expires_at,
    }
}

pub fn resume_from_wire(request: ar_wire::ResumeRunRequest) -> ResumeRun {
    ResumeRun {
        intent: request.intent,
        content: request.content,
        resume_id: request.resume_id,
        interaction_id: request.interaction_id,
        response_payload: request.response_payload,
        external_actor_id: request.external_actor_id,
        message_provenance: request.message_provenance,
        turn_policy: request.turn_policy.map(turn_policy_from_wire),
        budgets: request.budgets,
    }
}

pub fn message_to_wire(message: &Message) -> ar_wire::AgentRunMessage {
    ar_wire::AgentRunMessage {
        id: message.id.clone(),
        app_id: message.app_id.clone(),
        run_id: message.run_id.clone(),
        runtime_message_id: message.runtime_message_id.clone(),
        role: message.role.as_str().to_string(),
        content: message.content.clone(),
        message_type: message.message_type.clone(),
        content_blocks: message.content_blocks.clone(),
        tool_invocations: message.tool_invocations.clone(),
        sequence_no: message.sequence_no,
        created_at: message.created_at,
    }
}

pub fn artifact_to_wire(artifact: &Artifact) -> ar_wire::AgentRunArtifact {
    ar_wire::AgentRunArtifact {
        id: artifact.id.clone(),
        app_id: artifact.app_id.clone(),
        run_id: artifact.run_id.clone(),
        artifact_type: artifact.artifact_type.clone(),
        format: artifact.format.clone(),
        storage_mode: artifact.storage_mode.clone(),
        inline_content: artifact.inline_content.clone(),
        metadata: artifact.metadata.clone(),
        sequence_no: artifact.sequence_no,
        created_at: artifact.created_at,
    }
}

pub fn interaction_to_wire(interaction: &Interaction) -> ar_wire::AgentRunInteraction {
    ar_wire::AgentRunInteraction {
        id: interaction.id.clone(),
        app_id: interaction.app_id.clone(),
        run_id: interaction.run_id.clone(),
        runtime_kind: interaction.runtime_kind.as_str().to_string(),
        interaction_kind: interaction.interaction_kind.clone(),
        status: interaction.status.as_str().to_string(),
        title: interaction.title.clone(),
        summary: interaction.summary.clone(),
        request_payload: interaction.request_payload.clone(),
        response_payload: interaction.response_payload.clone(),
        resolved_by_external_id: interaction.resolved_by_external_id.clone(),
        resolved_at: interaction.resolved_at,
        created_at: interaction.created_at,
        updated_at: interaction.updated_at,
    }
}

pub fn tool_call_to_wire(call: &ToolCallRecord) -> ar_wire::ToolCall {
    ar_wire::ToolCall {
        id: call.id.clone(),
        app_id: call.app_id.clone(),
        run_id: call.run_id.clone(),
        tool_name: call.tool_name.clone(),
        input: call.input.clone(),
        output: call.output.clone(),
        error: call.error.clone(),
        mutating: call.mutating,
        approval_required: call.approval_required,
        created_at: call.created_at,
    }
}

/// `with_risk`: capabilities list the risk level; run tool lists do not.
pub fn tool_to_wire(tool: &ToolDefinition, with_risk: bool) -> ar_wire::Tool {
    ar_wire::Tool {
        name: tool.name.clone(),
        description: tool.description.clone(),
        category: tool.category.clone(),
        input_schema: tool.input_schema.clone(),
        mutating: tool.mutating,
        risk_level: if with_risk {
            tool.effective_risk().as_str().to_string()
        } else {
            String::new()
        },
        supported_target_types: tool.supported_target_types.clone(),
    }
}

/// The v1 envelope of a persisted event, borrowed from it (see [`ar_wire::EventEnvelopeRef`]).
pub fn v1_envelope(event: &StoredEvent) -> ar_wire::EventEnvelopeRef<'_> {
    ar_wire::EventEnvelopeRef {
        event_id: &event.event_id,
        sent_at: event.created_at,
        sequence_no: event.sequence_no,
        app_id: &event.app_id,
        run_id: &event.run_id,
        host_run_id: &event.host_run_id,
        schema_version: "",
        turn_id: "",
        segment_id: "",
        revision: 0,
        base_revision: 0,
        event_type: event.kind.as_str(),
        data: match event.data.json() {
            Some(text) => ar_wire::EnvelopeData::Text(text),
            None => ar_wire::EnvelopeData::Object(&event.data),
        },
    }
}

/// The first non-empty string among `keys` in `data`.
fn first_string<'a>(data: &'a JsonMap, keys: &[&str]) -> &'a str {
    keys.iter()
        .filter_map(|key| data.get(*key).and_then(Value::as_str))
        .find(|value| !value.is_empty())
        .unwrap_or_default()
}

/// The v2 envelope: segment and turn derived from the data, revision = sequence.
pub fn v2_envelope(event: &StoredEvent) -> ar_wire::EventEnvelopeRef<'_> {
    let mut envelope = v1_envelope(event);
    envelope.schema_version = ar_wire::events::EVENT_SCHEMA_VERSION_V2;
    envelope.segment_id = first_string(
        &event.data,
        &["segment_id", "message_id", "tool_call_id", "activity_id"],
    );
    envelope.turn_id = first_string(&event.data, &["turn_id", "parent_message_id"]);
    if envelope.turn_id.is_empty()
        && matches!(
            event.kind,
            EventKind::AssistantMessageStarted
                | EventKind::AssistantMessageDelta
                | EventKind::AssistantMessageCompleted
        )
    {
        envelope.turn_id = envelope.segment_id;
    }
    envelope.revision = event.sequence_no;
    envelope
}

/// The v2 envelope, owned.
pub fn event_to_v2(event: &StoredEvent) -> ar_wire::EventEnvelope {
    v2_envelope(event).to_owned_envelope()
}

/// The bare form of a transient event (its data carries no `host_run_id`: the envelope does).
pub fn transient_to_wire(event: &TransientEvent) -> ar_wire::Event {
    ar_wire::Event {
        app_id: event.app_id.clone(),
        run_id: event.run_id.clone(),
        host_run_id: event.host_run_id.clone(),
        event_type: event.event.kind().as_str().to_string(),
        data: event.event.data(""),
    }
}
