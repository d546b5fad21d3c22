//! Codex's ChatGPT sign-in for a run (`POST /v1/runs/{id}/codex-auth/device-code/...`): which
//! runs may sign in, the `codex_auth.state_changed` events recorded on them, and the sign-ins
//! an app keeps. The tokens codex wrote are sealed with the run credentials' key, bound to the
//! app and the connection (the ChatGPT account), and stored as an app secret that outlives the
//! run; they are never in an event, a response or a log. The device flow itself (the
//! `codex app-server` that talks to the issuer) is an adapter's business, not the engine's.

use ar_core::event::{CodexAuthStateChanged, RunEvent};
use ar_core::secret::Secret;
use ar_core::{Run, RuntimeKind};
use serde::{Deserialize, Serialize};

use crate::engine::{Decide, Engine};
use crate::error::{EngineError, EngineResult};

/// A sign-in asked of a run that does not run codex.
pub const NOT_A_CODEX_RUN: &str = "codex auth is only available for runs of codex agents";
/// A sign-in asked of a finished run.
pub const RUN_TERMINAL: &str = "run is terminal";
/// A sign-in completed on a runtime that cannot seal it.
pub const NO_SEALING: &str = "codex sign-in needs credential sealing \
    (AGENT_RUNTIME_MODEL_CREDENTIAL_ENCRYPTION_KEY is not set)";

/// An app's sign-in of one ChatGPT account: its plan and codex's `auth.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct CodexSignIn {
    pub plan_type: String,
    pub auth_json: Secret,
}

/// The sealed form of a sign-in.
#[derive(Serialize, Deserialize)]
struct Sealed {
    plan_type: String,
    auth_json: String,
}

/// The app secret (and the sealing purpose) of the sign-in of one connection.
fn secret_name(connection: &str) -> String {
    format!("codex_auth/{connection}")
}

impl Engine {
    /// The run a sign-in is for: the app's run of a codex agent, not finished.
    pub async fn codex_auth_run(&self, app_id: &str, run_id: &str) -> EngineResult<Run> {
        let run = self.load_run(app_id, run_id).await?;
        if run.runtime_kind != RuntimeKind::Codex {
            return Err(EngineError::invalid(NOT_A_CODEX_RUN));
        }
        if run.is_terminal() {
            return Err(EngineError::invalid(RUN_TERMINAL));
        }
        Ok(run)
    }

    /// Whether a completed sign-in could be kept (the runtime seals credentials).
    pub fn can_keep_codex_sign_in(&self) -> bool {
        self.deps().sealer.is_some()
    }

    /// Keeps `sign_in` as the app's sign-in of `connection`, sealed.
    pub async fn keep_codex_sign_in(
        &self,
        app_id: &str,
        connection: &str,
        sign_in: &CodexSignIn,
    ) -> EngineResult<()> {
        let sealer = self
            .deps()
            .sealer
            .clone()
            .ok_or_else(|| EngineError::invalid(NO_SEALING))?;
        let name = secret_name(connection);
        let plain = serde_json::to_vec(&Sealed {
            plan_type: sign_in.plan_type.clone(),
            auth_json: sign_in.auth_json.expose().to_string(),
        })
        .map_err(|error| EngineError::internal("encoding the codex sign-in", error))?;
        let sealed = sealer
            .seal(app_id, "", &name, &plain)
            .map_err(|error| EngineError::internal("sealing the codex sign-in", error))?;
        self.deps()
            .store
            .put_app_secret(app_id, &name, &sealed)
            .await?;
        Ok(())
    }

    /// The app's sign-in of `connection`, when it has one.
    pub async fn codex_sign_in(
        &self,
        app_id: &str,
        connection: &str,
    ) -> EngineResult<Option<CodexSignIn>> {
        let name = secret_name(connection);
        let Some(sealed) = self.deps().store.get_app_secret(app_id, &name).await? else {
            return Ok(None);
        };
        let sealer = self
            .deps()
            .sealer
            .clone()
            .ok_or_else(|| EngineError::invalid(NO_SEALING))?;
        let plain = sealer
            .open(app_id, "", &name, &sealed)
            .map_err(|error| EngineError::internal("opening the codex sign-in", error))?;
        let sealed: Sealed = serde_json::from_slice(&plain)
            .map_err(|error| EngineError::internal("reading the codex sign-in", error))?;
        Ok(Some(CodexSignIn {
            plan_type: sealed.plan_type,
            auth_json: Secret::new(sealed.auth_json),
        }))
    }

    /// Records a sign-in's new state on the run (`codex_auth.state_changed`).
    pub async fn record_codex_auth(
        &self,
        app_id: &str,
        run_id: &str,
        state: CodexAuthStateChanged,
    ) -> EngineResult<()> {
        self.transact(app_id, run_id, None, |_, change| {
            change
                .events
                .push(RunEvent::CodexAuthStateChanged(state.clone()));
            Ok(Decide::Commit(()))
        })
        .await?;
        Ok(())
    }
}
