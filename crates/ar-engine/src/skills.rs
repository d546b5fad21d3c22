//! A run's skills and the agent's execution policy, as the engine uses them: resolved at
//! admission (refusing what cannot be honoured) and again at each turn start, the prompt
//! section they add, the skill tools, the `runtime_skill_manifest`, and the completion gate
//! (`completion.required_tools`, `completion_requires_interaction_kinds` with one corrective
//! turn).

use std::path::PathBuf;

use ar_core::workspace::WorkspaceAccess;
use ar_core::{Agent, Run, RuntimeKind};
use ar_skills::activation::Phase;
use ar_skills::resolve::{resolve, LookupRequest};
use ar_skills::stage::{self, StageKind};
use ar_skills::tools::{manifest, ManifestExtras, SkillTools};
use ar_skills::{Catalog, ExecutionPolicy, Resolution, SkillPolicy};
use serde_json::Value;

use crate::engine::Engine;
use crate::error::{EngineError, EngineResult};

/// What a run's skills and its agent's `execution_config` come to for one turn.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunSkills {
    pub resolution: Resolution,
    /// The skills' policy merged with `execution_config.runtime_policy`.
    pub policy: SkillPolicy,
    /// `execution_config.completion.required_tools`, canonical names.
    pub required_tools: Vec<String>,
    pub tools: SkillTools,
    /// Repository `SKILL.md` files that could not be used, and why (for the manifest).
    pub repository_problems: Vec<String>,
}

/// What the completion gate decided for a turn that would end the run's work.
pub(crate) enum Completion {
    Proceed,
    /// Run one corrective turn with this prompt.
    Correct(String),
    Fail(String),
}

impl RunSkills {
    /// Whether there is anything to do for this run.
    pub fn is_empty(&self) -> bool {
        self.resolution.skills.is_empty()
            && self.required_tools.is_empty()
            && self.policy == SkillPolicy::default()
    }

    /// The system prompt's skill section (empty when nothing is compiled in).
    pub fn prompt_section(&self) -> String {
        let mut section = self.resolution.prompt_instructions();
        if !self.tools.is_empty() {
            if !section.is_empty() {
                section.push_str("\n\n");
            }
            section.push_str("Further skills are available: call list_available_skills or search_available_skills to find one and read_skill to read it.");
            if self.policy.allow_implicit_invocation == Some(false) {
                section.push_str(" Use a skill only when the task asks for it.");
            }
        }
        section
    }

    /// The `runtime_skill_manifest` artifact's content.
    pub fn manifest(&self) -> Value {
        let extras = ManifestExtras {
            staged: self.tools.staged(),
            repository_problems: &self.repository_problems,
        };
        manifest(
            &self.resolution,
            &self.policy,
            &self.required_tools,
            &extras,
        )
    }
}

/// Where a run's skills are staged: its workspace when it has a writable one, else a
/// per-run temporary directory (removed when the run ends).
struct StagePlace {
    /// The workspace root, when the run has a live lease.
    root: Option<PathBuf>,
    writable: bool,
    run_id: String,
}

impl StagePlace {
    fn of(run: &Run) -> StagePlace {
        let root = crate::workspace::live_lease(run)
            .map(|lease| PathBuf::from(lease.root_path))
            .filter(|root| !root.as_os_str().is_empty());
        let writable = run
            .engine
            .workspace
            .is_some_and(|ws| ws.spec.access == WorkspaceAccess::ReadWrite);
        StagePlace {
            root,
            writable,
            run_id: run.id.clone(),
        }
    }

    /// Stages `tools`' skills (blocking file work).
    fn stage(&self, tools: &SkillTools) -> Result<stage::Staged, stage::StageError> {
        let skills: Vec<&ar_skills::SkillDefinition> = tools.skills().iter().collect();
        match (&self.root, self.writable) {
            (Some(root), true) => {
                stage::stage(&skills, root, &stage::WORKSPACE_STAGE, StageKind::Workspace)
            }
            _ => {
                let name = stage::temp_name(&self.run_id);
                let rel = [stage::TEMP_STAGE, name.as_str()];
                stage::stage(&skills, &std::env::temp_dir(), &rel, StageKind::Temporary)
            }
        }
    }
}

/// The refs of a run: its agent's, then those attached to its MCP servers.
fn skill_refs(agent: &Agent, run: &Run) -> Vec<ar_core::agent::SkillRef> {
    let mut refs = agent.skills.clone();
    for server in &run.input.mcp_servers {
        refs.extend(server.skills.iter().cloned());
    }
    refs
}

/// The tools a run may call: its allow-list (else the agent's) and its MCP servers' aliases.
fn allowed_tools(agent: &Agent, run: &Run) -> Vec<String> {
    let mut tools = if run.input.allowed_tools.is_empty() {
        agent.allowed_tools.clone()
    } else {
        run.input.allowed_tools.clone()
    };
    for server in &run.input.mcp_servers {
        tools.extend(server.tools.iter().map(|grant| server.alias(&grant.name)));
    }
    tools
}

impl Engine {
    /// Resolves and checks a run's skills and its agent's policy. Every refusal is a 400 whose
    /// message names the skill or setting.
    pub(crate) async fn run_skills(&self, agent: &Agent, run: &Run) -> EngineResult<RunSkills> {
        let policy = ExecutionPolicy::from_execution_config(agent.execution_config.as_ref())
            .map_err(|error| EngineError::invalid(error.to_string()))?;
        let refs = skill_refs(agent, run);
        let context = LookupRequest {
            app_id: run.app_id.clone(),
            agent_id: agent.id.clone(),
            run_id: run.id.clone(),
            target: run.target.clone(),
            trigger: run.input.trigger.clone().unwrap_or_default(),
            metadata: run.input.metadata.clone().unwrap_or_default(),
            ..LookupRequest::default()
        };
        let lookup = self.deps().skills.as_deref();
        let mut resolution = resolve(Catalog::built_in(), lookup, &context, &refs)
            .await
            .map_err(|error| EngineError::invalid(error.to_string()))?;
        resolution.activate(&Phase::from_metadata(
            &context.metadata,
            &run.target.target_type,
        ));
        resolution
            .validate(agent.runtime_kind.as_str(), &allowed_tools(agent, run))
            .map_err(|error| EngineError::invalid(error.to_string()))?;
        let mut merged = resolution.policy();
        merged.merge(&policy.runtime_policy);
        let skills = RunSkills {
            tools: SkillTools::new(&resolution),
            resolution,
            policy: merged,
            required_tools: policy.required_tools,
            repository_problems: Vec::new(),
        };
        check_runtime(agent.runtime_kind, &skills)?;
        Ok(skills)
    }

    /// Adds the workspace's repository skills (`.agents/skills`; a key already resolved wins,
    /// a skill this run cannot honour is reported, not used) and stages what the skill tools
    /// offer. Runs after the workspace is prepared; an error fails the run.
    pub(crate) async fn place_skills(
        &self,
        agent: &Agent,
        run: &Run,
        mut skills: RunSkills,
    ) -> Result<RunSkills, String> {
        let place = StagePlace::of(run);
        let runtime = agent.runtime_kind;
        let allowed = allowed_tools(agent, run);
        let root = place.root.clone();
        let found = tokio::task::spawn_blocking(move || {
            root.map(|root| ar_skills::repository::discover(&root))
                .unwrap_or_default()
        })
        .await
        .map_err(|error| format!("repository skills could not be read: {error}"))?;
        let mut problems: Vec<String> = found.problems.iter().map(ToString::to_string).collect();
        let mut usable = Vec::new();
        for skill in found.skills {
            let single = Resolution {
                skills: vec![ar_skills::ResolvedSkill {
                    definition: skill.clone(),
                    role: ar_skills::SkillRole::Available,
                }],
            };
            match single.validate(runtime.as_str(), &allowed) {
                Ok(()) => usable.push(skill),
                Err(error) => problems.push(format!(".agents/skills/{}: {error}", skill.key)),
            }
        }
        skills.resolution.add_repository(usable);
        skills.repository_problems = problems;
        let tools = SkillTools::new(&skills.resolution);
        if tools.is_empty() {
            skills.tools = tools;
            return Ok(skills);
        }
        let staged =
            tokio::task::spawn_blocking(move || place.stage(&tools).map(|s| tools.with_staging(s)))
                .await
                .map_err(|error| format!("skills could not be staged: {error}"))?;
        skills.tools = staged.map_err(|error| error.to_string())?;
        check_runtime(runtime, &skills).map_err(|error| error.to_string())?;
        Ok(skills)
    }

    /// Removes the run's temporary skill staging (it ended); a workspace's staging goes with
    /// the workspace.
    pub(crate) async fn remove_skill_staging(&self, run_id: &str) {
        let run_id = run_id.to_string();
        let removed = tokio::task::spawn_blocking(move || stage::remove_temporary(&run_id)).await;
        if let Ok(Err(error)) = removed {
            tracing::warn!(%error, "temporary skill staging was not removed");
        }
    }

    /// The completion gate of a turn about to end the run's work: the interactions the policy
    /// requires (one corrective turn, then failure) and the required tools' successful calls.
    pub(crate) async fn completion_gate(
        &self,
        run: &Run,
        skills: &RunSkills,
        corrected: bool,
    ) -> EngineResult<Completion> {
        let kinds = &skills.policy.completion_requires_interaction_kinds;
        if !kinds.is_empty() {
            let interactions = self
                .deps()
                .store
                .list_interactions(&run.app_id, &run.id)
                .await?;
            if !interactions
                .iter()
                .any(|i| kinds.contains(&i.interaction_kind))
            {
                let wanted = kinds.join(", ");
                if corrected {
                    return Ok(Completion::Fail(format!(
                        "skill policy requires one of the interactions [{wanted}] before the run completes, and none happened after a corrective turn"
                    )));
                }
                return Ok(Completion::Correct(format!(
                    "Runtime skill policy correction: this run may not finish before one of these interactions happens: {wanted}. Do that now with the matching tool (request_approval for approval_request, request_review_checkpoint for review_checkpoint, request_user_input for request_user_input)."
                )));
            }
        }
        if skills.required_tools.is_empty() {
            return Ok(Completion::Proceed);
        }
        let calls = self
            .deps()
            .store
            .list_tool_calls(&run.app_id, &run.id)
            .await?;
        let missing: Vec<&str> = skills
            .required_tools
            .iter()
            .filter(|tool| {
                !calls.iter().any(|call| {
                    &call.tool_name == *tool && call.error.is_empty() && call.output.is_some()
                })
            })
            .map(String::as_str)
            .collect();
        if missing.is_empty() {
            return Ok(Completion::Proceed);
        }
        Ok(Completion::Fail(format!(
            "completion contract not met: no successful call of required tool(s) {} (execution_config.completion.required_tools)",
            missing.join(", ")
        )))
    }
}

/// What only the native loop honours is refused for other runtimes.
fn check_runtime(kind: RuntimeKind, skills: &RunSkills) -> EngineResult<()> {
    if kind == RuntimeKind::NativeSdk {
        return Ok(());
    }
    let refuse = |what: &str| {
        Err(EngineError::invalid(format!(
            "{what} is supported only for runtime native_sdk on this runtime, not {kind}"
        )))
    };
    if !skills.tools.is_empty() && skills.resolution.explicit_roles() {
        return refuse("skills with runtime_skill_role available");
    }
    if !skills
        .policy
        .completion_requires_interaction_kinds
        .is_empty()
    {
        return refuse("completion_requires_interaction_kinds (skill or runtime_policy)");
    }
    if !skills.required_tools.is_empty() {
        return refuse("execution_config.completion.required_tools");
    }
    Ok(())
}
