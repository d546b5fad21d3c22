//! The bridge's settings, read from its environment: which service, app and run it serves, the
//! bearer token it sends, and how long one gateway request may take.

use std::time::Duration;

use ar_config::env::{
    EnvVar, API_BASE_URL, APP_ID, MCP_BRIDGE_HTTP_TIMEOUT_SECONDS, RUN_ID, SERVICE_TOKEN,
};
use ar_core::secret::Secret;
use reqwest::Url;

/// A setting the bridge cannot start without, or one whose value it cannot use.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{name} is required: {purpose}")]
    Missing {
        name: &'static str,
        purpose: &'static str,
    },
    #[error("{name}: {value:?} is not an http(s) URL")]
    BadUrl { name: &'static str, value: String },
    #[error("{name}: {value:?} is not a positive whole number of seconds")]
    BadTimeout { name: &'static str, value: String },
}

/// Everything the bridge needs to reach one run's tool gateway.
#[derive(Debug, Clone)]
pub struct BridgeSettings {
    /// The service's base URL (the gateway is below `/v1/runs/...`).
    pub base_url: Url,
    pub app_id: String,
    pub run_id: String,
    /// Sent as `Authorization: Bearer …` when set; `Secret` keeps it out of `Debug`.
    pub token: Option<Secret>,
    /// Bound of one gateway request; a tool call may run long, hence the generous default.
    pub timeout: Duration,
}

impl BridgeSettings {
    /// Reads the settings through `lookup` (the process environment in production).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, SettingsError> {
        let value = |var: &EnvVar| lookup(var.name).map(|v| v.trim().to_owned());
        let required = |var: &EnvVar, purpose| {
            value(var)
                .filter(|v| !v.is_empty())
                .ok_or(SettingsError::Missing {
                    name: var.name,
                    purpose,
                })
        };
        let base = required(&API_BASE_URL, "the base URL of the agent runtime service")?;
        let base_url = Url::parse(&base)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
            .ok_or(SettingsError::BadUrl {
                name: API_BASE_URL.name,
                value: base,
            })?;
        let app_id = required(&APP_ID, "the app of the run whose tools are served")?;
        let run_id = required(&RUN_ID, "the run whose tools are served")?;
        let token = value(&SERVICE_TOKEN)
            .filter(|v| !v.is_empty())
            .map(Secret::new);
        let timeout = match value(&MCP_BRIDGE_HTTP_TIMEOUT_SECONDS).filter(|v| !v.is_empty()) {
            None => Duration::from_secs(300),
            Some(text) => match text.parse::<u64>() {
                Ok(seconds) if seconds > 0 => Duration::from_secs(seconds),
                _ => {
                    return Err(SettingsError::BadTimeout {
                        name: MCP_BRIDGE_HTTP_TIMEOUT_SECONDS.name,
                        value: text,
                    })
                }
            },
        };
        Ok(BridgeSettings {
            base_url,
            app_id,
            run_id,
            token,
            timeout,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Result<BridgeSettings, SettingsError> {
        let env: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        BridgeSettings::from_lookup(|name| env.get(name).cloned())
    }

    const BASE: [(&str, &str); 3] = [
        ("AGENT_RUNTIME_API_BASE_URL", "http://127.0.0.1:8090"),
        ("AGENT_RUNTIME_APP_ID", "app"),
        ("AGENT_RUNTIME_RUN_ID", "run_1"),
    ];

    #[test]
    fn the_required_variables_are_named_when_missing() {
        for (missing, (name, _)) in BASE.iter().enumerate() {
            let pairs: Vec<_> = BASE
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != missing)
                .map(|(_, pair)| *pair)
                .collect();
            let error = read(&pairs).unwrap_err().to_string();
            assert!(error.starts_with(name), "{error}");
        }
    }

    #[test]
    fn defaults_and_the_token() {
        let settings = read(&BASE).unwrap();
        assert_eq!(settings.timeout, Duration::from_secs(300));
        assert!(settings.token.is_none());
        let mut pairs = BASE.to_vec();
        pairs.push(("AGENT_RUNTIME_SERVICE_TOKEN", " tok-secret "));
        pairs.push(("AGENT_RUNTIME_MCP_BRIDGE_HTTP_TIMEOUT_SECONDS", "7"));
        let settings = read(&pairs).unwrap();
        assert_eq!(settings.timeout, Duration::from_secs(7));
        assert_eq!(settings.token.as_ref().unwrap().expose(), "tok-secret");
        assert!(!format!("{settings:?}").contains("tok-secret"));
    }

    #[test]
    fn unusable_values_are_refused() {
        let mut pairs = BASE.to_vec();
        pairs[0] = ("AGENT_RUNTIME_API_BASE_URL", "not a url");
        assert!(matches!(read(&pairs), Err(SettingsError::BadUrl { .. })));
        let mut pairs = BASE.to_vec();
        pairs.push(("AGENT_RUNTIME_MCP_BRIDGE_HTTP_TIMEOUT_SECONDS", "0"));
        assert!(matches!(
            read(&pairs),
            Err(SettingsError::BadTimeout { .. })
        ));
    }
}
