//! Every environment variable declared once, and the app configuration parsed into a validated form with all diagnostics.
//!
//! Two entry points: [`env::ServiceSettings::from_env`] reads the process settings through a
//! lookup closure (so tests never touch the real environment) and [`app::AppConfig::load`] parses
//! `AGENT_RUNTIME_APP_CONFIG`. Both validate everything and return every problem at once as a
//! list of [`Diagnostic`]s instead of stopping at the first one.
//!
//! Every variable and app key declares its [`support::Support`]: a setting this version would
//! ignore is refused when set, naming the [`support::Capability`] it lacks, and the test
//! `tests/settings_have_readers.rs` checks that every supported one is read.

pub mod app;
pub mod env;
pub mod nodes;
pub mod support;
pub mod temporal_tls;

use std::fmt;

pub use app::{AppConfig, AppSettings, ComponentSummary};
pub use env::ServiceSettings;

/// One configuration problem: where it is and what is wrong.
///
/// `path` is an environment variable name (`AGENT_RUNTIME_STORE_DRIVER`) or a location inside the
/// app configuration (`apps[0].event_callbacks[1].url`). Messages never contain secret values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub path: String,
    pub message: String,
}

impl Diagnostic {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// A list of diagnostics as one error value (for callers that want `std::error::Error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} configuration problem(s):\n{}", .0.len(), render_list(.0))]
pub struct ConfigError(pub Vec<Diagnostic>);

fn render_list(diagnostics: &[Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(|d| format!("  - {d}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl From<Vec<Diagnostic>> for ConfigError {
    fn from(diagnostics: Vec<Diagnostic>) -> Self {
        ConfigError(diagnostics)
    }
}
