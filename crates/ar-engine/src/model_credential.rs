//! A run's model credential at rest: a clear binding (provider, type, connection, account)
//! followed by the credential sealed with that binding in its associated data, so a stored
//! credential opens only for the app, run, provider, type, connection and account it was
//! given for. A `none` credential carries no secret: it is stored as its binding alone and
//! needs no encryption key.

use serde::{Deserialize, Serialize};

use crate::admission::MODEL_CREDENTIAL_SECRET;
use crate::error::{EngineError, EngineResult};
use crate::model_route::RunCredential;
use crate::sealer::Sealer;

/// Marks the stored form with a binding (a form without it, sealed before bindings existed,
/// opens with the purpose alone).
const MAGIC: &[u8] = b"mc1\n";

/// What a stored credential is for; kept in the clear and bound into the ciphertext.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CredentialBinding {
    pub provider: String,
    #[serde(rename = "type")]
    pub credential_type: String,
    pub connection_id: String,
    pub account_id: String,
}

impl CredentialBinding {
    pub fn of(provider: &str, credential: &RunCredential) -> Self {
        CredentialBinding {
            provider: provider.to_string(),
            credential_type: credential.credential_type.clone(),
            connection_id: credential.connection_id.clone(),
            account_id: credential.account_id.clone(),
        }
    }

    fn purpose(&self) -> String {
        format!(
            "{MODEL_CREDENTIAL_SECRET}\x00{}\x00{}\x00{}\x00{}",
            self.provider, self.credential_type, self.connection_id, self.account_id
        )
    }

    /// Reads the binding of a stored credential without opening it (`None`: an older form).
    pub fn read(stored: &[u8]) -> Option<CredentialBinding> {
        split(stored).map(|(binding, _)| binding)
    }
}

fn split(stored: &[u8]) -> Option<(CredentialBinding, &[u8])> {
    let rest = stored.strip_prefix(MAGIC)?;
    let end = rest.iter().position(|byte| *byte == b'\n')?;
    let binding = serde_json::from_slice(&rest[..end]).ok()?;
    Some((binding, &rest[end + 1..]))
}

/// The stored form of `credential` for a run on `provider`. Only a `none` credential can be
/// stored without a sealer.
pub(crate) fn seal(
    sealer: Option<&Sealer>,
    (app_id, run_id): (&str, &str),
    provider: &str,
    credential: &RunCredential,
) -> EngineResult<Vec<u8>> {
    let binding = CredentialBinding::of(provider, credential);
    let mut stored = MAGIC.to_vec();
    let header = serde_json::to_vec(&binding)
        .map_err(|error| EngineError::internal("encoding the credential binding", error))?;
    stored.extend_from_slice(&header);
    stored.push(b'\n');
    if credential.credential_type == "none" {
        return Ok(stored);
    }
    let sealer = sealer.ok_or_else(|| {
        EngineError::invalid(
            "run model credentials are not configured (AGENT_RUNTIME_MODEL_CREDENTIAL_ENCRYPTION_KEY is not set)",
        )
    })?;
    let plaintext = serde_json::to_vec(credential)
        .map_err(|error| EngineError::internal("encoding the run credential", error))?;
    let sealed = sealer
        .seal(app_id, run_id, &binding.purpose(), &plaintext)
        .map_err(|error| EngineError::internal("sealing the run credential", error))?;
    stored.extend_from_slice(&sealed);
    Ok(stored)
}

/// Why a stored credential cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum OpenError {
    #[error("run credentials cannot be opened: no encryption key")]
    NoKey,
    #[error("the stored model credential is for provider {stored}, not {wanted}")]
    OtherProvider { stored: String, wanted: String },
    #[error("the stored model credential does not open for this run")]
    Unreadable,
}

/// Opens the stored credential of a run on `provider`.
pub(crate) fn open(
    sealer: Option<&Sealer>,
    (app_id, run_id): (&str, &str),
    provider: &str,
    stored: &[u8],
) -> Result<RunCredential, OpenError> {
    let Some((binding, sealed)) = split(stored) else {
        let plain = sealer
            .ok_or(OpenError::NoKey)?
            .open(app_id, run_id, MODEL_CREDENTIAL_SECRET, stored)
            .map_err(|_| OpenError::Unreadable)?;
        return serde_json::from_slice(&plain).map_err(|_| OpenError::Unreadable);
    };
    if binding.provider != provider {
        return Err(OpenError::OtherProvider {
            stored: binding.provider,
            wanted: provider.to_string(),
        });
    }
    if binding.credential_type == "none" {
        return Ok(RunCredential {
            credential_type: "none".to_string(),
            ..RunCredential::default()
        });
    }
    let plain = sealer
        .ok_or(OpenError::NoKey)?
        .open(app_id, run_id, &binding.purpose(), sealed)
        .map_err(|_| OpenError::Unreadable)?;
    let credential: RunCredential =
        serde_json::from_slice(&plain).map_err(|_| OpenError::Unreadable)?;
    if CredentialBinding::of(provider, &credential) != binding {
        return Err(OpenError::Unreadable);
    }
    Ok(credential)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer() -> Sealer {
        Sealer::from_key_material(&[7u8; 32]).unwrap()
    }

    fn key(connection: &str) -> RunCredential {
        RunCredential {
            credential_type: "api_key".into(),
            api_key: "sk-secret".into(),
            connection_id: connection.into(),
            ..RunCredential::default()
        }
    }

    #[test]
    fn a_credential_opens_only_for_what_it_was_sealed_for() {
        let sealer = sealer();
        let stored = seal(Some(&sealer), ("app", "run_1"), "openai", &key("conn_1")).unwrap();
        assert!(!String::from_utf8_lossy(&stored).contains("sk-secret"));
        let opened = open(Some(&sealer), ("app", "run_1"), "openai", &stored).unwrap();
        assert_eq!(opened.api_key, "sk-secret");
        assert_eq!(
            CredentialBinding::read(&stored).unwrap().connection_id,
            "conn_1"
        );
        assert_eq!(
            open(Some(&sealer), ("app", "run_2"), "openai", &stored).unwrap_err(),
            OpenError::Unreadable
        );
        assert!(matches!(
            open(Some(&sealer), ("app", "run_1"), "anthropic", &stored),
            Err(OpenError::OtherProvider { .. })
        ));
        // A binding edited in the clear no longer authenticates the ciphertext.
        let mut edited = stored.clone();
        let at = edited.windows(6).position(|w| w == b"conn_1").unwrap();
        edited[at..at + 6].copy_from_slice(b"conn_2");
        assert!(open(Some(&sealer), ("app", "run_1"), "openai", &edited).is_err());
        assert_eq!(
            open(None, ("app", "run_1"), "openai", &stored).unwrap_err(),
            OpenError::NoKey
        );
    }

    #[test]
    fn a_none_credential_needs_no_key_and_an_older_form_still_opens() {
        let none = RunCredential {
            credential_type: "none".into(),
            ..RunCredential::default()
        };
        let stored = seal(None, ("app", "run_1"), "openai_compatible", &none).unwrap();
        let opened = open(None, ("app", "run_1"), "openai_compatible", &stored).unwrap();
        assert_eq!(opened.credential_type, "none");
        assert!(seal(None, ("app", "run_1"), "openai", &key("")).is_err());

        let sealer = sealer();
        let plain = serde_json::to_vec(&key("")).unwrap();
        let legacy = sealer
            .seal("app", "run_1", MODEL_CREDENTIAL_SECRET, &plain)
            .unwrap();
        let opened = open(Some(&sealer), ("app", "run_1"), "openai", &legacy).unwrap();
        assert_eq!(opened.api_key, "sk-secret");
    }
}
