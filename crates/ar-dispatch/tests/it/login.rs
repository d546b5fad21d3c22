//! Codex's device-code sign-in through a real `codex app-server`, pointed at the loopback
//! stand-in of the issuer and the ChatGPT backend's account discovery (the mock provider):
//! the code to show, the completed login with the account and the tokens codex wrote, a
//! person who does not sign in, and a cancelled login. The vendor's real issuer cannot be
//! reached from here; everything on the app-server's side is real.

use ar_dispatch::codex_login::{CodexLoginConfig, DeviceLogin, LoginOutcome};
use ar_test_support::mock_provider::{DeviceLoginScript, MockProvider};

use crate::support::require_cli;

fn config(mock: &MockProvider, root: &std::path::Path) -> CodexLoginConfig {
    CodexLoginConfig {
        program: "codex".into(),
        home_root: root.to_path_buf(),
        issuer: Some(mock.root_url()),
        chatgpt_base_url: Some(format!("{}/backend-api/", mock.root_url())),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_login_signs_in_and_hands_over_the_account() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.device_login(DeviceLoginScript {
        plan_type: "pro".into(),
        ..DeviceLoginScript::default()
    });
    let root = tempfile::tempdir().unwrap();
    let login = DeviceLogin::start(&config(&mock, root.path()))
        .await
        .unwrap();
    assert_eq!(login.user_code, "MOCK-1234");
    assert_eq!(
        login.verification_url,
        format!("{}/codex/device", mock.root_url())
    );
    assert!(!login.login_id.is_empty());
    let LoginOutcome::Connected(account) = login.outcome().await else {
        panic!("not connected");
    };
    assert_eq!(account.plan_type, "pro");
    assert_eq!(account.account_id, "acct_mock_1");
    assert_eq!(account.email, "person@example.com");
    let tokens = mock.issued_chatgpt_tokens();
    assert_eq!(tokens.len(), 3);
    assert!(
        account.auth_json.expose().contains(&tokens[2]),
        "the refresh token is in auth.json"
    );
    assert!(!format!("{account:?}").contains(&tokens[2]));
    assert!(mock.device_login_polls() >= 3);
    assert_eq!(
        std::fs::read_dir(root.path()).unwrap().count(),
        0,
        "the login's home was removed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_or_cancelled_login_says_so() {
    if !require_cli("codex") {
        return;
    }
    let mock = MockProvider::start().await;
    mock.device_login(DeviceLoginScript {
        pending_polls: 1,
        approve: false,
        ..DeviceLoginScript::default()
    });
    let root = tempfile::tempdir().unwrap();
    let denied = DeviceLogin::start(&config(&mock, root.path()))
        .await
        .unwrap();
    match denied.outcome().await {
        LoginOutcome::Failed(reason) => assert!(reason.contains("400"), "{reason}"),
        other => panic!("{other:?}"),
    }
    mock.device_login(DeviceLoginScript {
        pending_polls: 10_000,
        ..DeviceLoginScript::default()
    });
    let mut waiting = DeviceLogin::start(&config(&mock, root.path()))
        .await
        .unwrap();
    waiting.cancel().await;
    assert!(matches!(waiting.outcome().await, LoginOutcome::Cancelled));
    assert!(mock.issued_chatgpt_tokens().is_empty());
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
}
