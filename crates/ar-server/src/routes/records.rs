//! Run records: messages, artifacts, interactions, tool calls, and the run tool gateway.

use ar_engine::NewArtifact;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::params::{Params, RunPath};
use super::runs::load;
use crate::convert::{
    artifact_to_wire, interaction_to_wire, message_to_wire, tool_call_to_wire, tool_to_wire,
};
use crate::error::{json, ApiJson, ApiResult};
use crate::state::AppState;

/// The caller's app id, once the run is known to exist in that app (404 otherwise).
async fn visible_run(state: &AppState, params: &Params, run_id: &str) -> ApiResult<String> {
    let app_id = params.app_id()?;
    load(state, &app_id, run_id).await?;
    Ok(app_id)
}

/// A 200 JSON array of records converted to their wire form.
fn json_list<T, W: serde::Serialize>(rows: &[T], to_wire: fn(&T) -> W) -> Response {
    json(
        StatusCode::OK,
        &rows.iter().map(to_wire).collect::<Vec<_>>(),
    )
}

pub async fn list_messages(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
) -> ApiResult<Response> {
    let app_id = visible_run(&state, &params, &run_id).await?;
    let rows = state.store.list_messages(&app_id, &run_id).await?;
    Ok(json_list(&rows, message_to_wire))
}

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

pub async fn list_artifacts(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
) -> ApiResult<Response> {
    let app_id = visible_run(&state, &params, &run_id).await?;
    let rows = state.store.list_artifacts(&app_id, &run_id).await?;
    Ok(json_list(&rows, artifact_to_wire))
}

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

pub async fn list_interactions(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
) -> ApiResult<Response> {
    let app_id = visible_run(&state, &params, &run_id).await?;
    let rows = state.store.list_interactions(&app_id, &run_id).await?;
    Ok(json_list(&rows, interaction_to_wire))
}

pub async fn list_tool_calls(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
) -> ApiResult<Response> {
    let app_id = visible_run(&state, &params, &run_id).await?;
    let rows = state.store.list_tool_calls(&app_id, &run_id).await?;
    Ok(json_list(&rows, tool_call_to_wire))
}

pub async fn list_tools(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let tools = state.engine.run_tools(&app_id, &run_id).await?;
    let body = ar_wire::ToolListResponse {
        tools: tools.iter().map(|tool| tool_to_wire(tool, false)).collect(),
    };
    Ok(json(StatusCode::OK, &body))
}

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
        .await?;
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
