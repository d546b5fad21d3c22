//! Slow and greedy clients on raw TCP: a stalled header and a body shorter than its
//! `Content-Length` are closed after the (configured) read timeouts, and one address cannot hold
//! more connections than its limit while its earlier ones keep working.

use std::net::SocketAddr;
use std::time::Duration;

use ar_test_support::mock_provider::MockProvider;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use ar_test_support::service::*;

/// Bound of every read here; the server's timeouts are 1 s.
const BOUND: Duration = Duration::from_secs(10);

async fn server_with(
    mock: &MockProvider,
    dir: &tempfile::TempDir,
    extra: &[(&str, &str)],
) -> TestServer {
    let mut env = env_for(mock, &dir.path().join("runtime.db").display().to_string());
    for (name, value) in extra {
        env.insert(name.to_string(), value.to_string());
    }
    TestServer::start_with(env).await
}

/// Reads until the server closes the connection (bounded); returns what it sent.
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    match tokio::time::timeout(BOUND, stream.read_to_end(&mut received)).await {
        Ok(_) => String::from_utf8_lossy(&received).into_owned(),
        Err(_) => panic!(
            "the server kept the connection open; got {:?}",
            String::from_utf8_lossy(&received)
        ),
    }
}

/// Sends one keep-alive `GET /healthz` and reads its whole answer; returns the status line.
async fn healthz(stream: &mut TcpStream) -> String {
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .expect("write request");
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let text = String::from_utf8_lossy(&received).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if body.len() >= length {
                return head.lines().next().unwrap_or_default().to_string();
            }
        }
        let read = tokio::time::timeout_at(deadline, stream.read(&mut buffer))
            .await
            .expect("the answer did not come")
            .expect("read");
        if read == 0 {
            return format!("closed after {text:?}");
        }
        received.extend_from_slice(&buffer[..read]);
    }
}

async fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).await.expect("connect")
}

/// A connection from the loopback address `from` (all of 127/8 is loopback on Linux), so the
/// service's own link to its embedded studio, from 127.0.0.1, does not count against it.
async fn connect_from(from: &str, addr: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{from}:0").parse().expect("address"))
        .expect("bind a loopback source address");
    socket.connect(addr).await.expect("connect")
}

#[tokio::test]
async fn a_stalled_header_and_a_short_body_are_closed_after_the_timeouts() {
    let mock = MockProvider::start().await;
    let dir = tempfile::tempdir().unwrap();
    let server = server_with(
        &mock,
        &dir,
        &[
            ("AGENT_RUNTIME_HTTP_HEADER_READ_TIMEOUT_SECONDS", "1"),
            ("AGENT_RUNTIME_HTTP_BODY_READ_TIMEOUT_SECONDS", "1"),
        ],
    )
    .await;
    // Headers that never end.
    let mut stalled_header = connect(server.addr).await;
    stalled_header
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    // A body that stops short of its Content-Length.
    let mut short_body = connect(server.addr).await;
    let head = format!(
        "POST /v1/agents HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"app_id\": "
    );
    short_body.write_all(head.as_bytes()).await.unwrap();
    let (header_answer, body_answer) = tokio::join!(
        read_to_close(&mut stalled_header),
        read_to_close(&mut short_body)
    );
    assert!(
        !header_answer.contains("200 OK"),
        "a request without the end of its headers was served: {header_answer:?}"
    );
    assert!(
        body_answer.starts_with("HTTP/1.1 408"),
        "the stalled body is answered 408: {body_answer:?}"
    );
    assert!(body_answer.contains("request body was not received in time"));
    // Nothing was created from the half body, and the server still serves.
    let (status, agents) = server.get(&format!("/v1/agents?app_id={APP}")).await;
    assert_eq!(status, 200);
    assert_eq!(agents, serde_json::json!([]));
    server.stop().await;
}

#[tokio::test]
async fn one_address_holds_at_most_its_limit_of_connections() {
    let mock = MockProvider::start().await;
    let dir = tempfile::tempdir().unwrap();
    let server = server_with(
        &mock,
        &dir,
        &[("AGENT_RUNTIME_HTTP_MAX_CONNECTIONS_PER_CLIENT", "2")],
    )
    .await;
    const CLIENT: &str = "127.0.0.2";
    let mut first = connect_from(CLIENT, server.addr).await;
    let mut second = connect_from(CLIENT, server.addr).await;
    assert_eq!(healthz(&mut first).await, "HTTP/1.1 200 OK");
    assert_eq!(healthz(&mut second).await, "HTTP/1.1 200 OK");
    // A third one from the same address is answered 429 and closed.
    let mut third = connect_from(CLIENT, server.addr).await;
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let refused = read_to_close(&mut third).await;
    assert!(refused.starts_with("HTTP/1.1 429"), "{refused:?}");
    assert!(refused.contains("too many open connections from this address"));
    // The earlier ones keep working, and another address has places of its own.
    assert_eq!(healthz(&mut first).await, "HTTP/1.1 200 OK");
    assert_eq!(healthz(&mut second).await, "HTTP/1.1 200 OK");
    let mut other = connect_from("127.0.0.3", server.addr).await;
    assert_eq!(healthz(&mut other).await, "HTTP/1.1 200 OK");
    // A closed connection gives its place back (the server notices the close shortly after).
    drop(first);
    let admitted = wait_for("a freed place", BOUND, || async {
        let mut next = connect_from(CLIENT, server.addr).await;
        let status = healthz(&mut next).await;
        (status == "HTTP/1.1 200 OK").then_some(next)
    })
    .await;
    drop(admitted);
    drop(second);
    server.stop().await;
}
