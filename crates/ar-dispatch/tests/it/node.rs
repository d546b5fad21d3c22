//! Node server on loopback with the remote client: remote runs with signal and cancel, disconnect cancels, auth and bad input.

use std::sync::Arc;

use ar_dispatch::node::{NodeConfig, NodeOptions};
use ar_dispatch::{serve_node, DispatchError, EventType, RemoteRuntime, RunSpec, Runtime, State};
use tokio::sync::oneshot;

use crate::support::{collect, data_of, find_process, group_gone};

const TOKEN: &str = "node-secret-token";

struct Node {
    url: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Node {
    async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = (&mut self.task).await;
    }
}

async fn start(token: Option<&str>, commands: &[&str]) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let commands: Vec<String> = commands.iter().map(|s| s.to_string()).collect();
    let options = NodeOptions {
        commands,
        shutdown_grace: std::time::Duration::from_millis(500),
        ..NodeOptions::default()
    };
    let config =
        NodeConfig::local(dir.path().join("ws"), &options, token.map(str::to_string)).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        serve_node(config, listener, async move {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    Node {
        url,
        stop: Some(tx),
        task,
        _dir: dir,
    }
}

const ECHOER: &str = r#"echoer=sh -c 'while read l; do echo "echo:$l"; done'"#;

#[tokio::test]
async fn remote_run_with_signal_and_cancel() {
    let node = start(Some(TOKEN), &[ECHOER]).await;
    let remote = RemoteRuntime::new("peer", &node.url, TOKEN).unwrap();
    let spec = RunSpec {
        run_id: "remote-1".into(),
        agent: "command:echoer".into(),
        prompt: "first line".into(),
        workdir: "/definitely/not/used".into(),
        machine: "peer".into(),
        ..Default::default()
    };
    let run = remote.dispatch(spec).await.unwrap();
    assert_eq!(run.id(), "remote-1");
    let mut ev = run.events().unwrap();
    assert_eq!(ev.next().await.unwrap().kind, EventType::Started);
    assert_eq!(ev.next().await.unwrap().data, "echo:first line");
    run.signal("more").await.unwrap();
    let e = ev.next().await.unwrap();
    assert_eq!(
        (e.kind, e.data.as_str(), e.run_id.as_str()),
        (EventType::Message, "echo:more", "remote-1")
    );
    run.cancel();
    let rest = ev.collect().await;
    assert_eq!(rest.last().unwrap().kind, EventType::Exited);
    let st = run.wait().await;
    assert_eq!(st.state, State::Canceled);
    node.stop().await;
}

#[tokio::test]
async fn remote_run_to_completion_and_node_clears_workdir() {
    let node = start(Some(TOKEN), &["where=sh -c 'read l; pwd; echo \"got $l\"'"]).await;
    let remote = RemoteRuntime::new("peer", &node.url, TOKEN).unwrap();
    let spec = RunSpec {
        run_id: "r2".into(),
        agent: "command:where".into(),
        prompt: "x".into(),
        workdir: "/etc".into(),
        ..Default::default()
    };
    let run = remote.dispatch(spec).await.unwrap();
    let events = collect(&run).await;
    let msgs = data_of(&events, EventType::Message);
    assert!(msgs[0].ends_with("/ws/r2"), "{msgs:?}");
    assert_eq!(msgs[1], "got x");
    assert_eq!(run.wait().await.state, State::Succeeded);
    node.stop().await;
}

#[tokio::test]
async fn client_disconnect_cancels_the_node_run() {
    let marker = format!("ar-node-disconnect-{}", std::process::id());
    let flag = format!("sleeper=sh -c 'echo started; sleep 300' {marker}");
    let node = start(Some(TOKEN), &[&flag]).await;
    let client = reqwest::Client::new();
    let mut resp = client
        .post(format!("{}/api/exec", node.url))
        .bearer_auth(TOKEN)
        .body(r#"{"RunID":"d1","Agent":"command:sleeper","Prompt":"p"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/x-ndjson");
    let mut got = String::new();
    while !got.contains("\"message\"") {
        let chunk = resp.chunk().await.unwrap().expect("stream open");
        got.push_str(&String::from_utf8_lossy(&chunk));
    }
    let pid = find_process(&marker)
        .await
        .expect("node started the process");
    drop(resp);
    drop(client);
    assert!(
        group_gone(pid).await,
        "node run still alive after the client went away"
    );
    // the node forgot the run
    let c = reqwest::Client::new();
    let mut status = 0;
    for _ in 0..200 {
        status = c
            .post(format!("{}/api/exec/d1/cancel", node.url))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        if status == 404 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(status, 404);
    node.stop().await;
}

#[tokio::test]
async fn auth_and_bad_input_are_4xx() {
    let node = start(Some(TOKEN), &[ECHOER]).await;
    let c = reqwest::Client::new();
    let exec = |body: &'static str, token: Option<&'static str>| {
        let mut r = c.post(format!("{}/api/exec", node.url)).body(body);
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send()
    };
    let ok_body = r#"{"Agent":"command:echoer","Prompt":"p"}"#;
    assert_eq!(exec(ok_body, None).await.unwrap().status(), 401);
    assert_eq!(exec(ok_body, Some("wrong")).await.unwrap().status(), 401);
    // The scheme is matched case-insensitively and the token trimmed, as on the service.
    for (authorization, status) in [
        (format!("Token {TOKEN}"), 401),
        (format!("bearer  {TOKEN} "), 200),
    ] {
        let r = c
            .get(format!("{}/api/node/capabilities", node.url))
            .header("authorization", &authorization)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), status, "{authorization:?}");
    }
    for bad in [
        r#"{"Agent":"command:echoer","Bogus":true}"#,
        r#"{"Agent":"command:echoer"} trailing"#,
        r#"{"RunID":"a","run_id":"b","Agent":"command:echoer"}"#,
        r#"{"Agent":"command:echoer","profile":"x"}"#,
        r#"{"Agent":"nope"}"#,
        r#"{"Agent":"command","Prompt":"/bin/sh -c id"}"#,
        r#"{"RunID":"../x","Agent":"command:echoer"}"#,
        "not json",
    ] {
        let r = exec(bad, Some(TOKEN)).await.unwrap();
        assert_eq!(r.status(), 400, "{bad}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().len() > 3);
    }
    // a subscription spec with a workdir is refused before anything starts
    let mut sub = crate::wire::sub_spec("gpt-5.5", crate::wire::policy("gpt-5.5"));
    sub.workdir = "/tmp".into();
    let r = c
        .post(format!("{}/api/exec", node.url))
        .bearer_auth(TOKEN)
        .body(sub.to_json())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    // a 2 MiB signal body is refused with 413
    let remote = RemoteRuntime::new("peer", &node.url, TOKEN).unwrap();
    let run = remote
        .dispatch(RunSpec {
            run_id: "sig".into(),
            agent: "command:echoer".into(),
            prompt: "p".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let big = vec![b'x'; 2 * 1024 * 1024];
    let r = c
        .post(format!("{}/api/exec/sig/signal", node.url))
        .bearer_auth(TOKEN)
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let r = c
        .post(format!("{}/api/exec/nope/signal", node.url))
        .bearer_auth(TOKEN)
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = c
        .post(format!("{}/api/exec/sig/signal", node.url))
        .bearer_auth(TOKEN)
        .body("ok")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    // duplicate active run id
    let r = exec(r#"{"RunID":"sig","Agent":"command:echoer"}"#, Some(TOKEN))
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let r = c
        .post(format!("{}/api/exec/sig/cancel", node.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let events = collect(&run).await;
    let st = run.wait().await;
    assert_eq!(st.state, State::Canceled, "{st:?} {events:?}");

    let caps: serde_json::Value = c
        .get(format!("{}/api/node/capabilities", node.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let agents: Vec<String> = serde_json::from_value(caps["agents"].clone()).unwrap();
    assert!(agents.contains(&"command:echoer".to_string()));
    assert!(!agents.contains(&"command".to_string()));

    let wrong = RemoteRuntime::new("peer", &node.url, "bad").unwrap();
    assert!(
        !format!("{wrong:?}").contains("\"bad\""),
        "the node token never shows in Debug"
    );
    let e = wrong
        .dispatch(RunSpec {
            agent: "command:echoer".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            DispatchError::Remote {
                status: Some(401),
                ..
            }
        ),
        "{e}"
    );
    node.stop().await;
}

#[tokio::test]
async fn no_token_configured_is_403() {
    let node = start(None, &[ECHOER]).await;
    let c = reqwest::Client::new();
    let r = c
        .get(format!("{}/api/node/capabilities", node.url))
        .bearer_auth("anything")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = c
        .post(format!("{}/api/exec", node.url))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    node.stop().await;
}

#[tokio::test]
async fn stream_without_terminal_event_fails_the_remote_run() {
    use axum::routing::post;
    let app = axum::Router::new().route(
        "/api/exec",
        post(|| async {
            let line = ar_dispatch::RunEvent::new("cut", EventType::Started, "x");
            format!("{}\n", serde_json::to_string(&line).unwrap())
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let remote = RemoteRuntime::new("cut", &url, "t").unwrap();
    let run = remote
        .dispatch(RunSpec {
            run_id: "cut".into(),
            agent: "a".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let events = collect(&run).await;
    assert_eq!(
        events.iter().map(|e| e.kind).collect::<Vec<_>>(),
        vec![EventType::Started, EventType::Error]
    );
    let st = run.wait().await;
    assert_eq!(st.state, State::Failed);
    assert!(st.err.contains("without a terminal event"));
    server.abort();
}

#[tokio::test]
async fn cluster_over_a_real_node() {
    let node = start(Some(TOKEN), &["hello=sh -c 'read l; echo remote:$l'"]).await;
    let tmp = tempfile::tempdir().unwrap();
    let local = Arc::new(crate::local::runtime(tmp.path()));
    let remote = Arc::new(RemoteRuntime::new("box2", &node.url, TOKEN).unwrap());
    let cluster = ar_dispatch::ClusterRouter::new("box1", local).with_peer("box2", remote);
    let run = cluster
        .dispatch(RunSpec {
            agent: "command:hello".into(),
            prompt: "hi".into(),
            machine: "box2".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        data_of(&collect(&run).await, EventType::Message),
        vec!["remote:hi"]
    );
    let e = cluster
        .dispatch(RunSpec {
            agent: "command".into(),
            machine: "box9".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), "unknown_machine");
    node.stop().await;
}

#[tokio::test]
async fn node_shutdown_cancels_active_runs() {
    let marker = format!("ar-node-shutdown-{}", std::process::id());
    let flag = format!("sleeper=sh -c 'echo up; sleep 300' {marker}");
    let node = start(Some(TOKEN), &[&flag]).await;
    let remote = RemoteRuntime::new("peer", &node.url, TOKEN).unwrap();
    let run = remote
        .dispatch(RunSpec {
            agent: "command:sleeper".into(),
            prompt: "p".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut ev = run.events().unwrap();
    ev.next().await.unwrap();
    assert_eq!(ev.next().await.unwrap().data, "up");
    let pid = find_process(&marker).await.expect("running");
    node.stop().await;
    let rest = ev.collect().await;
    let exited = rest.last().unwrap();
    assert_eq!(exited.kind, EventType::Exited);
    // Reported as the node's shutdown, not as a cancel the caller asked for: the caller may
    // run it again elsewhere.
    assert_eq!(exited.error_code, "node_shutdown");
    let status = run.wait().await;
    assert_eq!(status.state, State::Failed);
    assert!(status.err.contains("shut down"), "{status:?}");
    assert!(group_gone(pid).await);
}
