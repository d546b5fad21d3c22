//! `HttpWorkspaces` against a host serving the contract's three endpoints: bodies, bearer token,
//! answers checked, failures typed.

use std::sync::{Arc, Mutex};

use ar_core::workspace::{CleanupReason, FinalizeOutcome};
use ar_core::TargetRef;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::json;

use super::*;

type Seen = Arc<Mutex<Vec<(String, Option<String>, Value)>>>;

async fn endpoint(
    State((seen, lease)): State<(Seen, Value)>,
    Path(step): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    seen.lock().unwrap().push((step.clone(), auth, body));
    match step.as_str() {
        "prepare" => (StatusCode::OK, Json(lease)),
        "finalize" => (
            StatusCode::OK,
            Json(json!({"output_summary": {"pr": 7}, "metadata": {}})),
        ),
        "cleanup" => (StatusCode::OK, Json(json!({}))),
        _ => (StatusCode::NOT_FOUND, Json(json!({"detail": "Not Found"}))),
    }
}

async fn provider(lease: Value) -> (HttpWorkspaces, Seen) {
    let seen: Seen = Arc::default();
    let app = Router::new()
        .route("/ws/{step}", post(endpoint))
        .with_state((seen.clone(), lease));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let text = format!(
        "apps: [{{app_id: a, workspace_provider: {{base_url: 'http://{addr}/ws', token: ws-token}}}}]"
    );
    let config = AppConfig::parse(&text, &|_| None).expect("config");
    (HttpWorkspaces::from_app_config(&config).unwrap(), seen)
}

fn run() -> WorkspaceRun {
    WorkspaceRun {
        app_id: "a".into(),
        run_id: "run_1".into(),
        agent_id: "agent_1".into(),
        runtime_kind: "native_sdk".into(),
        target: TargetRef {
            target_type: "ticket".into(),
            id: "T-1".into(),
            ..TargetRef::default()
        },
    }
}

fn prepare_request() -> PrepareRequest {
    PrepareRequest {
        run: run(),
        target_context: None,
        instructions: "fix it".into(),
        trigger: JsonMap::new(),
        metadata: JsonMap::new(),
        mode: WorkspaceMode::HostPrepared,
        execution_config: Some(json!({"workspace": {"mode": "host_prepared"}})),
    }
}

#[tokio::test]
async fn prepare_finalize_cleanup_send_the_contract_bodies() {
    // What the Python SDK's router answers: its model's defaults are nulls.
    let (workspaces, seen) = provider(json!({
        "id": "lease_1", "provider": null, "root_path": "/srv/ws/1",
        "cleanup_policy": null, "metadata": {}
    }))
    .await;
    assert!(workspaces.supports("a", WorkspaceMode::HostPrepared));
    assert!(!workspaces.supports("a", WorkspaceMode::Repository));
    assert!(!workspaces.supports("b", WorkspaceMode::HostPrepared));
    let lease = workspaces.prepare(&prepare_request()).await.unwrap();
    assert_eq!(
        (lease.id.as_str(), lease.root_path.as_str()),
        ("lease_1", "/srv/ws/1")
    );
    let finalized = workspaces
        .finalize(&FinalizeRequest {
            run: run(),
            mode: WorkspaceMode::HostPrepared,
            lease: lease.clone(),
            outcome: FinalizeOutcome::Completed,
            error_message: String::new(),
            output_summary: JsonMap::new(),
        })
        .await
        .unwrap();
    assert_eq!(finalized.output_summary["pr"], 7);
    workspaces
        .cleanup(&CleanupRequest {
            run: run(),
            mode: WorkspaceMode::HostPrepared,
            lease,
            reason: CleanupReason::Completed,
        })
        .await
        .unwrap();
    let seen = seen.lock().unwrap();
    let steps: Vec<_> = seen.iter().map(|(step, _, _)| step.as_str()).collect();
    assert_eq!(steps, ["prepare", "finalize", "cleanup"]);
    assert!(seen
        .iter()
        .all(|(_, auth, _)| auth.as_deref() == Some("Bearer ws-token")));
    let prepare = &seen[0].2;
    assert_eq!(prepare["workspace_mode"], "host_prepared");
    assert_eq!(prepare["target"], json!({"type": "ticket", "id": "T-1"}));
    assert_eq!(
        prepare["execution_config"]["workspace"]["mode"],
        "host_prepared"
    );
    assert_eq!(seen[1].2["outcome"], "completed");
    assert_eq!(seen[1].2["lease"]["id"], "lease_1");
    assert_eq!(seen[2].2["reason"], "completed");
}

#[tokio::test]
async fn an_unusable_lease_is_refused_with_the_reason() {
    for (lease, reason) in [
        (json!({"id": "", "root_path": "/x"}), "no id"),
        (
            json!({"id": "l", "root_path": "relative/dir"}),
            "not an absolute path",
        ),
        (
            json!({"id": "l", "root_path": "/x", "cleanup_policy": "weekly"}),
            "unknown cleanup_policy",
        ),
        (json!(["not", "a", "lease"]), "unusable answer"),
    ] {
        let (workspaces, _) = provider(lease).await;
        let error = workspaces.prepare(&prepare_request()).await.unwrap_err();
        assert!(
            matches!(error, WorkspaceError::BadAnswer { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains(reason), "{error}");
    }
}

#[tokio::test]
async fn an_unreachable_provider_fails_without_its_url_or_token() {
    let text = "apps: [{app_id: a, workspace_provider: {base_url: 'http://127.0.0.1:9/ws', token: ws-token}}]";
    let config = AppConfig::parse(text, &|_| None).unwrap();
    let workspaces = HttpWorkspaces::from_app_config(&config).unwrap();
    let error = workspaces.prepare(&prepare_request()).await.unwrap_err();
    let text = ar_core::error_chain(&error);
    assert!(text.contains("unreachable"), "{text}");
    assert!(
        !text.contains("ws-token") && !text.contains("127.0.0.1"),
        "{text}"
    );
}
