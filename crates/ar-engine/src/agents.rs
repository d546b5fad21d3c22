//! Agent definitions: validation and create/upsert.

use ar_core::agent::{Agent, SkillRef};
use ar_core::ids::{new_id, prefix, validate_external_id};
use ar_core::tool::canonical_tool_name;
use ar_core::{ApprovalMode, InvocationMode, RuntimeKind};

use crate::engine::Engine;
use crate::error::{EngineError, EngineResult};

/// An agent as a host submits it (strings are validated here).
#[derive(Debug, Clone, Default)]
pub struct AgentInput {
    pub id: String,
    pub app_id: String,
    pub name: String,
    pub runtime_kind: String,
    pub provider: String,
    pub model: String,
    pub system_prompt: String,
    pub skills: Vec<SkillRef>,
    pub allowed_tools: Vec<String>,
    pub allowed_targets: Vec<String>,
    pub approval_mode: String,
    pub default_invocation_mode: String,
    pub execution_config: Option<serde_json::Value>,
}

fn parse_or_default<T>(
    value: &str,
    default: T,
    parse: impl Fn(&str) -> Result<T, ar_core::UnknownValue>,
) -> EngineResult<T> {
    if value.trim().is_empty() {
        Ok(default)
    } else {
        parse(value).map_err(|error| EngineError::invalid(error.to_string()))
    }
}

impl Engine {
    fn build_agent(&self, input: AgentInput, existing: Option<&Agent>) -> EngineResult<Agent> {
        let app_id = input.app_id.trim().to_string();
        validate_external_id("app_id", &app_id).map_err(EngineError::Invalid)?;
        let name = input.name.trim().to_string();
        if name.is_empty() {
            return Err(EngineError::invalid("name is required"));
        }
        if name.chars().count() > 200 {
            return Err(EngineError::invalid("name is longer than 200 characters"));
        }
        let id = if input.id.trim().is_empty() {
            new_id(prefix::AGENT)
        } else {
            input.id.trim().to_string()
        };
        validate_external_id("id", &id).map_err(EngineError::Invalid)?;
        let runtime_kind = parse_or_default(
            &input.runtime_kind,
            RuntimeKind::NativeSdk,
            RuntimeKind::parse,
        )?;
        let approval_mode = parse_or_default(
            &input.approval_mode,
            ApprovalMode::Never,
            ApprovalMode::parse,
        )?;
        let default_invocation_mode = parse_or_default(
            &input.default_invocation_mode,
            InvocationMode::Autonomous,
            InvocationMode::parse,
        )?;
        if let Some(config) = &input.execution_config {
            if !config.is_object() && !config.is_null() {
                return Err(EngineError::invalid(
                    "execution_config must be a JSON object",
                ));
            }
        }
        crate::limits::AgentLimits::of(runtime_kind, input.execution_config.as_ref())?;
        let mut allowed_tools: Vec<String> = Vec::new();
        for tool in &input.allowed_tools {
            let name = canonical_tool_name(tool);
            if name.is_empty() {
                return Err(EngineError::invalid("allowed_tools contains an empty name"));
            }
            if !allowed_tools.contains(&name) {
                allowed_tools.push(name);
            }
        }
        let allowed_targets: Vec<String> = input
            .allowed_targets
            .iter()
            .map(|target| target.trim().to_string())
            .filter(|target| !target.is_empty())
            .collect();
        let now = self.now();
        Ok(Agent {
            id,
            app_id,
            name,
            runtime_kind,
            provider: input.provider.trim().to_string(),
            model: input.model.trim().to_string(),
            system_prompt: input.system_prompt,
            skills: input.skills,
            allowed_tools,
            allowed_targets,
            approval_mode,
            default_invocation_mode,
            execution_config: input.execution_config.filter(|config| !config.is_null()),
            created_at: existing.map(|agent| agent.created_at).unwrap_or(now),
            updated_at: now,
        })
    }

    /// Creates an agent; an id that exists in the app is a 400.
    pub async fn create_agent(&self, input: AgentInput) -> EngineResult<Agent> {
        let agent = self.build_agent(input, None)?;
        if self
            .deps()
            .store
            .get_agent(&agent.app_id, &agent.id)
            .await?
            .is_some()
        {
            return Err(EngineError::invalid(format!(
                "agent {} already exists",
                agent.id
            )));
        }
        self.deps().store.put_agent(&agent).await?;
        Ok(agent)
    }

    /// Creates or replaces an agent; returns it and whether it was created.
    pub async fn upsert_agent(&self, input: AgentInput) -> EngineResult<(Agent, bool)> {
        if input.id.trim().is_empty() {
            return Err(EngineError::invalid("agent id is required"));
        }
        validate_external_id("app_id", input.app_id.trim()).map_err(EngineError::Invalid)?;
        let existing = self
            .deps()
            .store
            .get_agent(input.app_id.trim(), input.id.trim())
            .await?;
        let agent = self.build_agent(input, existing.as_ref())?;
        self.deps().store.put_agent(&agent).await?;
        Ok((agent, existing.is_none()))
    }
}
