//! The studio's axum routes under `/api/`: the runtime link, the people API, and access control.

mod api;
mod auth;
mod body;
mod error;
mod link;
mod playground;
mod sse;

use std::sync::Arc;

use axum::routing::{any, get, post, put};
use axum::Router;

use crate::server::StudioServer;

pub use api::RunLookup;
pub use auth::{is_loopback_host, AccessPolicy, PeerAddr};
pub use error::ApiError;
pub use playground::validate_run;

/// How the routes are exposed.
#[derive(Clone, Default)]
pub struct RouterOptions {
    /// Hosted use: every request needs this bearer token. `None`: loopback only.
    pub token: Option<String>,
    /// Checks source runs of playground runs (404 when unknown).
    pub runs: Option<Arc<dyn RunLookup>>,
}

impl std::fmt::Debug for RouterOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouterOptions")
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("runs", &self.runs.is_some())
            .finish()
    }
}

/// The three runtime-link routes, without access control.
pub fn link_routes(server: StudioServer) -> Router {
    Router::new()
        .route("/api/runtime/register", post(link::register))
        .route("/api/runtime/commands", any(link::commands))
        .route("/api/runtime/acks", post(link::acks))
        .with_state(server)
}

/// The people API, without access control.
pub fn api_routes(server: StudioServer, runs: Option<Arc<dyn RunLookup>>) -> Router {
    let state = api::ApiState { server, runs };
    Router::new()
        .route("/api/runtimes", get(api::runtimes))
        .route(
            "/api/runtimes/{id}",
            get(api::runtime).delete(api::forget_runtime),
        )
        .route("/api/runtimes/{id}/breakpoints", put(api::put_breakpoints))
        .route("/api/manifests", get(api::manifests))
        .route("/api/playground/runs", post(api::playground_run))
        .route("/api/playground/commands/{id}", get(api::command_status))
        .route(
            "/api/playground/commands/{id}/cancel",
            post(api::cancel_command),
        )
        .route("/api/runs/{id}/approvals", post(api::approvals))
        .route("/api/runs/{id}/steer", post(api::steer))
        .route("/api/runs/{id}/cancel", post(api::cancel_run))
        .route("/api/runs/{id}/commands", get(api::run_commands))
        .with_state(state)
}

/// Every studio route under `/api/`, behind the access policy of `opts`.
pub fn router(server: StudioServer, opts: RouterOptions) -> Router {
    let policy = AccessPolicy::new(opts.token);
    link_routes(server.clone())
        .merge(api_routes(server, opts.runs))
        .layer(axum::middleware::from_fn_with_state(policy, auth::guard))
}
