//! Which declared settings this version honours, and the refusal of those it does not yet.
//!
//! Every environment variable and app-configuration key states its [`Support`]. A setting this
//! version would silently ignore is refused when it is set, with a [`Diagnostic`] naming the
//! setting and the missing [`Capability`], so `serve` and `config validate` stop instead of
//! starting without it. An unset setting is never a problem.

use crate::Diagnostic;

/// A capability the original service has and this version does not have yet. Each later issue
/// turns one on by reading its settings and dropping them from the refusals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// Browser tools and their artifact uploads.
    Browser,
    /// A deterministic stand-in model when no model is configured. Refused by design, not for
    /// lack of time: see [`Capability::reason`].
    DeterministicModel,
    /// TLS to Temporal without verifying the server's certificate. Refused by design: see
    /// [`Capability::reason`].
    UnverifiedTls,
}

impl Capability {
    /// What is missing, as a phrase ("this version does not support … yet").
    pub fn describe(self) -> &'static str {
        match self {
            Capability::Browser => "browser tools",
            Capability::DeterministicModel => "a deterministic stand-in model",
            Capability::UnverifiedTls => "TLS without verifying the server's certificate",
        }
    }

    /// Whether the capability is left out on purpose rather than for lack of time.
    pub fn by_design(self) -> bool {
        matches!(
            self,
            Capability::DeterministicModel | Capability::UnverifiedTls
        )
    }

    /// Why a setting asking for the capability is refused.
    pub fn reason(self) -> String {
        match self {
            // The original answers with a made-up reply when no provider is configured; a
            // host would take it for the agent's work and never see the missing provider.
            Capability::DeterministicModel => "this runtime never answers with a stand-in model \
                 in place of a missing provider (a made-up reply would hide it); configure a \
                 provider, or point one at a stand-in server for tests; to try the runtime \
                 without a key, `agent-runtime serve --demo` serves a demo model labelled as one"
                .to_string(),
            // Anyone on the path could pose as Temporal and read every run's data; the
            // settings that make verification pass are the fix.
            Capability::UnverifiedTls => "this runtime never turns off verification of \
                 Temporal's server certificate (anyone on the path could pose as Temporal); \
                 trust its CA with TEMPORAL_TLS_CA_PATH (or TEMPORAL_TLS_CA_DATA) and set \
                 TEMPORAL_TLS_SERVER_NAME to the name its certificate is issued for"
                .to_string(),
            other => format!("this version does not support {} yet", other.describe()),
        }
    }

    /// The refusal of a setting at `path` (a variable name or an app-config location).
    pub fn refusal(self, path: impl Into<String>) -> Diagnostic {
        Diagnostic::new(path, format!("{}; remove this setting", self.reason()))
    }

    /// The refusal of one value of a setting whose other values work.
    pub fn value_refusal(self, path: impl Into<String>, value: &str) -> Diagnostic {
        Diagnostic::new(path, format!("{value:?}: {}", self.reason()))
    }
}

/// Whether this version honours a declared setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Read by working code (the test `settings_have_readers` records where).
    Supported,
    /// Supported, except for these values, which are refused (a CSV setting is checked item by
    /// item; values compare case-insensitively).
    ExceptValues(&'static [(&'static str, Capability)]),
    /// Refused whenever set. An on/off variable whose default is off may still be set to off:
    /// off is what this version does.
    NotYet(Capability),
}

impl Support {
    /// The capability a value of the setting asks for and this version lacks, if any.
    pub fn refused_value(self, value: &str) -> Option<Capability> {
        match self {
            Support::ExceptValues(values) => values
                .iter()
                .find(|(refused, _)| refused.eq_ignore_ascii_case(value.trim()))
                .map(|(_, capability)| *capability),
            Support::Supported | Support::NotYet(_) => None,
        }
    }
}
