//! Secrets never appear in `Debug` output.

use std::collections::BTreeMap;

use ar_wire::*;

const SECRETS: &[&str] = &[
    "sk-live-abc123",
    "gho_shortlived",
    "crm-secret",
    "ghs_installation",
    "hunter2",
    "AUTHORIZATION: basic",
    "askpass-secret",
];

fn assert_clean(debug: &str) {
    for s in SECRETS {
        assert!(!debug.contains(s), "secret {s:?} leaked: {debug}");
    }
    assert!(
        debug.contains(REDACTED),
        "expected a redaction marker: {debug}"
    );
}

#[test]
fn model_credential_debug_is_redacted() {
    let c = ModelCredential {
        credential_type: "api_key".into(),
        api_key: "sk-live-abc123".into(),
        connection_id: "conn_77".into(),
        ..ModelCredential::default()
    };
    let d = format!("{c:?}");
    assert_clean(&d);
    assert!(d.contains("conn_77") && d.contains("api_key"), "{d}");
    assert_clean(&format!(
        "{:#?}",
        UpdateRunModelCredentialRequest { credential: c }
    ));
}

#[test]
fn mcp_credential_debug_is_redacted() {
    let c = RunMCPCredential {
        credential_type: "headers".into(),
        headers: BTreeMap::from([("X-Api-Key".to_owned(), "crm-secret".to_owned())]),
        ..RunMCPCredential::default()
    };
    let d = format!("{c:?}");
    assert_clean(&d);
    assert!(d.contains("X-Api-Key"), "header names stay visible: {d}");
    let req: StartRunRequest =
        serde_json::from_str(&crate::fixture("start_run_request.json")).expect("fixture");
    assert_clean(&format!("{req:?}"));
}

#[test]
fn repository_auth_debug_is_redacted() {
    let auth = RepositoryAuth {
        auth_type: "basic".into(),
        token: "ghs_installation".into(),
        username: "bot".into(),
        password: "hunter2".into(),
        extra_header: "AUTHORIZATION: basic abc".into(),
        env: BTreeMap::from([("GIT_ASKPASS_TOKEN".to_owned(), "askpass-secret".to_owned())]),
    };
    let d = format!("{auth:?}");
    assert_clean(&d);
    assert!(d.contains("bot") && d.contains("GIT_ASKPASS_TOKEN"), "{d}");
    let spec = RepositoryWorkspaceSpec {
        auth: Some(auth),
        ..RepositoryWorkspaceSpec::default()
    };
    assert_clean(&format!("{spec:?}"));
}

#[test]
fn empty_secrets_print_empty() {
    let d = format!(
        "{:?}",
        ModelCredential {
            credential_type: "none".into(),
            ..ModelCredential::default()
        }
    );
    assert!(!d.contains(REDACTED), "{d}");
}

#[test]
fn serialization_still_carries_secrets_for_the_wire() {
    let c = ModelCredential {
        credential_type: "api_key".into(),
        api_key: "k".into(),
        ..ModelCredential::default()
    };
    assert_eq!(serde_json::to_value(&c).expect("encode")["api_key"], "k");
}
