//! `agent-runtime config validate|doctor`: check the app configuration offline.

use ar_config::app::AppConfig;
use ar_config::env::process_env;
use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Validate an app configuration (inline JSON/YAML or @file) and print every problem.
    Validate {
        /// The configuration, or `@path`; defaults to AGENT_RUNTIME_APP_CONFIG.
        source: Option<String>,
    },
    /// Show what one app configures (components, endpoints, auth presence).
    Doctor {
        /// The configuration, or `@path`.
        source: String,
        /// The app to describe.
        app_id: String,
    },
}

fn load(source: Option<String>) -> anyhow::Result<AppConfig> {
    let source = source
        .or_else(|| process_env("AGENT_RUNTIME_APP_CONFIG"))
        .ok_or_else(|| {
            anyhow::anyhow!("no configuration given (argument or AGENT_RUNTIME_APP_CONFIG)")
        })?;
    AppConfig::load(&source, &process_env).map_err(|diagnostics| {
        let lines: Vec<String> = diagnostics.iter().map(|d| format!("  {d}")).collect();
        anyhow::anyhow!("{} problem(s):\n{}", diagnostics.len(), lines.join("\n"))
    })
}

pub fn run(action: ConfigAction) -> anyhow::Result<()> {
    match action {
        ConfigAction::Validate { source } => {
            let config = load(source)?;
            println!("ok: {} app(s)", config.apps.len());
            Ok(())
        }
        ConfigAction::Doctor { source, app_id } => {
            let config = load(Some(source))?;
            let app = config
                .apps
                .get(&app_id)
                .ok_or_else(|| anyhow::anyhow!("app {app_id} is not configured"))?;
            print!("{}", app.doctor_report().render());
            Ok(())
        }
    }
}
