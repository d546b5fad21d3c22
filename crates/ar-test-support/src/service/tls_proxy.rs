//! A TLS-terminating gRPC (HTTP/2) reverse proxy in front of a plain-text server, as the front
//! door of a hosted or self-hosted Temporal is: TLS with ALPN `h2` on a certificate of a
//! throwaway CA ([`TestPki`], made with the `openssl` CLI at test time), `authorization: Bearer
//! <key>` required on every request (gRPC `UNAUTHENTICATED` otherwise) and, when asked, a client
//! certificate of that CA (mTLS). Requests and responses stream through, trailers included, on
//! one upstream HTTP/2 connection per client connection.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::{Request, Response, Uri};
use http_body_util::{Either, Empty};
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{crypto, RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

/// The name the proxy's server certificate is issued for (and only that: a client that
/// connects to `127.0.0.1` must be told this name to accept it).
pub const SERVER_NAME: &str = "temporal.test";

/// A throwaway CA, a server certificate for [`SERVER_NAME`] and a client certificate, all PEM
/// files in a temporary directory that goes with it.
pub struct TestPki {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    _dir: tempfile::TempDir,
}

/// `openssl req`'s arguments for a new EC P-256 key.
const EC_P256: [&str; 4] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];

/// Runs `openssl <args>` in `dir`, panicking with its stderr when it fails.
fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("running openssl (the CLI makes the test certificates)");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// An EC P-256 key and a certificate for `subject` signed by the CA in `dir`, with `extensions`.
fn issue(dir: &Path, name: &str, subject: &str, extensions: &str) {
    let (key, csr, pem, ext) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.pem"),
        format!("{name}.ext"),
    );
    std::fs::write(dir.join(&ext), extensions).expect("write extensions");
    let mut request = vec!["req", "-new", "-nodes", "-keyout", &key, "-out", &csr];
    request.extend(EC_P256);
    request.extend(["-subj", subject]);
    openssl(dir, &request);
    let mut sign: Vec<&str> = "x509 -req -CA ca.pem -CAkey ca.key -CAcreateserial -days 2"
        .split(' ')
        .collect();
    sign.extend(["-in", &csr, "-out", &pem, "-extfile", &ext]);
    openssl(dir, &sign);
}

impl TestPki {
    /// Generates the CA and both certificates.
    pub fn generate() -> TestPki {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path();
        // A name of its own (the directory's), so another TestPki's CA is another issuer.
        let unique = path
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or("");
        let subject = format!("/CN=agent-runtime test CA {unique}");
        let mut ca = vec![
            "req", "-x509", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        ];
        ca.extend(EC_P256);
        ca.extend(["-days", "2", "-subj", &subject]);
        openssl(path, &ca);
        let server = format!(
            "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:{SERVER_NAME}\n"
        );
        issue(path, "server", &format!("/CN={SERVER_NAME}"), &server);
        let client = "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\nsubjectAltName=DNS:worker.test\n";
        issue(path, "client", "/CN=worker.test", client);
        TestPki {
            ca: path.join("ca.pem"),
            server_cert: path.join("server.pem"),
            server_key: path.join("server.key"),
            client_cert: path.join("client.pem"),
            client_key: path.join("client.key"),
            _dir: dir,
        }
    }
}

/// Whether the proxy asks clients for a certificate of the test CA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Required,
}

/// What the proxy counts: requests forwarded and requests refused for their key.
#[derive(Default)]
struct Counts {
    forwarded: AtomicUsize,
    refused: AtomicUsize,
}

/// The running proxy; stops accepting when dropped.
pub struct GrpcTlsProxy {
    /// `127.0.0.1:<port>`, where it listens.
    pub addr: SocketAddr,
    counts: Arc<Counts>,
    task: JoinHandle<()>,
}

impl Drop for GrpcTlsProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What every connection shares.
struct Front {
    upstream: SocketAddr,
    /// `Bearer <key>`: the whole `authorization` value a request must carry.
    expected: String,
    counts: Arc<Counts>,
}

impl GrpcTlsProxy {
    /// A proxy on `127.0.0.1:0` in front of the plain HTTP/2 server at `upstream`, with
    /// `pki`'s server certificate, requiring `api_key` (and a client certificate when asked).
    pub async fn start(
        upstream: SocketAddr,
        pki: &TestPki,
        api_key: &str,
        client_auth: ClientAuth,
    ) -> GrpcTlsProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let acceptor = TlsAcceptor::from(Arc::new(server_config(pki, client_auth)));
        let counts = Arc::new(Counts::default());
        let front = Arc::new(Front {
            upstream,
            expected: format!("Bearer {api_key}"),
            counts: counts.clone(),
        });
        let task = tokio::spawn(accept(listener, acceptor, front));
        GrpcTlsProxy { addr, counts, task }
    }

    /// Requests that carried the key and went upstream.
    pub fn forwarded(&self) -> usize {
        self.counts.forwarded.load(Ordering::SeqCst)
    }

    /// Requests answered `UNAUTHENTICATED` (no key or another key).
    pub fn refused(&self) -> usize {
        self.counts.refused.load(Ordering::SeqCst)
    }
}

fn read_pem(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// TLS 1.2/1.3 with ALPN `h2` (gRPC clients insist on it), on the ring provider.
fn server_config(pki: &TestPki, client_auth: ClientAuth) -> ServerConfig {
    let provider = Arc::new(crypto::ring::default_provider());
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&read_pem(&pki.server_cert))
            .collect::<Result<_, _>>()
            .expect("server certificate PEM");
    let key = PrivateKeyDer::from_pem_slice(&read_pem(&pki.server_key)).expect("server key PEM");
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("protocol versions");
    let builder = match client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        ClientAuth::Required => {
            let mut roots = RootCertStore::empty();
            for ca in CertificateDer::pem_slice_iter(&read_pem(&pki.ca)) {
                roots.add(ca.expect("CA PEM")).expect("CA certificate");
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .expect("client verifier");
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .expect("server certificate and key");
    config.alpn_protocols = vec![b"h2".to_vec()];
    config
}

async fn accept(listener: TcpListener, acceptor: TlsAcceptor, front: Arc<Front>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(serve_connection(tcp, acceptor.clone(), front.clone()));
    }
}

/// One client connection: the TLS handshake (a refused one just ends it: the client sees the
/// alert), then HTTP/2 served by forwarding each request on one upstream connection.
async fn serve_connection(tcp: TcpStream, acceptor: TlsAcceptor, front: Arc<Front>) {
    let Ok(tls) = acceptor.accept(tcp).await else {
        return;
    };
    let Ok(upstream) = TcpStream::connect(front.upstream).await else {
        return;
    };
    let handshake =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(upstream)).await;
    let Ok((sender, connection)) = handshake else {
        return;
    };
    tokio::spawn(connection);
    let service =
        hyper::service::service_fn(move |request| forward(request, sender.clone(), front.clone()));
    let _closed = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(tls), service)
        .await;
}

type ProxyBody = Either<Incoming, Empty<Bytes>>;

/// Forwards a request with the right key upstream (without the key) and streams the answer
/// back; any other request is answered `UNAUTHENTICATED` without going upstream.
async fn forward(
    request: Request<Incoming>,
    mut upstream: SendRequest<Incoming>,
    front: Arc<Front>,
) -> Result<Response<ProxyBody>, hyper::Error> {
    let authorization = request.headers().get(AUTHORIZATION);
    if authorization.and_then(|value| value.to_str().ok()) != Some(front.expected.as_str()) {
        front.counts.refused.fetch_add(1, Ordering::SeqCst);
        return Ok(unauthenticated());
    }
    front.counts.forwarded.fetch_add(1, Ordering::SeqCst);
    let (mut parts, body) = request.into_parts();
    parts.headers.remove(AUTHORIZATION);
    let path = parts.uri.path_and_query().map_or("/", |path| path.as_str());
    parts.uri = Uri::builder()
        .scheme("http")
        .authority(front.upstream.to_string())
        .path_and_query(path)
        .build()
        .expect("upstream URI");
    let response = upstream
        .send_request(Request::from_parts(parts, body))
        .await?;
    Ok(response.map(Either::Left))
}

/// A trailers-only gRPC answer: status 16, UNAUTHENTICATED.
fn unauthenticated() -> Response<ProxyBody> {
    Response::builder()
        .header("content-type", "application/grpc")
        .header("grpc-status", "16")
        .header(
            "grpc-message",
            "the test proxy wants authorization: Bearer with its API key",
        )
        .body(Either::Right(Empty::new()))
        .expect("a static response")
}
