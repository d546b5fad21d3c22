//! OpenTelemetry traces over OTLP: the real binary with `OTEL_EXPORTER_OTLP_ENDPOINT` exports
//! one trace per run step to an OTLP/HTTP receiver (written here on the OpenTelemetry
//! project's `opentelemetry-proto` messages), with the step's model call, tool call and commits
//! as its children, and a host callback made during the step carries the step's `traceparent`.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use serde_json::{json, Value};

use ar_test_support::mock_provider::{MockProvider, Reply};
use ar_test_support::service::*;

use crate::BIN;

/// One received span: name, trace id, span id, parent span id (hex; empty for a root).
#[derive(Debug, Clone)]
struct Received {
    name: String,
    trace: String,
    id: String,
    parent: String,
}

/// An OTLP/HTTP receiver (`POST /v1/traces`, protobuf) keeping every span it is sent.
async fn otlp_receiver() -> (String, Arc<Mutex<Vec<Received>>>) {
    let spans: Arc<Mutex<Vec<Received>>> = Arc::default();
    let kept = spans.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: Bytes| {
            let kept = kept.clone();
            async move {
                let request = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                let mut kept = kept.lock().unwrap();
                for resource in request.resource_spans {
                    for scope in resource.scope_spans {
                        for span in scope.spans {
                            kept.push(Received {
                                name: span.name,
                                trace: hex(&span.trace_id),
                                id: hex(&span.span_id),
                                parent: hex(&span.parent_span_id),
                            });
                        }
                    }
                }
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, spans)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A host command provider keeping the `traceparent` of each `/execute` call.
async fn command_host() -> (String, Arc<Mutex<Vec<String>>>) {
    let parents: Arc<Mutex<Vec<String>>> = Arc::default();
    let kept = parents.clone();
    let app = axum::Router::new().route(
        "/execute",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let kept = kept.clone();
            async move {
                let parent = headers
                    .get("traceparent")
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or_default();
                kept.lock().unwrap().push(parent.to_string());
                axum::Json(json!({"output": {"tagged": true}}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, parents)
}

#[tokio::test]
async fn each_step_is_a_trace_with_its_model_call_tool_call_and_commits() {
    let (collector, spans) = otlp_receiver().await;
    let (host, parents) = command_host().await;
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call("tag_ticket", "{}"));
    mock.push(Reply::text("Tagged."));
    let dir = tempfile::tempdir().unwrap();
    let mut env = sqlite_env(dir.path(), &mock);
    env.insert("OTEL_EXPORTER_OTLP_ENDPOINT".into(), collector);
    env.insert("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into());
    let apps = json!({"apps": [{
        "app_id": APP,
        "model_endpoints": [{"id": "mock", "base_url": mock.base_url(), "auth_mode": "api_key", "allow_http": true}],
        "command_provider": {"transport": "http", "base_url": host, "token": "cmd-token", "commands": [
            {"name": "tag_ticket", "description": "Tag a ticket", "mutating": false, "risk_level": "read",
             "input_schema": {"type": "object"}}]}
    }]});
    env.insert("AGENT_RUNTIME_APP_CONFIG".into(), apps.to_string());
    let server = Server::start(BIN, &env).await;
    let agent = server
        .agent("tagger", json!({"allowed_tools": ["tag_ticket"]}))
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap().to_string();
    server.wait_status(&run_id, &["completed"]).await;

    let steps: Vec<Received> = wait_for("two exported steps with their children", WAIT, || {
        let spans = spans.lock().unwrap().clone();
        async move {
            let steps: Vec<Received> = spans
                .iter()
                .filter(|s| s.name == "run_step")
                .cloned()
                .collect();
            let models = spans.iter().filter(|s| s.name == "model_call").count();
            (steps.len() >= 2 && models >= 2).then_some(steps)
        }
    })
    .await;
    let spans = spans.lock().unwrap().clone();
    let traces: BTreeSet<&str> = steps.iter().map(|step| step.trace.as_str()).collect();
    assert_eq!(traces.len(), steps.len(), "one trace per step: {steps:?}");
    assert!(
        steps.iter().all(|step| step.parent.is_empty()),
        "steps are roots"
    );
    let children = |step: &Received, name: &str| -> Vec<Received> {
        spans
            .iter()
            .filter(|span| span.name == name && span.parent == step.id)
            .inspect(|span| assert_eq!(span.trace, step.trace))
            .cloned()
            .collect()
    };
    let tool_step = steps
        .iter()
        .find(|step| !children(step, "tool_call").is_empty())
        .unwrap_or_else(|| panic!("no step with a tool call: {spans:?}"));
    for step in &steps {
        assert_eq!(
            children(step, "model_call").len(),
            1,
            "{step:?} in {spans:?}"
        );
        assert!(
            !children(step, "store_commit").is_empty(),
            "{step:?} in {spans:?}"
        );
    }
    let tool = &children(tool_step, "tool_call")[0];
    let parents = parents.lock().unwrap().clone();
    assert_eq!(parents.len(), 1, "{parents:?}");
    let expected = format!("00-{}-{}-01", tool_step.trace, tool.id);
    assert_eq!(
        parents[0], expected,
        "the callback carries the tool call's context"
    );
    let _: Value = server.run(&run_id).await;
}
