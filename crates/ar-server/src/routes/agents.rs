//! `/v1/agents`: list, create, get, upsert.

use crate::openapi::*;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::params::{Params, RunPath};
use crate::convert::{agent_from_wire, agent_to_wire};
use crate::error::{json, ApiError, ApiJson, ApiResult};
use crate::state::AppState;

#[utoipa::path(get, path = "/v1/agents", tag = "agents", params(AppQuery),
    responses((status = 200, description = "The app's agents", body = [ar_wire::Agent])))]
pub async fn list(State(state): State<AppState>, params: Params) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let agents = state.store.list_agents(&app_id).await?;
    let body: Vec<ar_wire::Agent> = agents.iter().map(agent_to_wire).collect();
    Ok(json(StatusCode::OK, &body))
}

/// `POST /v1/agents`. As in the original service, the app configuration does not gate agents:
/// an app it does not list (or any app, when there is none) gets its agent; such an app's runs
/// use the defaults (static target context, no approved model endpoints).
#[utoipa::path(post, path = "/v1/agents", tag = "agents", request_body = ar_wire::Agent,
    responses((status = 201, description = "The agent, created", body = ar_wire::Agent)))]
pub async fn create(
    State(state): State<AppState>,
    ApiJson(agent): ApiJson<ar_wire::Agent>,
) -> ApiResult<Response> {
    if agent.app_id.trim().is_empty() {
        return Err(ApiError::bad_request("app_id is required"));
    }
    let created = state.engine.create_agent(agent_from_wire(agent)).await?;
    Ok(json(StatusCode::CREATED, &agent_to_wire(&created)))
}

#[utoipa::path(get, path = "/v1/agents/{agent_id}", tag = "agents", params(AgentPath, AppQuery),
    responses((status = 200, description = "The agent", body = ar_wire::Agent),
              (status = 404, description = "No such agent in this app", body = ar_wire::ErrorBody)))]
pub async fn get(
    State(state): State<AppState>,
    RunPath(agent_id): RunPath,
    params: Params,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let agent = state
        .store
        .get_agent(&app_id, &agent_id)
        .await?
        .ok_or_else(|| ApiError::not_found("agent not found"))?;
    Ok(json(StatusCode::OK, &agent_to_wire(&agent)))
}

/// Upsert: the path id wins; `app_id` from the query, else from the body.
#[utoipa::path(put, path = "/v1/agents/{agent_id}", tag = "agents", params(AgentPath, OptionalAppQuery),
    request_body = ar_wire::Agent,
    responses((status = 200, description = "The agent, replaced", body = ar_wire::Agent),
              (status = 201, description = "The agent, created", body = ar_wire::Agent)))]
pub async fn upsert(
    State(state): State<AppState>,
    RunPath(agent_id): RunPath,
    params: Params,
    ApiJson(mut agent): ApiJson<ar_wire::Agent>,
) -> ApiResult<Response> {
    if let Some(app_id) = params.get("app_id") {
        agent.app_id = app_id.to_string();
    }
    if agent.app_id.trim().is_empty() {
        return Err(ApiError::bad_request("app_id is required"));
    }
    agent.id = agent_id;
    let (saved, created) = state.engine.upsert_agent(agent_from_wire(agent)).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(json(status, &agent_to_wire(&saved)))
}
