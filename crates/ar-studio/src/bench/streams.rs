//! Memory with 1,000 runtimes registered over HTTP, each holding an open command stream on a raw socket.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use super::report::StreamFigures;
use super::rig::{registration, Rig};
use super::rss_kib;

pub(crate) async fn measure(runtimes: usize) -> StreamFigures {
    let before = rss_kib();
    match run(runtimes).await {
        Ok((connected, after, rig, sockets)) => {
            drop(sockets);
            rig.stop().await;
            StreamFigures {
                runtimes,
                connected,
                rss_before_kib: before,
                rss_after_kib: after,
                error: None,
            }
        }
        Err(e) => StreamFigures {
            runtimes,
            rss_before_kib: before,
            error: Some(e),
            ..StreamFigures::default()
        },
    }
}

async fn run(runtimes: usize) -> Result<(usize, u64, Rig, Vec<TcpStream>), String> {
    let rig = Rig::start().await.map_err(|e| e.to_string())?;
    let http = reqwest::Client::new();
    let gate = Arc::new(Semaphore::new(64));
    let mut tasks = Vec::with_capacity(runtimes);
    for i in 0..runtimes {
        let http = http.clone();
        let gate = Arc::clone(&gate);
        let addr = rig.addr;
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire_owned().await.map_err(|e| e.to_string())?;
            let id = format!("rt-{i}");
            let resp = http
                .post(format!("http://{addr}/api/runtime/register"))
                .json(&registration(&id))
                .send()
                .await
                .map_err(|e| e.to_string())?;
            if !resp.status().is_success() {
                return Err(format!("register answered {}", resp.status()));
            }
            open_raw_stream(addr, &id).await
        }));
    }
    let mut sockets = Vec::with_capacity(runtimes);
    for t in tasks {
        let socket = t.await.map_err(|e| e.to_string())??;
        sockets.push(socket);
    }
    let connected = rig.server.snapshot().iter().filter(|v| v.connected).count();
    let after = rss_kib();
    Ok((connected, after, rig, sockets))
}

/// Opens the stream with a hand-written request and reads until the breakpoints frame, so the
/// client side costs one socket and nothing more.
async fn open_raw_stream(addr: std::net::SocketAddr, id: &str) -> Result<TcpStream, String> {
    let mut socket = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let req = format!(
        "GET /api/runtime/commands?runtime={id} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
    );
    socket
        .write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !seen.windows(18).any(|w| w == b"event: breakpoints") {
        let n = socket.read(&mut buf).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err(format!("stream of {id} closed early"));
        }
        seen.extend_from_slice(&buf[..n]);
    }
    Ok(socket)
}
