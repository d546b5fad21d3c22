//! The ChatGPT-subscription text-only lane of codex agents (seed 000's authority
//! `chat_subscription_isolated_v1` and runtime contract `codex_subscription_exec_v1`): an
//! agent asks for it in `execution_config`; admission refuses, naming the rule, a run whose
//! tools, MCP servers, workspace, placement or model route would break the lane (text only,
//! an empty directory of its own, this machine, the app's ChatGPT sign-in); each turn runs as
//! the app's sign-in of the account the agent names.

use ar_core::agent::Agent;
use ar_core::agent_cli::{
    ChatSubscription, CliPlacement, SubscriptionTurn, CHAT_SUBSCRIPTION_AUTHORITY,
};
use ar_core::{Run, RuntimeKind};

use crate::engine::Engine;
use crate::error::{EngineError, EngineResult};

impl Engine {
    /// The agent's lane, when it asks for one (a malformed ask is refused).
    fn lane_of(agent: &Agent) -> EngineResult<Option<ChatSubscription>> {
        ChatSubscription::from_execution_config(agent.execution_config.as_ref())
            .map_err(EngineError::invalid)
    }

    /// Checks, when a run is admitted, that the lane its agent asks for can take it.
    pub(crate) async fn check_subscription(&self, agent: &Agent, run: &Run) -> EngineResult<()> {
        let Some(lane) = Self::lane_of(agent)? else {
            return Ok(());
        };
        if let Some(problem) = self.lane_problem(agent, run) {
            return Err(EngineError::invalid(format!(
                "execution_config.authority {CHAT_SUBSCRIPTION_AUTHORITY}: {problem}"
            )));
        }
        if self
            .codex_sign_in(&run.app_id, &lane.account_id)
            .await?
            .is_none()
        {
            return Err(EngineError::invalid(no_sign_in(&run.app_id, &lane)));
        }
        Ok(())
    }

    /// The first rule of the lane the run would break.
    fn lane_problem(&self, agent: &Agent, run: &Run) -> Option<String> {
        let served = self
            .deps()
            .agent_cli
            .as_ref()
            .is_some_and(|cli| cli.serves_subscription());
        let placement = CliPlacement::from_execution_config(agent.execution_config.as_ref())
            .ok()
            .flatten()
            .unwrap_or_default();
        let workspace = crate::workspace::requested(agent, run)
            .ok()
            .flatten()
            .is_some();
        if run.runtime_kind != RuntimeKind::Codex {
            Some(format!(
                "the lane runs codex agents, not {}",
                run.runtime_kind
            ))
        } else if !served {
            Some("this runtime cannot run the lane (codex is not installed here)".into())
        } else if placement.machine.as_deref().is_some_and(|m| m != "local")
            || !placement.labels.is_empty()
        {
            Some("the lane runs on this machine; remove execution_config.placement".into())
        } else if !agent.allowed_tools.is_empty() {
            Some(format!(
                "the lane is text-only; the agent's tools would break it (allowed_tools: {})",
                agent.allowed_tools.join(", ")
            ))
        } else if !run.input.mcp_servers.is_empty() {
            Some("the lane is text-only; the run's MCP servers would break it".into())
        } else if workspace {
            Some(
                "the lane runs in an empty directory of its own; a workspace would break it".into(),
            )
        } else if run.input.model.is_some() {
            Some("the lane signs in as the app's ChatGPT account; a run model route does not apply (remove model and model_credential)".into())
        } else if agent.model.trim().is_empty() {
            Some("the agent names no model for the lane".into())
        } else {
            None
        }
    }

    /// The lane's turn of the run (`None` for agents that do not ask for it); an error
    /// naming why the turn cannot run (the sign-in is gone).
    pub(crate) async fn subscription_turn(
        &self,
        run: &Run,
        agent: &Agent,
    ) -> EngineResult<Result<Option<SubscriptionTurn>, String>> {
        let Some(lane) = Self::lane_of(agent).ok().flatten() else {
            return Ok(Ok(None));
        };
        let Some(sign_in) = self.codex_sign_in(&run.app_id, &lane.account_id).await? else {
            return Ok(Err(no_sign_in(&run.app_id, &lane)));
        };
        Ok(Ok(Some(SubscriptionTurn {
            model: agent.model.trim().to_string(),
            account_plan: sign_in.plan_type,
            auth_json: sign_in.auth_json,
        })))
    }
}

fn no_sign_in(app_id: &str, lane: &ChatSubscription) -> String {
    format!(
        "app {app_id} has no codex sign-in for ChatGPT account {}: sign in through POST /v1/runs/{{run_id}}/codex-auth/device-code/start on a codex run",
        lane.account_id
    )
}
