//! Test helpers: a studio on 127.0.0.1:0 with a manual clock, registrations, and a raw SSE reader.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ar_sse::{Decoder, Event};
use ar_studio::http::{router, RouterOptions};
use ar_studio::wire::{AgentRegistration, Registration};
use ar_studio::{ManualClock, ServerConfig, StudioServer};
use futures::StreamExt;
use tokio::sync::mpsc;

pub const MANIFEST: &str = r#"{"weft":1,"agents":[{"name":"helper","instructions":"be brief","model":{"name":"m1","provider":"fake"},"tools":[{"name":"search","input_schema":{"type":"object"}},{"name":"pay","approval":true},{"name":"read"}]}]}"#;

pub fn registration(id: &str) -> Registration {
    let mut side_effects = std::collections::BTreeMap::new();
    side_effects.insert("search".to_string(), "safe".to_string());
    side_effects.insert("pay".to_string(), "never".to_string());
    side_effects.insert("read".to_string(), "safe".to_string());
    Registration {
        runtime_id: id.to_string(),
        host: "h".into(),
        pid: 7,
        service: "svc".into(),
        env: "dev".into(),
        threads: true,
        agents: vec![AgentRegistration {
            name: "helper".into(),
            manifest: MANIFEST.into(),
            models: vec!["m1".into(), "m2".into()],
            limits: ar_studio::wire::AgentLimits {
                max_steps: 10,
                parallelism: 4,
            },
            defaults: ar_studio::wire::AgentDefaults {
                max_tokens: Some(1000),
                tool_choice: ar_studio::wire::ToolChoice {
                    mode: "auto".into(),
                    name: String::new(),
                },
                ..Default::default()
            },
            side_effects,
            allow: vec!["pay".into()],
            ..Default::default()
        }],
        ..Default::default()
    }
}

pub fn test_config() -> ServerConfig {
    ServerConfig {
        ping_every: Duration::from_secs(3600),
        ..ServerConfig::default()
    }
}

/// A studio served on loopback.
pub struct Served {
    pub server: StudioServer,
    pub clock: Arc<ManualClock>,
    pub addr: SocketAddr,
    pub http: reqwest::Client,
}

impl Served {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

pub async fn serve(config: ServerConfig) -> Served {
    serve_with(config, RouterOptions::default()).await
}

pub async fn serve_with(config: ServerConfig, opts: RouterOptions) -> Served {
    let clock = Arc::new(ManualClock::starting_now());
    let server = StudioServer::with_clock(config, clock.clone());
    serve_server(server, clock, opts).await
}

pub async fn serve_server(
    server: StudioServer,
    clock: Arc<ManualClock>,
    opts: RouterOptions,
) -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = router(server.clone(), opts);
    tokio::spawn(async move {
        let _ = axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await;
    });
    Served {
        server,
        clock,
        addr,
        http: reqwest::Client::new(),
    }
}

/// A raw reader of one command stream.
pub struct Stream {
    pub events: mpsc::UnboundedReceiver<Event>,
    pub raw: mpsc::UnboundedReceiver<bytes::Bytes>,
    task: tokio::task::JoinHandle<()>,
}

impl Stream {
    pub async fn next(&mut self) -> Event {
        tokio::time::timeout(Duration::from_secs(10), self.events.recv())
            .await
            .expect("a frame within the safety timeout")
            .expect("stream open")
    }

    /// Drops the connection.
    pub fn close(self) {
        self.task.abort();
    }
}

pub async fn open_stream(s: &Served, runtime: &str, last: Option<&str>) -> Stream {
    let mut req = s
        .http
        .get(s.url(&format!("/api/runtime/commands?runtime={runtime}")));
    if let Some(l) = last {
        req = req.header("last-event-id", l);
    }
    let resp = req.send().await.expect("stream request");
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()
            .get("x-accel-buffering")
            .and_then(|v| v.to_str().ok()),
        Some("no")
    );
    assert!(resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream")));
    let (tx, events) = mpsc::unbounded_channel();
    let (raw_tx, raw) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut reader = Decoder::with_max_frame(16 << 20);
        let mut body = resp.bytes_stream();
        while let Some(Ok(chunk)) = body.next().await {
            let _ = raw_tx.send(chunk.clone());
            reader.push(&chunk);
            while let Some(ev) = reader.next_event() {
                let _ = tx.send(ev);
            }
        }
    });
    Stream { events, raw, task }
}

/// Registers and opens a stream, consuming the opening ping and breakpoints frames.
pub async fn connect(s: &Served, id: &str) -> Stream {
    s.server.register(registration(id)).expect("register");
    let mut st = open_stream(s, id, None).await;
    assert_eq!(st.next().await.event, "ping");
    assert_eq!(st.next().await.event, "breakpoints");
    st
}

/// Polls `f` until it holds (a safety net of 10 s, never a timing assertion).
pub async fn eventually(mut f: impl FnMut() -> bool) {
    for _ in 0..2000 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("condition never held");
}

pub async fn post_json(
    s: &Served,
    path: &str,
    body: &serde_json::Value,
) -> (u16, serde_json::Value) {
    let resp = s
        .http
        .post(s.url(path))
        .json(body)
        .send()
        .await
        .expect("post");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
    )
}
