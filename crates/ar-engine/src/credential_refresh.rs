//! A run's model credential renewed through the app's `model_credential_callback`: 30 s
//! before it expires and after one 401, stored through the same compare-and-swap as a host's
//! `PUT …/model-credential` (same type, connection and account), and only while the renewed
//! credential is still the stored one. Each run has one owner at a time, so refreshes of one
//! run never overlap.

use std::time::Duration;

use ar_core::host::{CredentialRefreshRequest, RefreshReason};
use ar_core::Run;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use crate::credential_replace::Replaced;
use crate::engine::Engine;
use crate::model_route::RunCredential;

/// How long before its expiry a credential is renewed.
pub(crate) const RENEW_BEFORE: Duration = Duration::from_secs(30);

/// Whether a credential expiring at `expires_at` is due for renewal at `now`.
pub(crate) fn renewal_due(expires_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
    let lead = chrono::Duration::from_std(RENEW_BEFORE).unwrap_or_default();
    matches!(expires_at, Some(expiry) if expiry <= now + lead)
}

/// SHA-256 (hex) of the credential's secret: the host compares it with its current token.
pub(crate) fn fingerprint(credential: &RunCredential) -> String {
    let secret = match credential.credential_type.as_str() {
        "oauth" => &credential.access_token,
        _ => &credential.api_key,
    };
    hex::encode(Sha256::digest(secret.as_bytes()))
}

impl Engine {
    /// Asks the app's callback to replace `current` and stores the answer; the new credential
    /// when that worked, `None` when the app has no callback, the credential no connection, or
    /// the host's answer could not be used (logged, never with a secret).
    pub(crate) async fn refresh_credential(
        &self,
        run: &Run,
        current: &RunCredential,
        reason: RefreshReason,
    ) -> Option<RunCredential> {
        let refresher = self.deps().credential_refresher.as_ref()?;
        if !refresher.has_callback(&run.app_id) || current.connection_id.is_empty() {
            return None;
        }
        let request = CredentialRefreshRequest {
            credential_fingerprint: fingerprint(current),
            app_id: run.app_id.clone(),
            run_id: run.id.clone(),
            host_run_id: run.host_run_id.clone(),
            connection_id: current.connection_id.clone(),
            provider: run
                .input
                .model
                .as_ref()
                .map(|m| m.provider.clone())
                .unwrap_or_default(),
            account_id: current.account_id.clone(),
            reason,
        };
        let answer = match refresher.refresh(&request).await {
            Ok(answer) => answer,
            Err(error) => {
                tracing::warn!(run_id = %run.id, %error, "model credential refresh failed");
                return None;
            }
        };
        let credential: RunCredential = match serde_json::from_value(answer) {
            Ok(credential) => credential,
            Err(_) => {
                tracing::warn!(run_id = %run.id, "the refresh callback's credential is malformed");
                return None;
            }
        };
        match self
            .replace_model_credential(
                (&run.app_id, &run.id),
                &credential,
                Some(&request.credential_fingerprint),
            )
            .await
        {
            Ok(Replaced::Stored(..)) => Some(credential),
            // The host replaced it while the callback ran: its credential stands.
            Ok(Replaced::Superseded(current)) => Some(current),
            Err(error) => {
                tracing::warn!(run_id = %run.id, %error, "the refreshed model credential was refused");
                None
            }
        }
    }
}
