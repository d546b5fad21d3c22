//! Event endpoints: the v1 SSE stream (with ids, resume and heartbeats), the v1 history,
//! and the v2 pages and stream-state snapshot.

use crate::openapi::*;
use std::convert::Infallible;

use ar_core::event::LiveEvent;
use ar_events::sse;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use futures::StreamExt;

use super::params::{Params, RunPath};
use super::runs::load;
use crate::convert::{event_to_v2, transient_to_wire, v1_envelope, v2_envelope};
use crate::error::{json, ApiError, ApiResult};
use crate::state::AppState;

fn frame_for(event: &LiveEvent, v2: bool) -> String {
    match event {
        LiveEvent::Persisted(stored) => {
            let envelope = if v2 {
                v2_envelope(stored)
            } else {
                v1_envelope(stored)
            };
            let data = serde_json::to_string(&envelope).unwrap_or_default();
            sse::frame(Some(stored.sequence_no), stored.kind.as_str(), &data)
        }
        LiveEvent::Transient(transient) => {
            let body = transient_to_wire(transient);
            sse::frame(
                None,
                transient.event.kind().as_str(),
                &serde_json::to_string(&body).unwrap_or_default(),
            )
        }
    }
}

/// `GET /v1/runs/{id}/events`: replays after the cursor (`Last-Event-ID` or
/// `?after_sequence=`), then streams live, `: ping` every 15 s, and ends after the terminal event
/// (at once when the cursor is at or past the terminal event of a run that has ended).
#[utoipa::path(get, path = "/v1/runs/{run_id}/events", tag = "events", params(RunIdPath, EventStreamQuery, LastEventIdHeader),
    responses((status = 200, description = "Server-sent events: each persisted event as `id: <sequence_no>`, `event: <type>` and its v1 envelope (v2 for a v2 app), transient deltas without an id, `: ping` every 15 s; the stream ends after the terminal event",
               content_type = "text/event-stream", body = String)))]
pub async fn stream_v1(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    let run = load(&state, &app_id, &run_id).await?;
    let last_event_id = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok());
    let cursor = sse::resume_cursor(last_event_id, params.get("after_sequence"));
    let v2 = state.is_v2_app(&app_id);
    let run_state = if run.is_terminal() {
        ar_events::RunState::Ended
    } else {
        ar_events::RunState::Active
    };
    let events = ar_events::replay::stream_run_events(
        state.store.clone(),
        &state.bus,
        &app_id,
        &run.id,
        cursor,
        run_state,
    );
    let open = state.metrics.sse_stream();
    let frames = events.map(move |event| {
        let _counted = &open;
        let terminal = matches!(&*event, LiveEvent::Persisted(stored) if stored.kind.is_terminal());
        (frame_for(&event, v2), terminal)
    });
    Ok(event_stream(frames, state.draining.clone()))
}

/// An SSE response of `frames` (each a whole frame, and whether it is the stream's last),
/// interleaved with heartbeats; it ends after the last frame, when frames end, or when
/// `draining` is cancelled. Every SSE response of the service is made here.
pub(crate) fn event_stream(
    frames: impl futures::Stream<Item = (String, bool)> + Send + 'static,
    draining: tokio_util::sync::CancellationToken,
) -> Response {
    let mut response = Response::new(Body::from_stream(with_heartbeats(frames, draining)));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Interleaves frames with heartbeats; ends after the terminal frame, when events end, or when
/// the server drains.
fn with_heartbeats(
    frames: impl futures::Stream<Item = (String, bool)> + Send + 'static,
    draining: tokio_util::sync::CancellationToken,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    let heartbeat = tokio::time::interval_at(
        tokio::time::Instant::now() + sse::HEARTBEAT_INTERVAL,
        sse::HEARTBEAT_INTERVAL,
    );
    let start = futures::stream::once(async { Ok(Bytes::from(sse::comment("connected"))) });
    let state = (Box::pin(frames), heartbeat, false);
    let rest = futures::stream::unfold(state, move |(mut frames, mut heartbeat, done)| {
        let draining = draining.clone();
        async move {
            if done {
                return None;
            }
            tokio::select! {
                // Frames already published go out before a drain closes the stream.
                biased;
                next = frames.next() => next.map(|(frame, terminal)| {
                    (Ok(Bytes::from(frame)), (frames, heartbeat, terminal))
                }),
                _ = heartbeat.tick() => Some((Ok(Bytes::from(sse::comment("ping"))), (frames, heartbeat, false))),
                _ = draining.cancelled() => None,
            }
        }
    });
    start.chain(rest)
}

/// `GET /v1/runs/{id}/events/history`: every persisted event in sequence order.
#[utoipa::path(get, path = "/v1/runs/{run_id}/events/history", tag = "events", params(RunIdPath, AppQuery),
    responses((status = 200, description = "Every persisted event of the run, in sequence order", body = [ar_wire::EventEnvelope])))]
pub async fn history(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
) -> ApiResult<Response> {
    let app_id = params.app_id()?;
    load(&state, &app_id, &run_id).await?;
    let events = state
        .store
        .list_events_after(&app_id, &run_id, 0, None)
        .await?;
    Ok(json(
        StatusCode::OK,
        &events.iter().map(v1_envelope).collect::<Vec<_>>(),
    ))
}

/// The app id of a v2 request, once the app is known to be on v2 (the original's 404 otherwise).
fn v2_app(state: &AppState, params: &Params) -> ApiResult<String> {
    let app_id = params.app_id()?;
    if !state.is_v2_app(&app_id) {
        return Err(ApiError::not_found(
            ar_wire::error::messages::V2_NOT_ENABLED,
        ));
    }
    Ok(app_id)
}

async fn v2_gate(state: &AppState, params: &Params, run_id: &str) -> ApiResult<String> {
    let app_id = v2_app(state, params)?;
    load(state, &app_id, run_id).await?;
    Ok(app_id)
}

async fn snapshot(
    state: &AppState,
    app_id: &str,
    run_id: &str,
) -> ApiResult<ar_wire::StreamStateSnapshot> {
    let events = state
        .store
        .list_events_after(app_id, run_id, 0, None)
        .await?;
    let through = events.last().map(|event| event.sequence_no).unwrap_or(0);
    let envelopes: Vec<serde_json::Value> = events
        .iter()
        .map(|event| serde_json::to_value(v2_envelope(event)).unwrap_or_default())
        .collect();
    let mut state_map = serde_json::Map::new();
    state_map.insert("events".into(), serde_json::Value::Array(envelopes));
    Ok(ar_wire::StreamStateSnapshot {
        schema_version: "2".into(),
        run_id: run_id.to_string(),
        through_sequence: through,
        state: state_map,
    })
}

/// `GET /v2/runs/{id}/events?after_sequence=N[&page_size=K]`, checked in the original's order
/// (app, page size, run); an `after_sequence` that is not a whole number counts as 0, as there.
#[utoipa::path(get, path = "/v2/runs/{run_id}/events", tag = "events", params(RunIdPath, V2EventsQuery),
    responses((status = 200, description = "Persisted v2 events after the cursor", body = ar_wire::EventListResponse)))]
pub async fn list_v2(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
) -> ApiResult<Response> {
    let app_id = v2_app(&state, &params)?;
    let after = params
        .get("after_sequence")
        .and_then(|text| text.parse::<i64>().ok())
        .unwrap_or(0)
        .max(0);
    let page_size = match params.get("page_size") {
        None => None,
        Some(text) => Some(
            text.parse::<i64>()
                .ok()
                .filter(|size| (1..=ar_wire::events::MAX_EVENT_PAGE_SIZE).contains(size))
                .ok_or_else(|| ApiError::bad_request("page_size must be between 1 and 1000"))?,
        ),
    };
    load(&state, &app_id, &run_id).await?;
    let events = state
        .store
        .list_events_after(&app_id, &run_id, after, page_size)
        .await?;
    let next = events
        .last()
        .map(|event| event.sequence_no)
        .unwrap_or(after);
    let stream_state_snapshot = if page_size.is_none() && after == 0 {
        Some(snapshot(&state, &app_id, &run_id).await?)
    } else {
        None
    };
    let body = ar_wire::EventListResponse {
        events: events.iter().map(event_to_v2).collect(),
        next_sequence_no: next,
        stream_state_snapshot,
    };
    Ok(json(StatusCode::OK, &body))
}

/// `GET /v2/runs/{id}/stream-state`.
#[utoipa::path(get, path = "/v2/runs/{run_id}/stream-state", tag = "events", params(RunIdPath, AppQuery),
    responses((status = 200, description = "The run's materialised v2 stream state", body = ar_wire::StreamStateSnapshot)))]
pub async fn stream_state(
    State(state): State<AppState>,
    RunPath(run_id): RunPath,
    params: Params,
) -> ApiResult<Response> {
    let app_id = v2_gate(&state, &params, &run_id).await?;
    Ok(json(
        StatusCode::OK,
        &snapshot(&state, &app_id, &run_id).await?,
    ))
}
