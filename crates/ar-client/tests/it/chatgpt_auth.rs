//! `chatgptauth` against the sign-in issuer's stand-in of the mock provider (the shapes the
//! Codex CLI's own client sends and reads): a device login polled to its token, the stored
//! interval honoured, refresh with rotation, a denied login, an expired session.

use ar_client::chatgptauth::{AuthError, Client, Config, PollResult};
use ar_test_support::mock_provider::{DeviceLoginScript, MockProvider};

fn client(mock: &MockProvider) -> Client {
    Client::new(Config {
        issuer: mock.root_url(),
        allow_local_http: true,
        ..Default::default()
    })
    .expect("client")
}

#[tokio::test]
async fn a_device_login_is_polled_at_its_interval_to_a_token_and_refreshed() {
    let mock = MockProvider::start().await;
    mock.device_login(DeviceLoginScript {
        pending_polls: 1,
        account_id: "acct_host_1".into(),
        ..Default::default()
    });
    let auth = client(&mock);
    let mut session = auth.start_device_login().await.expect("start");
    assert_eq!(session.user_code, "MOCK-1234");
    assert_eq!(
        session.verification_url,
        format!("{}/codex/device", mock.root_url())
    );
    assert_eq!(session.interval_seconds, 1);
    let lifetime = session.expires_at - chrono::Utc::now();
    assert!((14..=15).contains(&lifetime.num_minutes()), "{lifetime}");
    assert_eq!(format!("{session:?}"), "[private device session]");

    // Too early: pending without asking the issuer.
    assert_eq!(
        auth.poll_device_login(&mut session).await.unwrap(),
        PollResult::Pending
    );
    assert_eq!(
        mock.device_login_polls(),
        0,
        "no request before next_poll_at"
    );
    let token = loop {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        match auth.poll_device_login(&mut session).await.expect("poll") {
            PollResult::Pending => continue,
            PollResult::Token(token) => break token,
        }
    };
    assert_eq!(
        mock.device_login_polls(),
        2,
        "one pending poll, one approved, a second apart"
    );
    assert_eq!(token.account_id, "acct_host_1");
    assert!(mock.issued_chatgpt_tokens().contains(&token.refresh_token));
    assert_eq!(format!("{token:?}"), "[redacted ChatGPT token]");

    let refreshed = auth.refresh(&token).await.expect("refresh");
    assert_ne!(refreshed.refresh_token, token.refresh_token, "rotated");
    assert_ne!(refreshed.access_token, token.access_token);
    assert_eq!(refreshed.account_id, "acct_host_1");

    // The issuer now answers for another account: the connection must be made again.
    mock.device_login(DeviceLoginScript {
        account_id: "acct_other".into(),
        ..Default::default()
    });
    let changed = auth.refresh(&refreshed).await.expect_err("account changed");
    assert_eq!(changed.code, "account_changed");
    let mut unknown = refreshed.clone();
    unknown.refresh_token = "rt_never_issued".into();
    let refused = auth
        .refresh(&unknown)
        .await
        .expect_err("unknown refresh token");
    assert_eq!(
        (refused.code, refused.status),
        ("reconnect_required", Some(400))
    );
}

#[tokio::test]
async fn a_denied_or_expired_login_needs_a_new_one() {
    let mock = MockProvider::start().await;
    mock.device_login(DeviceLoginScript {
        pending_polls: 0,
        approve: false,
        ..Default::default()
    });
    let auth = client(&mock);
    let mut session = auth.start_device_login().await.expect("start");
    session.next_poll_at = chrono::Utc::now();
    let denied = auth
        .poll_device_login(&mut session)
        .await
        .expect_err("denied");
    assert_eq!(denied.code, "authorization_failed");
    let mut expired = session.clone();
    expired.expires_at = chrono::Utc::now() - chrono::Duration::seconds(1);
    let polls = mock.device_login_polls();
    assert_eq!(
        auth.poll_device_login(&mut expired).await,
        Err(AuthError {
            code: "expired",
            status: None
        })
    );
    assert_eq!(
        mock.device_login_polls(),
        polls,
        "an expired login is not polled"
    );
}
