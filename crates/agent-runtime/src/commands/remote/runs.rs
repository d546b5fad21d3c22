//! `agent-runtime runs list|get|start|watch|approve|reply|cancel|pause|events`.

use std::path::PathBuf;

use ar_client::{Client, RunSearch};
use ar_wire::{AgentRun, ModelCredential, ResumeRunRequest, RunModel, StartRunRequest, TargetRef};

use super::timeline::{self, WatchOptions};
use super::{output, Exit, Failure, Outcome, Remote};

#[derive(Debug, clap::Args)]
pub struct RunsArgs {
    #[command(subcommand)]
    action: RunsAction,
    #[command(flatten)]
    pub remote: Remote,
}

#[derive(Debug, clap::Subcommand)]
enum RunsAction {
    /// List the app's runs, newest first (a page of the search).
    List {
        /// Only runs in this status (queued, running, paused, completed, failed, cancelled).
        #[arg(long)]
        status: Option<String>,
        /// Free text to look for.
        #[arg(long, short = 'q')]
        query: Option<String>,
        #[arg(long, default_value_t = 25)]
        limit: u32,
        #[arg(long, default_value_t = 0)]
        offset: u32,
    },
    /// Show one run.
    Get { run_id: String },
    /// Start a run of an agent.
    Start(StartArgs),
    /// Follow a run live: streamed text, tool calls with durations, pauses and what they ask,
    /// usage; exits with the run's outcome.
    Watch {
        run_id: String,
        #[command(flatten)]
        options: WatchArgs,
    },
    /// Approve the run's pending approval.
    Approve {
        run_id: String,
        /// Who approves (the host's user id).
        #[arg(long)]
        actor: Option<String>,
    },
    /// Answer a paused run: a reply to its question, or (paused for an approval) the changes
    /// asked for instead of approving.
    Reply {
        run_id: String,
        message: String,
        #[arg(long)]
        actor: Option<String>,
    },
    /// Cancel the run.
    Cancel { run_id: String },
    /// Pause the run at its next checkpoint.
    Pause { run_id: String },
    /// Print the run's persisted events (a timeline, or JSON lines with --json).
    Events {
        run_id: String,
        /// Only the events after this sequence number.
        #[arg(long, default_value_t = 0)]
        after: i64,
    },
}

#[derive(Debug, clap::Args)]
struct WatchArgs {
    /// Stop (exit code 9) when the run pauses instead of waiting for someone to answer.
    #[arg(long)]
    exit_on_pause: bool,
}

#[derive(Debug, clap::Args)]
struct StartArgs {
    /// A start-run request (JSON or YAML) the flags below complete or override.
    #[arg(short = 'f', long = "file")]
    file: Option<PathBuf>,
    /// The agent to run.
    #[arg(long)]
    agent: Option<String>,
    /// What the run is about, as TYPE:ID (default: `cli:<agent>`).
    #[arg(long)]
    target: Option<String>,
    /// What to do.
    #[arg(long, short = 'i')]
    instructions: Option<String>,
    /// The model as PROVIDER:MODEL (for example openai_compatible:my-model).
    #[arg(long)]
    model: Option<String>,
    /// One of the app's approved model endpoints (its id; base URL and auth mode are read from
    /// the app's health).
    #[arg(long)]
    endpoint: Option<String>,
    /// The environment variable holding the run's API key (never a key on the command line).
    #[arg(long)]
    api_key_env: Option<String>,
    /// The host's id of this run (starting again with it returns the same run).
    #[arg(long)]
    host_run_id: Option<String>,
    /// Follow the run after starting it, as `runs watch` does.
    #[arg(long)]
    watch: bool,
    #[command(flatten)]
    options: WatchArgs,
}

pub async fn run(args: RunsArgs) -> Outcome {
    let client = args.remote.client()?;
    let json = args.remote.json;
    match args.action {
        RunsAction::List {
            status,
            query,
            limit,
            offset,
        } => {
            let search = RunSearch {
                query: query.unwrap_or_default(),
                status: status.unwrap_or_default(),
                limit,
                offset,
            };
            let page = client.search_runs(&search).await?;
            if json {
                output::json(&page)?;
            } else {
                print_list(&page);
            }
            Ok(Exit::Ok)
        }
        RunsAction::Get { run_id } => show(json, &client.get_run(&run_id).await?),
        RunsAction::Start(start) => start_run(&client, json, start).await,
        RunsAction::Watch { run_id, options } => {
            timeline::watch(&client, &run_id, watch_options(json, &options)).await
        }
        RunsAction::Approve { run_id, actor } => {
            show(json, &client.approve_run(&run_id, actor.as_deref()).await?)
        }
        RunsAction::Reply {
            run_id,
            message,
            actor,
        } => reply(&client, json, &run_id, message, actor).await,
        RunsAction::Cancel { run_id } => show(json, &client.cancel_run(&run_id).await?),
        RunsAction::Pause { run_id } => show(json, &client.pause_run(&run_id).await?),
        RunsAction::Events { run_id, after } => {
            let events = client.list_run_events(&run_id).await?;
            timeline::print_history(json, events.into_iter().filter(|e| e.sequence_no > after))
        }
    }
}

fn watch_options(json: bool, args: &WatchArgs) -> WatchOptions {
    WatchOptions {
        json,
        exit_on_pause: args.exit_on_pause,
    }
}

/// The run, for people or as JSON.
fn show(json: bool, run: &AgentRun) -> Outcome {
    if json {
        output::json(run)?;
        return Ok(Exit::Ok);
    }
    let target = format!("{}:{}", run.target.target_type, run.target.id);
    output::fields(&[
        ("run", run.id.clone()),
        ("agent", run.agent_id.clone()),
        ("target", target),
        ("status", run.status.clone()),
        ("paused for", paused_for(run)),
        ("approval", run.approval_state.clone()),
        ("error", run.error_message.clone()),
        ("created", run.created_at.to_rfc3339()),
        (
            "completed",
            run.completed_at
                .map(|at| at.to_rfc3339())
                .unwrap_or_default(),
        ),
    ]);
    Ok(Exit::Ok)
}

fn paused_for(run: &AgentRun) -> String {
    if run.status == "paused" {
        run.pause_reason.clone()
    } else {
        String::new()
    }
}

fn print_list(page: &ar_wire::RunPage) {
    let rows: Vec<Vec<String>> = page
        .items
        .iter()
        .map(|run| {
            vec![
                run.id.clone(),
                run.status.clone(),
                output::cell(&paused_for(run)),
                run.agent_id.clone(),
                format!("{}:{}", run.target.target_type, run.target.id),
                run.created_at.format("%Y-%m-%d %H:%M:%S").to_string(),
            ]
        })
        .collect();
    output::table(
        &["ID", "STATUS", "PAUSED FOR", "AGENT", "TARGET", "CREATED"],
        &rows,
    );
    let shown = page.items.len() as i64;
    println!("{shown} of {} (offset {})", page.total, page.offset);
}

/// A reply to a question, or the changes asked for when the run waits for an approval.
async fn reply(
    client: &Client,
    json: bool,
    run_id: &str,
    message: String,
    actor: Option<String>,
) -> Outcome {
    let run = client.get_run(run_id).await?;
    let resumed = if run.status == "paused" && run.pause_reason == "human_approval" {
        client
            .request_changes(run_id, &message, actor.as_deref())
            .await?
    } else {
        let request = ResumeRunRequest {
            intent: ar_wire::runs::resume_intent::REPLY.into(),
            content: message,
            external_actor_id: actor.unwrap_or_default(),
            ..Default::default()
        };
        client.resume_run(run_id, &request).await?
    };
    show(json, &resumed)
}

async fn start_run(client: &Client, json: bool, args: StartArgs) -> Outcome {
    let request = start_request(client, &args).await?;
    let run = client.start_run(request).await?;
    if !args.watch {
        return show(json, &run);
    }
    if !json {
        println!("started run {} of agent {}", run.id, run.agent_id);
    }
    timeline::watch(client, &run.id, watch_options(json, &args.options)).await
}

/// The request of `-f FILE` with the flags applied.
async fn start_request(client: &Client, args: &StartArgs) -> Result<StartRunRequest, Failure> {
    let usage = |message: String| Failure::new(Exit::Usage, message);
    let mut request: StartRunRequest = match &args.file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|error| {
                Failure::new(Exit::Error, format!("{}: {error}", path.display()))
            })?;
            let value: serde_json::Value = serde_yaml::from_str(&text)
                .map_err(|error| usage(format!("{}: {error}", path.display())))?;
            serde_json::from_value::<StartRunRequest>(value)
                .map_err(|error| usage(format!("{}: {error}", path.display())))?
        }
        None => StartRunRequest::default(),
    };
    if let Some(agent) = &args.agent {
        request.agent_id = agent.clone();
    }
    if request.agent_id.trim().is_empty() {
        return Err(usage(
            "no agent: give --agent or `agent_id` in the file".into(),
        ));
    }
    if let Some(target) = &args.target {
        let (kind, id) = target
            .split_once(':')
            .filter(|(kind, id)| !kind.is_empty() && !id.is_empty())
            .ok_or_else(|| usage(format!("--target {target:?} is not TYPE:ID")))?;
        request.target = TargetRef::new(kind, id);
    } else if request.target.id.is_empty() {
        request.target = TargetRef::new("cli", request.agent_id.clone());
    }
    if let Some(instructions) = &args.instructions {
        request.instructions = instructions.clone();
    }
    if let Some(host_run_id) = &args.host_run_id {
        request.host_run_id = host_run_id.clone();
    }
    apply_model(client, args, &mut request).await?;
    Ok(request)
}

/// `--model`, `--endpoint` (read from the app's approved endpoints) and `--api-key-env`.
async fn apply_model(
    client: &Client,
    args: &StartArgs,
    request: &mut StartRunRequest,
) -> Result<(), Failure> {
    let usage = |message: String| Failure::new(Exit::Usage, message);
    if let Some(model) = &args.model {
        let (provider, name) = model
            .split_once(':')
            .filter(|(provider, name)| !provider.is_empty() && !name.is_empty())
            .ok_or_else(|| usage(format!("--model {model:?} is not PROVIDER:MODEL")))?;
        request.model = Some(RunModel {
            provider: provider.into(),
            model: name.into(),
            ..Default::default()
        });
    }
    if let Some(endpoint_id) = &args.endpoint {
        let Some(model) = request.model.as_mut() else {
            return Err(usage("--endpoint needs --model".into()));
        };
        let app = client.get_app_health().await?;
        let endpoint = app
            .model_endpoints
            .into_iter()
            .find(|endpoint| &endpoint.id == endpoint_id)
            .ok_or_else(|| {
                usage(format!(
                    "app {} has no model endpoint {endpoint_id:?}",
                    app.app_id
                ))
            })?;
        if endpoint.auth_mode == "none" && args.api_key_env.is_none() {
            request.model_credential = Some(ModelCredential {
                credential_type: "none".into(),
                ..Default::default()
            });
        }
        model.endpoint = Some(endpoint);
    }
    if let Some(name) = &args.api_key_env {
        let key = std::env::var(name)
            .ok()
            .filter(|key| !key.trim().is_empty())
            .ok_or_else(|| usage(format!("--api-key-env: {name} is not set")))?;
        request.model_credential = Some(ModelCredential {
            credential_type: "api_key".into(),
            api_key: key,
            ..Default::default()
        });
    }
    Ok(())
}
