//! The router: `/v1` (and its `/internal` alias), `/v2`, `/healthz`, `/readyz`, JSON 404/405 answers.

pub(crate) mod agents;
pub(crate) mod events;
pub(crate) mod meta;
mod params;
pub(crate) mod records;
pub(crate) mod runs;

use axum::body::Body;
use axum::extract::DefaultBodyLimit;
use axum::http::{Response, StatusCode};
use axum::middleware;
use axum::routing::{get, post, put, MethodRouter};
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
        .merge(run_routes(EventsRoute::V1))
}

/// Which answer `GET …/runs/{id}/events` gives: the v1 SSE stream or the v2 page.
#[derive(Clone, Copy)]
enum EventsRoute {
    V1,
    V2,
}

/// The run sub-routes. The original mounts the same tree under `/v1`, `/internal` and `/v2`
/// (where `events` is the v2 page and `stream-state` is added), and answers a method a run
/// sub-route does not take with 404 `not found`.
fn run_routes(events: EventsRoute) -> Router<AppState> {
    let router = Router::new()
        .route("/runs/{run_id}", run(get(runs::get)))
        .route("/runs/{run_id}/events/history", run(get(events::history)))
        .route("/runs/{run_id}/execution", run(get(runs::execution)))
        .route(
            "/runs/{run_id}/messages",
            run(get(records::list_messages).post(records::append_message)),
        )
        .route(
            "/runs/{run_id}/artifacts",
            run(get(records::list_artifacts).post(records::append_artifact)),
        )
        .route(
            "/runs/{run_id}/interactions",
            run(get(records::list_interactions)),
        )
        .route(
            "/runs/{run_id}/tool-calls",
            run(get(records::list_tool_calls)),
        )
        .route(
            "/runs/{run_id}/tools",
            run(get(records::list_tools).post(records::call_tool)),
        )
        .route("/runs/{run_id}/resume", run(post(runs::resume)))
        .route("/runs/{run_id}/approve", run(post(runs::approve)))
        .route(
            "/runs/{run_id}/request-changes",
            run(post(runs::request_changes)),
        )
        .route("/runs/{run_id}/cancel", run(post(runs::cancel)))
        .route("/runs/{run_id}/pause", run(post(runs::pause)))
        .route(
            "/runs/{run_id}/mcp-servers/{server_id}/credential",
            // A credential body is small: 128 KiB at most (the contract's limit).
            run(put(runs::update_mcp_credential)).layer(DefaultBodyLimit::max(128 * 1024)),
        )
        .route(
            "/runs/{run_id}/model-credential",
            run(put(runs::update_model_credential).delete(runs::revoke_model_credential)),
        )
        .route(
            "/runs/{run_id}/codex-auth/device-code/start",
            run(post(runs::codex_auth_start)),
        )
        .route(
            "/runs/{run_id}/codex-auth/device-code/cancel",
            run(post(runs::codex_auth_cancel)),
        );
    match events {
        EventsRoute::V1 => router.route("/runs/{run_id}/events", run(get(events::stream_v1))),
        EventsRoute::V2 => router
            .route("/runs/{run_id}/events", run(get(events::list_v2)))
            .route(
                "/runs/{run_id}/stream-state",
                run(get(events::stream_state)),
            ),
    }
}

/// A run sub-route: a method it does not take is the original's 404.
fn run(route: MethodRouter<AppState>) -> MethodRouter<AppState> {
    route.fallback(not_found)
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
        .nest("/v2", run_routes(EventsRoute::V2))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    Router::new()
        .route("/healthz", get(meta::healthz))
        .route("/readyz", get(meta::readyz))
        .route("/openapi.json", get(crate::openapi::openapi_json))
        .merge(authenticated)
        .fallback(not_found)
        .layer(middleware::map_response(json_method_not_allowed))
        .layer(DefaultBodyLimit::max(DEFAULT_BODY_LIMIT))
        .with_state(state)
}
