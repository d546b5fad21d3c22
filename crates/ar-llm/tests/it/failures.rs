//! Error mapping, bounded retries with Retry-After, no replay of broken streams, idle timeout,
//! and cancellation by dropping the future — across all three wire formats.

use std::time::{Duration, Instant};

use ar_core::model::{ModelClient, ModelError, StreamDelta};
use ar_llm::{LlmClient, LlmClientConfig, RetryPolicy};
use ar_test_support::mock_provider::Reply;

use crate::{call, client, mock, route, simple_request};

const PROVIDERS: [&str; 3] = ["openai_compatible", "openai", "anthropic"];

#[tokio::test]
async fn unauthorized_is_an_auth_error_without_retry() {
    for p in PROVIDERS {
        let mock = mock().await;
        mock.push(Reply::unauthorized());
        mock.set_fallback(Some(Reply::text("should not be reached")));
        let (res, _) = call(&client(3), &route(p, mock.base_url()), &simple_request()).await;
        assert!(
            matches!(res, Err(ModelError::Authentication(ref m)) if m.contains("API key")),
            "{p}: {res:?}"
        );
        assert_eq!(mock.request_count(), 1, "{p}");
    }
}

#[tokio::test]
async fn transient_errors_are_retried_then_succeed() {
    for p in PROVIDERS {
        let mock = mock().await;
        mock.push_all([
            Reply::server_error(),
            Reply::error(529, "overloaded"),
            Reply::text("ok"),
        ]);
        let (res, _) = call(&client(3), &route(p, mock.base_url()), &simple_request()).await;
        assert_eq!(res.unwrap().text, "ok", "{p}");
        assert_eq!(mock.request_count(), 3, "{p}");
    }
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let mock = mock().await;
    mock.push_all([Reply::rate_limited(1), Reply::text("after wait")]);
    let t = Instant::now();
    let (res, _) = call(
        &client(2),
        &route("openai_compatible", mock.base_url()),
        &simple_request(),
    )
    .await;
    assert_eq!(res.unwrap().text, "after wait");
    assert!(t.elapsed() >= Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(mock.request_count(), 2);
}

#[tokio::test]
async fn retry_after_beyond_the_cap_fails_fast() {
    let mock = mock().await;
    mock.push_all([Reply::rate_limited(3600), Reply::text("never")]);
    let t = Instant::now();
    let (res, _) = call(
        &client(2),
        &route("openai", mock.base_url()),
        &simple_request(),
    )
    .await;
    assert!(
        matches!(res, Err(ModelError::Unavailable { status: 429, .. })),
        "{res:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(mock.request_count(), 1);
}

#[tokio::test]
async fn a_spent_quota_is_not_retried() {
    for p in PROVIDERS {
        let mock = mock().await;
        mock.push(Reply::error(402, "Insufficient credits (mock)"));
        mock.set_fallback(Some(Reply::text("should not be reached")));
        let (res, _) = call(&client(3), &route(p, mock.base_url()), &simple_request()).await;
        let error = res.unwrap_err();
        assert!(
            matches!(error, ModelError::QuotaExhausted { status: 402, .. }),
            "{p}: {error:?}"
        );
        assert!(error.to_string().contains("quota exhausted"), "{error}");
        assert_eq!(mock.request_count(), 1, "{p}");
    }
}

#[tokio::test]
async fn retries_are_bounded() {
    let mock = mock().await;
    mock.set_fallback(Some(Reply::server_error()));
    let (res, _) = call(
        &client(2),
        &route("anthropic", mock.base_url()),
        &simple_request(),
    )
    .await;
    assert!(
        matches!(res, Err(ModelError::Unavailable { status: 500, .. })),
        "{res:?}"
    );
    assert_eq!(mock.request_count(), 3);
}

#[tokio::test]
async fn client_errors_are_rejected_without_retry() {
    let mock = mock().await;
    mock.push(Reply::error(400, "bad schema"));
    let (res, _) = call(
        &client(3),
        &route("openai_compatible", mock.base_url()),
        &simple_request(),
    )
    .await;
    assert_eq!(
        res.unwrap_err(),
        ModelError::Rejected {
            status: 400,
            message: "bad schema".into()
        }
    );
    assert_eq!(mock.request_count(), 1);
}

#[tokio::test]
async fn broken_stream_is_not_replayed() {
    for p in PROVIDERS {
        let mock = mock().await;
        mock.push(Reply::text_deltas(["par", "tial"]).then_disconnect());
        mock.set_fallback(Some(Reply::text("replayed!")));
        let (res, deltas) = call(&client(3), &route(p, mock.base_url()), &simple_request()).await;
        assert!(
            matches!(res, Err(ModelError::Transport { .. })),
            "{p}: {res:?}"
        );
        assert!(
            deltas.contains(&StreamDelta::Text("par".into())),
            "{p}: deltas before the break are delivered: {deltas:?}"
        );
        assert_eq!(mock.request_count(), 1, "{p}");
    }
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() {
    // Bind and drop a listener to get a port nobody serves.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (res, _) = call(
        &client(1),
        &route("openai_compatible", format!("http://127.0.0.1:{port}/v1")),
        &simple_request(),
    )
    .await;
    let error = res.unwrap_err();
    assert!(matches!(error, ModelError::Transport { .. }), "{error:?}");
    // The transport's own error survives as the source, down to the refused connection.
    let mut chain = std::error::Error::source(&error);
    let mut refused = false;
    while let Some(cause) = chain {
        refused |= cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused);
        chain = cause.source();
    }
    assert!(
        refused,
        "no refused connection among the causes of {error:?}"
    );
}

#[tokio::test]
async fn idle_stream_times_out() {
    let mock = mock().await;
    mock.push(Reply::text("stalls").then_hang());
    let client = LlmClient::with_config(LlmClientConfig {
        retry: RetryPolicy::fast(2),
        idle_timeout: Duration::from_millis(200),
        ..LlmClientConfig::default()
    })
    .unwrap();
    let (res, deltas) = call(
        &client,
        &route("openai", mock.base_url()),
        &simple_request(),
    )
    .await;
    assert!(
        matches!(res, Err(ModelError::Transport { ref message, .. }) if message.contains("no data")),
        "{res:?}"
    );
    assert_eq!(deltas, vec![StreamDelta::Text("stalls".into())]);
    assert_eq!(mock.request_count(), 1);
}

#[tokio::test]
async fn dropping_the_future_closes_the_stream() {
    for p in PROVIDERS {
        let mock = mock().await;
        mock.push(Reply::text("first words").then_hang());
        let client = client(0);
        let r = route(p, mock.base_url());
        let req = simple_request();
        let mut sink = |_d: StreamDelta| {};
        let fut = client.complete(&r, &req, &mut sink);
        let timed_out = tokio::time::timeout(Duration::from_millis(300), fut).await;
        assert!(timed_out.is_err(), "{p}: call should still be running");
        // The future is dropped here; the mock must see the connection go away.
        let deadline = Instant::now() + Duration::from_secs(5);
        while mock.active_streams() != 0 {
            assert!(
                Instant::now() < deadline,
                "{p}: stream still open after cancel"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[tokio::test]
async fn unknown_provider_is_unsupported() {
    let mock = mock().await;
    let (res, _) = call(
        &client(0),
        &route("gemini", mock.base_url()),
        &simple_request(),
    )
    .await;
    assert_eq!(
        res.unwrap_err(),
        ModelError::UnsupportedProvider("gemini".into())
    );
    assert_eq!(mock.request_count(), 0);
}

#[tokio::test]
async fn in_stream_errors_map_by_vendor_kind_and_are_not_replayed() {
    let cases = [
        ("openai_compatible", 429u16),
        ("openai", 500),
        ("anthropic", 529),
    ];
    for (p, status) in cases {
        let mock = mock().await;
        mock.push(Reply::text("so far").then_error(status, "mid-stream trouble"));
        mock.set_fallback(Some(Reply::text("replayed!")));
        let (res, deltas) = call(&client(3), &route(p, mock.base_url()), &simple_request()).await;
        assert_eq!(
            res.unwrap_err(),
            ModelError::Unavailable {
                status,
                message: "mid-stream trouble".into()
            },
            "{p}"
        );
        assert_eq!(deltas, vec![StreamDelta::Text("so far".into())], "{p}");
        assert_eq!(mock.request_count(), 1, "{p}");
    }
}

#[tokio::test]
async fn reasoning_is_streamed_in_every_wire_format() {
    for p in PROVIDERS {
        let mock = mock().await;
        mock.push(
            Reply::text("answer")
                .with_reasoning("step ")
                .with_reasoning("one"),
        );
        let (res, deltas) = call(&client(0), &route(p, mock.base_url()), &simple_request()).await;
        let res = res.unwrap();
        assert_eq!(res.reasoning, "step one", "{p}");
        assert_eq!(res.text, "answer", "{p}");
        assert_eq!(
            deltas[..2],
            [
                StreamDelta::Reasoning("step ".into()),
                StreamDelta::Reasoning("one".into())
            ],
            "{p}"
        );
    }
}

#[tokio::test]
async fn a_request_over_the_context_window_is_a_context_overflow_in_every_format() {
    for p in PROVIDERS {
        let mock = mock().await;
        mock.set_context_window(Some(40));
        mock.set_fallback(Some(Reply::text("not reached")));
        let (res, _) = call(&client(3), &route(p, mock.base_url()), &simple_request()).await;
        assert!(
            matches!(res, Err(ModelError::ContextOverflow { status: 400, .. })),
            "{p}: {res:?}"
        );
        assert_eq!(mock.request_count(), 1, "{p}: not retried");
    }
}

#[tokio::test]
async fn openais_spent_quota_429_is_not_a_rate_limit() {
    let mock = mock().await;
    mock.push(Reply::quota_exhausted());
    mock.set_fallback(Some(Reply::text("should not be reached")));
    let (res, _) = call(
        &client(3),
        &route("openai", mock.base_url()),
        &simple_request(),
    )
    .await;
    assert!(
        matches!(res, Err(ModelError::QuotaExhausted { status: 429, .. })),
        "{res:?}"
    );
    assert_eq!(mock.request_count(), 1);
}
