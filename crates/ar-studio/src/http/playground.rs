//! Validation of a playground run against the runtime's registration: the reference's 400/403/404 table.

use crate::wire::{AgentRegistration, Command, Registration};

use super::error::ApiError;

const EDIT_KINDS: [&str; 6] = ["", "tool_result", "reply", "user", "tool_args", "insert"];

/// Checks `cmd` against what the runtime registered. The runtime re-validates everything.
pub fn validate_run(reg: &Registration, cmd: &Command) -> Result<(), ApiError> {
    if cmd.agent.is_empty() {
        return Err(ApiError::bad_request("agent is required"));
    }
    let agent = reg
        .agent(&cmd.agent)
        .ok_or_else(|| ApiError::not_found(format!("unknown agent {}", cmd.agent)))?;
    check_modes(reg, cmd)?;
    check_source(cmd)?;
    check_tools(agent, cmd)?;
    check_model(agent, cmd)?;
    check_options(agent, cmd)?;
    check_side_effects(agent, cmd)
}

fn check_modes(reg: &Registration, cmd: &Command) -> Result<(), ApiError> {
    if !matches!(cmd.engine.as_str(), "" | "live" | "scripted") {
        return Err(ApiError::unsupported(format!(
            "unsupported engine {:?}",
            cmd.engine
        )));
    }
    if !matches!(
        cmd.side_effects.as_str(),
        "" | "substitute" | "park" | "allow"
    ) {
        return Err(ApiError::unsupported(format!(
            "unsupported side_effects {:?}",
            cmd.side_effects
        )));
    }
    match cmd.thread.as_str() {
        "" | "ephemeral" => {}
        "fork" => {
            if !reg.threads {
                return Err(ApiError::unsupported(
                    "the runtime holds no thread sessions: fork is unsupported",
                ));
            }
            if cmd.source.is_none() {
                return Err(ApiError::bad_request("thread fork needs a source run"));
            }
        }
        other => {
            return Err(ApiError::unsupported(format!(
                "unsupported thread {other:?}"
            )))
        }
    }
    if cmd.engine == "scripted" {
        if cmd.source.is_none() {
            return Err(ApiError::bad_request(
                "the scripted engine replays a source run: source is required",
            ));
        }
        if !cmd.overrides.instructions.is_empty() || !cmd.overrides.model.is_empty() {
            return Err(ApiError::bad_request(
                "the scripted engine replays recorded turns: an instructions or model override would be ignored",
            ));
        }
    }
    Ok(())
}

fn check_source(cmd: &Command) -> Result<(), ApiError> {
    let Some(source) = &cmd.source else {
        if !cmd.transcript_edits.is_empty() {
            return Err(ApiError::bad_request("transcript_edits need a source run"));
        }
        return Ok(());
    };
    if source.run_id.is_empty() {
        return Err(ApiError::bad_request("source.run_id is required"));
    }
    if source.from_step < 0 {
        return Err(ApiError::bad_request("source.from_step must be 0 or more"));
    }
    if cmd.input.is_some() && source.from_step > 0 {
        return Err(ApiError::bad_request(
            "input re-runs the whole turn: it cannot be combined with from_step > 0",
        ));
    }
    for (i, edit) in cmd.transcript_edits.iter().enumerate() {
        if !EDIT_KINDS.contains(&edit.kind.as_str()) {
            return Err(ApiError::bad_request(format!(
                "transcript_edits[{i}]: unknown kind {:?}",
                edit.kind
            )));
        }
        if edit.step < 0 || edit.index < 0 {
            return Err(ApiError::bad_request(format!(
                "transcript_edits[{i}]: negative step or index"
            )));
        }
        let inside = if edit.kind == "insert" {
            edit.step <= source.from_step
        } else {
            edit.step < source.from_step
        };
        if !inside {
            return Err(ApiError::bad_request(format!(
                "transcript_edits[{i}]: step {} is outside the kept prefix (steps before {})",
                edit.step, source.from_step
            )));
        }
        let needs_call = edit.kind == "tool_args"
            || edit.kind == "tool_result"
            || (edit.kind.is_empty() && !edit.tool_result.is_empty());
        if needs_call && edit.call_id.is_empty() {
            return Err(ApiError::bad_request(format!(
                "transcript_edits[{i}]: call_id is required"
            )));
        }
        if edit.kind == "tool_args" && !edit.args.as_ref().is_some_and(|a| a.is_object()) {
            return Err(ApiError::bad_request(format!(
                "transcript_edits[{i}]: args must be a JSON object"
            )));
        }
    }
    Ok(())
}

fn known_tools(agent: &AgentRegistration) -> Vec<String> {
    let mut tools = agent.manifest_tool_names();
    for name in agent.side_effects.keys() {
        if !tools.contains(name) {
            tools.push(name.clone());
        }
    }
    tools
}

fn check_tools(agent: &AgentRegistration, cmd: &Command) -> Result<(), ApiError> {
    let known = known_tools(agent);
    let o = &cmd.overrides;
    for name in o
        .tools_enabled
        .iter()
        .chain(&o.only_tools)
        .chain(&o.park_on)
    {
        if !known.contains(name) {
            return Err(ApiError::bad_request(format!("unknown tool {name}")));
        }
    }
    if let Some(choice) = &o.tool_choice {
        match choice.mode.as_str() {
            "auto" | "any" | "none" => {}
            "named" if known.contains(&choice.name) => {}
            "named" => {
                return Err(ApiError::bad_request(format!(
                    "unknown tool {}",
                    choice.name
                )))
            }
            other => {
                return Err(ApiError::unsupported(format!(
                    "unsupported tool_choice mode {other:?}"
                )))
            }
        }
    }
    Ok(())
}

fn check_model(agent: &AgentRegistration, cmd: &Command) -> Result<(), ApiError> {
    let o = &cmd.overrides;
    if !o.model.is_empty()
        && !agent.resolver
        && !agent.models.contains(&o.model)
        && agent.manifest_model_name() != o.model
    {
        return Err(ApiError::bad_request(format!("unknown model {}", o.model)));
    }
    if !matches!(o.thinking.as_str(), "" | "off" | "low" | "medium" | "high") {
        return Err(ApiError::unsupported(format!(
            "unsupported thinking {:?}",
            o.thinking
        )));
    }
    Ok(())
}

fn check_cap(name: &str, value: f64, limit: i64) -> Result<(), ApiError> {
    if value < 1.0 || value.fract() != 0.0 {
        return Err(ApiError::bad_request(format!(
            "options.{name} must be a whole number of at least 1"
        )));
    }
    if limit > 0 && value > limit as f64 {
        return Err(ApiError::forbidden(format!(
            "options.{name} {value} raises the agent's limit {limit}: overrides may only narrow"
        )));
    }
    Ok(())
}

fn check_options(agent: &AgentRegistration, cmd: &Command) -> Result<(), ApiError> {
    for (name, &value) in &cmd.overrides.options {
        if !value.is_finite() {
            return Err(ApiError::bad_request(format!(
                "options.{name} is not a number"
            )));
        }
        match name.as_str() {
            "temperature" if (0.0..=2.0).contains(&value) => {}
            "temperature" => {
                return Err(ApiError::bad_request("options.temperature must be in 0..2"))
            }
            "max_steps" => check_cap(name, value, agent.limits.max_steps)?,
            "parallelism" => check_cap(name, value, agent.limits.parallelism)?,
            other => return Err(ApiError::bad_request(format!("unknown option {other}"))),
        }
    }
    if let Some(params) = &cmd.overrides.params {
        if let Some(top_p) = params.top_p {
            if !(0.0..=1.0).contains(&top_p) {
                return Err(ApiError::bad_request("params.top_p must be in 0..1"));
            }
        }
        if let Some(max_tokens) = params.max_tokens {
            if max_tokens < 1 {
                return Err(ApiError::bad_request(
                    "params.max_tokens must be at least 1",
                ));
            }
            if let Some(own) = agent.defaults.max_tokens {
                if max_tokens > own {
                    return Err(ApiError::forbidden(format!(
                        "params.max_tokens {max_tokens} raises the agent's {own}: overrides may only narrow"
                    )));
                }
            }
        }
    }
    Ok(())
}

fn check_side_effects(agent: &AgentRegistration, cmd: &Command) -> Result<(), ApiError> {
    if cmd.side_effects != "allow" {
        return Ok(());
    }
    let enabled = if cmd.overrides.tools_enabled.is_empty() {
        known_tools(agent)
    } else {
        cmd.overrides.tools_enabled.clone()
    };
    for tool in enabled {
        let safe = agent.side_effects.get(&tool).is_some_and(|c| c == "safe");
        if !safe && !agent.is_allowed(&tool) {
            return Err(ApiError::forbidden(format!(
                "side_effects allow: tool {tool} is neither opted in nor replay-safe"
            )));
        }
    }
    Ok(())
}
