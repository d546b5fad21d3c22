//! Contract parity, route by route: every route of the original's router with its error cases,
//! and the status and `{"error"}` message the original answers them with
//! (`internal/api/server.go`, `events_sse.go`, `v2_events.go`, `model_credentials.go`).

use ar_test_support::mock_provider::{MockProvider, Reply};
use reqwest::Method;
use serde_json::{json, Value};

use ar_test_support::service::*;

/// One request and the answer the original gives it.
struct Case {
    method: Method,
    path: String,
    body: Option<String>,
    /// `X-Agent-Runtime-Event-Protocol`.
    protocol: Option<&'static str>,
    /// Whether the service token is sent.
    token: bool,
    status: u16,
    /// The exact `error` of the body, for error answers.
    error: Option<&'static str>,
}

fn case(method: Method, path: impl Into<String>, status: u16, error: &'static str) -> Case {
    Case {
        method,
        path: path.into(),
        body: None,
        protocol: None,
        token: true,
        status,
        error: (!error.is_empty()).then_some(error),
    }
}

impl Case {
    fn body(mut self, body: impl Into<String>) -> Case {
        self.body = Some(body.into());
        self
    }

    fn protocol(mut self, protocol: &'static str) -> Case {
        self.protocol = Some(protocol);
        self
    }

    fn anonymous(mut self) -> Case {
        self.token = false;
        self
    }

    async fn check(&self, server: &TestServer) -> Value {
        let mut request = server
            .client
            .request(self.method.clone(), server.url(&self.path));
        if self.token {
            request = request.bearer_auth(TOKEN);
        }
        if let Some(protocol) = self.protocol {
            request = request.header("X-Agent-Runtime-Event-Protocol", protocol);
        }
        if let Some(body) = &self.body {
            request = request
                .header("content-type", "application/json")
                .body(body.clone());
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let what = format!(
            "{} {} {:?}",
            self.method,
            self.path,
            self.body.as_deref().map(|b| &b[..b.len().min(80)])
        );
        assert_eq!(status, self.status, "{what}: {text}");
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if let Some(error) = self.error {
            assert_eq!(body["error"], error, "{what}: {text}");
        } else if status >= 400 {
            assert!(body["error"].is_string(), "{what}: {text}");
        }
        body
    }
}

fn start_body(agent_id: &str, app_id: &str) -> String {
    json!({"app_id": app_id, "agent_id": agent_id, "target": {"type": "ticket", "id": "T-1"}})
        .to_string()
}

#[tokio::test]
async fn every_route_answers_its_error_cases_as_the_original() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("done"));
    let server = TestServer::start(&mock).await;
    let agent = server.agent("stable", json!({})).await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let ended = run["id"].as_str().unwrap().to_string();
    server.wait_status(&ended, &["completed"]).await;
    let runs_before = server.run_count().await;

    use Method as M;
    let a = format!("app_id={APP}");
    let unknown = |sub: &str| format!("/v1/runs/run_nope{sub}?{a}");
    let big = format!(
        r#"{{"app_id": "{APP}", "instructions": "{}"}}"#,
        "x".repeat(1 << 20)
    );
    let credential = r#"{"credential": {"type": "api_key", "api_key": "k"}}"#;
    let mcp_credential = r#"{"credential": {"type": "bearer", "token": "t"}}"#;
    let mismatch_v2 =
        "agent runtime event protocol mismatch: host expects v2 but app is configured for v1";
    let mismatch_v1 =
        "agent runtime event protocol mismatch: host expects v1 but app is configured for v2";
    let cases = vec![
        // Unauthenticated routes, and the token on every other one.
        case(M::GET, "/healthz", 200, "").anonymous(),
        case(M::GET, "/readyz", 200, "").anonymous(),
        case(M::GET, "/v1/capabilities", 401, "unauthorized").anonymous(),
        case(M::GET, format!("/internal/runs?{a}"), 401, "unauthorized").anonymous(),
        case(
            M::GET,
            format!("/v2/runs/{ended}/events?{a}"),
            401,
            "unauthorized",
        )
        .anonymous(),
        // Agents.
        case(M::GET, "/v1/agents", 400, "app_id is required"),
        case(M::POST, "/v1/agents", 400, "invalid request body").body("{not json"),
        case(M::POST, "/v1/agents", 400, "invalid request body"),
        case(M::POST, "/v1/agents", 400, "app_id is required").body(r#"{"name": "x"}"#),
        case(M::GET, "/v1/agents/stable", 400, "app_id is required"),
        case(
            M::GET,
            format!("/v1/agents/nope?{a}"),
            404,
            "agent not found",
        ),
        case(
            M::GET,
            format!("/internal/agents/nope?{a}"),
            404,
            "agent not found",
        ),
        case(
            M::PUT,
            format!("/v1/agents/x?{a}"),
            400,
            "invalid request body",
        )
        .body("{"),
        case(M::PUT, "/v1/agents/x", 400, "app_id is required").body(r#"{"name": "n"}"#),
        case(
            M::DELETE,
            format!("/v1/agents/stable?{a}"),
            405,
            "method not allowed",
        ),
        case(
            M::GET,
            format!("/v1/agents/stable/extra?{a}"),
            404,
            "not found",
        ),
        // Starting runs.
        case(M::GET, "/v1/runs", 400, "app_id is required"),
        case(M::POST, "/v1/runs", 400, "invalid request body"),
        case(M::POST, "/v1/runs", 400, "invalid request body").body(big),
        case(M::POST, "/v1/runs", 400, "invalid request body")
            .body(r#"{"app_id": "host_app", "surprise": 1}"#),
        case(M::POST, "/v1/runs", 400, "invalid request body")
            .body(format!("{} {{}}", start_body("stable", APP))),
        case(M::POST, "/v1/runs", 400, "agent not found").body(start_body("nope", APP)),
        case(M::POST, "/internal/runs", 400, "agent not found").body(start_body("nope", APP)),
        case(M::POST, "/v1/runs", 409, mismatch_v2)
            .body(start_body("stable", APP))
            .protocol("v2"),
        case(M::POST, "/v1/runs", 409, mismatch_v1)
            .body(start_body("stable", V2_APP))
            .protocol(" V1 "),
        case(M::POST, "/v1/runs", 400, "agent not found")
            .body(start_body("nope", APP))
            .protocol(" V1 "),
        // Search pages leniently.
        case(M::GET, "/v1/runs/search", 400, "app_id is required"),
        case(
            M::GET,
            format!("/v1/runs/search?{a}&limit=abc&offset=-3"),
            200,
            "",
        ),
        case(
            M::GET,
            format!("/v1/runs/search?{a}&status=sleeping"),
            200,
            "",
        ),
        // A run that does not exist: reads of the run say 404, mutations and the engine's
        // reads 400, record lists are empty.
        case(M::GET, unknown(""), 404, "run not found"),
        case(M::GET, unknown("/events"), 404, "run not found"),
        case(M::GET, unknown("/events/history"), 404, "run not found"),
        case(M::GET, unknown("/execution"), 400, "run not found"),
        case(M::GET, unknown("/messages"), 200, ""),
        case(M::GET, unknown("/artifacts"), 200, ""),
        case(M::GET, unknown("/interactions"), 200, ""),
        case(M::GET, unknown("/tool-calls"), 200, ""),
        case(M::POST, unknown("/messages"), 400, "run not found").body(r#"{"content": "x"}"#),
        case(M::POST, unknown("/artifacts"), 400, "run not found")
            .body(r#"{"artifact_type": "x"}"#),
        case(M::GET, unknown("/tools"), 400, "agent run not found"),
        case(M::POST, unknown("/tools"), 400, "agent run not found").body(r#"{"tool_name": "x"}"#),
        case(M::POST, unknown("/resume"), 400, "run not found")
            .body(r#"{"intent": "reply", "content": "x"}"#),
        case(M::POST, unknown("/approve"), 400, "run not found"),
        case(M::POST, unknown("/request-changes"), 400, "run not found")
            .body(r#"{"content": "x"}"#),
        case(M::POST, unknown("/cancel"), 400, "run not found"),
        case(M::POST, unknown("/pause"), 400, "run not found"),
        case(
            M::PUT,
            unknown("/mcp-servers/s1/credential"),
            400,
            "run not found",
        )
        .body(mcp_credential),
        case(M::PUT, unknown("/model-credential"), 400, "run not found").body(credential),
        case(
            M::PUT,
            unknown("/model-credential"),
            400,
            "invalid credential request",
        )
        .body("{"),
        case(
            M::DELETE,
            unknown("/model-credential"),
            400,
            "run not found",
        ),
        // With codex installed the sign-in is offered and the run is looked up first.
        case(
            M::POST,
            unknown("/codex-auth/device-code/start"),
            400,
            match ar_process::find_program("codex", None) {
                Some(_) => "run not found",
                None => "codex auth manager is not configured",
            },
        ),
        case(
            M::POST,
            format!("/internal/runs/run_nope/cancel?{a}"),
            400,
            "run not found",
        ),
        // Sub-routes: app_id first, unknown paths and methods are 404.
        case(
            M::GET,
            format!("/v1/runs/{ended}/messages"),
            400,
            "app_id is required",
        ),
        case(
            M::GET,
            format!("/v1/runs/{ended}/nothing?{a}"),
            404,
            "not found",
        ),
        case(
            M::GET,
            format!("/v1/runs/{ended}/cancel?{a}"),
            404,
            "not found",
        ),
        case(
            M::DELETE,
            format!("/v1/runs/{ended}/resume?{a}"),
            404,
            "not found",
        ),
        case(M::GET, format!("/v1/nothing-here?{a}"), 404, "not found"),
        // Bodies: the routes that read one refuse an empty or broken one.
        case(
            M::POST,
            format!("/v1/runs/{ended}/resume?{a}"),
            400,
            "invalid request body",
        ),
        case(
            M::POST,
            format!("/v1/runs/{ended}/resume?{a}"),
            400,
            "invalid request body",
        )
        .body("[1]"),
        case(
            M::POST,
            format!("/v1/runs/{ended}/messages?{a}"),
            400,
            "invalid request body",
        ),
        case(
            M::POST,
            format!("/v1/runs/{ended}/tools?{a}"),
            400,
            "invalid request body",
        )
        .body("nope"),
        // An ended run.
        case(
            M::POST,
            format!("/v1/runs/{ended}/resume?{a}"),
            400,
            "run is terminal",
        )
        .body(r#"{"intent": "reply", "content": "x"}"#),
        case(
            M::POST,
            format!("/v1/runs/{ended}/approve?{a}"),
            400,
            "run is terminal",
        ),
        case(
            M::GET,
            format!("/v1/runs/{ended}/tools?{a}"),
            400,
            "agent run is not active",
        ),
        case(
            M::PUT,
            format!("/v1/runs/{ended}/mcp-servers/s1/credential?{a}"),
            400,
            "agent run is terminal",
        )
        .body(mcp_credential),
        case(M::POST, format!("/v1/runs/{ended}/cancel?{a}"), 200, ""),
        // v2: gated per app, and the whole run tree mounted under /v2.
        case(
            M::GET,
            format!("/v2/runs/{ended}/events?{a}"),
            404,
            "v2 event protocol is not enabled for app",
        ),
        case(
            M::GET,
            format!("/v2/runs/{ended}/stream-state?{a}"),
            404,
            "v2 event protocol is not enabled for app",
        ),
        case(
            M::GET,
            format!("/v2/runs/run_nope/events?app_id={V2_APP}"),
            404,
            "run not found",
        ),
        case(
            M::GET,
            format!("/v2/runs/run_nope/events?app_id={V2_APP}&page_size=0"),
            400,
            "page_size must be between 1 and 1000",
        ),
        case(M::GET, format!("/v2/runs/{ended}?{a}"), 200, ""),
        case(
            M::GET,
            format!("/v2/runs/{ended}/events/history?{a}"),
            200,
            "",
        ),
        case(M::GET, format!("/v2/runs/{ended}/messages?{a}"), 200, ""),
        case(
            M::POST,
            format!("/v2/runs/run_nope/cancel?{a}"),
            400,
            "run not found",
        ),
    ];
    let mut answers = Vec::new();
    for case in &cases {
        answers.push(case.check(&server).await);
    }

    // What the successful answers hold.
    let page = |path: &str| {
        let index = cases.iter().position(|c| c.path.ends_with(path)).unwrap();
        answers[index].clone()
    };
    let lenient = page("limit=abc&offset=-3");
    assert_eq!(
        (lenient["limit"].as_i64(), lenient["offset"].as_i64()),
        (Some(25), Some(0))
    );
    assert_eq!(lenient["total"], 1, "{lenient}");
    let sleeping = page("status=sleeping");
    assert_eq!(
        (
            sleeping["total"].as_i64(),
            sleeping["items"].as_array().map(Vec::len)
        ),
        (Some(0), Some(0))
    );
    assert_eq!(page("/run_nope/messages?app_id=host_app"), json!([]));
    assert_eq!(answers[0], json!({"status": "ok"}));
    assert_eq!(answers[1], json!({"status": "ready"}));
    let over_v2 = cases
        .iter()
        .position(|c| c.path == format!("/v2/runs/{ended}?{a}"))
        .unwrap();
    assert_eq!(answers[over_v2]["id"], ended.as_str());
    // The fixed phrase comes with our account of what was wrong.
    let unknown_field = &answers[cases
        .iter()
        .position(|c| c.body.as_deref().is_some_and(|b| b.contains("surprise")))
        .unwrap()];
    assert!(
        unknown_field["detail"]
            .as_str()
            .unwrap()
            .contains("surprise"),
        "{unknown_field}"
    );

    // None of it started, changed or ended anything.
    assert_eq!(server.run_count().await, runs_before);
    assert_eq!(server.run(&ended).await["status"], "completed");
}
