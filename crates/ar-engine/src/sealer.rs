//! Encryption of per-run credentials at rest: AES-256-GCM, bound to app, run and purpose.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use rand::RngCore;

/// Seals and opens credential blobs. The key never leaves this type, and `Debug` hides it.
pub struct Sealer {
    cipher: Aes256Gcm,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer([redacted])")
    }
}

/// Why key material was refused, or sealing or opening failed.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// Key material that is not 32 raw bytes must be base64 text, and this is not text.
    #[error("credential encryption error: key is neither 32 bytes nor base64")]
    KeyNotText(#[source] std::str::Utf8Error),
    /// Key material that is not 32 raw bytes must be base64, and this is not.
    #[error("credential encryption error: key is neither 32 bytes nor base64")]
    KeyNotBase64(#[source] base64::DecodeError),
    /// The key (decoded) has the wrong length.
    #[error("credential encryption error: key must be 32 bytes, got {0}")]
    KeyLength(usize),
    /// The cipher refused to seal (AES-GCM says no more than that).
    #[error("credential encryption error: encryption failed")]
    SealFailed,
    /// The blob is shorter than its nonce: it was never sealed here.
    #[error("credential encryption error: ciphertext too short")]
    TooShort,
    /// The blob does not authenticate: tampered with, or sealed for another app, run, purpose
    /// or key.
    #[error("credential encryption error: decryption failed")]
    OpenFailed,
}

const NONCE_LEN: usize = 12;

impl Sealer {
    /// Accepts 32 raw bytes or standard base64 of 32 bytes.
    pub fn from_key_material(material: &[u8]) -> Result<Self, SealError> {
        use base64::Engine as _;
        let key: Vec<u8> = if material.len() == 32 {
            material.to_vec()
        } else {
            let text = std::str::from_utf8(material).map_err(SealError::KeyNotText)?;
            base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .map_err(SealError::KeyNotBase64)?
        };
        let cipher =
            Aes256Gcm::new_from_slice(&key).map_err(|_| SealError::KeyLength(key.len()))?;
        Ok(Sealer { cipher })
    }

    fn associated_data(app_id: &str, run_id: &str, purpose: &str) -> Vec<u8> {
        format!("agent-runtime\x00{app_id}\x00{run_id}\x00{purpose}").into_bytes()
    }

    /// Nonce-prefixed ciphertext.
    pub fn seal(
        &self,
        app_id: &str,
        run_id: &str,
        purpose: &str,
        plaintext: &[u8],
    ) -> Result<Vec<u8>, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        rand::thread_rng().fill_bytes(&mut nonce);
        let aad = Self::associated_data(app_id, run_id, purpose);
        let sealed = self
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: &aad,
                },
            )
            .map_err(|_| SealError::SealFailed)?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    pub fn open(
        &self,
        app_id: &str,
        run_id: &str,
        purpose: &str,
        sealed: &[u8],
    ) -> Result<Vec<u8>, SealError> {
        if sealed.len() < NONCE_LEN {
            return Err(SealError::TooShort);
        }
        let (nonce, body) = sealed.split_at(NONCE_LEN);
        let aad = Self::associated_data(app_id, run_id, purpose);
        self.cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: body,
                    aad: &aad,
                },
            )
            .map_err(|_| SealError::OpenFailed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_blobs_are_bound_to_their_run() {
        let sealer = Sealer::from_key_material(&[7u8; 32]).unwrap();
        let sealed = sealer
            .seal("app", "run_1", "model_credential", b"sk-secret")
            .unwrap();
        assert_eq!(
            sealer
                .open("app", "run_1", "model_credential", &sealed)
                .unwrap(),
            b"sk-secret"
        );
        assert!(matches!(
            sealer.open("app", "run_2", "model_credential", &sealed),
            Err(SealError::OpenFailed)
        ));
        assert!(matches!(
            sealer.open("app", "run_1", "model_credential", &sealed[..4]),
            Err(SealError::TooShort)
        ));
        assert!(!sealed.windows(9).any(|w| w == b"sk-secret"));
    }

    #[test]
    fn base64_keys_are_accepted() {
        use base64::Engine as _;
        let text = base64::engine::general_purpose::STANDARD.encode([1u8; 32]);
        assert!(Sealer::from_key_material(text.as_bytes()).is_ok());
        let short = base64::engine::general_purpose::STANDARD.encode([1u8; 16]);
        assert!(matches!(
            Sealer::from_key_material(short.as_bytes()),
            Err(SealError::KeyLength(16))
        ));
    }

    #[test]
    fn bad_key_material_keeps_why_as_its_source() {
        use std::error::Error as _;
        let error = Sealer::from_key_material(b"short").unwrap_err();
        assert_eq!(
            error.to_string(),
            "credential encryption error: key is neither 32 bytes nor base64"
        );
        assert!(error
            .source()
            .is_some_and(|cause| cause.is::<base64::DecodeError>()));
        let error = Sealer::from_key_material(&[0xff; 7]).unwrap_err();
        assert!(error
            .source()
            .is_some_and(|cause| cause.is::<std::str::Utf8Error>()));
    }
}
