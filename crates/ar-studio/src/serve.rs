//! The standalone studio server: its configuration, a listener whose writes carry a deadline, and `serve_studio`.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use ar_core::clock::SystemClock;
use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Sleep;

use crate::error::StudioError;
use crate::http::{router, PeerAddr, RouterOptions};
use crate::server::{ServerConfig, StudioServer};
use crate::store::{SqliteStore, StudioStore};

/// The listen address when neither `--addr` nor the environment names one.
pub const DEFAULT_STUDIO_ADDR: &str = "127.0.0.1:8092";
/// The environment variable naming the listen address.
pub const STUDIO_ADDR_ENV: &str = "AGENT_RUNTIME_STUDIO_ADDR";

/// Configuration of a standalone studio.
#[derive(Debug, Clone, Default)]
pub struct StudioConfig {
    /// Timers and bounds.
    pub server: ServerConfig,
    /// Hosted use: the bearer token every request needs. `None`: loopback only.
    pub token: Option<String>,
    /// Where command rows and breakpoint sets persist: a SQLite file path or `sqlite:` URL.
    /// `None`: memory only.
    pub store: Option<String>,
}

impl StudioConfig {
    /// The listen address: `flag` (from `--addr`), else [`STUDIO_ADDR_ENV`], else
    /// [`DEFAULT_STUDIO_ADDR`].
    pub fn listen_addr(flag: Option<&str>) -> Result<SocketAddr, std::net::AddrParseError> {
        let env = std::env::var(STUDIO_ADDR_ENV)
            .ok()
            .filter(|v| !v.is_empty());
        flag.map(str::to_string)
            .or(env)
            .unwrap_or_else(|| DEFAULT_STUDIO_ADDR.to_string())
            .parse()
    }

    /// Builds the studio this configuration describes.
    pub async fn build(&self) -> Result<StudioServer, StudioError> {
        match &self.store {
            Some(target) => {
                let store: Arc<dyn StudioStore> = Arc::new(SqliteStore::open(target).await?);
                StudioServer::with_store(self.server.clone(), Arc::new(SystemClock), store).await
            }
            None => Ok(StudioServer::new(self.server.clone())),
        }
    }
}

/// Serves the studio on `listener` until `shutdown` completes; then every command stream
/// ends at once and in-flight requests finish.
pub async fn serve_studio(
    config: StudioConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StudioError> {
    let server = config.build().await?;
    let app = router(
        server.clone(),
        RouterOptions {
            token: config.token.clone(),
            runs: None,
        },
    )
    .merge(crate::console::routes());
    let listener = DeadlineListener::new(listener, config.server.write_timeout);
    let closing = server.clone();
    let result = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<PeerAddr>(),
    )
    .with_graceful_shutdown(async move {
        shutdown.await;
        closing.shutdown().await;
    })
    .await;
    server.shutdown().await;
    result.map_err(StudioError::Io)
}

/// A TCP listener whose connections fail a write that makes no progress for `timeout`: a
/// peer that stopped reading cannot hold a command stream open forever.
#[derive(Debug)]
pub struct DeadlineListener {
    inner: TcpListener,
    timeout: Duration,
}

impl DeadlineListener {
    /// Wraps `inner`; a zero `timeout` disables the deadline.
    pub fn new(inner: TcpListener, timeout: Duration) -> Self {
        Self { inner, timeout }
    }
}

impl axum::serve::Listener for DeadlineListener {
    type Io = DeadlineIo;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (io, addr) = axum::serve::Listener::accept(&mut self.inner).await;
        let _ = io.set_nodelay(true);
        (
            DeadlineIo {
                inner: io,
                timeout: self.timeout,
                stalled: None,
            },
            addr,
        )
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

impl Connected<IncomingStream<'_, DeadlineListener>> for PeerAddr {
    fn connect_info(stream: IncomingStream<'_, DeadlineListener>) -> Self {
        PeerAddr(*stream.remote_addr())
    }
}

/// A connection with a write deadline.
#[derive(Debug)]
pub struct DeadlineIo {
    inner: TcpStream,
    timeout: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl DeadlineIo {
    fn poll_deadline<T>(
        &mut self,
        cx: &mut Context<'_>,
        res: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match res {
            Poll::Ready(r) => {
                self.stalled = None;
                Poll::Ready(r)
            }
            Poll::Pending if self.timeout.is_zero() => Poll::Pending,
            Poll::Pending => {
                let timeout = self.timeout;
                let sleep = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "write deadline passed",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl AsyncRead for DeadlineIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for DeadlineIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.poll_deadline(cx, res)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.poll_deadline(cx, res)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let res = Pin::new(&mut self.inner).poll_flush(cx);
        self.poll_deadline(cx, res)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
