//! The console's run views in the embedded studio (`/studio/api/...`): recent runs, one run's
//! transcript, tool calls, interactions and usage, and its live timeline as SSE. Run content
//! stays in the service: a standalone studio shows commands only.

use std::sync::Arc;
use std::time::Duration;

use ar_config::app::AppConfig;
use ar_core::secret::Secret;
use ar_core::store::{RunSearch, Store};
use ar_engine::transcript::LoopState;
use ar_events::sse;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::convert;

/// How often the live timeline looks for new events.
const TIMELINE_POLL: Duration = Duration::from_millis(250);
/// Runs on a page of the console's list, unless it asks for fewer.
const PAGE: i64 = 50;
/// The most runs one page may ask for.
const MAX_PAGE: i64 = 200;

#[derive(Clone)]
struct ConsoleState {
    store: Arc<dyn Store>,
    apps: Arc<AppConfig>,
    token: Option<Secret>,
    /// Demo mode (`serve --demo`): the built-in demo model serves runs that name no model.
    demo: bool,
}

/// The run-view routes, behind the service token (a bearer header or `?token=`, which
/// `EventSource` needs) or, without one, loopback only.
pub fn routes(
    store: Arc<dyn Store>,
    apps: Arc<AppConfig>,
    token: Option<String>,
    demo: bool,
) -> Router {
    let state = ConsoleState {
        store,
        apps,
        token: token.filter(|t| !t.is_empty()).map(Secret::new),
        demo,
    };
    Router::new()
        .route("/studio/api/info", get(info))
        .route("/studio/api/runs", get(runs))
        .route("/studio/api/runs/{id}", get(run))
        .route("/studio/api/runs/{id}/events", get(events))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

fn deny(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        Json(json!({"error": {"code": code, "message": message}})),
    )
        .into_response()
}

async fn guard(State(s): State<ConsoleState>, req: Request, next: Next) -> Response {
    match &s.token {
        Some(token) => {
            let accepted = crate::auth::bearer_matches(&req, token)
                || query_token(&req).is_some_and(|given| token.matches(&given));
            if accepted {
                next.run(req).await
            } else {
                deny(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "a valid bearer token is required",
                )
            }
        }
        None => {
            let loopback = req
                .headers()
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .is_some_and(ar_studio::http::is_loopback_host);
            if loopback {
                next.run(req).await
            } else {
                deny(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    "without a token the console answers loopback requests only",
                )
            }
        }
    }
}

/// The `?token=` parameter, which stands in for the bearer header where `EventSource` cannot
/// send headers.
fn query_token(req: &Request) -> Option<String> {
    let query = req.uri().query()?;
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
}

/// What the console needs to say what to do next: the apps runs can be started in, and
/// whether the demo model serves them.
async fn info(State(s): State<ConsoleState>) -> Json<Value> {
    let apps: Vec<&str> = s.apps.app_ids().collect();
    Json(json!({"embedded": true, "runs": true, "apps": apps, "demo": s.demo}))
}

async fn find_app(s: &ConsoleState, run_id: &str) -> Option<String> {
    for app in s.apps.apps.keys() {
        if let Ok(Some(_)) = s.store.get_run(app, run_id).await {
            return Some(app.clone());
        }
    }
    None
}

/// The console's run list: a page of one app's runs or of all apps', newest first, filtered
/// by status and a search text (run, host run, agent or target id).
#[derive(Deserialize, Default)]
#[serde(default)]
struct RunsQuery {
    app: String,
    q: String,
    status: String,
    offset: i64,
    limit: i64,
}

async fn runs(State(s): State<ConsoleState>, Query(query): Query<RunsQuery>) -> Response {
    let status = match query.status.trim() {
        "" => None,
        given => match ar_core::RunStatus::parse(given) {
            Ok(status) => Some(status),
            Err(error) => return deny(StatusCode::BAD_REQUEST, "bad_request", &error.to_string()),
        },
    };
    let apps: Vec<String> = match query.app.trim() {
        "" => s.apps.app_ids().map(str::to_string).collect(),
        app if s.apps.app(app).is_some() => vec![app.to_string()],
        _ => return deny(StatusCode::NOT_FOUND, "not_found", "no such app"),
    };
    let offset = query.offset.max(0);
    let limit = if query.limit > 0 {
        query.limit.min(MAX_PAGE)
    } else {
        PAGE
    };
    // One app pages in the store; several are merged from the first offset+limit of each.
    let (skip, search_offset, search_limit) = match apps.len() {
        1 => (0, offset, limit),
        _ => (offset, 0, offset + limit),
    };
    let mut all = Vec::new();
    let mut total = 0;
    for app in apps {
        let search = RunSearch {
            app_id: app,
            query: query.q.trim().to_string(),
            status,
            limit: search_limit,
            offset: search_offset,
        };
        match s.store.search_runs(&search).await {
            Ok((page, count)) => {
                all.extend(page);
                total += count;
            }
            Err(error) => {
                tracing::warn!(%error, "console: listing runs failed");
                return deny(StatusCode::INTERNAL_SERVER_ERROR, "internal", "store error");
            }
        }
    }
    all.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
    let rows: Vec<Value> = all
        .iter()
        .skip(usize::try_from(skip).unwrap_or(usize::MAX))
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
        .map(run_row)
        .collect();
    Json(json!({"runs": rows, "total": total, "offset": offset, "limit": limit})).into_response()
}

/// One run as the console's list shows it.
fn run_row(r: &ar_core::Run) -> Value {
    json!({
        "id": r.id,
        "app_id": r.app_id,
        "agent_id": r.agent_id,
        "target": format!("{}/{}", r.target.target_type, r.target.id),
        "status": r.status().to_string(),
        "pause_reason": r.pause_reason().to_string(),
        "created_at": r.created_at,
        "error": r.error_message,
        "studio": r.engine.studio,
        // Which model answers: the console labels the demo model's runs.
        "model": r.input.model.as_ref().map(|m| format!("{}/{}", m.provider, m.model)),
        "demo_model": r.input.model.as_ref()
            .is_some_and(|m| m.provider == ar_core::model::DEMO_PROVIDER),
        "forked_from": r.engine.studio.as_ref()
            .map(|policy| policy.source_run_id.as_str())
            .filter(|source| !source.is_empty()),
    })
}

async fn run(State(s): State<ConsoleState>, Path(id): Path<String>) -> Response {
    let Some(app) = find_app(&s, &id).await else {
        return deny(StatusCode::NOT_FOUND, "not_found", "run not found");
    };
    let loaded = async {
        let run = s.store.get_run(&app, &id).await?;
        let state = s.store.latest_checkpoint(&id).await?;
        let messages = s.store.list_messages(&app, &id).await?;
        let calls = s.store.list_tool_calls(&app, &id).await?;
        let interactions = s.store.list_interactions(&app, &id).await?;
        Ok::<_, ar_core::store::StoreError>((run, state, messages, calls, interactions))
    }
    .await;
    let (run, checkpoint, messages, calls, interactions) = match loaded {
        Ok((Some(run), c, m, t, i)) => (run, c, m, t, i),
        Ok((None, ..)) => return deny(StatusCode::NOT_FOUND, "not_found", "run not found"),
        Err(error) => {
            tracing::warn!(%error, "console: reading a run failed");
            return deny(StatusCode::INTERNAL_SERVER_ERROR, "internal", "store error");
        }
    };
    let state = checkpoint
        .and_then(|c| LoopState::from_json(&c.state).ok())
        .unwrap_or_default();
    let steps = state
        .transcript
        .iter()
        .filter(|m| m.role == ar_core::model::ChatRole::Assistant)
        .count();
    Json(json!({
        "run": convert::run_to_wire(&run),
        "studio": run.engine.studio,
        // What the engine keeps for itself (turn start, last resume, CLI workdir).
        "engine": run.engine,
        "steps": steps,
        "transcript": state.transcript,
        "pending": state.pending,
        "usage": {
            "input_tokens": state.usage.input_tokens,
            "output_tokens": state.usage.output_tokens,
            "total_tokens": state.usage.total_tokens,
        },
        "messages": messages.iter().map(convert::message_to_wire).collect::<Vec<_>>(),
        "tool_calls": calls.iter().map(convert::tool_call_to_wire).collect::<Vec<_>>(),
        "interactions": interactions.iter().map(convert::interaction_to_wire).collect::<Vec<_>>(),
    }))
    .into_response()
}

#[derive(Deserialize)]
struct After {
    #[serde(default)]
    after: i64,
}

async fn events(
    State(s): State<ConsoleState>,
    Path(id): Path<String>,
    Query(after): Query<After>,
) -> Response {
    let Some(app) = find_app(&s, &id).await else {
        return deny(StatusCode::NOT_FOUND, "not_found", "run not found");
    };
    let stream = futures::stream::unfold(
        (s.store.clone(), app, id, after.after, true),
        |(store, app, id, mut cursor, first)| async move {
            if !first {
                tokio::time::sleep(TIMELINE_POLL).await;
            }
            let batch = store
                .list_events_after(&app, &id, cursor, Some(200))
                .await
                .unwrap_or_default();
            let mut frames = Vec::with_capacity(batch.len());
            for event in &batch {
                cursor = cursor.max(event.sequence_no);
                let wire = convert::v1_envelope(event);
                let data = serde_json::to_string(&wire).unwrap_or_default();
                frames.push((
                    sse::frame(Some(event.sequence_no), "run_event", &data),
                    false,
                ));
            }
            Some((
                futures::stream::iter(frames),
                (store, app, id, cursor, false),
            ))
        },
    );
    use futures::StreamExt as _;
    // The timeline follows the run until the page closes it.
    crate::routes::events::event_stream(stream.flatten(), CancellationToken::new())
}
