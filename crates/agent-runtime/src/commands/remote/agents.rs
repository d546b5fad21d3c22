//! `agent-runtime agents list|get|apply -f FILE`.

use std::path::PathBuf;

use ar_wire::Agent;
use serde_json::Value;

use super::{output, Exit, Failure, Outcome, Remote};

#[derive(Debug, clap::Args)]
pub struct AgentsArgs {
    #[command(subcommand)]
    action: AgentsAction,
    #[command(flatten)]
    pub remote: Remote,
}

#[derive(Debug, clap::Subcommand)]
enum AgentsAction {
    /// List the app's agents.
    List,
    /// Show one agent.
    Get { agent_id: String },
    /// Create or replace the agents of a JSON or YAML file (one agent, a list, or `agents:`);
    /// an agent with an `id` is created or replaced under it, one without one is created.
    Apply {
        /// The file (`-` for stdin).
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
    },
}

pub async fn run(args: AgentsArgs) -> Outcome {
    let client = args.remote.client()?;
    let json = args.remote.json;
    match args.action {
        AgentsAction::List => {
            let agents = client.list_agents().await?;
            if json {
                output::json(&agents)?;
            } else {
                print_list(&agents);
            }
        }
        AgentsAction::Get { agent_id } => {
            let agent = client.get_agent(&agent_id).await?;
            if json {
                output::json(&agent)?;
            } else {
                print_agent(&agent);
            }
        }
        AgentsAction::Apply { file } => {
            let mut applied = Vec::new();
            for agent in read_agents(&file)? {
                let done = if agent.id.trim().is_empty() {
                    client.create_agent(agent).await?
                } else {
                    client.upsert_agent(agent).await?
                };
                if !json {
                    println!("applied agent {} ({})", done.id, done.name);
                }
                applied.push(done);
            }
            if json {
                output::json(&applied)?;
            }
        }
    }
    Ok(Exit::Ok)
}

fn print_list(agents: &[Agent]) {
    let rows: Vec<Vec<String>> = agents
        .iter()
        .map(|agent| {
            vec![
                agent.id.clone(),
                agent.name.clone(),
                output::cell(&agent.runtime_kind),
                output::cell(&agent.model),
                output::cell(&agent.allowed_tools.join(",")),
            ]
        })
        .collect();
    output::table(&["ID", "NAME", "RUNTIME", "MODEL", "TOOLS"], &rows);
    if agents.is_empty() {
        println!("(no agents yet: agent-runtime agents apply -f agent.yaml)");
    }
}

fn print_agent(agent: &Agent) {
    output::fields(&[
        ("id", agent.id.clone()),
        ("app", agent.app_id.clone()),
        ("name", agent.name.clone()),
        ("runtime", agent.runtime_kind.clone()),
        ("provider", agent.provider.clone()),
        ("model", agent.model.clone()),
        ("approval", agent.approval_mode.clone()),
        ("tools", agent.allowed_tools.join(", ")),
        ("targets", agent.allowed_targets.join(", ")),
        ("prompt", agent.system_prompt.clone()),
        ("updated", agent.updated_at.to_rfc3339()),
    ]);
}

/// The agents of a JSON or YAML file: one agent, a list, or a mapping with `agents`.
fn read_agents(path: &std::path::Path) -> Result<Vec<Agent>, Failure> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    }
    .map_err(|error| Failure::new(Exit::Error, format!("{}: {error}", path.display())))?;
    let refuse =
        |message: String| Failure::new(Exit::Usage, format!("{}: {message}", path.display()));
    let document: Value = serde_yaml::from_str(&text).map_err(|error| refuse(error.to_string()))?;
    let items = match document {
        Value::Array(items) => items,
        Value::Object(mut map) if map.contains_key("agents") => match map.remove("agents") {
            Some(Value::Array(items)) => items,
            _ => return Err(refuse("`agents` must be a list".into())),
        },
        Value::Object(map) => vec![Value::Object(map)],
        _ => {
            return Err(refuse(
                "expected an agent, a list of agents, or `agents:`".into(),
            ))
        }
    };
    items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            agent_from(item).map_err(|message| refuse(format!("agent {}: {message}", index + 1)))
        })
        .collect()
}

/// An agent from a file's item; a key the contract does not know is refused, not dropped.
fn agent_from(item: Value) -> Result<Agent, String> {
    let Value::Object(given) = &item else {
        return Err("an agent is a mapping".into());
    };
    let agent: Agent = serde_json::from_value(item.clone()).map_err(|error| error.to_string())?;
    let known = serde_json::to_value(&agent).map_err(|error| error.to_string())?;
    let unknown: Vec<&str> = given
        .iter()
        .filter(|(key, value)| known.get(key.as_str()).is_none() && !is_empty(value))
        .map(|(key, _)| key.as_str())
        .collect();
    if !unknown.is_empty() {
        return Err(format!("unknown field(s): {}", unknown.join(", ")));
    }
    if agent.name.trim().is_empty() {
        return Err("`name` is required".into());
    }
    Ok(agent)
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(flag) => !flag,
        Value::String(text) => text.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        Value::Number(number) => number.as_f64() == Some(0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_refused_and_empty_optional_ones_are_not() {
        let ok = agent_from(
            serde_json::json!({"id": "a", "name": "A", "skills": [], "allowed_tools": ["x"]}),
        );
        assert_eq!(ok.expect("agent").allowed_tools, ["x"]);
        let typo = agent_from(serde_json::json!({"name": "A", "alowed_tools": ["x"]}));
        assert_eq!(typo.unwrap_err(), "unknown field(s): alowed_tools");
        assert!(
            agent_from(serde_json::json!({"id": "a"})).is_err(),
            "a name is required"
        );
    }
}
