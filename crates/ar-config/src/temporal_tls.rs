//! TLS to Temporal (`TEMPORAL_TLS_*`, named as the Temporal CLI names them): the PEM files an
//! operator names, read and checked while the settings are read, so a missing or malformed file
//! stops `serve` and `worker` at startup with the variable's name instead of at the first call.
//!
//! The checks are PEM-level (the files hold certificates, the key file a private key); the TLS
//! library checks the rest when it connects. No message ever shows a key file's content.

use ar_core::secret::Secret;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};

pub use ar_core::durable::{ClientCertificate, TemporalTls};

fn read(path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|error| format!("cannot read {path:?}: {error}"))
}

/// The content of the PEM file at `path`, which must hold at least one certificate and nothing
/// malformed.
pub fn read_certificates(path: &str) -> Result<Vec<u8>, String> {
    let pem = read(path)?;
    let mut certificates = 0;
    for item in CertificateDer::pem_slice_iter(&pem) {
        item.map_err(|error| format!("{path:?} is not valid PEM: {error}"))?;
        certificates += 1;
    }
    if certificates == 0 {
        return Err(format!(
            "{path:?} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        ));
    }
    Ok(pem)
}

/// The PEM private key at `path` (PKCS#8, PKCS#1 or SEC1). The parser's own error is not
/// passed on: it may quote the file.
pub fn read_private_key(path: &str) -> Result<Secret, String> {
    let not_a_key = || {
        format!("{path:?} holds no PEM private key (PKCS#8, PKCS#1 or SEC1; -----BEGIN … PRIVATE KEY-----)")
    };
    let text = String::from_utf8(read(path)?).map_err(|_| not_a_key())?;
    PrivateKeyDer::from_pem_slice(text.as_bytes()).map_err(|_| not_a_key())?;
    Ok(Secret::new(text))
}

/// Whether `name` can be a TLS server name: a DNS name or an IP address.
pub fn check_server_name(name: &str) -> Result<(), String> {
    ServerName::try_from(name)
        .map(|_| ())
        .map_err(|_| format!("{name:?} is not a DNS name or an IP address"))
}
