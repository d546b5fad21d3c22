//! Durable execution through TLS and an API key, as against a self-hosted Temporal behind its
//! front door: a TLS-terminating gRPC proxy (`ar_test_support::service::tls_proxy`: a
//! throwaway CA's certificate for `temporal.test` only, `authorization: Bearer <key>` on every
//! request, a client certificate when asked) in front of the dev server. `serve` and `worker`
//! reach it with `TEMPORAL_TLS_CA_PATH` (or the CA inline as `TEMPORAL_TLS_CA_DATA`),
//! `TEMPORAL_TLS_SERVER_NAME` and `TEMPORAL_API_KEY` (and `TEMPORAL_TLS_CERT_PATH`/`_KEY_PATH`);
//! a wrong key, the system's roots or another CA, the address's own name, plain text and a
//! missing or untrusted client certificate each stop both at startup, saying which.

use ar_test_support::mock_provider::{MockProvider, Reply};
use ar_test_support::service::temporal::TemporalDev;
use ar_test_support::service::tls_proxy::{ClientAuth, GrpcTlsProxy, TestPki, SERVER_NAME};
use ar_test_support::service::*;
use serde_json::json;

use super::Durable;
use crate::BIN;

const API_KEY: &str = "tls-test-key-5b7e0c";
const WRONG_KEY: &str = "tls-wrong-key-91d4aa";

/// The dev server behind the proxy, and the CA the proxy's certificate comes from.
struct Front {
    dev: TemporalDev,
    pki: TestPki,
    proxy: GrpcTlsProxy,
}

impl Front {
    async fn start(case: &str, client_auth: ClientAuth) -> Option<Front> {
        let dev = TemporalDev::start(case).await?;
        let pki = TestPki::generate();
        let upstream = dev.address.parse().expect("the dev server's address");
        let proxy = GrpcTlsProxy::start(upstream, &pki, API_KEY, client_auth).await;
        Some(Front { dev, pki, proxy })
    }

    /// The settings that reach the proxy: its address, the test CA, its certificate's name
    /// and the key.
    fn settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("TEMPORAL_ADDRESS", self.proxy.addr.to_string()),
            ("TEMPORAL_TLS_CA_PATH", self.pki.ca.display().to_string()),
            ("TEMPORAL_TLS_SERVER_NAME", SERVER_NAME.to_string()),
            ("TEMPORAL_API_KEY", API_KEY.to_string()),
        ]
    }

    /// [`Front::settings`] plus the client certificate.
    fn settings_with_client_cert(&self) -> Vec<(&'static str, String)> {
        let mut settings = self.settings();
        settings.push((
            "TEMPORAL_TLS_CERT_PATH",
            self.pki.client_cert.display().to_string(),
        ));
        settings.push((
            "TEMPORAL_TLS_KEY_PATH",
            self.pki.client_key.display().to_string(),
        ));
        settings
    }
}

/// `serve` and `worker` with `settings` (and `change` applied) both exit at startup, their
/// stderr saying every one of `says` and showing neither API key nor any line of the client's
/// private key.
async fn assert_refused_at_startup(
    front: &Front,
    mock: &MockProvider,
    settings: &[(&'static str, String)],
    change: &[(&'static str, Option<&str>)],
    says: &[&str],
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut env = sqlite_env(dir.path(), mock);
    for (name, value) in settings {
        env.insert((*name).into(), value.clone());
    }
    for (name, value) in change {
        match value {
            Some(value) => env.insert((*name).into(), (*value).into()),
            None => env.remove(*name),
        };
    }
    for args in [&["serve"][..], &["worker", "--addr", "127.0.0.1:0"]] {
        let (status, _, stderr) = run_command(BIN, args, &env).await;
        assert!(!status.success(), "{args:?} {change:?} started:\n{stderr}");
        for text in says {
            assert!(
                stderr.contains(text),
                "{args:?} {change:?}: no {text:?} in\n{stderr}"
            );
        }
        let private_key = std::fs::read_to_string(&front.pki.client_key).expect("client key");
        let key_lines = private_key
            .lines()
            .filter(|line| !line.starts_with("-----"));
        for key in [API_KEY, WRONG_KEY].into_iter().chain(key_lines) {
            assert!(!stderr.contains(key), "{args:?} printed a key:\n{stderr}");
        }
    }
}

/// A two-step durable run on `d` completes.
async fn assert_durable_run_completes(d: &Durable, mock: &MockProvider) {
    let agent = d.server.create_agent("over-tls", &["get_context"]).await;
    let run_id = d
        .durable_run(mock, agent["id"].as_str().unwrap(), json!({}))
        .await;
    d.wait_completed(&run_id).await;
    let info = d.wait_workflow(&run_id, "completed").await;
    assert_eq!(info["workflow_id"], format!("agent-run-{run_id}"), "{info}");
}

/// The mock provider, scripted for a two-step run (a tool call, then an answer).
async fn two_steps() -> MockProvider {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call(
        "get_context",
        json!({"step": 0}).to_string(),
    ));
    mock.push(Reply::text("done through the TLS front door"));
    mock
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_and_worker_reach_temporal_through_tls_with_an_api_key() {
    let mock = two_steps().await;
    let Some(front) = Front::start("durable over TLS", ClientAuth::None).await else {
        return;
    };
    let settings = front.settings();
    // Each change to the working settings, and what the refusal at startup names.
    type Refusal<'a> = (&'a [(&'static str, Option<&'a str>)], &'a [&'a str]);
    let key_refusals: [Refusal; 2] = [
        (
            &[("TEMPORAL_API_KEY", Some(WRONG_KEY))],
            &["TEMPORAL_API_KEY", "UNAUTHENTICATED"],
        ),
        (
            &[("TEMPORAL_API_KEY", None)],
            &["TEMPORAL_API_KEY", "UNAUTHENTICATED"],
        ),
    ];
    for (change, says) in key_refusals {
        assert_refused_at_startup(&front, &mock, &settings, change, says).await;
    }
    assert!(
        front.proxy.refused() >= 4,
        "the proxy saw the wrong and missing keys"
    );
    let tls_refusals: [Refusal; 3] = [
        (
            &[("TEMPORAL_TLS_CA_PATH", None)],
            &["TEMPORAL_TLS_CA_PATH", "UnknownIssuer"],
        ),
        (
            &[("TEMPORAL_TLS_SERVER_NAME", None)],
            &["TEMPORAL_TLS_SERVER_NAME", "not valid for name"],
        ),
        (
            &[("TEMPORAL_TLS_CA_PATH", Some("/nonexistent/ca.pem"))],
            &["TEMPORAL_TLS_CA_PATH", "cannot read", "/nonexistent/ca.pem"],
        ),
    ];
    for (change, says) in tls_refusals {
        assert_refused_at_startup(&front, &mock, &settings, change, says).await;
    }
    // The CA inline: another CA's is named as the one that does not issue the server's.
    let pem = |path: &std::path::Path| std::fs::read_to_string(path).expect("a CA's PEM");
    let other_ca = pem(&TestPki::generate().ca);
    let inline_other = [
        ("TEMPORAL_TLS_CA_PATH", None),
        ("TEMPORAL_TLS_CA_DATA", Some(other_ca.as_str())),
    ];
    let says = ["TEMPORAL_TLS_CA_DATA", "UnknownIssuer"];
    assert_refused_at_startup(&front, &mock, &settings, &inline_other, &says).await;
    // TLS turned off: the key goes in plain text, as asked and warned about, and the TLS
    // front door does not speak it.
    let plain = [
        ("TEMPORAL_TLS", Some("false")),
        ("TEMPORAL_TLS_CA_PATH", None),
        ("TEMPORAL_TLS_SERVER_NAME", None),
    ];
    let says = [
        "TEMPORAL_API_KEY is sent to Temporal over plain text",
        "could not connect",
    ];
    assert_refused_at_startup(&front, &mock, &settings, &plain, &says).await;
    assert_eq!(front.proxy.forwarded(), 0, "nothing reached Temporal yet");

    // The runs go through with the CA inline (the mTLS test below reads it from its file).
    let ca = pem(&front.pki.ca);
    let mut extra: Vec<(&str, &str)> = settings
        .iter()
        .filter(|(name, _)| *name != "TEMPORAL_TLS_CA_PATH")
        .map(|(n, v)| (*n, v.as_str()))
        .collect();
    extra.push(("TEMPORAL_TLS_CA_DATA", ca.as_str()));
    let Front {
        dev,
        proxy,
        pki: _pki,
    } = front;
    let d = Durable::start_with(dev, &mock, &extra, None).await;
    let (status, caps) = d.server.get("/v1/capabilities").await;
    assert_eq!(status, 200);
    assert_eq!(caps["durable"]["temporal_address"], proxy.addr.to_string());
    assert_durable_run_completes(&d, &mock).await;
    assert!(
        proxy.forwarded() > 0,
        "the run's calls went through the proxy"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_is_presented_when_temporal_requires_one() {
    let mock = two_steps().await;
    let Some(front) = Front::start("durable over mTLS", ClientAuth::Required).await else {
        return;
    };
    let without_cert = front.settings();
    let needs_cert = ["TEMPORAL_TLS_CERT_PATH", "client certificate"];
    assert_refused_at_startup(&front, &mock, &without_cert, &[], &needs_cert).await;

    let settings = front.settings_with_client_cert();
    // The key file must hold a key: the certificate's own file is refused, quoting nothing.
    let cert = front.pki.client_cert.display().to_string();
    let not_a_key = [("TEMPORAL_TLS_KEY_PATH", Some(cert.as_str()))];
    let says = ["TEMPORAL_TLS_KEY_PATH", "holds no PEM private key"];
    assert_refused_at_startup(&front, &mock, &settings, &not_a_key, &says).await;
    // A client certificate of another CA is refused by Temporal, and the message says so.
    let other = TestPki::generate();
    let (other_cert, other_key) = (
        other.client_cert.display().to_string(),
        other.client_key.display().to_string(),
    );
    let untrusted = [
        ("TEMPORAL_TLS_CERT_PATH", Some(other_cert.as_str())),
        ("TEMPORAL_TLS_KEY_PATH", Some(other_key.as_str())),
    ];
    let says = ["TEMPORAL_TLS_CERT_PATH", "refuse", "client certificate"];
    assert_refused_at_startup(&front, &mock, &settings, &untrusted, &says).await;
    // A certificate without its key is refused by name.
    let half = [("TEMPORAL_TLS_KEY_PATH", None)];
    let says = [
        "TEMPORAL_TLS_KEY_PATH",
        "is required with TEMPORAL_TLS_CERT_PATH",
    ];
    assert_refused_at_startup(&front, &mock, &settings, &half, &says).await;
    let extra: Vec<(&str, &str)> = settings.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let Front {
        dev,
        proxy,
        pki: _pki,
    } = front;
    let d = Durable::start_with(dev, &mock, &extra, None).await;
    assert_durable_run_completes(&d, &mock).await;
    assert!(
        proxy.forwarded() > 0,
        "the run's calls went through the proxy"
    );
}
