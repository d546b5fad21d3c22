//! The `agent-runtime` binary: parses the command line, sets up logging and signals, and hands
//! off to the library crates. Nothing here is worth testing on its own.

mod commands;
mod telemetry;

/// mimalloc: the service allocates many short-lived strings and JSON values per step; glibc's
/// malloc spent ~16% of the server's CPU in the 5-step benchmark.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};

/// Agent Runtime: runs AI agents for host applications.
#[derive(Debug, Parser)]
#[command(name = "agent-runtime", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the HTTP API, its embedded studio (/api/...) and the console at /studio
    /// (configuration from AGENT_RUNTIME_* environment variables).
    Serve(commands::serve::ServeArgs),
    /// Check configuration.
    Config {
        #[command(subcommand)]
        action: commands::config::ConfigAction,
    },
    /// Run benchmarks and print their figures.
    Bench(commands::bench::BenchArgs),
    /// Serve a standalone studio: the runtime link, the people API and the console at /studio.
    Studio(commands::studio::StudioArgs),
    /// Execute durable runs from Temporal's task queues (TEMPORAL_ADDRESS; same settings and
    /// store as `serve`).
    Worker(commands::worker::WorkerArgs),
    /// Serve this machine's agent CLIs to other machines (node API, bearer token from
    /// AGENT_RUNTIME_NODE_TOKEN).
    Node(commands::node::NodeArgs),
    /// Dispatch one agent run (here or on a node) and show its events live.
    Exec(commands::exec::ExecArgs),
    /// Serve one run's tools as a stdio MCP server through the service's run tool gateway
    /// (AGENT_RUNTIME_API_BASE_URL, AGENT_RUNTIME_APP_ID, AGENT_RUNTIME_RUN_ID,
    /// AGENT_RUNTIME_SERVICE_TOKEN).
    McpBridge,
    /// The app's agents on a running service: list, get, apply -f FILE.
    Agents(commands::remote::AgentsArgs),
    /// The app's runs on a running service: list, get, start, watch, approve, reply, cancel,
    /// pause, events (exit codes: see the README, "The CLI").
    Runs(commands::remote::RunsArgs),
}

/// `AGENT_RUNTIME_LOG`, else `info`. A filter that does not parse is said, not ignored.
fn log_filter() -> tracing_subscriber::EnvFilter {
    let name = ar_config::env::LOG.name;
    let Some(filter) = std::env::var(name).ok().filter(|f| !f.trim().is_empty()) else {
        return "info".into();
    };
    tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|error| {
        eprintln!("warning: {name}: {error}; logging at info");
        "info".into()
    })
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // Logs on stderr; traces over OTLP when configured (flushed when this guard drops).
    let _telemetry = telemetry::init(log_filter());
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if matches!(cli.command, Command::Serve(_) | Command::Worker(_)) {
        match ar_config::env::worker_threads(|name| std::env::var(name).ok()) {
            Ok(threads) => {
                builder.worker_threads(threads);
            }
            Err(message) => {
                eprintln!("error: {message}");
                return std::process::ExitCode::FAILURE;
            }
        }
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: could not start the async runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let done = match cli.command {
            Command::Serve(args) => commands::serve::run(args).await,
            Command::Config { action } => commands::config::run(action),
            Command::Bench(args) => commands::bench::run(args).await,
            Command::Studio(args) => commands::studio::run(args).await,
            Command::Node(args) => commands::node::run(args).await,
            Command::Worker(args) => commands::worker::run(args).await,
            Command::Exec(args) => commands::exec::run(args).await,
            Command::McpBridge => commands::mcp_bridge::run().await,
            // The client commands say what went wrong themselves and exit with its code.
            Command::Agents(args) => return Ok(commands::remote::agents(args).await),
            Command::Runs(args) => return Ok(commands::remote::runs(args).await),
        };
        done.map(|()| std::process::ExitCode::SUCCESS)
    });
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
