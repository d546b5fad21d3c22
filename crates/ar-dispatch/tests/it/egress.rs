//! The model egress proxy against the mock model provider on loopback: the placeholder is
//! swapped for the key (both header forms), answers stream back and their usage is counted,
//! other hosts, other paths, other runs' placeholders and ended runs are refused, and a 20 MB
//! answer is cut with a clear reason while nothing is left hanging.

use std::time::Duration;

use ar_core::secret::Secret;
use ar_dispatch::egress::{upstream_client, EgressLimits, EgressProxy, EgressRoute};
use ar_test_support::mock_provider::{MockProvider, Reply, Usage};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const KEY: &str = "sk-the-real-route-key";

async fn proxy_for(mock: &MockProvider, cli_path: &str, limits: EgressLimits) -> EgressProxy {
    let route = EgressRoute {
        base_url: mock.base_url(),
        credential: Some(Secret::new(KEY)),
        headers: vec![("chatgpt-account-id".into(), "acct_test".into())],
    };
    EgressProxy::start(&route, cli_path, limits, upstream_client().unwrap())
        .await
        .unwrap()
}

fn responses_body() -> Value {
    json!({"model": "mock-model", "stream": true, "input": [{"role": "user", "content": "hi"}]})
}

async fn post(url: &str, auth: (&str, &str), body: &Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .header(auth.0, auth.1)
        .json(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_placeholder_is_swapped_for_the_key_and_usage_is_counted() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text_deltas(["Hel", "lo"]).usage(Usage::new(120, 8).cached(100)));
    mock.push(Reply::text("again").usage(Usage::new(10, 2)));
    let proxy = proxy_for(&mock, "/v1", EgressLimits::default()).await;
    let placeholder = proxy.placeholder().expose().to_string();
    assert!(placeholder.starts_with("arp_") && placeholder != KEY);
    let bearer = format!("Bearer {placeholder}");
    let url = format!("{}/responses", proxy.base_url());
    let answer = post(&url, ("authorization", &bearer), &responses_body()).await;
    assert_eq!(answer.status(), 200);
    let text = answer.text().await.unwrap();
    assert!(
        text.contains("response.completed") && text.contains("Hel"),
        "{text}"
    );
    // Anthropic's header form: the key goes upstream as x-api-key.
    let messages = json!({"model": "claude-sonnet-4-5", "max_tokens": 10, "stream": true,
                          "messages": [{"role": "user", "content": "hi"}]});
    let answer = post(
        &format!("{}/messages", proxy.base_url()),
        ("x-api-key", &placeholder),
        &messages,
    )
    .await;
    assert_eq!(answer.status(), 200);
    let _ = answer.text().await.unwrap();

    let seen = mock.model_requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(seen[1].header("x-api-key"), Some(KEY));
    assert_eq!(seen[0].header("chatgpt-account-id"), Some("acct_test"));
    assert!(seen[1].header("authorization").is_none());
    for request in &seen {
        let headers = format!("{:?}", request.headers);
        assert!(
            !headers.contains(&placeholder),
            "the placeholder went upstream: {headers}"
        );
    }
    let report = proxy.report();
    assert_eq!((report.requests, report.refused), (2, 0));
    assert!(report.bytes_sent > 0 && report.bytes_received > 0);
    assert_eq!(report.usage.input_tokens, 130, "{report:?}");
    assert_eq!(report.usage.output_tokens, 10, "{report:?}");
    assert_eq!(report.usage.cached_input_tokens, 100, "{report:?}");
    assert!(report.error.is_empty());
}

/// Sends raw bytes to the proxy and reads its answer (status line and body).
async fn raw(proxy: &EgressProxy, request: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).to_string()
}

#[tokio::test]
async fn other_hosts_paths_and_placeholders_are_refused() {
    let mock = MockProvider::start().await;
    mock.set_fallback(Some(Reply::text("should not be asked")));
    let proxy = proxy_for(&mock, "/v1", EgressLimits::default()).await;
    let other_run = proxy_for(&mock, "/v1", EgressLimits::default()).await;
    let mine = format!("Bearer {}", proxy.placeholder().expose());
    let theirs = format!("Bearer {}", other_run.placeholder().expose());
    let url = format!("{}/responses", proxy.base_url());

    let refused = post(&url, ("authorization", &theirs), &responses_body()).await;
    assert_eq!(refused.status(), 401);
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not the run's egress token"),
        "{body}"
    );
    assert_eq!(
        post(
            &url,
            ("authorization", "Bearer arp_guess"),
            &responses_body()
        )
        .await
        .status(),
        401
    );
    assert_eq!(
        post(
            &url,
            ("authorization", &format!("Bearer {KEY}")),
            &responses_body()
        )
        .await
        .status(),
        401
    );
    assert_eq!(
        post(&url, ("x-other", "1"), &responses_body())
            .await
            .status(),
        401
    );

    let another_host = format!(
        "POST http://api.example.com/v1/responses HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: {mine}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    let answer = raw(&proxy, &another_host).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(
        answer.contains("forwards only to the run's model route"),
        "{answer}"
    );
    let connect = format!("CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\nAuthorization: {mine}\r\nConnection: close\r\n\r\n");
    let answer = raw(&proxy, &connect).await;
    assert!(
        answer.starts_with("HTTP/1.1 403") || answer.starts_with("HTTP/1.1 400"),
        "{answer}"
    );
    let base = proxy.base_url().trim_end_matches("/v1").to_string();
    for (path, status) in [("/admin", 404), ("/v10/responses", 404)] {
        let answer = post(
            &format!("{base}{path}"),
            ("authorization", &mine),
            &responses_body(),
        )
        .await;
        assert_eq!(answer.status(), status, "{path}");
    }
    // reqwest would normalise dot segments away; sent as they are, they are refused.
    for path in ["/v1/../admin", "/v1/%2e%2e/admin", "/v1/x%2Fy"] {
        let climb = format!("POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {mine}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}");
        let answer = raw(&proxy, &climb).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{path}: {answer}");
    }
    assert!(
        mock.model_requests().is_empty(),
        "a refused request reached the route"
    );
    assert_eq!(proxy.report().requests, 0);
    assert!(proxy.report().refused >= 8, "{:?}", proxy.report());

    // An ended run's proxy takes nothing: it no longer listens.
    let addr = proxy.addr();
    proxy.stop();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let after = reqwest::Client::new()
        .post(&url)
        .header("authorization", &mine)
        .json(&responses_body())
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    assert!(
        after.is_err(),
        "the stopped proxy at {addr} still answered: {after:?}"
    );
}

#[tokio::test]
async fn a_20_mb_answer_is_cut_with_a_clear_reason_and_nothing_hangs() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("x".repeat(20 * 1024 * 1024)));
    mock.push(Reply::text("small").usage(Usage::new(3, 1)));
    let proxy = proxy_for(&mock, "/v1", EgressLimits::default()).await;
    let bearer = format!("Bearer {}", proxy.placeholder().expose());
    let url = format!("{}/responses", proxy.base_url());
    let answer = post(&url, ("authorization", &bearer), &responses_body()).await;
    assert_eq!(
        answer.status(),
        200,
        "headers come before the body is known to be too large"
    );
    let read = tokio::time::timeout(Duration::from_secs(60), answer.bytes()).await;
    let read = read.expect("the cut answer ended");
    assert!(
        read.is_err(),
        "the client saw the answer cut, not a complete one"
    );
    let report = proxy.report();
    assert!(
        report
            .error
            .contains("exceeded the egress proxy's limit of 16 MiB"),
        "{report:?}"
    );
    assert!(report.bytes_received <= 16 * 1024 * 1024, "{report:?}");
    // The proxy serves on: the next call goes through.
    let next = post(&url, ("authorization", &bearer), &responses_body()).await;
    assert_eq!(next.status(), 200);
    assert!(next.text().await.unwrap().contains("small"));
    // And the mock's stream of the cut answer was closed, not left open.
    for _ in 0..100 {
        if mock.active_streams() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        mock.active_streams(),
        0,
        "the cut stream is still open upstream"
    );
}

#[tokio::test]
async fn a_declared_oversized_request_is_refused_before_it_goes_out() {
    let mock = MockProvider::start().await;
    let limits = EgressLimits {
        max_request_bytes: 1024,
        ..EgressLimits::default()
    };
    let proxy = proxy_for(&mock, "/v1", limits).await;
    let bearer = format!("Bearer {}", proxy.placeholder().expose());
    let big = json!({"input": "y".repeat(4096)});
    let answer = post(
        &format!("{}/responses", proxy.base_url()),
        ("authorization", &bearer),
        &big,
    )
    .await;
    assert_eq!(answer.status(), 413);
    assert!(mock.model_requests().is_empty());
}
