//! `fetch_url` against local HTTP servers: loopback is reached only through the policy's
//! explicit `allow_loopback`, every other non-public destination stays refused on every hop.

use std::time::Duration;

use ar_core::{JsonMap, TargetRef};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use serde_json::json;

use super::*;

fn local() -> FetchPolicy {
    FetchPolicy {
        allow_http: true,
        allow_loopback: true,
        ..FetchPolicy::default()
    }
}

fn typed(content_type: &'static str, body: impl Into<Vec<u8>>) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body.into()).into_response()
}

async fn server() -> String {
    let app = Router::new()
        .route(
            "/page",
            get(|| async {
                typed(
                    "text/html; charset=utf-8",
                    "<html><head><title>x</title></head><body><h1>Docs</h1><p>Read &amp; enjoy</p><script>evil()</script></body></html>",
                )
            }),
        )
        .route("/data", get(|| async { typed("application/json", r#"{"a": [1, 2]}"#) }))
        .route("/image", get(|| async { typed("image/png", vec![0x89, b'P', b'N', b'G', 0, 1]) }))
        .route("/big", get(|| async { typed("text/plain", vec![b'x'; 3 * 1024 * 1024]) }))
        .route("/hop1", get(|| async { Redirect::temporary("/hop2") }))
        .route("/hop2", get(|| async { Redirect::permanent("page") }))
        .route("/loop", get(|| async { Redirect::temporary("/loop") }))
        .route("/to-private", get(|| async { Redirect::temporary("http://10.0.0.1/admin") }))
        .route(
            "/to-metadata",
            get(|| async { Redirect::temporary("http://169.254.169.254/latest/meta-data/") }),
        )
        .route("/missing", get(|| async { (StatusCode::NOT_FOUND, "no such page") }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "late"
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn ctx(lease: Option<Value>) -> ToolContext {
    let mut run_metadata = JsonMap::new();
    if let Some(lease) = lease {
        run_metadata.insert(WORKSPACE_LEASE_KEY.into(), lease);
    }
    ToolContext {
        app_id: "app".into(),
        run_id: "run_1".into(),
        agent_id: "agt_1".into(),
        external_actor_id: String::new(),
        target: TargetRef {
            target_type: "doc".into(),
            id: "D".into(),
            display: None,
            metadata: None,
        },
        context_summary: String::new(),
        run_metadata,
    }
}

async fn fetch(policy: FetchPolicy, input: Value) -> ToolOutput {
    FetchUrl::new(policy).unwrap().call(&ctx(None), input).await
}

#[tokio::test]
async fn html_becomes_text_json_stays_and_redirects_are_followed() {
    let base = server().await;
    let page = fetch(local(), json!({"url": format!("{base}/page")})).await;
    assert!(!page.is_error, "{page:?}");
    assert_eq!(page.content, "Docs\nRead & enjoy");
    let data = fetch(local(), json!({"url": format!("{base}/data")})).await;
    assert_eq!(data.content, r#"{"a": [1, 2]}"#);
    let hopped = fetch(local(), json!({"url": format!("{base}/hop1")})).await;
    assert_eq!(hopped.content, "Docs\nRead & enjoy");
    assert_eq!(hopped.structured.unwrap()["url"], format!("{base}/page"));
    let looped = fetch(local(), json!({"url": format!("{base}/loop")})).await;
    assert!(
        looped.is_error && looped.content.contains("redirects"),
        "{looped:?}"
    );
    let missing = fetch(local(), json!({"url": format!("{base}/missing")})).await;
    assert!(
        missing.is_error && missing.content.contains("HTTP 404"),
        "{missing:?}"
    );
}

#[tokio::test]
async fn every_hop_is_checked() {
    let base = server().await;
    for path in ["to-private", "to-metadata"] {
        let out = fetch(local(), json!({"url": format!("{base}/{path}")})).await;
        assert!(out.is_error, "{out:?}");
        assert!(
            out.content.contains("refused") && out.content.contains("address"),
            "{}",
            out.content
        );
    }
    // Without the explicit allowance loopback is refused, as a literal and behind a name.
    let strict_http = FetchPolicy {
        allow_http: true,
        ..FetchPolicy::default()
    };
    let literal = fetch(strict_http, json!({"url": format!("{base}/page")})).await;
    assert!(
        literal.is_error && literal.content.contains("loopback"),
        "{literal:?}"
    );
    let port = base.rsplit(':').next().unwrap();
    let named = fetch(
        strict_http,
        json!({"url": format!("http://localhost:{port}/page")}),
    )
    .await;
    assert!(
        named.is_error && named.content.contains("loopback"),
        "{named:?}"
    );
    // Plain http is refused unless allowed.
    let https_only = FetchPolicy {
        allow_loopback: true,
        ..FetchPolicy::default()
    };
    let plain = fetch(https_only, json!({"url": format!("{base}/page")})).await;
    assert!(
        plain.is_error && plain.content.contains("plain http"),
        "{plain:?}"
    );
}

#[tokio::test]
async fn bodies_are_capped_and_binary_needs_an_output_path() {
    let base = server().await;
    let big = fetch(local(), json!({"url": format!("{base}/big")})).await;
    assert!(!big.is_error);
    assert!(
        big.content.len() <= MAX_TEXT_BYTES + 20,
        "{}",
        big.content.len()
    );
    assert!(big.content.ends_with("[truncated]"));
    assert_eq!(big.structured.unwrap()["truncated"], true);
    let image = fetch(local(), json!({"url": format!("{base}/image")})).await;
    assert!(
        image.is_error && image.content.contains("output_path"),
        "{image:?}"
    );
    let slow = FetchUrl::new(local())
        .unwrap()
        .with_timeout(Duration::from_millis(300))
        .call(&ctx(None), json!({"url": format!("{base}/slow")}))
        .await;
    assert!(slow.is_error && slow.content.contains("within"), "{slow:?}");
    let bad = fetch(local(), json!({"output_path": "x"})).await;
    assert!(bad.is_error && bad.content.contains("`url`"), "{bad:?}");
}

#[tokio::test]
async fn output_path_writes_inside_the_workspace_only() {
    let base = server().await;
    let workspace = tempfile::tempdir().unwrap();
    let lease = json!({"id": "ws", "root_path": workspace.path().to_str().unwrap()});
    let tool = FetchUrl::new(local()).unwrap();
    let call = |path: &str, input_path: &str| {
        let input = json!({"url": format!("{base}/{path}"), "output_path": input_path});
        let ctx = ctx(Some(lease.clone()));
        let tool = tool.clone();
        async move { tool.call(&ctx, input).await }
    };
    let saved = call("image", "downloads/logo.png").await;
    assert!(!saved.is_error, "{saved:?}");
    assert_eq!(
        std::fs::read(workspace.path().join("downloads/logo.png")).unwrap(),
        vec![0x89, b'P', b'N', b'G', 0, 1]
    );
    assert_eq!(saved.structured.unwrap()["bytes"], 6);
    let escaped = call("image", "../escaped.png").await;
    assert!(
        escaped.is_error && escaped.content.contains("relative path"),
        "{escaped:?}"
    );
    let oversize = call("big", "big.txt").await;
    assert!(
        oversize.is_error && oversize.content.contains("nothing was written"),
        "{oversize:?}"
    );
    assert!(!workspace.path().join("big.txt").exists());

    let no_workspace = tool
        .call(
            &ctx(None),
            json!({"url": format!("{base}/image"), "output_path": "a.png"}),
        )
        .await;
    assert!(
        no_workspace.is_error && no_workspace.content.contains("has none"),
        "{no_workspace:?}"
    );
    let read_only = json!({"root_path": workspace.path().to_str().unwrap(), "access": "read_only"});
    let refused = tool
        .call(
            &ctx(Some(read_only)),
            json!({"url": format!("{base}/image"), "output_path": "b.png"}),
        )
        .await;
    assert!(
        refused.is_error && refused.content.contains("read-only"),
        "{refused:?}"
    );
    assert!(!workspace.path().join("b.png").exists());
}
