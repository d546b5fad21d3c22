//! The runtime-link routes over real HTTP on loopback: register, the SSE command stream, acks.

use std::time::Duration;

use ar_studio::wire::{ApprovalDecision, Command, CommandState};
use ar_studio::ServerConfig;
use serde_json::json;

use crate::support::{
    connect, eventually, open_stream, post_json, registration, serve, test_config,
};

#[tokio::test]
async fn register_validates_and_answers_the_commands_url() {
    let s = serve(test_config()).await;
    let (status, body) = post_json(&s, "/api/runtime/register", &json!({"agents": []})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_request"))
    );
    let (status, body) = post_json(
        &s,
        "/api/runtime/register",
        &json!({"runtime_id": "r", "agents": []}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .contains("no agents"));
    let (status, _) = post_json(
        &s,
        "/api/runtime/register",
        &json!({"runtime_id": "r\nx", "agents": [{"name":"a"}]}),
    )
    .await;
    assert_eq!(status, 400);
    let resp = s
        .http
        .post(s.url("/api/runtime/register"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("post");
    assert_eq!(resp.status(), 400);
    let mut big = serde_json::to_value(registration("big")).expect("json");
    big["host"] = json!("x".repeat(9 << 20));
    let (status, body) = post_json(&s, "/api/runtime/register", &big).await;
    assert_eq!(status, 413);
    assert!(body["error"]["code"].is_string());
    assert!(
        s.server.snapshot().is_empty(),
        "nothing registered by refused bodies"
    );
    let reg = serde_json::to_value(registration("a b/c")).expect("json");
    let (status, body) = post_json(&s, "/api/runtime/register", &reg).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"runtime_id": "a b/c", "commands_url": "/api/runtime/commands?runtime=a+b%2Fc"})
    );
}

#[tokio::test]
async fn the_stream_is_get_only_and_needs_a_known_runtime() {
    let s = serve(test_config()).await;
    let resp = s
        .http
        .get(s.url("/api/runtime/commands?runtime=nope"))
        .send()
        .await
        .expect("get");
    assert_eq!(resp.status(), 404);
    let resp = s
        .http
        .get(s.url("/api/runtime/commands"))
        .send()
        .await
        .expect("get");
    assert_eq!(resp.status(), 400);
    s.server.register(registration("rt")).expect("register");
    let resp = s
        .http
        .head(s.url("/api/runtime/commands?runtime=rt"))
        .send()
        .await
        .expect("head");
    assert_eq!(resp.status(), 405);
    assert_eq!(
        resp.headers().get("allow").and_then(|v| v.to_str().ok()),
        Some("GET")
    );
    let resp = s
        .http
        .post(s.url("/api/runtime/commands?runtime=rt"))
        .send()
        .await
        .expect("post");
    assert_eq!(resp.status(), 405);
    assert!(!s.server.connected("rt"), "a refused method takes no feed");
}

#[tokio::test]
async fn every_frame_kind_is_byte_exact_on_the_wire() {
    let s = serve(test_config()).await;
    let mut reg = registration("rt");
    reg.breakpoints = vec!["pay".into()];
    s.server.register(reg).expect("register");
    let mut st = open_stream(&s, "rt", None).await;
    let mut raw = Vec::new();
    // ping, breakpoints
    for _ in 0..2 {
        st.next().await;
    }
    let cmd = Command {
        command_id: "c1".into(),
        agent: "helper".into(),
        input: Some("hi\nthere".into()),
        ..Command::default()
    };
    s.server.enqueue("rt", cmd).expect("enqueue");
    s.server.cancel("rt", "c1");
    let d = s
        .server
        .enqueue_approval(
            "rt",
            ApprovalDecision {
                command_id: "d1".into(),
                run_id: "r".into(),
                call_id: "k".into(),
                decision: "resolve".into(),
                content: "42".into(),
                ..Default::default()
            },
        )
        .expect("approve");
    assert_eq!(d.command_id, "d1");
    s.server
        .set_breakpoints("rt", &["search".into()])
        .expect("bp");
    s.server.steer("rt", "r", "go").expect("steer");
    for _ in 0..5 {
        st.next().await;
    }
    while let Ok(chunk) = st.raw.try_recv() {
        raw.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(raw).expect("utf8");
    let bp_open = text.split("\n\n").nth(1).unwrap_or_default().to_string();
    assert!(text.starts_with("event: ping\ndata: {}\n\nid: cmd_"));
    assert!(bp_open.ends_with("event: breakpoints\ndata: {\"tools\":[\"pay\"]}"));
    let frames: Vec<&str> = text.split_inclusive("\n\n").skip(2).collect();
    assert_eq!(frames.len(), 5);
    assert_eq!(frames[0], "id: c1\nevent: run\ndata: {\"command_id\":\"c1\",\"agent\":\"helper\",\"source\":null,\"input\":\"hi\\nthere\",\"overrides\":{},\"transcript_edits\":[],\"engine\":\"\",\"side_effects\":\"\",\"thread\":\"\",\"experiment_id\":\"\",\"actor\":\"\",\"public_id\":\"\"}\n\n");
    assert_eq!(
        frames[1],
        "event: cancel\ndata: {\"command_id\":\"c1\"}\n\n"
    );
    assert_eq!(frames[2], "id: d1\nevent: approve\ndata: {\"command_id\":\"d1\",\"run_id\":\"r\",\"call_id\":\"k\",\"decision\":\"resolve\",\"content\":\"42\"}\n\n");
    assert!(
        frames[3].starts_with("id: cmd_")
            && frames[3].ends_with("\nevent: breakpoints\ndata: {\"tools\":[\"search\"]}\n\n")
    );
    assert!(
        frames[4].starts_with("id: cmd_")
            && frames[4]
                .ends_with("\nevent: steer\ndata: {\"run_id\":\"r\",\"message\":\"go\"}\n\n")
    );
}

#[tokio::test]
async fn pings_keep_the_stream_alive() {
    let config = ServerConfig {
        ping_every: Duration::from_millis(20),
        ..test_config()
    };
    let s = serve(config).await;
    let mut st = connect(&s, "rt").await;
    let before = s.server.snapshot()[0].last_seen;
    s.clock.advance(Duration::from_secs(5));
    assert_eq!(st.next().await.event, "ping");
    eventually(|| s.server.snapshot()[0].last_seen > before).await;
}

#[tokio::test]
async fn last_event_id_resends_the_queued_backlog() {
    let s = serve(test_config()).await;
    let st = connect(&s, "rt").await;
    for id in ["a", "b", "c"] {
        s.server
            .enqueue(
                "rt",
                Command {
                    command_id: id.into(),
                    agent: "helper".into(),
                    ..Command::default()
                },
            )
            .expect("enqueue");
    }
    s.server
        .ack(&ar_studio::wire::Ack {
            command_id: "b".into(),
            state: "accepted".into(),
            ..Default::default()
        })
        .expect("ack");
    // Replace the stream with a resumed one: only queued commands after "a" come again.
    let mut again = open_stream(&s, "rt", Some("a")).await;
    assert_eq!(again.next().await.event, "ping");
    assert_eq!(again.next().await.event, "breakpoints");
    let ev = again.next().await;
    assert_eq!((ev.event.as_str(), ev.id.as_deref()), ("run", Some("c")));
    st.close();
}

#[tokio::test]
async fn acks_answer_404_400_409_and_200() {
    let s = serve(test_config()).await;
    let _st = connect(&s, "rt").await;
    s.server
        .enqueue(
            "rt",
            Command {
                command_id: "c".into(),
                agent: "helper".into(),
                ..Command::default()
            },
        )
        .expect("enqueue");
    let (status, body) = post_json(
        &s,
        "/api/runtime/acks",
        &json!({"command_id": "zz", "state": "accepted"}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );
    let (status, _) = post_json(
        &s,
        "/api/runtime/acks",
        &json!({"command_id": "c", "state": "running"}),
    )
    .await;
    assert_eq!(status, 400);
    let (status, _) = post_json(&s, "/api/runtime/acks", &json!({"state": "accepted"})).await;
    assert_eq!(status, 400);
    s.clock.advance(Duration::from_secs(31));
    let (status, body) = post_json(
        &s,
        "/api/runtime/acks",
        &json!({"command_id": "c", "state": "accepted", "run_id": "r"}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("conflict"))
    );
    assert_eq!(s.server.state_of("c"), Some(CommandState::Lost));
    let (status, _) = post_json(
        &s,
        "/api/runtime/acks",
        &json!({"command_id": "c", "state": "finished", "status": "succeeded", "run_id": "r"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(s.server.state_of("c"), Some(CommandState::Finished));
}

#[tokio::test]
async fn a_dropped_connection_runs_the_disconnect_sweep() {
    let s = serve(test_config()).await;
    let st = connect(&s, "rt").await;
    s.server
        .enqueue(
            "rt",
            Command {
                command_id: "c".into(),
                agent: "helper".into(),
                ..Command::default()
            },
        )
        .expect("enqueue");
    st.close();
    eventually(|| !s.server.connected("rt")).await;
    assert_eq!(s.server.state_of("c"), Some(CommandState::Lost));
}

#[tokio::test]
async fn a_peer_that_stops_reading_is_cut_off_by_the_write_deadline() {
    use ar_studio::http::{router, PeerAddr, RouterOptions};
    use ar_studio::{DeadlineListener, ManualClock, StudioServer};
    use tokio::io::AsyncWriteExt;

    // A feed far larger than the socket buffers, so only the write deadline can end the stream.
    let config = ServerConfig {
        feed_size: 1_000_000,
        ..test_config()
    };
    let clock = std::sync::Arc::new(ManualClock::starting_now());
    let server = StudioServer::with_clock(config, clock);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = router(server.clone(), RouterOptions::default());
    let listener = DeadlineListener::new(listener, Duration::from_millis(100));
    tokio::spawn(async move {
        let _ = axum::serve(
            listener,
            app.into_make_service_with_connect_info::<PeerAddr>(),
        )
        .await;
    });
    server.register(registration("rt")).expect("register");
    let mut socket = tokio::net::TcpStream::connect(addr).await.expect("connect");
    socket
        .write_all(b"GET /api/runtime/commands?runtime=rt HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .expect("request");
    eventually(|| server.connected("rt")).await;
    let big = "x".repeat(64 * 1024);
    for i in 0..2_000 {
        if !server.connected("rt") {
            break;
        }
        let cmd = Command {
            command_id: format!("c{i}"),
            agent: "helper".into(),
            input: Some(big.clone()),
            ..Command::default()
        };
        let _ = server.enqueue("rt", cmd);
        tokio::task::yield_now().await;
    }
    eventually(|| !server.connected("rt")).await;
    drop(socket);
}
