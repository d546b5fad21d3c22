//! Run records: messages, artifacts, interactions, tool calls, and the run tool gateway.
//!
//! As in the original, a list of an unknown run's records is an empty list: the store is asked
//! by app and run, so another app's run has none either.

use crate::openapi::*;
use ar_engine::NewArtifact;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::params::{Params, RunPath};
use crate::convert::{
    artifact_to_wire, interaction_to_wire, message_to_wire, tool_call_to_wire, tool_to_wire,
};
use crate::error::{json, ApiError, ApiJson, ApiResult};
use crate::state::AppState;

/// The run tool gateway names an unknown run as the original does.
fn gateway_error(error: ar_engine::EngineError) -> ApiError {
    match error {
        ar_engine::EngineError::NotFound(message)
            if message == ar_wire::error::messages::RUN_NOT_FOUND =>
        {
            ApiError::bad_request(ar_wire::error::messages::AGENT_RUN_NOT_FOUND)
        }
        error => ApiError::from(error),
    }
}

/// A 200 JSON array of records converted to their wire form.
fn json_list<T, W: serde::Serialize>(rows: &[T], to_wire: fn(&T) -> W) -> Response {
    json(
        StatusCode::OK,
        &rows.iter().map(to_wire).collect::<Vec<_>>(),
    )
}

#[utoipa::path(get, path = "/v1/runs/{run_id}/messages", tag = "records", params(RunIdPath, AppQuery),
    responses((status = 200, description = "The run's messages", body = [ar_wire::AgentRunMessage])))]
pub async fn list_messages(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let rows = state.store.list_messages(&app_id, &run_id).await?;
    Ok(json_list(&rows, message_to_wire))
}

#[utoipa::path(post, path = "/v1/runs/{run_id}/messages", tag = "records", params(RunIdPath, AppQuery),
    request_body = ar_wire::AppendMessageRequest, responses((status = 201, description = "The message, appended", body = ar_wire::AgentRunMessage)))]
pub async fn append_message(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
    ApiJson(body): ApiJson<ar_wire::AppendMessageRequest>,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let row = state
        .engine
        .append_message(
            &app_id,
            &run_id,
            &body.role,
            &body.content,
            &body.external_actor_id,
        )
        .await?;
    Ok(json(StatusCode::CREATED, &message_to_wire(&row)))
}

#[utoipa::path(get, path = "/v1/runs/{run_id}/artifacts", tag = "records", params(RunIdPath, AppQuery),
    responses((status = 200, description = "The run's artifacts", body = [ar_wire::AgentRunArtifact])))]
pub async fn list_artifacts(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let rows = state.store.list_artifacts(&app_id, &run_id).await?;
    Ok(json_list(&rows, artifact_to_wire))
}

#[utoipa::path(post, path = "/v1/runs/{run_id}/artifacts", tag = "records", params(RunIdPath, AppQuery),
    request_body = ar_wire::AppendArtifactRequest, responses((status = 201, description = "The artifact, appended", body = ar_wire::AgentRunArtifact)))]
pub async fn append_artifact(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
    ApiJson(body): ApiJson<ar_wire::AppendArtifactRequest>,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let row = state
        .engine
        .append_artifact(
            &app_id,
            &run_id,
            NewArtifact {
                artifact_type: body.artifact_type,
                format: body.format,
                storage_mode: body.storage_mode,
                inline_content: body.inline_content,
                metadata: body.metadata,
            },
        )
        .await?;
    Ok(json(StatusCode::CREATED, &artifact_to_wire(&row)))
}

#[utoipa::path(get, path = "/v1/runs/{run_id}/interactions", tag = "records", params(RunIdPath, AppQuery),
    responses((status = 200, description = "The run's interactions", body = [ar_wire::AgentRunInteraction])))]
pub async fn list_interactions(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let rows = state.store.list_interactions(&app_id, &run_id).await?;
    Ok(json_list(&rows, interaction_to_wire))
}

#[utoipa::path(get, path = "/v1/runs/{run_id}/tool-calls", tag = "records", params(RunIdPath, AppQuery),
    responses((status = 200, description = "The run's tool calls", body = [ar_wire::ToolCall])))]
pub async fn list_tool_calls(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let rows = state.store.list_tool_calls(&app_id, &run_id).await?;
    Ok(json_list(&rows, tool_call_to_wire))
}

#[utoipa::path(get, path = "/v1/runs/{run_id}/tools", tag = "tools", params(RunIdPath, AppQuery),
    responses((status = 200, description = "The tools the run may call", body = ar_wire::ToolListResponse)))]
pub async fn list_tools(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let tools = state
        .engine
        .run_tools(&app_id, &run_id)
        .await
        .map_err(gateway_error)?;
    let body = ar_wire::ToolListResponse {
        tools: tools.iter().map(|tool| tool_to_wire(tool, false)).collect(),
    };
    Ok(json(StatusCode::OK, &body))
}

#[utoipa::path(post, path = "/v1/runs/{run_id}/tools", tag = "tools", params(RunIdPath, AppQuery),
    request_body = ar_wire::RunToolCallRequest, responses((status = 200, description = "The call's result, or that it waits for approval", body = ar_wire::ToolCallResult)))]
pub async fn call_tool(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
    ApiJson(body): ApiJson<ar_wire::RunToolCallRequest>,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let result = state
        .engine
        .call_run_tool(&app_id, &run_id, &body.tool_name, body.input)
        .await
        .map_err(gateway_error)?;
    let answer = ar_wire::ToolCallResult {
        content: vec![ar_wire::ContentItem {
            item_type: "text".into(),
            text: result.output.content,
        }],
        structured_content: result.output.structured,
        is_error: result.output.is_error,
        approval_required: result.approval_required,
        interaction_id: result.interaction_id,
    };
    Ok(json(StatusCode::OK, &answer))
}
