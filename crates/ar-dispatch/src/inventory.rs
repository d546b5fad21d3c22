//! What a machine can run, as seed 000's inventory: its agent CLIs as source agents of one
//! execution source (the machine), each with its readiness and the evidence for it (where the
//! program is, what `--version` said, when it was probed).
//!
//! [`probe_agents`] runs each CLI's `--version` (through ar-process, bounded in time) and
//! [`machine_inventory`] builds the validated [`AgentSourceInventorySnapshot`] a node serves on
//! `GET /api/node/capabilities` and the service shows in `/v1/capabilities`.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::contracts::{
    AgentSourceInventorySnapshot, ContractError, ExecutionSource, ResourceSharing, SharingScope,
    SourceAgent, SourceAgentInventory, SourceAgentReadiness,
};

/// The contract a ready agent is checked against: it runs turns of this runtime's CLI-turn
/// protocol (`RunSpec.turn`, egress proxy, MCP bridge).
pub const CLI_TURN_CONTRACT: &str = "agent-runtime.cli-turn";
/// Its revision.
pub const CLI_TURN_CONTRACT_REVISION: &str = "1";
/// The framework name of a machine's execution source.
pub const NODE_FRAMEWORK: &str = "agent-runtime";
/// Longest a `--version` probe may take (Claude Code starts slowly on a busy machine).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// What probing one agent found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentProbe {
    /// The agent name (`codex`, `claude`, `opencode`, `command:NAME`).
    pub agent: String,
    /// The program it runs, when it has one of its own.
    pub program: Option<String>,
    /// The version line the program printed.
    pub version: Option<String>,
    /// Why it is not ready (empty when it is).
    pub problem: String,
    /// When it was probed.
    pub probed_at: DateTime<Utc>,
}

impl AgentProbe {
    /// Ready when nothing is wrong.
    pub fn ready(&self) -> bool {
        self.problem.is_empty()
    }
}

/// Probes `(agent, program)` pairs: the program found on `PATH` and its `--version` answered
/// with status 0 within [`PROBE_TIMEOUT`]. Agents without a program of their own (`command`
/// agents) are ready as configured.
pub async fn probe_agents(agents: &[(String, Option<String>)]) -> Vec<AgentProbe> {
    let probes = agents
        .iter()
        .map(|(agent, program)| probe_one(agent.clone(), program.clone()));
    futures::future::join_all(probes).await
}

async fn probe_one(agent: String, program: Option<String>) -> AgentProbe {
    let mut probe = AgentProbe {
        agent,
        program: None,
        version: None,
        problem: String::new(),
        probed_at: Utc::now(),
    };
    let Some(program) = program else {
        return probe;
    };
    let Some(path) = ar_process::find_program(&program, None) else {
        probe.problem = format!("{program} is not installed (not found on PATH)");
        return probe;
    };
    probe.program = Some(path.display().to_string());
    let spec = ar_process::ProcessSpec::new(path.display().to_string(), std::env::temp_dir())
        .args(["--version"]);
    match tokio::time::timeout(PROBE_TIMEOUT, ar_process::capture_output(&spec, 4096)).await {
        Ok(Ok((out, exit))) if exit.success() => {
            probe.version = out
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(String::from);
            if probe.version.is_none() {
                probe.problem = format!("{program} --version printed nothing");
            }
        }
        Ok(Ok((_, exit))) => probe.problem = format!("{program} --version failed: {exit}"),
        Ok(Err(error)) => probe.problem = format!("{program} --version: {error}"),
        Err(_) => {
            probe.problem = format!(
                "{program} --version did not answer within {}s",
                PROBE_TIMEOUT.as_secs()
            )
        }
    }
    probe
}

/// The machine `name` and its probed agents as a validated inventory snapshot.
pub fn machine_inventory(
    name: &str,
    instance_id: &str,
    probes: &[AgentProbe],
) -> Result<AgentSourceInventorySnapshot, ContractError> {
    let now = Utc::now();
    let source_id = format!("node:{name}");
    let execution_source = ExecutionSource {
        id: source_id.clone(),
        account_id: NODE_FRAMEWORK.to_string(),
        framework: NODE_FRAMEWORK.to_string(),
        instance_id: instance_id.to_string(),
        gateway_id: String::new(),
        display_name: name.to_string(),
        // Each turn gets a private home and its own egress proxy: credentials are per run;
        // the machine's disk and CLI installs are shared by its runs.
        resource_sharing: ResourceSharing {
            provider_credentials: SharingScope::ProfileScoped,
            filesystem: SharingScope::MachineShared,
            browser_sessions: SharingScope::Unknown,
            framework_sessions: SharingScope::ProfileScoped,
            source_memory: SharingScope::ProfileScoped,
            tool_configuration: SharingScope::MachineShared,
        },
        last_seen_at: now,
    };
    let agents = probes
        .iter()
        .map(|probe| agent_inventory(&source_id, probe, now))
        .collect();
    let snapshot = AgentSourceInventorySnapshot {
        execution_source,
        agents,
        observed_at: now,
    };
    snapshot.validate()?;
    Ok(snapshot)
}

fn agent_inventory(
    source_id: &str,
    probe: &AgentProbe,
    now: DateTime<Utc>,
) -> SourceAgentInventory {
    let mut evidence = Vec::new();
    if let Some(program) = &probe.program {
        evidence.push(format!("program: {program}"));
    }
    if let Some(version) = &probe.version {
        evidence.push(format!("version: {version}"));
    }
    if !probe.problem.is_empty() {
        evidence.push(format!("problem: {}", probe.problem));
    }
    evidence.push(format!("probed_at: {}", probe.probed_at.to_rfc3339()));
    let mut capabilities = vec!["cli_turn".to_string()];
    if probe.program.is_some() {
        capabilities.extend(["model_egress_proxy".to_string(), "mcp_bridge".to_string()]);
    }
    SourceAgentInventory {
        source_agent: SourceAgent {
            id: format!("{source_id}/{}", probe.agent),
            execution_source_id: source_id.to_string(),
            opaque_source_agent_id: probe.agent.clone(),
            display_name: probe.agent.clone(),
            last_seen_at: now,
        },
        capabilities,
        readiness: SourceAgentReadiness {
            ready: probe.ready(),
            contract_id: CLI_TURN_CONTRACT.to_string(),
            contract_revision: CLI_TURN_CONTRACT_REVISION.to_string(),
            evidence,
        },
    }
}

/// The agents of an inventory that are ready.
pub fn ready_agents(snapshot: &AgentSourceInventorySnapshot) -> Vec<String> {
    snapshot
        .agents
        .iter()
        .filter(|agent| agent.readiness.ready)
        .map(|agent| agent.source_agent.opaque_source_agent_id.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_program_is_not_ready_and_says_why() {
        let probes = probe_agents(&[
            (
                "ghost".to_string(),
                Some("no-such-cli-anywhere".to_string()),
            ),
            ("sh".to_string(), Some("sh".to_string())),
            ("command:echo".to_string(), None),
        ])
        .await;
        assert!(!probes[0].ready());
        assert!(
            probes[0].problem.contains("not installed"),
            "{:?}",
            probes[0]
        );
        assert!(probes[2].ready());
        let snapshot = machine_inventory("n1", "pid-1", &probes).unwrap();
        assert_eq!(snapshot.execution_source.id, "node:n1");
        assert_eq!(snapshot.agents.len(), 3);
        let ghost = &snapshot.agents[0];
        assert!(!ghost.readiness.ready);
        assert!(ghost
            .readiness
            .evidence
            .iter()
            .any(|e| e.starts_with("problem: ")));
        assert!(!ready_agents(&snapshot).contains(&"ghost".to_string()));
        assert!(ready_agents(&snapshot).contains(&"command:echo".to_string()));
    }
}
