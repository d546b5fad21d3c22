//! The service's OpenAPI 3.1 document (`GET /openapi.json`), generated from the handlers'
//! `#[utoipa::path]` annotations and the `ar-wire` types.
//!
//! The handlers are annotated once, under `/v1` (and the v2-only routes under `/v2`); the
//! document adds what the router mounts twice: every `/v1` route again under `/internal`, and
//! the run tree again under `/v2` (where `events` is the v2 page). Errors every route shares
//! (401, 400, 500, 503, and the run routes' 404) are added here rather than on each handler.
//! A body field is `required` when the server always writes it: the keys of the type's
//! default value, so the document says exactly what a response always carries.

use std::sync::OnceLock;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::schema::Schema;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, ResponseBuilder};
use utoipa::{IntoParams, OpenApi as _, ToSchema};

use crate::routes;

/// `app_id` (required): the host app whose records are read or written.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AppQuery {
    /// The host app.
    #[param(example = "host_app")]
    pub app_id: String,
}

/// `app_id`, optional on this route.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct OptionalAppQuery {
    /// The host app (the body's `app_id` when absent).
    #[param(example = "host_app")]
    pub app_id: Option<String>,
}

/// `GET /v1/runs/search`. As lenient as the original: `limit` and `offset` that are not whole
/// numbers count as unset, so they are strings here.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SearchQuery {
    /// The host app.
    #[param(example = "host_app")]
    pub app_id: String,
    /// Text matched against the run's id, agent, target and instructions.
    pub q: Option<String>,
    /// A run status; one no run can have finds nothing.
    pub status: Option<String>,
    /// Page size, 1..=100 (default 25); anything else is the default or the maximum.
    pub limit: Option<String>,
    /// Runs to skip (a whole number; anything else counts as 0).
    pub offset: Option<String>,
}

/// The v1 event stream's cursor.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventStreamQuery {
    /// The host app.
    #[param(example = "host_app")]
    pub app_id: String,
    /// Replay the events after this sequence number (`Last-Event-ID` wins when both are given).
    pub after_sequence: Option<String>,
}

/// A v2 page's cursor and size.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
pub struct V2EventsQuery {
    /// The host app (its `event_protocol` must be `v2`).
    #[param(example = "v2_app")]
    pub app_id: String,
    /// Events after this sequence number (not a whole number: 0).
    pub after_sequence: Option<String>,
    /// Page size, 1..=1000; without it, every event and the stream state.
    pub page_size: Option<String>,
}

/// The run of a run route.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct RunIdPath {
    /// The run's id (`run_…`).
    pub run_id: String,
}

/// The agent of an agent route.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct AgentPath {
    /// The agent's id within its app.
    pub agent_id: String,
}

/// The MCP server of a run MCP route.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ServerIdPath {
    /// The server's `server_id` as the run was started with.
    pub server_id: String,
}

/// `Last-Event-ID`: resume a stream after this sequence number.
#[derive(IntoParams, serde::Deserialize)]
#[into_params(parameter_in = Header)]
pub struct LastEventIdHeader {
    /// The `id` of the last event received.
    #[serde(rename = "Last-Event-ID")]
    pub last_event_id: Option<String>,
}

/// The host's declared event protocol.
#[derive(IntoParams, serde::Deserialize)]
#[into_params(parameter_in = Header)]
pub struct EventProtocolHeader {
    /// `v1` or `v2`; a value other than the app's is a 409.
    #[serde(rename = "X-Agent-Runtime-Event-Protocol")]
    pub event_protocol: Option<String>,
}

/// Header aliases of the resume body's fields.
#[derive(IntoParams, serde::Deserialize)]
#[into_params(parameter_in = Header)]
pub struct ResumeHeaders {
    /// `resume_id` when the body has none.
    #[serde(rename = "Idempotency-Key")]
    pub idempotency_key: Option<String>,
    /// `interaction_id` when the body has none.
    #[serde(rename = "X-Agent-Runtime-Interaction-ID")]
    pub interaction_id: Option<String>,
}

/// A body whose fields are ignored.
#[derive(ToSchema)]
pub struct EmptyObject {}

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Agent Runtime",
        description = "The HTTP API of Agent Runtime: app-scoped agents, runs, their records and events. \
Every route under `/v1` is also served under `/internal`; the run routes are also served under `/v2`, \
where `events` answers pages of v2 envelopes.",
    ),
    paths(
        routes::meta::healthz,
        routes::meta::readyz,
        routes::meta::capabilities,
        routes::meta::app_health,
        routes::meta::metrics,
        openapi_json,
        routes::agents::list,
        routes::agents::create,
        routes::agents::get,
        routes::agents::upsert,
        routes::runs::list,
        routes::runs::start,
        routes::runs::search,
        routes::runs::get,
        routes::runs::execution,
        routes::runs::resume,
        routes::runs::approve,
        routes::runs::request_changes,
        routes::runs::cancel,
        routes::runs::pause,
        routes::runs::update_model_credential,
        routes::runs::revoke_model_credential,
        routes::runs::update_mcp_credential,
        routes::runs::codex_auth_start,
        routes::runs::codex_auth_cancel,
        routes::records::list_messages,
        routes::records::append_message,
        routes::records::list_artifacts,
        routes::records::append_artifact,
        routes::records::list_interactions,
        routes::records::list_tool_calls,
        routes::records::list_tools,
        routes::records::call_tool,
        routes::events::stream_v1,
        routes::events::history,
        routes::events::list_v2,
        routes::events::stream_state,
    ),
    components(schemas(ar_wire::ErrorBody, ar_wire::Event))
)]
struct ApiDoc;

/// Routes anyone may call (no bearer token).
const PUBLIC_PATHS: &[&str] = &["/healthz", "/readyz", "/openapi.json"];

/// `GET /openapi.json`: this document.
#[utoipa::path(get, path = "/openapi.json", tag = "meta",
    responses((status = 200, description = "The OpenAPI 3.1 document of this API", body = Object)))]
pub async fn openapi_json() -> Response {
    static DOCUMENT: OnceLock<Vec<u8>> = OnceLock::new();
    let body = DOCUMENT.get_or_init(|| serde_json::to_vec(&document_json()).unwrap_or_default());
    (
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.clone(),
    )
        .into_response()
}

/// The whole document as served: [`document`] with the event stream's frames described.
pub fn document_json() -> Value {
    let mut doc = serde_json::to_value(document()).unwrap_or_default();
    if let Some(paths) = doc["paths"].as_object_mut() {
        for item in paths.values_mut() {
            let pointer = "/get/responses/200/content/text~1event-stream/schema";
            if let Some(schema) = item.pointer_mut(pointer) {
                *schema = sse_frame_schema();
            }
        }
    }
    doc
}

/// One server-sent event of a run stream: `id` (the sequence number; none on transient
/// deltas), `event` (the event type) and `data`, a JSON envelope (persisted events) or a bare
/// event (deltas).
fn sse_frame_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "id": {"type": "string", "pattern": "^[0-9]+$"},
            "event": {"type": "string"},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": {"anyOf": [
                    {"$ref": "#/components/schemas/EventEnvelope"},
                    {"$ref": "#/components/schemas/Event"},
                ]},
            },
        },
    })
}

/// The document as built from the annotations (see [`document_json`] for what is served).
pub fn document() -> OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    add_aliases(&mut doc);
    name_operations(&mut doc);
    add_security(&mut doc);
    add_common_errors(&mut doc);
    mark_always_written(&mut doc);
    doc
}

fn operations_mut(item: &mut PathItem) -> impl Iterator<Item = (&'static str, &mut Operation)> {
    [
        ("get", &mut item.get),
        ("put", &mut item.put),
        ("post", &mut item.post),
        ("delete", &mut item.delete),
        ("patch", &mut item.patch),
        ("head", &mut item.head),
        ("options", &mut item.options),
        ("trace", &mut item.trace),
    ]
    .into_iter()
    .filter_map(|(method, operation)| operation.as_mut().map(|operation| (method, operation)))
}

/// Every `/v1` route again under `/internal`, the run tree again under `/v2` (its `events` is
/// the v2 handler's own).
fn add_aliases(doc: &mut OpenApi) {
    let originals: Vec<(String, PathItem)> = doc
        .paths
        .paths
        .iter()
        .map(|(path, item)| (path.clone(), item.clone()))
        .collect();
    for (path, item) in originals {
        let Some(rest) = path.strip_prefix("/v1") else {
            continue;
        };
        insert_alias(doc, format!("/internal{rest}"), &item);
        let v2_tree = rest.starts_with("/runs/{run_id}") && rest != "/runs/{run_id}/events";
        if v2_tree {
            insert_alias(doc, format!("/v2{rest}"), &item);
        }
    }
}

fn insert_alias(doc: &mut OpenApi, path: String, item: &PathItem) {
    doc.paths.paths.insert(path, item.clone());
}

/// Operation ids from method and path (`get_v1_runs_run_id_events`): unique, and the same for
/// a route and its aliases but for the prefix.
fn name_operations(doc: &mut OpenApi) {
    for (path, item) in doc.paths.paths.iter_mut() {
        let words: Vec<&str> = path
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|word| !word.is_empty())
            .collect();
        for (method, operation) in operations_mut(item) {
            operation.operation_id = Some(format!("{method}_{}", words.join("_")));
        }
    }
}

fn add_security(doc: &mut OpenApi) {
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
    );
    for (path, item) in doc.paths.paths.iter_mut() {
        let public = PUBLIC_PATHS.contains(&path.as_str());
        for (_, operation) in operations_mut(item) {
            operation.security = Some(if public {
                Vec::new()
            } else {
                vec![SecurityRequirement::new("bearer", Vec::<String>::new())]
            });
        }
    }
}

/// The errors every authenticated route may answer, with the contract's JSON error body.
fn add_common_errors(doc: &mut OpenApi) {
    for (path, item) in doc.paths.paths.iter_mut() {
        if PUBLIC_PATHS.contains(&path.as_str()) {
            continue;
        }
        let run_route = path.contains("{run_id}");
        for (method, operation) in operations_mut(item) {
            let mut errors = vec![
                ("400", "A parameter or the body is missing or wrong (`error` says which, `detail` how)"),
                ("401", "No bearer token, or not the service token"),
                ("500", "The runtime failed (its log says why)"),
                ("503", "The runtime is shutting down, or a provider this needs is not ready"),
            ];
            if run_route {
                errors.push((
                    "404",
                    "No such run in this app, or a method this run route does not take",
                ));
            }
            if method != "get" {
                errors.push(("408", "The request body did not arrive in time"));
                errors.push((
                    "502",
                    "A host endpoint this needs failed or answered garbage",
                ));
            }
            for (status, description) in errors {
                operation
                    .responses
                    .responses
                    .entry(status.to_string())
                    .or_insert_with(|| error_response(description));
            }
        }
    }
}

fn error_response(description: &str) -> RefOr<utoipa::openapi::Response> {
    let content = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("ErrorBody")))
        .build();
    RefOr::T(
        ResponseBuilder::new()
            .description(description)
            .content("application/json", content)
            .build(),
    )
}

/// The JSON a wire type always writes: its default value's keys.
macro_rules! always_written {
    ($($ty:ty),+ $(,)?) => {
        vec![$((
            <$ty as ToSchema>::name().to_string(),
            serde_json::to_value(<$ty>::default()).unwrap_or_default(),
        )),+]
    };
}

/// Calls `$callback![…]` with every wire type of the document (`ar_wire::…` paths), so the
/// document and the tests that check it work from one list.
#[macro_export]
macro_rules! for_each_wire_type {
    ($callback:ident) => {
        $callback![
            ar_wire::Agent,
            ar_wire::SkillRef,
            ar_wire::AgentRunArtifact,
            ar_wire::AppendArtifactRequest,
            ar_wire::Capabilities,
            ar_wire::ProviderCapability,
            ar_wire::StoreInfo,
            ar_wire::DurableInfo,
            ar_wire::SkillInfo,
            ar_wire::RunMCPCapability,
            ar_wire::NodeInfo,
            ar_wire::AppSummary,
            ar_wire::AppComponent,
            ar_wire::HealthResponse,
            ar_wire::CodexAuthState,
            ar_wire::ErrorBody,
            ar_wire::EventEnvelope,
            ar_wire::EventListResponse,
            ar_wire::StreamStateSnapshot,
            ar_wire::Event,
            ar_wire::AgentRunInteraction,
            ar_wire::RunMCPServer,
            ar_wire::RunMCPTool,
            ar_wire::RunMCPCredential,
            ar_wire::UpdateRunMCPCredentialRequest,
            ar_wire::RunMCPCredentialUpdate,
            ar_wire::AgentRunMessage,
            ar_wire::AppendMessageRequest,
            ar_wire::RunModel,
            ar_wire::ModelEndpoint,
            ar_wire::ModelControls,
            ar_wire::OpenRouterModelControls,
            ar_wire::OpenRouterProviderPreferences,
            ar_wire::ModelCredential,
            ar_wire::UpdateRunModelCredentialRequest,
            ar_wire::RunModelCredentialUpdate,
            ar_wire::AgentRun,
            ar_wire::RunInput,
            ar_wire::TurnPolicy,
            ar_wire::StartRunRequest,
            ar_wire::ResumeRunRequest,
            ar_wire::RequestChangesRequest,
            ar_wire::RunPage,
            ar_wire::RunExecutionInfo,
            ar_wire::TargetRef,
            ar_wire::TargetDisplay,
            ar_wire::Tool,
            ar_wire::ToolCall,
            ar_wire::ToolCallResult,
            ar_wire::ContentItem,
            ar_wire::RunToolCallRequest,
            ar_wire::ToolListResponse,
            ar_wire::WorkspaceLease,
        ]
    };
}

/// The wire types of the document, with what each always writes.
pub fn wire_defaults() -> Vec<(String, Value)> {
    for_each_wire_type!(always_written)
}

/// Marks as `required` the properties a type always writes.
fn mark_always_written(doc: &mut OpenApi) {
    let Some(components) = doc.components.as_mut() else {
        return;
    };
    for (name, default) in wire_defaults() {
        let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(&name) else {
            continue;
        };
        let written = default.as_object().cloned().unwrap_or_default();
        object.required = object
            .properties
            .keys()
            .filter(|key| written.contains_key(key.as_str()))
            .cloned()
            .collect();
    }
}
