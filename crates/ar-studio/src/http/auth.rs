//! Access to the studio's routes: a bearer token (checked by `ar_core::secret`) when hosted, loopback-only without one.

use std::net::{IpAddr, SocketAddr};

use ar_core::secret::{bearer_token, Secret};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// The peer address of a connection accepted by [`crate::serve_studio`]'s listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// Who may call the routes.
#[derive(Debug, Clone, Default)]
pub struct AccessPolicy {
    token: Option<Secret>,
}

impl AccessPolicy {
    /// `Some(token)`: every request needs `Authorization: Bearer <token>`. `None`: only
    /// loopback requests (loopback `Host`, and a loopback peer when the peer is known).
    pub fn new(token: Option<String>) -> Self {
        Self {
            token: token.filter(|t| !t.is_empty()).map(Secret::new),
        }
    }

    fn check(&self, req: &Request) -> Result<(), ApiError> {
        match &self.token {
            Some(token) => {
                let accepted = req
                    .headers()
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(bearer_token)
                    .is_some_and(|given| token.matches(given));
                if accepted {
                    Ok(())
                } else {
                    Err(ApiError::unauthorized("a valid bearer token is required"))
                }
            }
            None => {
                let host_ok = req
                    .headers()
                    .get(header::HOST)
                    .and_then(|v| v.to_str().ok())
                    .map(is_loopback_host);
                let peer = req
                    .extensions()
                    .get::<ConnectInfo<PeerAddr>>()
                    .map(|c| c.0 .0)
                    .or_else(|| {
                        req.extensions()
                            .get::<ConnectInfo<SocketAddr>>()
                            .map(|c| c.0)
                    });
                let peer_ok = peer.map(|p| p.ip().is_loopback());
                match (host_ok, peer_ok) {
                    (Some(false), _) | (_, Some(false)) | (None, None) => Err(ApiError::forbidden(
                        "without a token the studio answers loopback requests only",
                    )),
                    _ => Ok(()),
                }
            }
        }
    }
}

/// Whether a `Host` header names the loopback interface.
pub fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else if host.matches(':').count() == 1 {
        host.split(':').next().unwrap_or_default()
    } else {
        host
    };
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The middleware applying `policy`.
pub(crate) async fn guard(
    State(policy): State<AccessPolicy>,
    req: Request,
    next: Next,
) -> Response {
    match policy.check(&req) {
        Ok(()) => next.run(req).await,
        Err(err) => err.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for h in [
            "localhost",
            "localhost:8092",
            "127.0.0.1:1",
            "[::1]:80",
            "::1",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in [
            "example.com",
            "10.0.0.1:80",
            "[2001:db8::1]:80",
            "evil.localhost.com",
        ] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }
}
