//! `/healthz`, `/readyz`, `/v1/capabilities`, `/v1/app-health`.

use crate::openapi::*;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::params::Params;
use crate::convert::tool_to_wire;
use crate::error::{json, ApiError, ApiResult};
use crate::state::AppState;

#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "The process serves", body = ar_wire::HealthResponse)))]
pub async fn healthz() -> Response {
    json(StatusCode::OK, &serde_json::json!({"status": "ok"}))
}

/// 200 `{"status":"ready"}`, or 503 `{"status":"not_ready"}` while a required MCP provider
/// has not loaded its catalogue or the server is draining.
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses((status = 200, description = "Ready: `{\"status\":\"ready\"}`", body = ar_wire::HealthResponse),
              (status = 503, description = "Not ready: `{\"status\":\"not_ready\"}`", body = ar_wire::HealthResponse)))]
pub async fn readyz(State(state): State<AppState>) -> Response {
    let waiting = state.mcp_providers.waiting_for();
    if waiting.is_empty() && !state.draining.is_cancelled() {
        return json(StatusCode::OK, &serde_json::json!({"status": "ready"}));
    }
    tracing::debug!(?waiting, "not ready");
    json(
        StatusCode::SERVICE_UNAVAILABLE,
        &serde_json::json!({"status": "not_ready"}),
    )
}

/// Durable execution as configured (`TEMPORAL_ADDRESS`): where Temporal is, or off.
fn durable_info(engine: &ar_engine::Engine) -> ar_wire::DurableInfo {
    match engine.durable_endpoint() {
        Some((temporal_address, namespace)) => ar_wire::DurableInfo {
            enabled: true,
            temporal_address,
            namespace,
        },
        None => ar_wire::DurableInfo::default(),
    }
}

fn static_summary(state: &AppState, app_id: &str) -> ar_wire::AppSummary {
    let Some(app) = state.apps.apps.get(app_id) else {
        return ar_wire::AppSummary {
            app_id: app_id.to_string(),
            ..Default::default()
        };
    };
    let components = app
        .components()
        .into_iter()
        .map(|component| ar_wire::AppComponent {
            name: component.name,
            kind: component.kind.to_string(),
            configured: true,
            url: component.url.unwrap_or_default(),
            transport: component.transport.unwrap_or_default(),
            auth_configured: component.auth_configured,
            ..Default::default()
        })
        .collect();
    ar_wire::AppSummary {
        app_id: app_id.to_string(),
        require_run_model_credentials: app.require_run_model_credentials,
        model_endpoints: app
            .model_endpoint_bindings()
            .into_iter()
            .map(|endpoint| ar_wire::ModelEndpoint {
                id: endpoint.id,
                base_url: endpoint.base_url,
                auth_mode: endpoint.auth_mode,
            })
            .collect(),
        components,
    }
}

#[utoipa::path(get, path = "/v1/capabilities", tag = "meta", params(OptionalAppQuery),
    responses((status = 200, description = "What this runtime offers", body = ar_wire::Capabilities)))]
pub async fn capabilities(State(state): State<AppState>, params: Params) -> ApiResult<Response> {
    let app_filter = params.get("app_id").map(str::to_string);
    let apps: Vec<ar_wire::AppSummary> = match &app_filter {
        Some(app_id) => vec![static_summary(&state, app_id)],
        None => state
            .apps
            .apps
            .keys()
            .map(|app_id| static_summary(&state, app_id))
            .collect(),
    };
    let catalog_app = app_filter.clone().unwrap_or_default();
    let tools = state
        .engine
        .catalog(&catalog_app)
        .iter()
        .map(|tool| tool_to_wire(tool, true))
        .collect();
    let facts = &state.facts;
    let nodes = fleet_nodes(&state);
    let body = ar_wire::Capabilities {
        runtime_kinds: runtime_kinds(&facts.runtime_kinds, &nodes),
        providers: facts.providers.clone(),
        store: ar_wire::StoreInfo {
            driver: facts.store_driver.clone(),
            in_memory: facts.store_in_memory,
        },
        durable: durable_info(&state.engine),
        skills: built_in_skills(),
        apps,
        service_auth_enabled: state.service_token.is_some(),
        tools,
        run_mcp: run_mcp_capability(&state.engine),
        nodes,
    };
    Ok(json(StatusCode::OK, &body))
}

/// The fleet's nodes as the cluster router sees them now (none without a fleet).
fn fleet_nodes(state: &AppState) -> Vec<ar_wire::NodeInfo> {
    let Some(fleet) = &state.fleet else {
        return Vec::new();
    };
    fleet
        .nodes()
        .into_iter()
        .map(|node| {
            let inventory = node
                .inventory()
                .and_then(|snapshot| serde_json::to_value(snapshot).ok());
            ar_wire::NodeInfo {
                name: node.name,
                url: node.url,
                labels: node.labels,
                ready: node.health.ready,
                error: node.health.error,
                checked_at: node
                    .health
                    .checked_at
                    .map(|at| at.to_rfc3339())
                    .unwrap_or_default(),
                active_runs: node.active_runs as i64,
                max_concurrent_runs: node.max_concurrent_runs as i64,
                agents: node.health.agents,
                inventory,
            }
        })
        .collect()
}

/// The runtime kinds this service runs: its own, and the CLIs ready on a node.
fn runtime_kinds(local: &[String], nodes: &[ar_wire::NodeInfo]) -> Vec<String> {
    let mut kinds = local.to_vec();
    for node in nodes.iter().filter(|node| node.ready) {
        for agent in &node.agents {
            let kind = match agent.as_str() {
                "codex" => ar_core::RuntimeKind::Codex,
                "claude" => ar_core::RuntimeKind::ClaudeCode,
                "opencode" => ar_core::RuntimeKind::OpenCode,
                _ => continue,
            };
            if !kinds.iter().any(|k| k == kind.as_str()) {
                kinds.push(kind.as_str().to_string());
            }
        }
    }
    kinds
}

/// One app-health component per node: `ok` when it answers and takes runs.
fn node_components(state: &AppState) -> Vec<ar_wire::AppComponent> {
    fleet_nodes(state)
        .into_iter()
        .map(|node| ar_wire::AppComponent {
            name: node.name,
            kind: "node".into(),
            configured: true,
            url: node.url,
            transport: "http".into(),
            auth_configured: true,
            status: if node.ready {
                "ok".into()
            } else if node.checked_at.is_empty() {
                "unknown".into()
            } else if node.error.contains("could not be reached") || node.error.contains("in time")
            {
                "unreachable".into()
            } else {
                "error".into()
            },
            error: node.error,
            ..Default::default()
        })
        .collect()
}

/// Run MCP as this runtime offers it: the limits and destination settings in force.
fn run_mcp_capability(engine: &ar_engine::Engine) -> ar_wire::RunMCPCapability {
    let mut capability = ar_wire::RunMCPCapability {
        supported: engine.run_mcp_supported(),
        transports: vec!["streamable_http".to_string()],
        credential_encryption_configured: engine.run_mcp_supported(),
        ..ar_wire::RunMCPCapability::default()
    };
    if capability.supported {
        let settings = &engine.config().mcp;
        capability.max_servers_per_run = ar_core::mcp::MAX_SERVERS_PER_RUN as i64;
        capability.max_tools_per_server = ar_core::mcp::MAX_TOOLS_PER_SERVER as i64;
        capability.allow_http = settings.allow_http;
        capability.allow_private_networks = settings.allow_private_networks;
        capability.allowed_hosts = settings.allowed_hosts.clone();
    }
    capability
}

fn provider_health(
    component: &mut ar_wire::AppComponent,
    health: &ar_tools::mcp_providers::ProviderHealth,
) {
    component.status = health.status.as_str().to_string();
    component.error = health.error.clone();
    component.tool_count = health.tool_count as i64;
}

/// Probes one component URL: any HTTP answer below 500 counts as reachable.
async fn probe(state: &AppState, component: &mut ar_wire::AppComponent) {
    if component.url.is_empty() {
        component.status = if component.configured {
            "ok".into()
        } else {
            "not_configured".into()
        };
        return;
    }
    match state
        .http
        .get(&component.url)
        .timeout(Duration::from_secs(3))
        .send()
        .await
    {
        Ok(response) => {
            let status = response.status().as_u16();
            component.http_status = i64::from(status);
            component.status = if status < 500 {
                "ok".into()
            } else {
                "error".into()
            };
            if status >= 500 {
                component.error = format!("component answered {status}");
            }
        }
        Err(error) => {
            component.status = "unreachable".into();
            component.error = if error.is_timeout() {
                "timed out".into()
            } else {
                "connection failed".into()
            };
        }
    }
}

#[utoipa::path(get, path = "/v1/app-health", tag = "meta", params(AppQuery),
    responses((status = 200, description = "The app's components and their health", body = ar_wire::AppSummary)))]
pub async fn app_health(State(state): State<AppState>, params: Params) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    if !state.apps.apps.contains_key(&app_id) && !state.apps.apps.is_empty() {
        return Err(ApiError::bad_request(format!(
            "app {app_id} is not configured"
        )));
    }
    let mut summary = static_summary(&state, &app_id);
    let mut probes = Vec::new();
    let mut providers = state.mcp_providers.health(&app_id).into_iter();
    for mut component in summary.components.drain(..) {
        if component.kind == ar_config::app::summary_kind::MCP_PROVIDER {
            // Providers report what their catalogue refreshes found; probing the URL would
            // say less (and a stdio provider has none).
            if let Some(health) = providers.next() {
                provider_health(&mut component, &health);
            }
            probes.push(futures::future::Either::Left(std::future::ready(component)));
            continue;
        }
        let state = state.clone();
        probes.push(futures::future::Either::Right(async move {
            let mut component = component;
            probe(&state, &mut component).await;
            component
        }));
    }
    summary.components = futures::future::join_all(probes).await;
    summary.components.extend(node_components(&state));
    let store_ok = state.store.ping().await;
    summary.components.push(ar_wire::AppComponent {
        name: "store".into(),
        kind: "store".into(),
        configured: true,
        transport: state.facts.store_driver.clone(),
        status: if store_ok.is_ok() {
            "ok".into()
        } else {
            "error".into()
        },
        error: store_ok
            .err()
            .map(|_| "store ping failed".to_string())
            .unwrap_or_default(),
        ..Default::default()
    });
    Ok(json(StatusCode::OK, &summary))
}

#[utoipa::path(get, path = "/metrics", tag = "meta",
    responses((status = 200, description = "Prometheus metrics (OpenMetrics text): runs by status, run, step, model call, tool call and store commit latencies, tokens by provider, SSE streams open, outbox lag",
               content_type = "application/openmetrics-text", body = String)))]
pub async fn metrics(State(state): State<AppState>) -> Response {
    let appended = *state.bus.appended_signal().borrow();
    let text = state.metrics.render(state.store.as_ref(), appended).await;
    (
        StatusCode::OK,
        [(
            axum::http::header::CONTENT_TYPE,
            crate::metrics::CONTENT_TYPE,
        )],
        text,
    )
        .into_response()
}

/// The built-in skills, as `Capabilities.skills` lists them.
fn built_in_skills() -> Vec<ar_wire::SkillInfo> {
    ar_skills::Catalog::built_in()
        .skills()
        .iter()
        .map(|skill| ar_wire::SkillInfo {
            key: skill.key.clone(),
            title: skill.title.clone(),
            description: skill.description.clone(),
        })
        .collect()
}
