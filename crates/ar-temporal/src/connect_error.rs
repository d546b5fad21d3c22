//! Why connecting to Temporal failed, said so an operator knows which setting to fix: a refused
//! API key or client certificate, a server certificate that the roots do not trust or that is
//! issued for another name, a client certificate the server asked for. The SDK's own error
//! chain follows; no credential is ever part of it.

use std::error::Error;

use rustls::{AlertDescription, CertificateError};
use temporalio_client::errors::ClientConnectError;
use temporalio_client::tonic::Code;

use crate::TemporalSettings;

/// The sentence for `error`, met connecting to `settings`' frontend.
pub(crate) fn explain(settings: &TemporalSettings, error: &ClientConnectError) -> String {
    let address = &settings.address;
    let (detail, cause): (String, &(dyn Error + 'static)) = match error {
        ClientConnectError::SystemInfoCallError(status) => {
            if let Some(code) = refusal(status.code()) {
                return format!(
                    "Temporal at {address} refused this client's credentials ({code}: {}); check TEMPORAL_API_KEY{}",
                    status.message(),
                    client_cert_variable(settings).map(|name| format!(" and {name}")).unwrap_or_default(),
                );
            }
            let mut detail = format!("{:?}: {}", status.code(), status.message());
            if let Some(source) = status.source() {
                detail = format!("{detail}: {}", ar_core::error_chain(source));
            }
            (detail, status)
        }
        other => (ar_core::error_chain(other), other),
    };
    let problem = tls_problem(cause).or_else(|| alert_in(&detail));
    let hint = match problem {
        Some(problem) => hint(settings, &problem),
        None => closed_hint(settings, cause),
    };
    match hint {
        Some(hint) => {
            format!("could not connect to Temporal at {address} over TLS: {hint} ({detail})")
        }
        None => format!("could not connect to Temporal at {address}: {detail}"),
    }
}

/// The gRPC name of a code that refuses the client's credentials.
fn refusal(code: Code) -> Option<&'static str> {
    match code {
        Code::Unauthenticated => Some("UNAUTHENTICATED"),
        Code::PermissionDenied => Some("PERMISSION_DENIED"),
        _ => None,
    }
}

/// The variable that gave the client certificate, if one was given.
fn client_cert_variable(settings: &TemporalSettings) -> Option<String> {
    let client = settings.tls.as_ref()?.client_cert.as_ref()?;
    Some(client.cert_form.variable("CERT"))
}

/// What to change for a TLS `problem`, when it is one an operator's setting explains.
fn hint(settings: &TemporalSettings, problem: &rustls::Error) -> Option<String> {
    let tls = settings.tls.as_ref()?;
    let hint = match problem {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            if tls.ca_pem.is_some() {
                let ca = tls.ca_form.variable("CA");
                format!("its certificate is not issued by {ca}'s CA")
            } else {
                "its certificate is not issued by a CA the system trusts; set TEMPORAL_TLS_CA_PATH to the CA's PEM file (or TEMPORAL_TLS_CA_DATA to its PEM)".to_string()
            }
        }
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => {
            let name = tls
                .server_name
                .as_deref()
                .unwrap_or("TEMPORAL_ADDRESS's host");
            format!("its certificate is not issued for {name}; set TEMPORAL_TLS_SERVER_NAME to the name it is issued for")
        }
        rustls::Error::AlertReceived(AlertDescription::CertificateRequired) => {
            "it asks for a client certificate; set TEMPORAL_TLS_CERT_PATH and TEMPORAL_TLS_KEY_PATH (or their _DATA forms)"
                .to_string()
        }
        rustls::Error::AlertReceived(
            AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateUnknown,
        ) => format!(
            "it refused the client certificate of {}",
            client_cert_variable(settings).unwrap_or_else(|| "TEMPORAL_TLS_CERT_PATH".to_string())
        ),
        _ => return None,
    };
    Some(hint)
}

/// A TLS server that wants a client certificate and got none, or got one it does not trust,
/// may close the connection before its alert is read (TLS 1.3 checks the certificate after the
/// handshake): the first call then fails on a closed connection.
fn closed_hint(settings: &TemporalSettings, cause: &(dyn Error + 'static)) -> Option<String> {
    let tls = settings.tls.as_ref()?;
    if !closed_by_peer(cause) {
        return None;
    }
    let hint = match &tls.client_cert {
        Some(client) => format!(
            "it closed the connection after the handshake, as a server that refuses the client certificate does; check that {}'s certificate is issued by a CA it trusts",
            client.cert_form.variable("CERT")
        ),
        None => "it closed the connection after the handshake, as a server that requires a client certificate does; set TEMPORAL_TLS_CERT_PATH and TEMPORAL_TLS_KEY_PATH (or their _DATA forms) if it does".to_string(),
    };
    Some(hint)
}

/// Whether `error`'s chain ends in the peer closing the connection (end of file, a reset).
fn closed_by_peer(error: &(dyn Error + 'static)) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionReset, UnexpectedEof};
    let mut cause = Some(error);
    while let Some(current) = cause {
        let io = current
            .downcast_ref::<h2::Error>()
            .and_then(h2::Error::get_io)
            .or_else(|| current.downcast_ref::<std::io::Error>());
        if io.is_some_and(|io| matches!(io.kind(), BrokenPipe | ConnectionReset | UnexpectedEof)) {
            return true;
        }
        cause = current.source();
    }
    false
}

/// An alert the server sent after the handshake seemed done (TLS 1.3 refuses a client
/// certificate then): HTTP/2 keeps only its text, so it is recognised by that text.
fn alert_in(detail: &str) -> Option<rustls::Error> {
    [
        AlertDescription::CertificateRequired,
        AlertDescription::BadCertificate,
        AlertDescription::UnknownCA,
        AlertDescription::CertificateUnknown,
    ]
    .into_iter()
    .map(rustls::Error::AlertReceived)
    .find(|alert| detail.contains(&alert.to_string()))
}

/// The TLS library's error somewhere in `error`'s chain (often inside an I/O error).
fn tls_problem(error: &(dyn Error + 'static)) -> Option<rustls::Error> {
    let mut cause = Some(error);
    while let Some(current) = cause {
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return Some(tls.clone());
        }
        let inner = current
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>());
        if let Some(tls) = inner {
            return Some(tls.clone());
        }
        cause = current.source();
    }
    None
}
