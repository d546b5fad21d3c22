//! A run's model credential replaced, by the host (`PUT …/model-credential`) or by a refresh
//! through the app's callback, as a compare-and-swap: the stored credential is read with the
//! run's version and written only if the run has not changed since, so a replacement is always
//! checked against the credential it actually replaces (same type, connection and account). A
//! refresh replaces only the credential it was asked to renew: when the host replaced or
//! revoked it while the callback ran, the host's choice stands.

use ar_core::store::{SecretChange, StoreError};
use ar_core::CredentialSource;
use ar_core::Run;
use chrono::{DateTime, Utc};

use crate::admission::MODEL_CREDENTIAL_SECRET;
use crate::credential_refresh::fingerprint;
use crate::engine::{Decide, Engine};
use crate::error::{EngineError, EngineResult};
use crate::model_credential::CredentialBinding;
use crate::model_route::RunCredential;

/// Reads and writes tried before giving up on a run that keeps changing under the swap (each
/// of its steps bumps the version).
const SWAP_ATTEMPTS: usize = 16;

/// What a replacement did.
pub(crate) enum Replaced {
    /// Stored: the run as committed and when the new credential expires.
    Stored(Box<Run>, Option<DateTime<Utc>>),
    /// Not stored: the credential to renew had been replaced meanwhile; the one stored now.
    Superseded(RunCredential),
}

impl Engine {
    /// `PUT /v1/runs/{id}/model-credential`: replaces an active run's credential (same type,
    /// connection and account).
    pub async fn update_model_credential(
        &self,
        app_id: &str,
        run_id: &str,
        credential: RunCredential,
    ) -> EngineResult<(Run, Option<DateTime<Utc>>)> {
        match self
            .replace_model_credential((app_id, run_id), &credential, None)
            .await?
        {
            Replaced::Stored(run, expires_at) => Ok((*run, expires_at)),
            // Only a conditional replacement can find its credential superseded.
            Replaced::Superseded(_) => Err(EngineError::invalid(
                "the run's model credential was replaced meanwhile",
            )),
        }
    }

    /// Replaces the run's credential with `credential`; with `renewing` (the fingerprint of
    /// the credential a refresh renews), only while that credential is the one stored.
    pub(crate) async fn replace_model_credential(
        &self,
        (app_id, run_id): (&str, &str),
        credential: &RunCredential,
        renewing: Option<&str>,
    ) -> EngineResult<Replaced> {
        for _ in 0..SWAP_ATTEMPTS {
            let run = self.load_run(app_id, run_id).await?;
            let provider = replaceable(&run)?;
            credential.validate(self.now())?;
            credential.validate_for(&provider)?;
            let stored = self
                .deps()
                .store
                .get_secret(run_id, MODEL_CREDENTIAL_SECRET)
                .await?;
            if let Some(expected) = renewing {
                if let Some(current) =
                    self.superseded(&run, &provider, stored.as_deref(), expected)?
                {
                    return Ok(Replaced::Superseded(current));
                }
            }
            if let Some(bound) = stored.as_deref().and_then(CredentialBinding::read) {
                check_replacement(&bound, &CredentialBinding::of(&provider, credential))?;
            }
            let ciphertext = crate::model_credential::seal(
                self.deps().sealer.as_deref(),
                (app_id, run_id),
                &provider,
                credential,
            )?;
            match self.swap_credential(run, ciphertext).await {
                Ok(run) => {
                    self.mark_route_stale(run_id);
                    return Ok(Replaced::Stored(Box::new(run), credential.expires_at));
                }
                Err(EngineError::Store(StoreError::Conflict(_))) => continue,
                Err(error) => return Err(error),
            }
        }
        Err(EngineError::Store(StoreError::Conflict(format!(
            "run {run_id} kept changing while its model credential was replaced"
        ))))
    }

    /// The credential stored now when it is no longer the one whose fingerprint is `expected`
    /// (`None`: it still is). A credential revoked meanwhile is not brought back.
    fn superseded(
        &self,
        run: &Run,
        provider: &str,
        stored: Option<&[u8]>,
        expected: &str,
    ) -> EngineResult<Option<RunCredential>> {
        let stored = stored.ok_or_else(|| {
            EngineError::invalid("the run's model credential was revoked meanwhile")
        })?;
        let current = crate::model_credential::open(
            self.deps().sealer.as_deref(),
            (&run.app_id, &run.id),
            provider,
            stored,
        )
        .map_err(|error| EngineError::invalid(error.to_string()))?;
        Ok((fingerprint(&current) != expected).then_some(current))
    }

    /// Writes the sealed credential if the run is still at the version it was read at.
    async fn swap_credential(&self, run: Run, ciphertext: Vec<u8>) -> EngineResult<Run> {
        let (app_id, run_id, version) = (run.app_id.clone(), run.id.clone(), run.version);
        let (run, _, ()) = self
            .transact(&app_id, &run_id, Some(run), |run, change| {
                if run.version != version {
                    return Err(EngineError::Store(StoreError::Conflict(
                        "the run changed since its credential was read".to_string(),
                    )));
                }
                if run.is_terminal() {
                    return Err(EngineError::invalid("run is terminal"));
                }
                change.secrets.push(SecretChange::Put {
                    kind: MODEL_CREDENTIAL_SECRET.to_string(),
                    ciphertext: ciphertext.clone(),
                });
                Ok(Decide::Commit(()))
            })
            .await?;
        Ok(run)
    }
}

/// The provider of a run whose credential may be replaced: active, started with one.
fn replaceable(run: &Run) -> EngineResult<String> {
    if run.is_terminal() {
        return Err(EngineError::invalid("run is terminal"));
    }
    if run.input.credential_source != Some(CredentialSource::App) {
        return Err(EngineError::invalid(
            "run was not started with a model credential",
        ));
    }
    Ok(run
        .input
        .model
        .as_ref()
        .map_or(String::new(), |m| m.provider.clone()))
}

/// A replacement credential keeps the connection, account and type of the one it replaces.
fn check_replacement(
    current: &CredentialBinding,
    replacement: &CredentialBinding,
) -> EngineResult<()> {
    if current.connection_id != replacement.connection_id
        || current.account_id != replacement.account_id
    {
        return Err(EngineError::invalid(
            "replacement credential cannot change connection_id or account_id",
        ));
    }
    if current.credential_type != replacement.credential_type {
        return Err(EngineError::invalid(
            "replacement credential cannot change its type",
        ));
    }
    Ok(())
}
