//! `agent-runtime config validate|doctor`: check the configuration offline, as `serve` would.
//!
//! Both read the environment exactly as `serve` does (so a variable this version does not
//! support yet is refused here too), with the app configuration taken from the argument when
//! one is given, else from `AGENT_RUNTIME_APP_CONFIG`.

use ar_config::app::AppConfig;
use ar_config::env::{process_env, APP_CONFIG};
use ar_config::ServiceSettings;
use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Validate the environment and an app configuration (inline JSON/YAML or @file) and print
    /// every problem.
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

/// The app configuration of `source` (else `AGENT_RUNTIME_APP_CONFIG`), after the same
/// validation of the whole environment as `serve`.
fn load(source: Option<String>) -> anyhow::Result<AppConfig> {
    let source = source
        .or_else(|| process_env(APP_CONFIG.name))
        .ok_or_else(|| {
            anyhow::anyhow!("no configuration given (argument or AGENT_RUNTIME_APP_CONFIG)")
        })?;
    let lookup = |name: &str| {
        if name == APP_CONFIG.name {
            Some(source.clone())
        } else {
            process_env(name)
        }
    };
    match ServiceSettings::from_env(lookup) {
        Ok(settings) => Ok(settings.app_config),
        Err(diagnostics) => {
            let lines: Vec<String> = diagnostics.iter().map(|d| format!("  {d}")).collect();
            anyhow::bail!("{} problem(s):\n{}", diagnostics.len(), lines.join("\n"))
        }
    }
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
