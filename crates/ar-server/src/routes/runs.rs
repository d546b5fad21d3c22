//! `/v1/runs`: start, list, search, get, execution info, and the lifecycle actions.

use crate::openapi::*;
use ar_core::RunStatus;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::params::{Params, RunPath, ServerPath};
use crate::convert::{credential_from_wire, resume_from_wire, run_to_wire, start_run_from_wire};
use crate::error::{json, ApiError, ApiJson, ApiResult, NoBody, OptionalJson};
use crate::state::AppState;

#[utoipa::path(get, path = "/v1/runs", tag = "runs", params(AppQuery),
    responses((status = 200, description = "The app's runs", body = [ar_wire::AgentRun])))]
pub async fn list(State(state): State<AppState>, params: Params) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let runs = state.store.list_runs(&app_id).await?;
    let body: Vec<ar_wire::AgentRun> = runs.iter().map(run_to_wire).collect();
    Ok(json(StatusCode::OK, &body))
}

/// `POST /v1/runs`: strict body (unknown fields are a 400, see `StartRunRequest`), the host's
/// `X-Agent-Runtime-Event-Protocol` checked against the app's, 202 on admission.
#[utoipa::path(post, path = "/v1/runs", tag = "runs", params(EventProtocolHeader),
    request_body = ar_wire::StartRunRequest,
    responses((status = 202, description = "The run, admitted", body = ar_wire::AgentRun),
              (status = 409, description = "The host's event protocol is not the app's", body = ar_wire::ErrorBody)))]
pub async fn start(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiJson(request): ApiJson<ar_wire::StartRunRequest>,
) -> ApiResult<Response> {
    check_event_protocol(&state, &headers, request.app_id.trim())?;
    let run = state.engine.start_run(start_run_from_wire(request)).await?;
    Ok(json(StatusCode::ACCEPTED, &run_to_wire(&run)))
}

/// The original's 409 when the host declares another event protocol than the app's.
fn check_event_protocol(state: &AppState, headers: &HeaderMap, app_id: &str) -> ApiResult<()> {
    let expected = headers
        .get(ar_wire::EVENT_PROTOCOL_HEADER)
        .map(|value| {
            String::from_utf8_lossy(value.as_bytes())
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default();
    let configured = if state.is_v2_app(app_id) { "v2" } else { "v1" };
    if expected.is_empty() || expected == configured {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::CONFLICT,
        format!("agent runtime event protocol mismatch: host expects {expected} but app is configured for {configured}"),
    ))
}

/// `GET /v1/runs/search`, as lenient as the original: a `limit` or `offset` that is not an
/// integer counts as unset, a limit outside 1..=100 is the default or the maximum, and a
/// `status` no run can have finds nothing.
#[utoipa::path(get, path = "/v1/runs/search", tag = "runs", params(SearchQuery),
    responses((status = 200, description = "One page of the app's matching runs, newest first", body = ar_wire::RunPage)))]
pub async fn search(State(state): State<AppState>, params: Params) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let lenient = |key: &str| params.get(key).and_then(|text| text.parse::<i64>().ok());
    let limit = match lenient("limit").unwrap_or(0) {
        limit if limit <= 0 => ar_wire::runs::SEARCH_DEFAULT_LIMIT,
        limit => limit.min(ar_wire::runs::SEARCH_MAX_LIMIT),
    };
    let offset = lenient("offset").unwrap_or(0).max(0);
    let status = match params.get("status").map(RunStatus::parse) {
        None => None,
        Some(Ok(status)) => Some(status),
        Some(Err(_)) => {
            let page = ar_wire::RunPage {
                items: Vec::new(),
                total: 0,
                limit,
                offset,
            };
            return Ok(json(StatusCode::OK, &page));
        }
    };
    let search = ar_core::store::RunSearch {
        app_id,
        query: params.get("q").unwrap_or_default().to_string(),
        status,
        limit,
        offset,
    };
    let (runs, total) = state.store.search_runs(&search).await?;
    let page = ar_wire::RunPage {
        items: runs.iter().map(run_to_wire).collect(),
        total,
        limit,
        offset,
    };
    Ok(json(StatusCode::OK, &page))
}

pub(crate) async fn load(state: &AppState, app_id: &str, run_id: &str) -> ApiResult<ar_core::Run> {
    state
        .store
        .get_run(app_id, run_id)
        .await?
        .ok_or_else(|| ApiError::not_found("run not found"))
}

#[utoipa::path(get, path = "/v1/runs/{run_id}", tag = "runs", params(RunIdPath, AppQuery),
    responses((status = 200, description = "The run", body = ar_wire::AgentRun)))]
pub async fn get(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let run = load(&state, &app_id, &run_id).await?;
    Ok(json(StatusCode::OK, &run_to_wire(&run)))
}

#[utoipa::path(get, path = "/v1/runs/{run_id}/execution", tag = "runs", params(RunIdPath, AppQuery),
    responses((status = 200, description = "How the run executes", body = ar_wire::RunExecutionInfo)))]
pub async fn execution(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    // The original asks the engine, so an unknown run is a 400 here.
    let run = load(&state, &app_id, &run_id)
        .await
        .map_err(|error| ApiError::bad_request(error.message))?;
    let mut info = ar_wire::RunExecutionInfo {
        execution_mode: run.execution_mode.as_str().to_string(),
        state: run.status().as_str().to_string(),
        started_at: run.started_at,
        closed_at: run.completed_at,
        ..Default::default()
    };
    if run.execution_mode == ar_core::ExecutionMode::Durable {
        // A durable run's execution is its workflow, as Temporal describes it.
        if let Some(workflow) = state.engine.durable_workflow(&run).await? {
            info = ar_wire::RunExecutionInfo {
                execution_mode: info.execution_mode,
                state: workflow.state,
                workflow_id: workflow.workflow_id,
                temporal_run_id: workflow.temporal_run_id,
                task_queue: workflow.task_queue,
                history_length: workflow.history_length,
                history_size_bytes: workflow.history_size_bytes,
                state_transition_count: workflow.state_transition_count,
                started_at: workflow.started_at,
                closed_at: workflow.closed_at,
            };
        }
    }
    Ok(json(StatusCode::OK, &info))
}

/// Header aliases: `Idempotency-Key` → `resume_id`, `X-Agent-Runtime-Interaction-ID` → `interaction_id`.
fn apply_resume_headers(headers: &HeaderMap, request: &mut ar_wire::ResumeRunRequest) {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    if request.resume_id.trim().is_empty() {
        if let Some(key) = header("idempotency-key") {
            request.resume_id = key.to_string();
        }
    }
    if request.interaction_id.trim().is_empty() {
        if let Some(id) = header("x-agent-runtime-interaction-id") {
            request.interaction_id = id.to_string();
        }
    }
}

#[utoipa::path(post, path = "/v1/runs/{run_id}/resume", tag = "runs", params(RunIdPath, AppQuery, ResumeHeaders),
    request_body = ar_wire::ResumeRunRequest,
    responses((status = 200, description = "The run, resumed", body = ar_wire::AgentRun)))]
pub async fn resume(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
    headers: HeaderMap,
    ApiJson(mut request): ApiJson<ar_wire::ResumeRunRequest>,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    apply_resume_headers(&headers, &mut request);
    let run = state
        .engine
        .resume(&app_id, &run_id, resume_from_wire(request))
        .await?;
    Ok(json(StatusCode::OK, &run_to_wire(&run)))
}

/// The optional body of `approve`.
#[derive(Debug, Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ApproveBody {
    /// The person who approves.
    external_actor_id: String,
}

#[utoipa::path(post, path = "/v1/runs/{run_id}/approve", tag = "runs", params(RunIdPath, AppQuery, ResumeHeaders),
    request_body(content = Option<ApproveBody>, description = "Optional: who approves"),
    responses((status = 200, description = "The run, approved and resumed", body = ar_wire::AgentRun)))]
pub async fn approve(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
    headers: HeaderMap,
    OptionalJson(body): OptionalJson<ApproveBody>,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let mut request = ar_wire::ResumeRunRequest {
        intent: "approve".into(),
        external_actor_id: body.external_actor_id,
        ..Default::default()
    };
    apply_resume_headers(&headers, &mut request);
    let run = state
        .engine
        .resume(&app_id, &run_id, resume_from_wire(request))
        .await?;
    Ok(json(StatusCode::OK, &run_to_wire(&run)))
}

#[utoipa::path(post, path = "/v1/runs/{run_id}/request-changes", tag = "runs", params(RunIdPath, AppQuery, ResumeHeaders),
    request_body = ar_wire::RequestChangesRequest,
    responses((status = 200, description = "The run, resumed with the requested changes", body = ar_wire::AgentRun)))]
pub async fn request_changes(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
    headers: HeaderMap,
    ApiJson(body): ApiJson<ar_wire::RequestChangesRequest>,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let mut request = ar_wire::ResumeRunRequest {
        intent: "request_changes".into(),
        content: body.content,
        external_actor_id: body.external_actor_id,
        ..Default::default()
    };
    apply_resume_headers(&headers, &mut request);
    let run = state
        .engine
        .resume(&app_id, &run_id, resume_from_wire(request))
        .await?;
    Ok(json(StatusCode::OK, &run_to_wire(&run)))
}

#[utoipa::path(post, path = "/v1/runs/{run_id}/cancel", tag = "runs", params(RunIdPath, AppQuery),
    request_body(content = Option<EmptyObject>, description = "None, or an object whose fields are ignored"),
    responses((status = 200, description = "The run, cancelled", body = ar_wire::AgentRun)))]
pub async fn cancel(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
    _: OptionalJson<NoBody>,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let run = state.engine.cancel(&app_id, &run_id).await?;
    Ok(json(StatusCode::OK, &run_to_wire(&run)))
}

#[utoipa::path(post, path = "/v1/runs/{run_id}/pause", tag = "runs", params(RunIdPath, AppQuery),
    request_body(content = Option<EmptyObject>, description = "None, or an object whose fields are ignored"),
    responses((status = 200, description = "The run; a running run pauses at its next checkpoint", body = ar_wire::AgentRun)))]
pub async fn pause(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
    _: OptionalJson<NoBody>,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let run = state.engine.pause(&app_id, &run_id).await?;
    Ok(json(StatusCode::OK, &run_to_wire(&run)))
}

#[utoipa::path(put, path = "/v1/runs/{run_id}/model-credential", tag = "credentials", params(RunIdPath, AppQuery),
    request_body = ar_wire::UpdateRunModelCredentialRequest,
    responses((status = 200, description = "The credential, replaced (never echoed)", body = ar_wire::RunModelCredentialUpdate)))]
pub async fn update_model_credential(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
    body: Result<ApiJson<ar_wire::UpdateRunModelCredentialRequest>, ApiError>,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let ApiJson(body) = body.map_err(|error| {
        error.with_message(ar_wire::error::messages::INVALID_CREDENTIAL_REQUEST)
    })?;
    let (run, expires_at) = state
        .engine
        .update_model_credential(&app_id, &run_id, credential_from_wire(body.credential))
        .await?;
    Ok(json(
        StatusCode::OK,
        &ar_wire::RunModelCredentialUpdate {
            run_id: run.id,
            expires_at,
        },
    ))
}

#[utoipa::path(delete, path = "/v1/runs/{run_id}/model-credential", tag = "credentials", params(RunIdPath, AppQuery),
    responses((status = 204, description = "The credential, revoked")))]
pub async fn revoke_model_credential(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    state
        .engine
        .revoke_model_credential(&app_id, &run_id)
        .await?;
    Ok(axum::response::IntoResponse::into_response(
        StatusCode::NO_CONTENT,
    ))
}

/// `PUT /v1/runs/{id}/mcp-servers/{server_id}/credential`: rotates an attached server's
/// sealed credential; answers without the secret.
#[utoipa::path(put, path = "/v1/runs/{run_id}/mcp-servers/{server_id}/credential", tag = "credentials",
    params(RunIdPath, ServerIdPath, AppQuery), request_body = ar_wire::UpdateRunMCPCredentialRequest,
    responses((status = 200, description = "The server's credential, rotated (never echoed)", body = ar_wire::RunMCPCredentialUpdate)))]
pub async fn update_mcp_credential(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    ServerPath(server_id): ServerPath,
    params: Params,
    ApiJson(body): ApiJson<ar_wire::UpdateRunMCPCredentialRequest>,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let credential = crate::convert::mcp_credential_from_wire(body.credential);
    let (run, expires_at) = state
        .engine
        .update_mcp_credential(&app_id, &run_id, &server_id, credential)
        .await?;
    Ok(json(
        StatusCode::OK,
        &ar_wire::RunMCPCredentialUpdate {
            run_id: run.id,
            server_id,
            expires_at,
            updated_at: run.updated_at,
        },
    ))
}

#[utoipa::path(post, path = "/v1/runs/{run_id}/codex-auth/device-code/start", tag = "runs", params(RunIdPath, AppQuery),
    request_body(content = Option<EmptyObject>, description = "None, or an object whose fields are ignored"),
    responses((status = 200, description = "The sign-in waiting for the person (`pending`: the verification URL and user code), or `failed` when codex could not start it", body = ar_wire::CodexAuthState),
        (status = 400, description = "No codex here (`codex auth manager is not configured`), an unknown run (`run not found`), not a codex run, or a finished run", body = ar_wire::ErrorBody)))]
pub async fn codex_auth_start(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
    _: OptionalJson<NoBody>,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let answer = state
        .codex_auth
        .start(&state.engine, &app_id, &run_id)
        .await?;
    Ok(json(StatusCode::OK, &answer))
}

#[utoipa::path(post, path = "/v1/runs/{run_id}/codex-auth/device-code/cancel", tag = "runs", params(RunIdPath, AppQuery),
    request_body(content = Option<EmptyObject>, description = "None, or an object whose fields are ignored"),
    responses((status = 200, description = "The sign-in's state: `cancelled`, how it had ended, or `required` when none was started", body = ar_wire::CodexAuthState),
        (status = 400, description = "No codex here, an unknown run, not a codex run, or a finished run", body = ar_wire::ErrorBody)))]
pub async fn codex_auth_cancel(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
    _: OptionalJson<NoBody>,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let answer = state
        .codex_auth
        .cancel(&state.engine, &app_id, &run_id)
        .await?;
    Ok(json(StatusCode::OK, &answer))
}
