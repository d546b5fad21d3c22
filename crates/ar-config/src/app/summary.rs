//! Secret-free summaries of an app's configured host components, for `/v1/app-health` and `agent-runtime config validate|doctor`.

use std::fmt::Write as _;

use url::Url;

use super::{AppSettings, ModelEndpointBinding};

/// Component kinds as they appear in app health: only components the runtime uses.
pub mod kind {
    pub const TARGET_CONTEXT: &str = "target_context";
    pub const EVENT_CALLBACK: &str = "event_callback";
    pub const COMMAND_PROVIDER: &str = "command_provider";
    pub const MCP_PROVIDER: &str = "mcp_provider";
}

/// One configured host component. Never carries a token; URLs are shown without their query
/// string (which may carry credentials).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentSummary {
    pub name: String,
    pub kind: &'static str,
    pub url: Option<String>,
    pub transport: Option<String>,
    pub auth_configured: bool,
}

fn display_url(url: &Url) -> String {
    let mut shown = url.clone();
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

fn component(
    name: impl Into<String>,
    kind: &'static str,
    url: Option<&Url>,
    transport: Option<&str>,
    auth: bool,
) -> ComponentSummary {
    ComponentSummary {
        name: name.into(),
        kind,
        url: url.map(display_url),
        transport: transport.map(str::to_string),
        auth_configured: auth,
    }
}

impl AppSettings {
    /// Every configured host component of the app the runtime calls, in a stable order.
    pub fn components(&self) -> Vec<ComponentSummary> {
        let mut out = Vec::new();
        if let Some(context) = &self.context {
            out.push(component(
                "target_context",
                kind::TARGET_CONTEXT,
                Some(&context.url),
                Some("http"),
                context.token.is_some(),
            ));
        }
        for (index, callback) in self.event_callbacks.iter().enumerate() {
            out.push(component(
                format!("event_callback[{index}]"),
                kind::EVENT_CALLBACK,
                Some(&callback.url),
                Some("http"),
                callback.token.is_some(),
            ));
        }
        if let Some(provider) = &self.command_provider {
            out.push(component(
                "command_provider",
                kind::COMMAND_PROVIDER,
                Some(&provider.base_url),
                Some("http"),
                provider.token.is_some(),
            ));
        }
        for provider in &self.mcp_providers {
            out.push(component(
                provider.name.clone(),
                kind::MCP_PROVIDER,
                provider.url.as_ref(),
                Some(provider.transport.as_str()),
                provider.token.is_some(),
            ));
        }
        out
    }

    /// Approved `openai_compatible` bindings, secret-free.
    pub fn model_endpoint_bindings(&self) -> Vec<ar_core::run::ModelEndpoint> {
        self.model_endpoints
            .iter()
            .map(ModelEndpointBinding::to_run_endpoint)
            .collect()
    }

    /// The app's health/doctor summary (before probing).
    pub fn doctor_report(&self) -> DoctorReport {
        DoctorReport {
            app_id: self.app_id.clone(),
            event_protocol: self.event_protocol.as_str(),
            components: self.components(),
            model_endpoints: self.model_endpoint_bindings(),
            require_run_model_credentials: self.require_run_model_credentials,
            host_commands: self
                .command_provider
                .as_ref()
                .and_then(|p| p.commands.as_ref())
                .map(|commands| commands.iter().map(|c| c.name.clone()).collect())
                .unwrap_or_default(),
            builtin_host_commands: self
                .command_provider
                .as_ref()
                .is_some_and(|p| p.commands.is_none()),
        }
    }
}

/// What `config doctor` prints and `/v1/app-health` starts from.
#[derive(Debug, Clone, PartialEq)]
pub struct DoctorReport {
    pub app_id: String,
    pub event_protocol: &'static str,
    pub components: Vec<ComponentSummary>,
    pub model_endpoints: Vec<ar_core::run::ModelEndpoint>,
    pub require_run_model_credentials: bool,
    /// The commands the app declared (`command_provider.commands`).
    pub host_commands: Vec<String>,
    /// The command provider declares no `commands`: it offers the original's built-in catalogue.
    pub builtin_host_commands: bool,
}

impl DoctorReport {
    /// A plain-text rendering for the terminal.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail; the results are ignored on purpose.
        let _ = writeln!(
            out,
            "app {} (event protocol {})",
            self.app_id, self.event_protocol
        );
        if self.components.is_empty() {
            let _ = writeln!(
                out,
                "  no host components configured (static target context)"
            );
        }
        for c in &self.components {
            let _ = writeln!(
                out,
                "  {:<20} {:<26} transport={:<16} auth={} {}",
                c.kind,
                c.name,
                c.transport.as_deref().unwrap_or("-"),
                if c.auth_configured { "yes" } else { "no" },
                c.url.as_deref().unwrap_or(""),
            );
        }
        if self.builtin_host_commands {
            let _ = writeln!(
                out,
                "  host commands: the built-in catalogue of the original"
            );
        } else if !self.host_commands.is_empty() {
            let _ = writeln!(out, "  host commands: {}", self.host_commands.join(", "));
        }
        for endpoint in &self.model_endpoints {
            let _ = writeln!(
                out,
                "  model endpoint {} {} auth_mode={}",
                endpoint.id, endpoint.base_url, endpoint.auth_mode
            );
        }
        if self.require_run_model_credentials {
            let _ = writeln!(out, "  runs must supply model credentials");
        }
        out
    }
}
