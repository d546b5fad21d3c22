//! The accept loop: every connection served over HTTP/1.1 with a deadline for its request
//! headers and for each pause in a request body, a cap on the connections one client address
//! may hold, and a graceful shutdown that lets in-flight requests finish.
//!
//! Without these a client whose `Content-Length` promises more than it sends (or that never
//! finishes its headers) holds a connection, and the task serving it, forever.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::error::ApiError;

/// What one client connection may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Time to send a request's headers (also the idle time of a keep-alive connection).
    pub header_read_timeout: Duration,
    /// Longest pause while sending a request body.
    pub body_read_timeout: Duration,
    /// Open connections per client IP address; 0: no limit.
    pub max_per_client: usize,
}

impl From<&ar_config::env::HttpSettings> for ConnectionLimits {
    fn from(settings: &ar_config::env::HttpSettings) -> Self {
        ConnectionLimits {
            header_read_timeout: settings.header_read_timeout,
            body_read_timeout: settings.body_read_timeout,
            max_per_client: settings.max_connections_per_client,
        }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops accepting and waits for
/// the open connections to finish their requests.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    let router = router.layer(RequestBodyTimeoutLayer::new(limits.body_read_timeout));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let mut refusing = builder.clone();
    refusing.keep_alive(false);
    let open = OpenConnections::new(limits.max_per_client);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = accept(&listener) => accepted,
            () = &mut shutdown => break,
        };
        if let Err(error) = stream.set_nodelay(true) {
            // Small SSE frames and JSON answers must not wait for Nagle's algorithm.
            tracing::debug!(%error, "could not set TCP_NODELAY");
        }
        let io = TokioIo::new(stream);
        let Some(slot) = open.admit(peer.ip()) else {
            tracing::warn!(client = %peer.ip(), limit = limits.max_per_client, "refusing a connection over the per-client limit");
            let refusal = hyper::service::service_fn(|_| async {
                Ok::<_, std::convert::Infallible>(too_many_connections())
            });
            let connection = graceful.watch(refusing.serve_connection(io, refusal));
            tokio::spawn(async move {
                let _ = connection.await;
            });
            continue;
        };
        let service = TowerToHyperService::new(router.clone());
        let connection = graceful.watch(builder.serve_connection(io, service));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, client = %peer, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// The next connection; errors of one connection are skipped, others (such as running out of
/// file descriptors) are retried after a second, as `axum::serve` does.
async fn accept(listener: &TcpListener) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(error) => {
                if !matches!(
                    error.kind(),
                    std::io::ErrorKind::ConnectionRefused
                        | std::io::ErrorKind::ConnectionAborted
                        | std::io::ErrorKind::ConnectionReset
                ) {
                    tracing::error!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }
}

fn too_many_connections() -> axum::response::Response {
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too many open connections from this address",
    )
    .into_response()
}

/// Open connections per client address.
#[derive(Clone)]
struct OpenConnections {
    max: usize,
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One admitted connection; gives its place back when dropped.
struct Slot {
    ip: IpAddr,
    counts: Option<Arc<Mutex<HashMap<IpAddr, usize>>>>,
}

impl OpenConnections {
    fn new(max: usize) -> Self {
        OpenConnections {
            max,
            counts: Arc::default(),
        }
    }

    /// A place for a connection from `ip`, or `None` when it already holds the maximum.
    fn admit(&self, ip: IpAddr) -> Option<Slot> {
        if self.max == 0 {
            return Some(Slot { ip, counts: None });
        }
        let mut counts = self.counts.lock();
        let count = counts.entry(ip).or_insert(0);
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(Slot {
            ip,
            counts: Some(self.counts.clone()),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(counts) = &self.counts {
            let mut counts = counts.lock();
            if let Some(count) = counts.get_mut(&self.ip) {
                *count -= 1;
                if *count == 0 {
                    counts.remove(&self.ip);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_counted_per_address_and_given_back() {
        let open = OpenConnections::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = open.admit(a).unwrap();
        let _second = open.admit(a).unwrap();
        assert!(open.admit(a).is_none(), "third connection of one address");
        assert!(
            open.admit(b).is_some(),
            "another address has its own places"
        );
        drop(first);
        assert!(
            open.admit(a).is_some(),
            "a closed connection frees its place"
        );
    }

    #[test]
    fn zero_means_no_limit() {
        let open = OpenConnections::new(0);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let slots: Vec<_> = (0..1000).map(|_| open.admit(a).unwrap()).collect();
        assert_eq!(slots.len(), 1000);
        assert!(open.counts.lock().is_empty());
    }
}
