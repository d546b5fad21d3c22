//! Codex's ChatGPT device sign-in for a run (`POST /v1/runs/{id}/codex-auth/device-code/start`
//! and `/cancel`), driven through a real `codex app-server` by ar-dispatch's
//! [`DeviceLogin`]. One login per run at a time: `start` answers the code to show the person
//! (`pending`), or the login already waiting; a task waits for its end and records it.
//! Every change is a `codex_auth.state_changed` event on the run (`pending`, then `connected`,
//! `failed` or `cancelled`). The tokens codex wrote are handed to the engine, which seals them
//! per app and connection (the ChatGPT account); no response, event or log line carries them.
//!
//! Offered when codex is installed here; otherwise both routes answer the contract's
//! `codex auth manager is not configured`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ar_core::event::CodexAuthStateChanged;
use ar_dispatch::codex_login::{CodexLoginConfig, DeviceLogin, LoginOutcome};
use ar_engine::Engine;
use ar_wire::codex::codex_auth_state as states;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::error::{ApiError, ApiResult};

/// The provider and auth mode every state names.
const PROVIDER: &str = "openai";
const AUTH_MODE: &str = "chatgpt_device_code";
/// How long a cancel waits for the app-server to confirm.
const CANCEL_WAIT: Duration = Duration::from_secs(70);

/// A run's login: its latest state, how to cancel it, and when it has ended.
struct RunLogin {
    state: watch::Sender<ar_wire::CodexAuthState>,
    cancel: CancellationToken,
}

/// The service's Codex sign-ins.
pub struct CodexAuth {
    /// `None`: codex is not installed here.
    config: Option<CodexLoginConfig>,
    logins: Mutex<HashMap<String, Arc<RunLogin>>>,
}

impl std::fmt::Debug for CodexAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodexAuth")
            .field("configured", &self.config.is_some())
            .finish()
    }
}

fn state(name: &str) -> ar_wire::CodexAuthState {
    ar_wire::CodexAuthState {
        provider: PROVIDER.into(),
        auth_mode: AUTH_MODE.into(),
        state: name.into(),
        updated_at: chrono::Utc::now(),
        ..ar_wire::CodexAuthState::default()
    }
}

/// The event of a state.
fn event_of(state: &ar_wire::CodexAuthState) -> CodexAuthStateChanged {
    let text = |value: &Option<String>| value.clone().unwrap_or_default();
    CodexAuthStateChanged {
        provider: state.provider.clone(),
        auth_mode: state.auth_mode.clone(),
        state: state.state.clone(),
        login_id: text(&state.login_id),
        auth_url: text(&state.auth_url),
        verification_url: text(&state.verification_url),
        user_code: text(&state.user_code),
        plan_type: text(&state.plan_type),
        error: text(&state.error),
    }
}

impl CodexAuth {
    /// Sign-ins through `config` (`None`: refused as not configured).
    pub fn new(config: Option<CodexLoginConfig>) -> Self {
        CodexAuth {
            config,
            logins: Mutex::default(),
        }
    }

    fn config(&self) -> ApiResult<&CodexLoginConfig> {
        self.config.as_ref().ok_or_else(|| {
            ApiError::bad_request(ar_wire::error::messages::CODEX_AUTH_NOT_CONFIGURED)
        })
    }

    fn login(&self, run_id: &str) -> Option<Arc<RunLogin>> {
        lock(&self.logins).get(run_id).cloned()
    }

    /// Starts the run's sign-in, or answers the one already waiting for the person.
    pub async fn start(
        self: &Arc<Self>,
        engine: &Engine,
        app_id: &str,
        run_id: &str,
    ) -> ApiResult<ar_wire::CodexAuthState> {
        let config = self.config()?;
        engine.codex_auth_run(app_id, run_id).await?;
        if !engine.can_keep_codex_sign_in() {
            return Err(ApiError::bad_request(ar_engine::codex_auth::NO_SEALING));
        }
        if let Some(login) = self.login(run_id) {
            let current = login.state.borrow().clone();
            if current.state == states::PENDING {
                return Ok(current);
            }
        }
        let mut answer = match DeviceLogin::start(config).await {
            Ok(login) => {
                let answer = ar_wire::CodexAuthState {
                    login_id: Some(login.login_id.clone()),
                    verification_url: Some(login.verification_url.clone()),
                    user_code: Some(login.user_code.clone()),
                    ..state(states::PENDING)
                };
                self.watch(engine, (app_id, run_id), login, &answer);
                answer
            }
            Err(error) => {
                tracing::warn!(run_id, %error, "codex sign-in could not start");
                ar_wire::CodexAuthState {
                    error: Some(error.to_string()),
                    ..state(states::FAILED)
                }
            }
        };
        engine
            .record_codex_auth(app_id, run_id, event_of(&answer))
            .await?;
        answer.updated_at = chrono::Utc::now();
        Ok(answer)
    }

    /// Keeps the login and waits for its end in a task of its own.
    fn watch(
        self: &Arc<Self>,
        engine: &Engine,
        (app_id, run_id): (&str, &str),
        login: DeviceLogin,
        pending: &ar_wire::CodexAuthState,
    ) {
        let (sender, _) = watch::channel(pending.clone());
        let run_login = Arc::new(RunLogin {
            state: sender,
            cancel: CancellationToken::new(),
        });
        lock(&self.logins).insert(run_id.to_string(), run_login.clone());
        let (engine, app_id, run_id) = (engine.clone(), app_id.to_string(), run_id.to_string());
        let base = pending.clone();
        tokio::spawn(async move {
            let outcome = login.outcome_until(run_login.cancel.clone()).await;
            let ended = ended_state(&engine, &app_id, outcome, base).await;
            if let Err(error) = engine
                .record_codex_auth(&app_id, &run_id, event_of(&ended))
                .await
            {
                tracing::warn!(%run_id, %error, "recording the codex sign-in's end");
            }
            run_login.state.send_replace(ended);
        });
    }

    /// Cancels the run's waiting sign-in; answers its state (`cancelled`, or how it ended
    /// before; `required` when it never started).
    pub async fn cancel(
        &self,
        engine: &Engine,
        app_id: &str,
        run_id: &str,
    ) -> ApiResult<ar_wire::CodexAuthState> {
        self.config()?;
        engine.codex_auth_run(app_id, run_id).await?;
        let Some(login) = self.login(run_id) else {
            return Ok(state(states::REQUIRED));
        };
        login.cancel.cancel();
        let mut changes = login.state.subscribe();
        let ended = tokio::time::timeout(
            CANCEL_WAIT,
            changes.wait_for(|current| current.state != states::PENDING),
        )
        .await;
        match ended {
            Ok(Ok(current)) => Ok(current.clone()),
            _ => Err(ApiError::internal()),
        }
    }
}

/// The state a login ended in; a completed one is kept (sealed) first.
async fn ended_state(
    engine: &Engine,
    app_id: &str,
    outcome: LoginOutcome,
    base: ar_wire::CodexAuthState,
) -> ar_wire::CodexAuthState {
    let login_id = base.login_id.clone();
    let failed = |error: String| ar_wire::CodexAuthState {
        login_id: login_id.clone(),
        error: Some(error),
        ..state(states::FAILED)
    };
    match outcome {
        LoginOutcome::Cancelled => ar_wire::CodexAuthState {
            login_id: login_id.clone(),
            ..state(states::CANCELLED)
        },
        LoginOutcome::Failed(error) => failed(error),
        LoginOutcome::Connected(account) => {
            let connection = match account.account_id.as_str() {
                "" => "default",
                id => id,
            };
            let sign_in = ar_engine::codex_auth::CodexSignIn {
                plan_type: account.plan_type.clone(),
                auth_json: account.auth_json.clone(),
            };
            match engine
                .keep_codex_sign_in(app_id, connection, &sign_in)
                .await
            {
                Ok(()) => ar_wire::CodexAuthState {
                    login_id: login_id.clone(),
                    plan_type: Some(account.plan_type.clone()),
                    ..state(states::CONNECTED)
                },
                Err(error) => failed(format!("keeping the sign-in: {error}")),
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}
