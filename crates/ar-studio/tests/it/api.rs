//! The people API over HTTP: views, the playground validation table, approvals, steer, cancel, breakpoints, access control.

use ar_studio::http::RouterOptions;
use ar_studio::wire::{Ack, CommandState};
use serde_json::{json, Value};

use crate::support::{connect, post_json, registration, serve, serve_with, test_config, Served};

async fn get(s: &Served, path: &str) -> (u16, Value) {
    let resp = s.http.get(s.url(path)).send().await.expect("get");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

fn run_body(extra: Value) -> Value {
    let mut body = json!({"runtime_id": "rt", "agent": "helper", "input": "hi"});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    body
}

async fn code_of(s: &Served, body: Value) -> (u16, String) {
    let (status, v) = post_json(s, "/api/playground/runs", &body).await;
    (
        status,
        v["error"]["code"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test]
async fn runtimes_and_manifests_are_listed() {
    let s = serve(test_config()).await;
    let _st = connect(&s, "rt").await;
    let (status, body) = get(&s, "/api/runtimes").await;
    assert_eq!(status, 200);
    let rt = &body["runtimes"][0];
    assert_eq!(rt["id"], "rt");
    assert_eq!(rt["connected"], true);
    assert_eq!(rt["breakpoints"], json!([]));
    assert_eq!(
        rt["agents"][0]["tools"][1],
        json!({"name": "pay", "side_effects": "never", "allow": true, "approval": true})
    );
    let (status, body) = get(&s, "/api/runtimes/rt").await;
    assert_eq!((status, body["id"].as_str()), (200, Some("rt")));
    assert_eq!(get(&s, "/api/runtimes/none").await.0, 404);
    let (status, body) = get(&s, "/api/manifests").await;
    assert_eq!(status, 200);
    assert_eq!(body["manifests"][0]["live"], true);
    assert_eq!(
        body["manifests"][0]["manifest_hash"].as_str().map(str::len),
        Some(64)
    );
}

#[tokio::test]
async fn playground_runs_follow_the_validation_table_and_change_nothing_when_refused() {
    let s = serve(test_config()).await;
    let mut st = connect(&s, "rt").await;
    let mut strict = registration("strict");
    strict.agents[0].allow.clear();
    s.server.register(strict).expect("register");
    let src = json!({"run_id": "src", "from_step": 2});
    let cases: Vec<(Value, u16, &str)> = vec![
        (json!({"runtime_id": ""}), 400, "bad_request"),
        (json!({"runtime_id": "ghost"}), 404, "not_found"),
        (json!({"agent": "ghost"}), 404, "not_found"),
        (
            json!({"overrides": {"tools_enabled": ["nuke"]}}),
            400,
            "bad_request",
        ),
        (json!({"overrides": {"model": "gpt-9"}}), 400, "bad_request"),
        (json!({"engine": "quantum"}), 400, "unsupported"),
        (
            json!({"overrides": {"options": {"temperature": 3.0}}}),
            400,
            "bad_request",
        ),
        (
            json!({"overrides": {"options": {"max_steps": 20}}}),
            403,
            "forbidden",
        ),
        (
            json!({"overrides": {"options": {"parallelism": 8}}}),
            403,
            "forbidden",
        ),
        (
            json!({"overrides": {"params": {"max_tokens": 5000}}}),
            403,
            "forbidden",
        ),
        (
            json!({"runtime_id": "strict", "side_effects": "allow"}),
            403,
            "forbidden",
        ),
        (json!({"source": src}), 400, "bad_request"),
        (
            json!({"input": null, "engine": "scripted", "source": src, "overrides": {"instructions": "x"}}),
            400,
            "bad_request",
        ),
        (
            json!({"input": null, "engine": "scripted", "source": src, "overrides": {"model": "m2"}}),
            400,
            "bad_request",
        ),
        (
            json!({"input": null, "source": src, "transcript_edits": [{"kind": "tool_result", "step": 2, "call_id": "k", "tool_result": "x"}]}),
            400,
            "bad_request",
        ),
        (
            json!({"input": null, "source": src, "transcript_edits": [{"kind": "tool_args", "step": 1, "call_id": "k", "args": [1]}]}),
            400,
            "bad_request",
        ),
        (
            json!({"transcript_edits": [{"step": 0, "content": "x"}]}),
            400,
            "bad_request",
        ),
        (json!({"command_id": "bad\nid: forged"}), 400, "bad_request"),
        (json!({"runtime_id": "strict"}), 503, "unavailable"),
    ];
    for (extra, status, code) in cases {
        let got = code_of(&s, run_body(extra.clone())).await;
        assert_eq!(got, (status, code.to_string()), "case {extra}");
    }
    let big = run_body(json!({"input": "x".repeat(5 << 20)}));
    assert_eq!(code_of(&s, big).await.0, 413);
    assert_eq!(s.server.command_count(), 0, "no refused run left a row");
    // A valid replay narrows and edits inside the kept prefix.
    let ok = run_body(json!({
        "command_id": "exp-1",
        "input": null,
        "engine": "scripted",
        "side_effects": "allow",
        "source": src,
        "overrides": {"options": {"max_steps": 5, "temperature": 0.5}, "tools_enabled": ["search", "pay"], "tool_choice": {"mode": "named", "name": "search"}},
        "transcript_edits": [{"kind": "tool_result", "step": 1, "call_id": "k", "tool_result": "x"}, {"kind": "insert", "step": 2, "content": "hint"}]
    }));
    let (status, body) = post_json(&s, "/api/playground/runs", &ok).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(
        (body["command_id"].as_str(), body["state"].as_str()),
        (Some("exp-1"), Some("queued"))
    );
    assert!(body["error"].is_null());
    let ev = st.next().await;
    assert_eq!(
        (ev.event.as_str(), ev.id.as_deref()),
        ("run", Some("exp-1"))
    );
    assert_eq!(code_of(&s, ok).await, (409, "conflict".to_string()));
    let (status, body) = get(&s, "/api/playground/commands/exp-1").await;
    assert_eq!((status, body["state"].as_str()), (200, Some("queued")));
    assert_eq!(get(&s, "/api/playground/commands/none").await.0, 404);
}

async fn started_run(s: &Served, command: &str, run: &str, fork: bool) {
    let thread = if fork { "fork" } else { "ephemeral" };
    let body = run_body(
        json!({"command_id": command, "thread": thread, "input": null, "source": {"run_id": "src", "from_step": 0}}),
    );
    let (status, v) = post_json(s, "/api/playground/runs", &body).await;
    assert_eq!(status, 202, "{v}");
    s.server
        .ack(&Ack {
            command_id: command.into(),
            state: "accepted".into(),
            run_id: run.into(),
            ..Ack::default()
        })
        .expect("accept");
}

#[tokio::test]
async fn approvals_refuse_app_runs_bad_decisions_and_second_decisions() {
    let s = serve(test_config()).await;
    let _st = connect(&s, "rt").await;
    started_run(&s, "c", "run-1", false).await;
    let decide = |d: &str| json!({"call_id": "call-1", "decision": d});
    let (status, _) = post_json(&s, "/api/runs/app-run/approvals", &decide("approve")).await;
    assert_eq!(status, 403, "the app's own runs are view-only");
    let (status, _) = post_json(&s, "/api/runs/run-1/approvals", &decide("maybe")).await;
    assert_eq!(status, 400);
    let (status, _) = post_json(
        &s,
        "/api/runs/run-1/approvals",
        &json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(status, 400);
    let (status, first) = post_json(&s, "/api/runs/run-1/approvals", &decide("deny")).await;
    assert_eq!(status, 202);
    let (status, _) = post_json(&s, "/api/runs/run-1/approvals", &decide("approve")).await;
    assert_eq!(status, 409, "a second decision on the same call");
    // Once the runtime rejects the first decision, the call may be decided again.
    let first_id = first["command_id"].as_str().unwrap_or_default().to_string();
    s.server
        .ack(&Ack {
            command_id: first_id,
            state: "rejected".into(),
            error: "not parked".into(),
            ..Ack::default()
        })
        .expect("reject");
    let (status, _) = post_json(&s, "/api/runs/run-1/approvals", &decide("approve")).await;
    assert_eq!(status, 202);
    let (status, body) = get(&s, "/api/runs/run-1/commands").await;
    assert_eq!(
        (status, body["commands"].as_array().map(Vec::len)),
        (200, Some(2))
    );
}

#[tokio::test]
async fn steer_and_cancel_follow_the_run_routes() {
    let s = serve(test_config()).await;
    let mut st = connect(&s, "rt").await;
    started_run(&s, "c", "run-1", false).await;
    started_run(&s, "f", "fork-1", true).await;
    st.next().await;
    st.next().await;
    assert_eq!(
        post_json(&s, "/api/runs/app/steer", &json!({"message": "x"}))
            .await
            .0,
        403
    );
    assert_eq!(
        post_json(&s, "/api/runs/run-1/steer", &json!({"message": " "}))
            .await
            .0,
        400
    );
    assert_eq!(
        post_json(&s, "/api/runs/fork-1/steer", &json!({"message": "x"}))
            .await
            .0,
        409
    );
    assert_eq!(
        post_json(&s, "/api/runs/run-1/steer", &json!({"message": "focus"}))
            .await
            .0,
        202
    );
    assert_eq!(st.next().await.event, "steer");
    let (status, body) = post_json(&s, "/api/runs/run-1/cancel", &json!({})).await;
    assert_eq!((status, body["command_id"].as_str()), (202, Some("c")));
    let ev = st.next().await;
    assert_eq!(
        (ev.event.as_str(), ev.data.as_str()),
        ("cancel", "{\"command_id\":\"c\"}")
    );
    assert_eq!(
        post_json(&s, "/api/runs/nope/cancel", &json!({})).await.0,
        404
    );
    let (status, _) = post_json(&s, "/api/playground/commands/f/cancel", &json!({})).await;
    assert_eq!(status, 202);
    s.server
        .ack(&Ack {
            command_id: "c".into(),
            state: "finished".into(),
            run_id: "run-1".into(),
            ..Ack::default()
        })
        .expect("finish");
    assert_eq!(
        post_json(&s, "/api/runs/run-1/cancel", &json!({})).await.0,
        409
    );
}

#[tokio::test]
async fn breakpoints_and_forget_over_http() {
    let s = serve(test_config()).await;
    let put = |id: &str, body: Value| {
        s.http
            .put(s.url(&format!("/api/runtimes/{id}/breakpoints")))
            .json(&body)
            .send()
    };
    s.server.register(registration("rt")).expect("register");
    assert_eq!(
        put("ghost", json!({"tools": []}))
            .await
            .expect("put")
            .status(),
        404
    );
    assert_eq!(
        put("rt", json!({"tools": ["pay"]}))
            .await
            .expect("put")
            .status(),
        503
    );
    assert!(
        s.server.breakpoints_of("rt").is_empty(),
        "nothing stored without delivery"
    );
    let mut st = crate::support::open_stream(&s, "rt", None).await;
    st.next().await;
    st.next().await;
    assert_eq!(
        put("rt", json!({"tools": ["nuke"]}))
            .await
            .expect("put")
            .status(),
        400
    );
    let resp = put("rt", json!({"tools": ["pay"]})).await.expect("put");
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    assert_eq!(
        (body["breakpoints"].clone(), body["breakpoints_by"].as_str()),
        (json!(["pay"]), Some("studio"))
    );
    assert_eq!(st.next().await.data, "{\"tools\":[\"pay\"]}");
    let view = &s.server.snapshot()[0];
    assert_eq!(view.breakpoints_surface, "api");
    let del = s
        .http
        .delete(s.url("/api/runtimes/rt"))
        .send()
        .await
        .expect("delete");
    assert_eq!(del.status(), 409);
    assert_eq!(s.server.state_of("x"), None::<CommandState>);
}

#[tokio::test]
async fn a_token_guards_every_route_when_set() {
    let s = serve_with(
        test_config(),
        RouterOptions {
            token: Some("sekret".into()),
            runs: None,
        },
    )
    .await;
    let resp = s
        .http
        .get(s.url("/api/runtimes"))
        .send()
        .await
        .expect("get");
    assert_eq!(resp.status(), 401);
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    assert_eq!(body["error"]["code"], "unauthorized");
    // The scheme is matched case-insensitively and the token trimmed, as on the service.
    for (authorization, status) in [
        ("Bearer sekreT", 401),
        ("Bearer sekret", 200),
        ("bearer   sekret ", 200),
        ("Basic sekret", 401),
    ] {
        let resp = s
            .http
            .get(s.url("/api/runtimes"))
            .header("authorization", authorization)
            .send()
            .await
            .expect("get");
        assert_eq!(resp.status(), status, "{authorization:?}");
    }
    let reg = serde_json::to_value(registration("rt")).expect("json");
    let resp = s
        .http
        .post(s.url("/api/runtime/register"))
        .json(&reg)
        .send()
        .await
        .expect("post");
    assert_eq!(resp.status(), 401, "the link routes too");
    assert!(s.server.snapshot().is_empty());
}

#[tokio::test]
async fn without_a_token_only_loopback_hosts_are_answered() {
    let s = serve(test_config()).await;
    let resp = s
        .http
        .get(s.url("/api/runtimes"))
        .header("host", "studio.example.com")
        .send()
        .await
        .expect("get");
    assert_eq!(resp.status(), 403);
    let resp = s
        .http
        .get(s.url("/api/runtimes"))
        .header("host", "localhost:1")
        .send()
        .await
        .expect("get");
    assert_eq!(resp.status(), 200);
}

/// serde reads a struct from a JSON array field by field; the studio decodes bodies with the
/// service's one decoder, which refuses that, so an array is a 400 and nothing is created.
#[tokio::test]
async fn array_bodies_are_refused_and_change_nothing() {
    let s = serve(test_config()).await;
    let _st = connect(&s, "rt").await;
    for body in [
        json!(["rt", "helper", "hi"]),
        json!({"runtime_id": "rt", "agent": "helper", "input": "hi", "source": ["src", 2]}),
    ] {
        let (status, v) = post_json(&s, "/api/playground/runs", &body).await;
        assert_eq!(status, 400, "{body} -> {v}");
        assert_eq!(v["error"]["code"], "bad_request", "{v}");
    }
    assert_eq!(s.server.command_count(), 0, "no refused run left a row");
}
