//! TLS to Temporal (`TEMPORAL_TLS_*`, named as the Temporal CLI names them): the PEM an operator
//! gives as a file (`*_PATH`) or inline (`*_DATA`), read and checked while the settings are
//! read, so a missing or malformed one stops `serve` and `worker` at startup with the variable's
//! name instead of at the first call.
//!
//! The checks are PEM-level (certificates hold certificates, the key a private key); the TLS
//! library checks the rest when it connects. No message ever shows a key's content.

use ar_core::secret::Secret;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};

pub use ar_core::durable::{ClientCertificate, PemForm, TemporalTls};

/// The content of the file at `path`, passed through `check`, whose message is prefixed with
/// the path (`"/etc/ca.pem" holds no …`).
pub fn read_file<T>(
    path: &str,
    check: impl FnOnce(Vec<u8>) -> Result<T, String>,
) -> Result<T, String> {
    let content = std::fs::read(path).map_err(|error| format!("cannot read {path:?}: {error}"))?;
    check(content).map_err(|message| format!("{path:?} {message}"))
}

/// `pem`, which must hold at least one certificate and nothing malformed.
pub fn certificates(pem: Vec<u8>) -> Result<Vec<u8>, String> {
    let mut certificates = 0;
    for item in CertificateDer::pem_slice_iter(&pem) {
        item.map_err(|error| format!("is not valid PEM: {error}"))?;
        certificates += 1;
    }
    if certificates == 0 {
        return Err("holds no PEM certificate (-----BEGIN CERTIFICATE-----)".to_string());
    }
    Ok(pem)
}

/// The PEM private key in `pem` (PKCS#8, PKCS#1 or SEC1). The parser's own error is not passed
/// on: it may quote the key.
pub fn private_key(pem: Vec<u8>) -> Result<Secret, String> {
    let not_a_key = || {
        "holds no PEM private key (PKCS#8, PKCS#1 or SEC1; -----BEGIN … PRIVATE KEY-----)"
            .to_string()
    };
    let text = String::from_utf8(pem).map_err(|_| not_a_key())?;
    PrivateKeyDer::from_pem_slice(text.as_bytes()).map_err(|_| not_a_key())?;
    Ok(Secret::new(text))
}

/// Whether `name` can be a TLS server name: a DNS name or an IP address.
pub fn check_server_name(name: &str) -> Result<(), String> {
    ServerName::try_from(name)
        .map(|_| ())
        .map_err(|_| format!("{name:?} is not a DNS name or an IP address"))
}
