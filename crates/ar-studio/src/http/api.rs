//! The people API: runtimes, manifests, playground runs and command status, run approvals, steer, cancel, breakpoints.

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use crate::error::StudioError;
use crate::server::{StudioServer, API_SURFACE};
use crate::wire::{ApprovalDecision, Command, CommandState, VERB_DECIDE};

use super::body::read_json;
use super::error::ApiError;
use super::playground::validate_run;

/// Tells the studio whether a source run exists, when the integrator can (the service's run
/// store). Without one, any source run id is passed on and the runtime checks it.
#[async_trait::async_trait]
pub trait RunLookup: Send + Sync + 'static {
    /// Whether `run_id` names a recorded run.
    async fn run_exists(&self, run_id: &str) -> bool;
}

/// State of the people routes.
#[derive(Clone)]
pub(crate) struct ApiState {
    pub(crate) server: StudioServer,
    pub(crate) runs: Option<Arc<dyn RunLookup>>,
}

pub(crate) async fn runtimes(State(s): State<ApiState>) -> Response {
    Json(json!({ "runtimes": s.server.snapshot() })).into_response()
}

pub(crate) async fn runtime(
    State(s): State<ApiState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let view = s
        .server
        .snapshot()
        .into_iter()
        .find(|v| v.id == id)
        .ok_or_else(|| ApiError::not_found(format!("unknown runtime {id}")))?;
    Ok(Json(view).into_response())
}

pub(crate) async fn forget_runtime(
    State(s): State<ApiState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    s.server.forget(&id)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub(crate) async fn manifests(State(s): State<ApiState>) -> Response {
    Json(json!({ "manifests": s.server.manifests() })).into_response()
}

#[derive(Deserialize)]
struct BreakpointsBody {
    #[serde(default)]
    tools: Vec<String>,
}

pub(crate) async fn put_breakpoints(
    State(s): State<ApiState>,
    Path(id): Path<String>,
    req: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let body: BreakpointsBody =
        read_json(&parts.headers, body, 1 << 20, "breakpoints body").await?;
    let reg = s
        .server
        .registration(&id)
        .ok_or_else(|| ApiError::not_found(format!("unknown runtime {id}")))?;
    for tool in &body.tools {
        if !reg.agents.iter().any(|a| a.has_tool(tool)) {
            return Err(ApiError::bad_request(format!("unknown tool {tool}")));
        }
    }
    s.server
        .set_breakpoints_from(&id, &body.tools, API_SURFACE)?;
    let view = s.server.snapshot().into_iter().find(|v| v.id == id);
    Ok(Json(json!({
        "runtime_id": id,
        "breakpoints": body.tools,
        "breakpoints_by": view.as_ref().map(|v| v.breakpoints_by.clone()),
        "breakpoints_set_at": view.and_then(|v| v.breakpoints_set_at),
    }))
    .into_response())
}

#[derive(Deserialize)]
struct PlaygroundRun {
    #[serde(default)]
    runtime_id: String,
    #[serde(flatten)]
    command: Command,
}

pub(crate) async fn playground_run(
    State(s): State<ApiState>,
    req: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let limit = s.server.config().playground_limit;
    let run: PlaygroundRun = read_json(&parts.headers, body, limit, "run body").await?;
    if run.runtime_id.is_empty() {
        return Err(ApiError::bad_request("runtime_id is required"));
    }
    let reg = s
        .server
        .registration(&run.runtime_id)
        .ok_or_else(|| ApiError::not_found(format!("unknown runtime {}", run.runtime_id)))?;
    validate_run(&reg, &run.command)?;
    if let (Some(lookup), Some(source)) = (&s.runs, &run.command.source) {
        if !lookup.run_exists(&source.run_id).await {
            return Err(ApiError::not_found(format!(
                "unknown source run {}",
                source.run_id
            )));
        }
    }
    let cmd = s.server.enqueue(&run.runtime_id, run.command)?;
    let status = s.server.command(&cmd.command_id)?;
    Ok((StatusCode::ACCEPTED, Json(status)).into_response())
}

pub(crate) async fn command_status(
    State(s): State<ApiState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let status = s.server.command(&id).map_err(|e| match e {
        StudioError::UnknownCommand => ApiError::not_found(format!("unknown command {id}")),
        other => other.into(),
    })?;
    Ok(Json(status).into_response())
}

pub(crate) async fn cancel_command(
    State(s): State<ApiState>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let target = s.server.cancel_command(&id)?;
    Ok((StatusCode::ACCEPTED, Json(target)).into_response())
}

#[derive(Deserialize)]
struct DecisionBody {
    #[serde(default)]
    command_id: String,
    #[serde(default)]
    call_id: String,
    #[serde(default)]
    decision: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    content: String,
    #[serde(default)]
    actor: String,
}

/// The runtime holding a run the studio started; the app's own runs are view-only (403).
fn runtime_holding(s: &ApiState, run_id: &str) -> Result<String, ApiError> {
    s.server.runtime_of(run_id).ok_or_else(|| {
        ApiError::forbidden(format!(
            "run {run_id} was not started from the studio: it is view-only"
        ))
    })
}

pub(crate) async fn approvals(
    State(s): State<ApiState>,
    Path(run_id): Path<String>,
    req: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let body: DecisionBody = read_json(&parts.headers, body, 1 << 20, "decision body").await?;
    if body.call_id.is_empty() {
        return Err(ApiError::bad_request("call_id is required"));
    }
    if !matches!(body.decision.as_str(), "approve" | "deny" | "resolve") {
        return Err(ApiError::bad_request(
            "decision must be approve, deny or resolve",
        ));
    }
    let runtime_id = runtime_holding(&s, &run_id)?;
    // A second decision on the same call is refused while the first one stands.
    let decided = s.server.commands_on(&run_id).into_iter().any(|c| {
        c.verb == VERB_DECIDE
            && c.call_id == body.call_id
            && !matches!(
                s.server.state_of(&c.command_id),
                Some(CommandState::Rejected | CommandState::Lost) | None
            )
    });
    if decided {
        return Err(ApiError::conflict(format!(
            "call {} of run {run_id} already has a decision",
            body.call_id
        )));
    }
    let d = s.server.enqueue_approval(
        &runtime_id,
        ApprovalDecision {
            command_id: body.command_id,
            run_id,
            call_id: body.call_id,
            decision: body.decision,
            reason: body.reason,
            content: body.content,
            actor: body.actor,
            public_id: String::new(),
        },
    )?;
    let status = s.server.command(&d.command_id)?;
    Ok((StatusCode::ACCEPTED, Json(status)).into_response())
}

#[derive(Deserialize)]
struct SteerBody {
    #[serde(default)]
    message: String,
}

pub(crate) async fn steer(
    State(s): State<ApiState>,
    Path(run_id): Path<String>,
    req: Request,
) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let body: SteerBody = read_json(&parts.headers, body, 1 << 20, "steer body").await?;
    if body.message.trim().is_empty() {
        return Err(ApiError::bad_request("message is required"));
    }
    let runtime_id = runtime_holding(&s, &run_id)?;
    if s.server.is_fork_run(&run_id) {
        return Err(ApiError::conflict(
            "steering into a fork-mode run is refused: send the fork's next turn instead",
        ));
    }
    s.server.steer(&runtime_id, &run_id, &body.message)?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "run_id": run_id, "runtime_id": runtime_id })),
    )
        .into_response())
}

pub(crate) async fn cancel_run(
    State(s): State<ApiState>,
    Path(run_id): Path<String>,
) -> Result<Response, ApiError> {
    let target = s.server.cancel_run(&run_id)?;
    Ok((StatusCode::ACCEPTED, Json(target)).into_response())
}

pub(crate) async fn run_commands(
    State(s): State<ApiState>,
    Path(run_id): Path<String>,
) -> Response {
    Json(json!({ "commands": s.server.commands_on(&run_id) })).into_response()
}
