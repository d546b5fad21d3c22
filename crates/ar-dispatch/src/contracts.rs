//! Collaboration contracts: `HandoffEmitter`, `RoutineAuthority`, `AgentSourceInventory`, their value types with validation, and in-memory implementations.
//!
//! These are seams only: an adapter turns provider-native actions into intent (a handoff),
//! reports and fences a framework's own scheduled routine, or lists the agents an
//! execution source offers. Nothing here executes anything.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::consts::*;
use crate::spec::is_sha256_hex;

/// A contract value broke a rule, or the in-memory store has no such entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    /// A value is invalid.
    #[error("invalid {what}: {why}")]
    Invalid {
        /// Which value.
        what: &'static str,
        /// Which rule.
        why: String,
    },
    /// Unknown entry.
    #[error("not found: {0}")]
    NotFound(String),
}

fn invalid(what: &'static str, why: impl Into<String>) -> ContractError {
    ContractError::Invalid {
        what,
        why: why.into(),
    }
}

fn need(what: &'static str, field: &str, v: &str) -> Result<(), ContractError> {
    if v.is_empty() || v.trim() != v {
        return Err(invalid(what, format!("{field} must be set and trimmed")));
    }
    Ok(())
}

fn zero_time(t: &DateTime<Utc>) -> bool {
    t.timestamp() == 0 && t.timestamp_subsec_nanos() == 0
}

fn list_rules(
    what: &'static str,
    field: &str,
    items: &[String],
    non_empty: bool,
) -> Result<(), ContractError> {
    if non_empty && items.is_empty() {
        return Err(invalid(what, format!("{field} must not be empty")));
    }
    let mut seen = HashSet::new();
    for i in items {
        need(what, field, i)?;
        if !seen.insert(i.as_str()) {
            return Err(invalid(what, format!("{field} has duplicate {i:?}")));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- conversation value types

/// How a resource is shared by an execution source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SharingScope {
    /// Per profile.
    ProfileScoped,
    /// Shared by the machine.
    MachineShared,
    /// Shared by the account.
    AccountShared,
    /// Not known.
    #[default]
    Unknown,
}

/// What an execution source shares between its agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceSharing {
    /// Provider credentials.
    pub provider_credentials: SharingScope,
    /// Filesystem.
    pub filesystem: SharingScope,
    /// Browser sessions.
    pub browser_sessions: SharingScope,
    /// Framework sessions.
    pub framework_sessions: SharingScope,
    /// Source memory.
    pub source_memory: SharingScope,
    /// Tool configuration.
    pub tool_configuration: SharingScope,
}

/// One concrete framework instance or gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionSource {
    /// Id.
    pub id: String,
    /// Owning account.
    pub account_id: String,
    /// Framework (`hermes`, `openclaw`, …).
    pub framework: String,
    /// Instance id.
    pub instance_id: String,
    /// Gateway id (may be empty).
    #[serde(default)]
    pub gateway_id: String,
    /// Display name.
    pub display_name: String,
    /// Sharing scopes.
    pub resource_sharing: ResourceSharing,
    /// Last seen.
    pub last_seen_at: DateTime<Utc>,
}

impl ExecutionSource {
    /// Ids, framework, instance and display name set and trimmed; `last_seen_at` set.
    pub fn validate(&self) -> Result<(), ContractError> {
        const W: &str = "execution source";
        need(W, "id", &self.id)?;
        need(W, "account_id", &self.account_id)?;
        need(W, "framework", &self.framework)?;
        need(W, "instance_id", &self.instance_id)?;
        need(W, "display_name", &self.display_name)?;
        if self.gateway_id.trim() != self.gateway_id {
            return Err(invalid(W, "gateway_id must be trimmed"));
        }
        if zero_time(&self.last_seen_at) {
            return Err(invalid(W, "last_seen_at must be set"));
        }
        Ok(())
    }
}

/// A framework-native agent identity, qualified by its execution source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceAgent {
    /// Id.
    pub id: String,
    /// The source.
    pub execution_source_id: String,
    /// The framework's own id.
    pub opaque_source_agent_id: String,
    /// Display name.
    pub display_name: String,
    /// Last seen.
    pub last_seen_at: DateTime<Utc>,
}

impl SourceAgent {
    /// All ids set and trimmed; `last_seen_at` set.
    pub fn validate(&self) -> Result<(), ContractError> {
        const W: &str = "source agent";
        need(W, "id", &self.id)?;
        need(W, "execution_source_id", &self.execution_source_id)?;
        need(W, "opaque_source_agent_id", &self.opaque_source_agent_id)?;
        need(W, "display_name", &self.display_name)?;
        if zero_time(&self.last_seen_at) {
            return Err(invalid(W, "last_seen_at must be set"));
        }
        Ok(())
    }
    /// The identity: (source, opaque id).
    pub fn identity(&self) -> (&str, &str) {
        (&self.execution_source_id, &self.opaque_source_agent_id)
    }
}

/// The subscription policy of a binding (the text-only policy without `selected_` prefixes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SubscriptionPolicy {
    /// Policy id.
    pub policy_id: String,
    /// Policy revision.
    pub policy_revision: String,
    /// Model.
    pub model: String,
    /// Reasoning effort.
    pub reasoning_effort: String,
    /// Reasoning context.
    pub reasoning_context: String,
    /// Timeout.
    pub request_timeout_millis: i64,
    /// Developer instruction revision.
    pub developer_instruction_revision: String,
    /// Account type.
    pub account_type: String,
    /// Account plan.
    pub account_plan: String,
    /// Adapter id.
    pub adapter_id: String,
    /// Adapter revision.
    pub adapter_revision: String,
    /// Codex version.
    pub codex_version: String,
    /// Codex executable revision.
    pub codex_executable_revision: String,
    /// Codex schema revision.
    pub codex_schema_revision: String,
    /// Thread mode.
    pub thread_mode: String,
    /// Sandbox mode.
    pub sandbox_mode: String,
    /// Approval policy.
    pub approval_policy: String,
    /// Workdir mode.
    pub workdir_mode: String,
    /// Dynamic tools mode.
    pub dynamic_tools_mode: String,
    /// MCP mode.
    pub mcp_mode: String,
    /// Command policy.
    pub command_policy: String,
    /// File read policy.
    pub file_read_policy: String,
    /// Isolation revision.
    pub isolation_revision: String,
}

impl SubscriptionPolicy {
    /// The equivalent text-only policy for a RunSpec.
    pub fn to_text_only(&self) -> crate::spec::TextOnlyPolicy {
        crate::spec::TextOnlyPolicy {
            policy_id: self.policy_id.clone(),
            policy_revision: self.policy_revision.clone(),
            model: self.model.clone(),
            reasoning_effort: self.reasoning_effort.clone(),
            reasoning_context: self.reasoning_context.clone(),
            request_timeout_millis: self.request_timeout_millis,
            developer_instruction_revision: self.developer_instruction_revision.clone(),
            account_type: self.account_type.clone(),
            account_plan: self.account_plan.clone(),
            selected_adapter_id: self.adapter_id.clone(),
            selected_adapter_revision: self.adapter_revision.clone(),
            selected_codex_version: self.codex_version.clone(),
            selected_codex_executable_revision: self.codex_executable_revision.clone(),
            selected_codex_schema_revision: self.codex_schema_revision.clone(),
            thread_mode: self.thread_mode.clone(),
            sandbox_mode: self.sandbox_mode.clone(),
            approval_policy: self.approval_policy.clone(),
            workdir_mode: self.workdir_mode.clone(),
            dynamic_tools_mode: self.dynamic_tools_mode.clone(),
            mcp_mode: self.mcp_mode.clone(),
            command_policy: self.command_policy.clone(),
            file_read_policy: self.file_read_policy.clone(),
            isolation_revision: self.isolation_revision.clone(),
        }
    }

    /// The same rules as `RunSpec::validate_authority` applies to a text-only policy.
    pub fn validate(&self) -> Result<(), ContractError> {
        let spec = crate::spec::RunSpec {
            agent: AGENT_CODEX_SUBSCRIPTION.into(),
            model: self.model.clone(),
            prompt: "x".into(),
            profile: format!("{AGENT_CODEX_SUBSCRIPTION}:{}", self.model),
            authority: crate::spec::AuthorityMode::chat_subscription_isolated_v1(),
            runtime_contract: RUNTIME_CONTRACT_CODEX_SUBSCRIPTION_EXEC_V1.into(),
            text_only_policy: Some(self.to_text_only()),
            ..Default::default()
        };
        spec.validate_authority()
            .map_err(|e| invalid("subscription policy", e.to_string()))
    }
}

/// The authority a target runs under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetAuthority {
    /// Authority mode.
    pub authority: String,
    /// The pinned policy.
    pub policy: SubscriptionPolicy,
    /// The model asked for.
    pub requested_model: String,
}

impl TargetAuthority {
    /// Authority is the subscription lane, the policy is valid and its model is the requested one.
    pub fn validate(&self) -> Result<(), ContractError> {
        if self.authority != AUTHORITY_CHAT_SUBSCRIPTION_ISOLATED_V1 {
            return Err(invalid("target authority", "unknown authority"));
        }
        self.policy.validate()?;
        if self.policy.model != self.requested_model {
            return Err(invalid(
                "target authority",
                "requested_model differs from the policy model",
            ));
        }
        Ok(())
    }
}

/// Evidence of what answered a target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetReceipt {
    /// Observed adapter id.
    pub observed_adapter_id: String,
    /// Observed adapter revision.
    pub observed_adapter_revision: String,
    /// Observed codex version.
    pub observed_codex_version: String,
    /// Observed codex executable revision.
    pub observed_codex_executable_revision: String,
    /// Observed codex schema revision.
    pub observed_codex_schema_revision: String,
    /// Provider thread id.
    pub provider_thread_id: String,
    /// Terminal status.
    pub terminal_status: String,
    /// Token counts.
    pub usage: crate::event::ProviderUsage,
}

impl TargetReceipt {
    /// Built from validated response metadata.
    pub fn from_response(m: &crate::event::ResponseMetadata) -> Self {
        Self {
            observed_adapter_id: m.observed_adapter_id.clone(),
            observed_adapter_revision: m.observed_adapter_revision.clone(),
            observed_codex_version: m.observed_codex_version.clone(),
            observed_codex_executable_revision: m.observed_codex_executable_revision.clone(),
            observed_codex_schema_revision: m.observed_codex_schema_revision.clone(),
            provider_thread_id: m.provider_thread_id.clone(),
            terminal_status: m.terminal_status.clone(),
            usage: m.usage,
        }
    }

    /// The observed identities equal the authority's policy; status completed; usage sane.
    pub fn validate_for(&self, authority: &TargetAuthority) -> Result<(), ContractError> {
        const W: &str = "target receipt";
        let p = &authority.policy;
        let pairs = [
            ("adapter_id", &self.observed_adapter_id, &p.adapter_id),
            (
                "adapter_revision",
                &self.observed_adapter_revision,
                &p.adapter_revision,
            ),
            (
                "codex_version",
                &self.observed_codex_version,
                &p.codex_version,
            ),
            (
                "codex_executable_revision",
                &self.observed_codex_executable_revision,
                &p.codex_executable_revision,
            ),
            (
                "codex_schema_revision",
                &self.observed_codex_schema_revision,
                &p.codex_schema_revision,
            ),
        ];
        for (name, got, want) in pairs {
            if got != want {
                return Err(invalid(
                    W,
                    format!("observed {name} differs from the policy"),
                ));
            }
        }
        need(W, "provider_thread_id", &self.provider_thread_id)?;
        if self.terminal_status != TERMINAL_STATUS_COMPLETED {
            return Err(invalid(W, "terminal_status must be completed"));
        }
        let u = &self.usage;
        if u.output_tokens <= 0
            || u.cached_input_tokens > u.input_tokens
            || u.reasoning_tokens > u.output_tokens
            || u.input_tokens < 0
            || u.cached_input_tokens < 0
            || u.reasoning_tokens < 0
        {
            return Err(invalid(W, "usage is not consistent"));
        }
        Ok(())
    }
}

/// True for a lowercase SHA-256 revision (re-exported for contract users).
pub fn is_revision(s: &str) -> bool {
    is_sha256_hex(s)
}

// ---------------------------------------------------------------- handoffs

/// Ask an adapter to turn a provider-native structured action into a handoff intent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandoffEmitterRequest {
    /// Adapter id.
    pub adapter_id: String,
    /// Adapter revision.
    pub adapter_revision: String,
    /// Invocation id.
    pub invocation_id: String,
    /// Account.
    pub account_id: String,
    /// The agent handing off.
    pub source_agent_id: String,
    /// Its behavior revision.
    pub source_behavior_revision_id: String,
    /// Its binding revision.
    pub source_binding_revision_id: String,
    /// The provider-native structured payload (JSON).
    pub structured_payload: Vec<u8>,
}

impl HandoffEmitterRequest {
    /// Identities set and trimmed; payload non-empty.
    pub fn validate(&self) -> Result<(), ContractError> {
        const W: &str = "handoff request";
        need(W, "adapter_id", &self.adapter_id)?;
        need(W, "adapter_revision", &self.adapter_revision)?;
        need(W, "invocation_id", &self.invocation_id)?;
        need(W, "account_id", &self.account_id)?;
        need(W, "source_agent_id", &self.source_agent_id)?;
        need(
            W,
            "source_behavior_revision_id",
            &self.source_behavior_revision_id,
        )?;
        need(
            W,
            "source_binding_revision_id",
            &self.source_binding_revision_id,
        )?;
        if self.structured_payload.is_empty() {
            return Err(invalid(W, "structured_payload must not be empty"));
        }
        Ok(())
    }
}

/// A handoff intent. The lists are required on the wire (`null` is rejected).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StructuredHandoffEmission {
    /// Adapter id (echo).
    pub adapter_id: String,
    /// Adapter revision (echo).
    pub adapter_revision: String,
    /// Invocation id (echo).
    pub invocation_id: String,
    /// Account (echo).
    pub account_id: String,
    /// Source agent (echo).
    pub source_agent_id: String,
    /// Behavior revision (echo).
    pub source_behavior_revision_id: String,
    /// Binding revision (echo).
    pub source_binding_revision_id: String,
    /// Who should act; never the source.
    pub recipient_agent_id: String,
    /// Context records handed along (unique, trimmed).
    pub context_record_ids: Vec<String>,
    /// What result is asked for.
    pub requested_result: String,
    /// Message this replies to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reply_to_message_id: String,
    /// Authority asked for (unique, trimmed); the platform intersects it.
    pub requested_authority: Vec<String>,
    /// When emitted.
    pub emitted_at: DateTime<Utc>,
}

impl StructuredHandoffEmission {
    /// Identities echo the request; recipient is not the source; lists unique and trimmed.
    pub fn validate_for(&self, request: &HandoffEmitterRequest) -> Result<(), ContractError> {
        const W: &str = "handoff emission";
        request.validate()?;
        let echo = [
            ("adapter_id", &self.adapter_id, &request.adapter_id),
            (
                "adapter_revision",
                &self.adapter_revision,
                &request.adapter_revision,
            ),
            ("invocation_id", &self.invocation_id, &request.invocation_id),
            ("account_id", &self.account_id, &request.account_id),
            (
                "source_agent_id",
                &self.source_agent_id,
                &request.source_agent_id,
            ),
            (
                "source_behavior_revision_id",
                &self.source_behavior_revision_id,
                &request.source_behavior_revision_id,
            ),
            (
                "source_binding_revision_id",
                &self.source_binding_revision_id,
                &request.source_binding_revision_id,
            ),
        ];
        for (name, got, want) in echo {
            if got != want {
                return Err(invalid(W, format!("{name} does not echo the request")));
            }
        }
        need(W, "recipient_agent_id", &self.recipient_agent_id)?;
        if self.recipient_agent_id == self.source_agent_id {
            return Err(invalid(W, "recipient must not be the source agent"));
        }
        need(W, "requested_result", &self.requested_result)?;
        if self.reply_to_message_id.trim() != self.reply_to_message_id {
            return Err(invalid(W, "reply_to_message_id must be trimmed"));
        }
        list_rules(W, "context_record_ids", &self.context_record_ids, false)?;
        list_rules(W, "requested_authority", &self.requested_authority, false)?;
        if zero_time(&self.emitted_at) {
            return Err(invalid(W, "emitted_at must be set"));
        }
        Ok(())
    }
}

/// Turns structured actions into handoff intents.
#[async_trait]
pub trait HandoffEmitter: Send + Sync {
    /// Emits one handoff for a request.
    async fn emit_handoff(
        &self,
        request: HandoffEmitterRequest,
    ) -> Result<StructuredHandoffEmission, ContractError>;
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HandoffPayload {
    recipient_agent_id: String,
    #[serde(default)]
    context_record_ids: Vec<String>,
    requested_result: String,
    #[serde(default)]
    reply_to_message_id: String,
    #[serde(default)]
    requested_authority: Vec<String>,
}

/// Reads the payload as JSON `{recipient_agent_id, context_record_ids?, requested_result,
/// reply_to_message_id?, requested_authority?}` and records what it emitted.
#[derive(Debug, Default)]
pub struct InMemoryHandoffEmitter {
    emitted: Mutex<Vec<StructuredHandoffEmission>>,
}

impl InMemoryHandoffEmitter {
    /// Emissions so far.
    pub fn emitted(&self) -> Vec<StructuredHandoffEmission> {
        lock(&self.emitted).clone()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

#[async_trait]
impl HandoffEmitter for InMemoryHandoffEmitter {
    async fn emit_handoff(
        &self,
        request: HandoffEmitterRequest,
    ) -> Result<StructuredHandoffEmission, ContractError> {
        request.validate()?;
        let p: HandoffPayload = serde_json::from_slice(&request.structured_payload)
            .map_err(|e| invalid("handoff payload", e.to_string()))?;
        let emission = StructuredHandoffEmission {
            adapter_id: request.adapter_id.clone(),
            adapter_revision: request.adapter_revision.clone(),
            invocation_id: request.invocation_id.clone(),
            account_id: request.account_id.clone(),
            source_agent_id: request.source_agent_id.clone(),
            source_behavior_revision_id: request.source_behavior_revision_id.clone(),
            source_binding_revision_id: request.source_binding_revision_id.clone(),
            recipient_agent_id: p.recipient_agent_id,
            context_record_ids: p.context_record_ids,
            requested_result: p.requested_result,
            reply_to_message_id: p.reply_to_message_id,
            requested_authority: p.requested_authority,
            emitted_at: Utc::now(),
        };
        emission.validate_for(&request)?;
        lock(&self.emitted).push(emission.clone());
        Ok(emission)
    }
}

// ---------------------------------------------------------------- routines

/// Which framework routine to inspect.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutineAuthorityInspectionRequest {
    /// Account.
    pub account_id: String,
    /// Execution source.
    pub execution_source_id: String,
    /// Source agent.
    pub source_agent_id: String,
    /// The framework's routine id.
    pub opaque_source_routine_id: String,
}

impl RoutineAuthorityInspectionRequest {
    /// All ids set and trimmed.
    pub fn validate(&self) -> Result<(), ContractError> {
        const W: &str = "routine inspection request";
        need(W, "account_id", &self.account_id)?;
        need(W, "execution_source_id", &self.execution_source_id)?;
        need(W, "source_agent_id", &self.source_agent_id)?;
        need(
            W,
            "opaque_source_routine_id",
            &self.opaque_source_routine_id,
        )
    }
}

/// What the framework says about its routine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceRoutineAuthorityEvidence {
    /// Account.
    pub account_id: String,
    /// Execution source.
    pub execution_source_id: String,
    /// Source agent.
    pub source_agent_id: String,
    /// Routine id.
    pub opaque_source_routine_id: String,
    /// Projection revision (≥ 1).
    pub projection_revision: i64,
    /// Whether the routine will fire.
    pub enabled: bool,
    /// Last occurrence (before `next_occurrence`).
    pub last_occurrence: DateTime<Utc>,
    /// Next occurrence.
    pub next_occurrence: DateTime<Utc>,
    /// When observed.
    pub observed_at: DateTime<Utc>,
}

impl SourceRoutineAuthorityEvidence {
    fn request(&self) -> RoutineAuthorityInspectionRequest {
        RoutineAuthorityInspectionRequest {
            account_id: self.account_id.clone(),
            execution_source_id: self.execution_source_id.clone(),
            source_agent_id: self.source_agent_id.clone(),
            opaque_source_routine_id: self.opaque_source_routine_id.clone(),
        }
    }

    fn validate_self(&self) -> Result<(), ContractError> {
        const W: &str = "routine evidence";
        self.request().validate()?;
        if self.projection_revision < 1 {
            return Err(invalid(W, "projection_revision must be at least 1"));
        }
        if self.last_occurrence >= self.next_occurrence {
            return Err(invalid(W, "last_occurrence must be before next_occurrence"));
        }
        if zero_time(&self.observed_at) {
            return Err(invalid(W, "observed_at must be set"));
        }
        Ok(())
    }

    /// Echoes the request; revision ≥ 1; last < next; observed_at set.
    pub fn validate_for(
        &self,
        request: &RoutineAuthorityInspectionRequest,
    ) -> Result<(), ContractError> {
        request.validate()?;
        if &self.request() != request {
            return Err(invalid(
                "routine evidence",
                "identities do not echo the request",
            ));
        }
        self.validate_self()
    }
}

/// Ask to disable a routine that was inspected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutineAuthorityFenceRequest {
    /// The inspection this fence acts on.
    pub inspection: SourceRoutineAuthorityEvidence,
    /// When asked; at or after `inspection.observed_at` and before its next occurrence.
    pub requested_at: DateTime<Utc>,
}

impl RoutineAuthorityFenceRequest {
    /// The inspection is valid and `observed_at ≤ requested_at < next_occurrence`.
    pub fn validate(&self) -> Result<(), ContractError> {
        const W: &str = "routine fence request";
        self.inspection.validate_self()?;
        if self.requested_at < self.inspection.observed_at {
            return Err(invalid(
                W,
                "requested_at is before the inspection was observed",
            ));
        }
        if self.requested_at >= self.inspection.next_occurrence {
            return Err(invalid(W, "requested_at is not before the next occurrence"));
        }
        Ok(())
    }
}

/// Proof that the framework's routine was disabled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceRoutineFenceReceipt {
    /// Account.
    pub account_id: String,
    /// Execution source.
    pub execution_source_id: String,
    /// Routine id.
    pub opaque_source_routine_id: String,
    /// Receipt id.
    pub fence_receipt_id: String,
    /// Projection revision after the fence (≥ the evidence's).
    pub projection_revision: i64,
    /// When the source disabled it (at or after observation, before the next occurrence).
    pub source_disabled_at: DateTime<Utc>,
    /// Equal to the evidence's.
    pub last_occurrence: DateTime<Utc>,
    /// Equal to the evidence's.
    pub next_occurrence: DateTime<Utc>,
}

impl SourceRoutineFenceReceipt {
    /// Identities and occurrences match the evidence exactly; the disable time is in the window.
    pub fn validate_for(
        &self,
        evidence: &SourceRoutineAuthorityEvidence,
    ) -> Result<(), ContractError> {
        const W: &str = "routine fence receipt";
        evidence.validate_self()?;
        if self.account_id != evidence.account_id
            || self.execution_source_id != evidence.execution_source_id
            || self.opaque_source_routine_id != evidence.opaque_source_routine_id
        {
            return Err(invalid(W, "identities do not match the evidence"));
        }
        need(W, "fence_receipt_id", &self.fence_receipt_id)?;
        if self.projection_revision < evidence.projection_revision {
            return Err(invalid(W, "projection_revision went backwards"));
        }
        if self.last_occurrence != evidence.last_occurrence
            || self.next_occurrence != evidence.next_occurrence
        {
            return Err(invalid(W, "occurrences do not match the evidence"));
        }
        if self.source_disabled_at < evidence.observed_at
            || self.source_disabled_at >= evidence.next_occurrence
        {
            return Err(invalid(
                W,
                "source_disabled_at must be at or after observation and before the next occurrence",
            ));
        }
        Ok(())
    }
}

/// Inspects and fences a framework's own routines. It cannot run anything.
#[async_trait]
pub trait RoutineAuthority: Send + Sync {
    /// Reports a routine.
    async fn inspect_source_routine(
        &self,
        request: RoutineAuthorityInspectionRequest,
    ) -> Result<SourceRoutineAuthorityEvidence, ContractError>;
    /// Disables a routine.
    async fn fence_source_routine(
        &self,
        request: RoutineAuthorityFenceRequest,
    ) -> Result<SourceRoutineFenceReceipt, ContractError>;
}

/// A routine held by [`InMemoryRoutineAuthority`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InMemoryRoutine {
    /// Enabled.
    pub enabled: bool,
    /// Projection revision.
    pub projection_revision: i64,
    /// Last occurrence.
    pub last_occurrence: DateTime<Utc>,
    /// Next occurrence.
    pub next_occurrence: DateTime<Utc>,
}

/// In-memory routines keyed by the inspection request.
#[derive(Debug, Default)]
pub struct InMemoryRoutineAuthority {
    routines: Mutex<HashMap<RoutineAuthorityInspectionRequest, InMemoryRoutine>>,
}

impl InMemoryRoutineAuthority {
    /// Adds or replaces a routine.
    pub fn put(&self, key: RoutineAuthorityInspectionRequest, routine: InMemoryRoutine) {
        lock(&self.routines).insert(key, routine);
    }
    /// The routine as stored.
    pub fn get(&self, key: &RoutineAuthorityInspectionRequest) -> Option<InMemoryRoutine> {
        lock(&self.routines).get(key).cloned()
    }
}

#[async_trait]
impl RoutineAuthority for InMemoryRoutineAuthority {
    async fn inspect_source_routine(
        &self,
        request: RoutineAuthorityInspectionRequest,
    ) -> Result<SourceRoutineAuthorityEvidence, ContractError> {
        request.validate()?;
        let r = self
            .get(&request)
            .ok_or_else(|| ContractError::NotFound(request.opaque_source_routine_id.clone()))?;
        let ev = SourceRoutineAuthorityEvidence {
            account_id: request.account_id.clone(),
            execution_source_id: request.execution_source_id.clone(),
            source_agent_id: request.source_agent_id.clone(),
            opaque_source_routine_id: request.opaque_source_routine_id.clone(),
            projection_revision: r.projection_revision,
            enabled: r.enabled,
            last_occurrence: r.last_occurrence,
            next_occurrence: r.next_occurrence,
            observed_at: Utc::now(),
        };
        ev.validate_for(&request)?;
        Ok(ev)
    }

    async fn fence_source_routine(
        &self,
        request: RoutineAuthorityFenceRequest,
    ) -> Result<SourceRoutineFenceReceipt, ContractError> {
        request.validate()?;
        let key = request.inspection.request();
        let mut g = lock(&self.routines);
        let r = g
            .get_mut(&key)
            .ok_or_else(|| ContractError::NotFound(key.opaque_source_routine_id.clone()))?;
        if r.projection_revision != request.inspection.projection_revision
            || r.last_occurrence != request.inspection.last_occurrence
            || r.next_occurrence != request.inspection.next_occurrence
        {
            return Err(invalid(
                "routine fence request",
                "the routine changed since it was inspected",
            ));
        }
        r.enabled = false;
        r.projection_revision += 1;
        let receipt = SourceRoutineFenceReceipt {
            account_id: key.account_id.clone(),
            execution_source_id: key.execution_source_id.clone(),
            opaque_source_routine_id: key.opaque_source_routine_id.clone(),
            fence_receipt_id: format!("fence_{}", ulid::Ulid::new().to_string().to_lowercase()),
            projection_revision: r.projection_revision,
            source_disabled_at: request.requested_at,
            last_occurrence: r.last_occurrence,
            next_occurrence: r.next_occurrence,
        };
        receipt.validate_for(&request.inspection)?;
        Ok(receipt)
    }
}

// ---------------------------------------------------------------- inventory

/// Which source to list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSourceInventoryRequest {
    /// The source.
    pub execution_source_id: String,
}

/// Readiness of one source agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceAgentReadiness {
    /// Ready to take work.
    pub ready: bool,
    /// Contract checked.
    pub contract_id: String,
    /// Contract revision checked.
    pub contract_revision: String,
    /// Evidence (non-empty, unique, trimmed).
    pub evidence: Vec<String>,
}

/// One agent of a source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceAgentInventory {
    /// The agent.
    pub source_agent: SourceAgent,
    /// Capabilities (non-empty, unique, trimmed).
    pub capabilities: Vec<String>,
    /// Readiness.
    pub readiness: SourceAgentReadiness,
}

/// Discovery result for one source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSourceInventorySnapshot {
    /// The source.
    pub execution_source: ExecutionSource,
    /// Its agents.
    pub agents: Vec<SourceAgentInventory>,
    /// When observed.
    pub observed_at: DateTime<Utc>,
}

impl AgentSourceInventorySnapshot {
    /// Valid source; no duplicate identities; every agent belongs to the source;
    /// capabilities and evidence non-empty, unique and trimmed.
    pub fn validate(&self) -> Result<(), ContractError> {
        const W: &str = "inventory snapshot";
        self.execution_source.validate()?;
        if zero_time(&self.observed_at) {
            return Err(invalid(W, "observed_at must be set"));
        }
        let mut ids = HashSet::new();
        let mut identities = HashSet::new();
        for a in &self.agents {
            a.source_agent.validate()?;
            if a.source_agent.execution_source_id != self.execution_source.id {
                return Err(invalid(
                    W,
                    format!("agent {:?} belongs to another source", a.source_agent.id),
                ));
            }
            if !ids.insert(a.source_agent.id.as_str())
                || !identities.insert(a.source_agent.identity())
            {
                return Err(invalid(
                    W,
                    format!("duplicate agent {:?}", a.source_agent.id),
                ));
            }
            list_rules(W, "capabilities", &a.capabilities, true)?;
            list_rules(W, "readiness.evidence", &a.readiness.evidence, true)?;
            need(W, "readiness.contract_id", &a.readiness.contract_id)?;
            need(
                W,
                "readiness.contract_revision",
                &a.readiness.contract_revision,
            )?;
        }
        Ok(())
    }
}

/// Lists the agents of an execution source (discovery only).
#[async_trait]
pub trait AgentSourceInventory: Send + Sync {
    /// The snapshot of one source.
    async fn inventory(
        &self,
        request: AgentSourceInventoryRequest,
    ) -> Result<AgentSourceInventorySnapshot, ContractError>;
}

/// Snapshots held in memory, validated on the way in and out.
#[derive(Debug, Default)]
pub struct InMemoryAgentSourceInventory {
    snapshots: Mutex<HashMap<String, AgentSourceInventorySnapshot>>,
}

impl InMemoryAgentSourceInventory {
    /// Stores a snapshot after validating it.
    pub fn put(&self, snapshot: AgentSourceInventorySnapshot) -> Result<(), ContractError> {
        snapshot.validate()?;
        lock(&self.snapshots).insert(snapshot.execution_source.id.clone(), snapshot);
        Ok(())
    }
}

#[async_trait]
impl AgentSourceInventory for InMemoryAgentSourceInventory {
    async fn inventory(
        &self,
        request: AgentSourceInventoryRequest,
    ) -> Result<AgentSourceInventorySnapshot, ContractError> {
        need(
            "inventory request",
            "execution_source_id",
            &request.execution_source_id,
        )?;
        let snap = lock(&self.snapshots)
            .get(&request.execution_source_id)
            .cloned()
            .ok_or_else(|| ContractError::NotFound(request.execution_source_id.clone()))?;
        snap.validate()?;
        Ok(snap)
    }
}
