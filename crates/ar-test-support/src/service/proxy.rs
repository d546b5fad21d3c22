//! A loopback TCP proxy in front of a service that a test can cut: every open connection is
//! dropped at once (a reset in the middle of a stream), and the upstream can be moved (a server
//! restarted on another port). How the client's resuming event stream is put to the test.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The proxy; stops accepting when dropped (connections are cut then too).
pub struct CutProxy {
    addr: SocketAddr,
    upstream: Arc<Mutex<SocketAddr>>,
    generation: watch::Sender<u64>,
    accepted: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl CutProxy {
    /// A proxy on `127.0.0.1:0` forwarding to `upstream`.
    pub async fn start(upstream: SocketAddr) -> CutProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let upstream = Arc::new(Mutex::new(upstream));
        let (generation, _) = watch::channel(0u64);
        let accepted = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(accept(
            listener,
            upstream.clone(),
            generation.clone(),
            accepted.clone(),
        ));
        CutProxy {
            addr,
            upstream,
            generation,
            accepted,
            task,
        }
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://` and the proxy's address.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Drops every connection open now (new ones are accepted as before).
    pub fn cut(&self) {
        self.generation.send_modify(|generation| *generation += 1);
    }

    /// Forwards new connections to `upstream` from now on.
    pub fn set_upstream(&self, upstream: SocketAddr) {
        *self.upstream.lock() = upstream;
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.task.abort();
        self.cut();
    }
}

async fn accept(
    listener: TcpListener,
    upstream: Arc<Mutex<SocketAddr>>,
    generation: watch::Sender<u64>,
    accepted: Arc<AtomicUsize>,
) {
    while let Ok((client, _)) = listener.accept().await {
        accepted.fetch_add(1, Ordering::SeqCst);
        let target = *upstream.lock();
        let mut cut = generation.subscribe();
        cut.mark_unchanged();
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(target).await else {
                return; // Dropping the client's socket: the upstream is down.
            };
            let (mut client, mut server) = (client, server);
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                _ = cut.changed() => {}
            }
        });
    }
}
