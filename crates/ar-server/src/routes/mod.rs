//! The router: `/v1` (and its `/internal` alias), `/v2`, `/healthz`, `/readyz`, JSON 404/405 answers.

mod agents;
pub(crate) mod events;
mod meta;
mod params;
mod records;
mod runs;

use axum::body::Body;
use axum::extract::DefaultBodyLimit;
use axum::http::{Response, StatusCode};
use axum::middleware;
use axum::routing::{get, post, put};
use axum::Router;

use crate::auth::require_token;
use crate::error::{ApiError, DEFAULT_BODY_LIMIT};
use crate::state::AppState;

/// Routes shared by `/v1` and `/internal`.
fn api_routes() -> Router<AppState> {
    Router::new()
        .route("/capabilities", get(meta::capabilities))
        .route("/app-health", get(meta::app_health))
        .route("/agents", get(agents::list).post(agents::create))
        .route("/agents/{agent_id}", get(agents::get).put(agents::upsert))
        .route("/runs", get(runs::list).post(runs::start))
        .route("/runs/search", get(runs::search))
        .route("/runs/{run_id}", get(runs::get))
        .route("/runs/{run_id}/events", get(events::stream_v1))
        .route("/runs/{run_id}/events/history", get(events::history))
        .route("/runs/{run_id}/execution", get(runs::execution))
        .route(
            "/runs/{run_id}/messages",
            get(records::list_messages).post(records::append_message),
        )
        .route(
            "/runs/{run_id}/artifacts",
            get(records::list_artifacts).post(records::append_artifact),
        )
        .route(
            "/runs/{run_id}/interactions",
            get(records::list_interactions),
        )
        .route("/runs/{run_id}/tool-calls", get(records::list_tool_calls))
        .route(
            "/runs/{run_id}/tools",
            get(records::list_tools).post(records::call_tool),
        )
        .route("/runs/{run_id}/resume", post(runs::resume))
        .route("/runs/{run_id}/approve", post(runs::approve))
        .route(
            "/runs/{run_id}/request-changes",
            post(runs::request_changes),
        )
        .route("/runs/{run_id}/cancel", post(runs::cancel))
        .route("/runs/{run_id}/pause", post(runs::pause))
        .route(
            "/runs/{run_id}/mcp-servers/{server_id}/credential",
            // A credential body is small: 128 KiB at most (the contract's limit).
            put(runs::update_mcp_credential).layer(DefaultBodyLimit::max(128 * 1024)),
        )
        .route(
            "/runs/{run_id}/model-credential",
            put(runs::update_model_credential).delete(runs::revoke_model_credential),
        )
        .route(
            "/runs/{run_id}/codex-auth/device-code/start",
            post(runs::codex_auth),
        )
        .route(
            "/runs/{run_id}/codex-auth/device-code/cancel",
            post(runs::codex_auth),
        )
}

fn v2_routes() -> Router<AppState> {
    Router::new()
        .route("/runs/{run_id}/events", get(events::list_v2))
        .route("/runs/{run_id}/stream-state", get(events::stream_state))
}

async fn not_found() -> ApiError {
    ApiError::not_found("not found")
}

/// Gives bodiless 405 answers the contract's JSON error body.
async fn json_method_not_allowed(response: Response<Body>) -> Response<Body> {
    if response.status() == StatusCode::METHOD_NOT_ALLOWED {
        let (parts, _) = response.into_parts();
        let mut answer = axum::response::IntoResponse::into_response(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed",
        ));
        if let Some(allow) = parts.headers.get(axum::http::header::ALLOW) {
            answer
                .headers_mut()
                .insert(axum::http::header::ALLOW, allow.clone());
        }
        return answer;
    }
    response
}

/// The whole HTTP API.
pub fn router(state: AppState) -> Router {
    let authenticated = Router::new()
        .nest("/v1", api_routes())
        .nest("/internal", api_routes())
        .nest("/v2", v2_routes())
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/healthz", get(meta::healthz))
        .route("/readyz", get(meta::readyz))
        .merge(authenticated)
        .fallback(not_found)
        .layer(middleware::map_response(json_method_not_allowed))
        .layer(DefaultBodyLimit::max(DEFAULT_BODY_LIMIT))
        .with_state(state)
}
