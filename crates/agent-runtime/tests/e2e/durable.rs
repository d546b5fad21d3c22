//! Durable execution on a real Temporal dev server: `serve` with `TEMPORAL_ADDRESS` starts
//! durable runs as `AgentRunWorkflow`s, `agent-runtime worker` executes their turns, signals
//! wake them, cancel cancels them, a killed worker's runs continue on another, and the
//! reconciler repairs rows whose workflow never started or ended early. The dev server comes
//! from `ar_test_support::service::temporal` (skipped loudly without the CLI, failing under
//! CI=true).

use std::time::Duration;

use ar_test_support::mock_provider::{MockProvider, Reply};
use ar_test_support::service::temporal::TemporalDev;
use ar_test_support::service::*;
use serde_json::{json, Value};

use crate::BIN;

/// The dev server, `serve` and one worker, on one store (a SQLite file unless PostgreSQL).
struct Durable {
    dev: TemporalDev,
    env: Env,
    server: Server,
    worker: ChildGuard,
    _dir: tempfile::TempDir,
}

/// `agent-runtime worker` with `env`, once it is ready.
async fn start_worker(env: &Env) -> ChildGuard {
    let mut worker = ChildGuard::spawn(BIN, &["worker", "--addr", "127.0.0.1:0"], env);
    worker.wait_stderr_line("ready on http://", WAIT).await;
    worker
}

impl Durable {
    async fn start(case: &str, mock: &MockProvider, extra: &[(&str, &str)]) -> Option<Durable> {
        Durable::start_on(case, mock, extra, None).await
    }

    /// [`Durable::start`] on PostgreSQL at `database_url` when given.
    async fn start_on(
        case: &str,
        mock: &MockProvider,
        extra: &[(&str, &str)],
        database_url: Option<&str>,
    ) -> Option<Durable> {
        let dev = TemporalDev::start(case).await?;
        Some(Durable::start_with(dev, mock, extra, database_url).await)
    }

    /// [`Durable::start_on`] with a dev server already started (`extra` may point
    /// `TEMPORAL_ADDRESS` elsewhere, e.g. at a proxy in front of it).
    async fn start_with(
        dev: TemporalDev,
        mock: &MockProvider,
        extra: &[(&str, &str)],
        database_url: Option<&str>,
    ) -> Durable {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut env = sqlite_env(dir.path(), mock);
        if let Some(url) = database_url {
            env = on_postgres(env, url);
        }
        env.insert("TEMPORAL_ADDRESS".into(), dev.address.clone());
        env.insert("TEMPORAL_TASK_QUEUE_PREFIX".into(), "test-".into());
        for (name, value) in extra {
            env.insert((*name).into(), (*value).into());
        }
        let server = Server::start(BIN, &env).await;
        let worker = start_worker(&env).await;
        Durable {
            dev,
            env,
            server,
            worker,
            _dir: dir,
        }
    }

    async fn durable_run(&self, mock: &MockProvider, agent_id: &str, extra: Value) -> String {
        let mut body = json!({"execution_mode": "durable"});
        merge(&mut body, &extra);
        let run = self.server.start_run(mock, agent_id, body).await;
        assert_eq!(run["execution_mode"], "durable", "{run}");
        run["id"].as_str().expect("run id").to_string()
    }

    async fn execution(&self, run_id: &str) -> Value {
        let (status, info) = self
            .server
            .get(&format!("/v1/runs/{run_id}/execution?app_id={APP}"))
            .await;
        assert_eq!(status, 200, "{info}");
        info
    }

    /// Waits until the run ends, asserts that it completed, and returns it.
    async fn wait_completed(&self, run_id: &str) -> Value {
        let done = self
            .server
            .wait_status(run_id, &["completed", "failed"])
            .await;
        assert_eq!(done["status"], "completed", "{done}");
        done
    }

    /// Asserts that the run's events are whole: contiguous, with one terminal event.
    async fn assert_whole_history(&self, run_id: &str) {
        let events = self.server.events(run_id).await;
        assert_contiguous(&events);
        one_terminal_event(&events);
    }

    /// Waits until the run's workflow reports `state`.
    async fn wait_workflow(&self, run_id: &str, state: &str) -> Value {
        wait_for(&format!("workflow {state}"), WAIT, || async {
            let info = self.execution(run_id).await;
            (info["state"] == state).then_some(info)
        })
        .await
    }

    async fn query(&self, run_id: &str, name: &str) -> Value {
        let (ok, stdout, stderr) = self
            .dev
            .command(&[
                "workflow",
                "query",
                "--workflow-id",
                &workflow_id(run_id),
                "--name",
                name,
                "--output",
                "json",
            ])
            .await;
        assert!(ok, "query {name}: {stderr}");
        let value: Value =
            serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        value["queryResult"][0].clone()
    }

    /// Waits until the workflow's `current_step` query answers `step`.
    async fn wait_step(&self, run_id: &str, step: &str) {
        wait_for(step, WAIT, || async {
            (self.query(run_id, "current_step").await == step).then_some(())
        })
        .await;
    }

    /// Turns (local activities) the workflow's current run has recorded.
    async fn turns_recorded(&self, run_id: &str) -> usize {
        let history = self.dev.history(&workflow_id(run_id)).await.to_string();
        history.matches("MARKER_RECORDED").count()
    }

    /// Sends `ResumeRun` with an already consumed `resume_id` straight to a waiting workflow
    /// (as a duplicate delivery would) and checks that it executes no turn.
    async fn assert_consumed_signal_wakes_nothing(&self, run_id: &str, resume_id: &str) {
        self.wait_step(run_id, "awaiting_input").await;
        let before = self.turns_recorded(run_id).await;
        let input = json!({ "resume_id": resume_id }).to_string();
        let (ok, _, stderr) = self
            .dev
            .command(&[
                "workflow",
                "signal",
                "--workflow-id",
                &workflow_id(run_id),
                "--name",
                "ResumeRun",
                "--input",
                &input,
            ])
            .await;
        assert!(ok, "{stderr}");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            self.turns_recorded(run_id).await,
            before,
            "the consumed resume id {resume_id} executed a turn"
        );
        assert_eq!(self.query(run_id, "current_step").await, "awaiting_input");
    }

    /// What a rolled-back resume must leave as it found: the run, its interactions, its
    /// messages and its events.
    async fn snapshot(&self, run_id: &str) -> Snapshot {
        Snapshot {
            run: self.server.run(run_id).await,
            interactions: self.server.list(run_id, "interactions").await,
            messages: self.server.list(run_id, "messages").await,
            events: self.server.events(run_id).await.len(),
        }
    }

    /// The run is as `before` (but for `updated_at`), and its events say it resumed and
    /// paused again for the same reason.
    async fn assert_rolled_back(&self, run_id: &str, before: &Snapshot) {
        let now = self.snapshot(run_id).await;
        let without_time = |run: &Value| {
            let mut run = run.clone();
            run.as_object_mut().map(|run| run.remove("updated_at"));
            run
        };
        assert_eq!(without_time(&now.run), without_time(&before.run));
        assert_eq!(now.interactions, before.interactions);
        assert_eq!(now.messages, before.messages);
        let events = self.server.events(run_id).await;
        assert_contiguous(&events);
        assert_eq!(
            event_types(&events[before.events..]),
            ["run.resumed", "run.paused"]
        );
        assert_eq!(
            events[events.len() - 1]["data"]["pause_reason"],
            before.run["pause_reason"]
        );
    }
}

/// A run's records at one moment.
struct Snapshot {
    run: Value,
    interactions: Vec<Value>,
    messages: Vec<Value>,
    events: usize,
}

fn workflow_id(run_id: &str) -> String {
    format!("agent-run-{run_id}")
}

fn one_terminal_event(events: &[Value]) {
    let types = event_types(events);
    let terminal = types
        .iter()
        .filter(|t| matches!(t.as_str(), "run.completed" | "run.failed" | "run.cancelled"))
        .count();
    assert_eq!(terminal, 1, "{types:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_five_step_run_completes_and_its_workflow_completed() {
    let mock = MockProvider::start().await;
    for step in 0..4 {
        mock.push(Reply::tool_call(
            "get_context",
            json!({"step": step}).to_string(),
        ));
    }
    mock.push(Reply::text("done after five steps"));
    let Some(d) = Durable::start("durable five steps", &mock, &[]).await else {
        return;
    };
    let (status, caps) = d.server.get("/v1/capabilities").await;
    assert_eq!(status, 200);
    assert_eq!(
        caps["durable"],
        json!({"enabled": true, "temporal_address": d.dev.address, "namespace": "default"})
    );
    let agent = d.server.create_agent("durable", &["get_context"]).await;
    let run_id = d
        .durable_run(&mock, agent["id"].as_str().unwrap(), json!({}))
        .await;
    d.wait_completed(&run_id).await;
    let info = d.wait_workflow(&run_id, "completed").await;
    assert_eq!(info["execution_mode"], "durable");
    assert_eq!(info["workflow_id"], workflow_id(&run_id));
    assert_eq!(info["task_queue"], "test-agent-native-autonomous");
    assert!(
        !info["temporal_run_id"].as_str().unwrap_or("").is_empty(),
        "{info}"
    );
    for field in [
        "history_length",
        "history_size_bytes",
        "state_transition_count",
    ] {
        assert!(info[field].as_i64().unwrap_or(0) > 0, "{field}: {info}");
    }
    assert!(
        info["started_at"].is_string() && info["closed_at"].is_string(),
        "{info}"
    );
    // Temporal itself says so, and its history carries references, not transcripts.
    let described = d.dev.describe_workflow(&workflow_id(&run_id)).await;
    let status = described["workflowExecutionInfo"]["status"]
        .as_str()
        .unwrap_or("");
    assert!(status.contains("COMPLETED"), "{described}");
    let history = d.dev.history(&workflow_id(&run_id)).await.to_string();
    assert!(
        !history.contains("done after five steps"),
        "transcript in history"
    );
    assert!(!history.contains(RUN_API_KEY), "secret in history");
    d.assert_whole_history(&run_id).await;
    assert_eq!(d.server.list(&run_id, "tool-calls").await.len(), 4);
    assert_eq!(mock.model_requests().len(), 5, "each step asked once");
    drop(d.worker);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_and_replies_travel_as_signals_and_duplicates_advance_nothing() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call(
        "request_approval",
        json!({"summary": "ship it?"}).to_string(),
    ));
    mock.push(Reply::text("approved, shipping"));
    mock.push(Reply::text("second answer"));
    let Some(d) = Durable::start("durable signals", &mock, &[]).await else {
        return;
    };
    let agent = d.server.create_agent("asker", &["request_approval"]).await;
    let policy = json!({"turn_policy": {"mode": "pause_after_assistant"}, "mode": "interactive"});
    let run_id = d
        .durable_run(&mock, agent["id"].as_str().unwrap(), policy)
        .await;
    let paused = d.server.wait_status(&run_id, &["paused"]).await;
    assert_eq!(paused["pause_reason"], "human_approval", "{paused}");
    d.wait_step(&run_id, "awaiting_approval").await;
    assert_eq!(
        d.query(&run_id, "approval_wait_state").await["waiting"],
        true
    );

    let approve = format!("/v1/runs/{run_id}/approve?app_id={APP}");
    let (status, body) = d
        .server
        .post(&approve, json!({"resume_id": "approve-1"}))
        .await;
    assert_eq!(status, 200, "{body}");
    let paused = d.server.wait_status(&run_id, &["paused"]).await;
    let paused = if paused["pause_reason"] == "human_approval" {
        wait_for("the approved turn", WAIT, || async {
            let run = d.server.run(&run_id).await;
            (run["pause_reason"] == "awaiting_user_message").then_some(run)
        })
        .await
    } else {
        paused
    };
    assert_eq!(paused["pause_reason"], "awaiting_user_message", "{paused}");
    assert_eq!(mock.model_requests().len(), 2);
    d.wait_step(&run_id, "awaiting_input").await;
    assert_eq!(d.query(&run_id, "input_wait_state").await["waiting"], true);

    let resume = format!("/v1/runs/{run_id}/resume?app_id={APP}");
    let reply = json!({"intent": "reply", "content": "once more", "resume_id": "reply-1"});
    let (status, body) = d.server.post(&resume, reply.clone()).await;
    assert_eq!(status, 200, "{body}");
    wait_for("the reply's turn", WAIT, || async {
        let run = d.server.run(&run_id).await;
        (mock.model_requests().len() == 3 && run["status"] == "paused").then_some(())
    })
    .await;
    // A duplicate reply (same resume id) neither appends a message nor runs a turn, and the
    // same signal sent again straight to the workflow wakes nothing: its id was consumed.
    d.wait_step(&run_id, "awaiting_input").await;
    let before = d.turns_recorded(&run_id).await;
    assert!(before >= 3, "prepare and two turns recorded: {before}");
    let (status, body) = d.server.post(&resume, reply).await;
    assert_eq!(status, 200, "{body}");
    d.assert_consumed_signal_wakes_nothing(&run_id, "reply-1")
        .await;
    assert_eq!(
        mock.model_requests().len(),
        3,
        "a duplicate advanced a turn"
    );
    assert_eq!(
        d.turns_recorded(&run_id).await,
        before,
        "a duplicate executed a turn"
    );
    let messages = d.server.list(&run_id, "messages").await;
    let replies = messages
        .iter()
        .filter(|m| m["content"] == "once more")
        .count();
    assert_eq!(replies, 1, "{messages:?}");
    assert_contiguous(&d.server.events(&run_id).await);
    assert_eq!(d.execution(&run_id).await["state"], "running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_cancels_the_workflow_and_ends_the_run_once() {
    let mock = MockProvider::start().await;
    mock.push(Reply::hang());
    let Some(d) = Durable::start("durable cancel", &mock, &[]).await else {
        return;
    };
    let agent = d.server.create_agent("hanger", &["get_context"]).await;
    let run_id = d
        .durable_run(&mock, agent["id"].as_str().unwrap(), json!({}))
        .await;
    wait_model_requests(&mock, 1).await;
    let (status, run) = d
        .server
        .post(&format!("/v1/runs/{run_id}/cancel?app_id={APP}"), json!({}))
        .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["status"], "cancelled");
    d.wait_workflow(&run_id, "cancelled").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    d.assert_whole_history(&run_id).await;
    assert_eq!(d.server.run(&run_id).await["status"], "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_run_leaves_its_runs_to_another_worker() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call("get_context", "{}"));
    // The second step's model call never answers: the worker dies with it in flight.
    mock.push(Reply::hang());
    let lease = [("AGENT_RUNTIME_LEASE_TTL_SECONDS", "3")];
    let Some(mut d) = Durable::start("durable worker kill", &mock, &lease).await else {
        return;
    };
    let agent = d.server.create_agent("survivor", &["get_context"]).await;
    let run_id = d
        .durable_run(&mock, agent["id"].as_str().unwrap(), json!({}))
        .await;
    wait_model_requests(&mock, 2).await;
    d.worker.kill_hard();
    mock.push(Reply::text("finished elsewhere"));
    let started = std::time::Instant::now();
    d.worker = start_worker(&d.env).await;
    d.wait_completed(&run_id).await;
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
    d.assert_whole_history(&run_id).await;
    assert_eq!(d.server.list(&run_id, "tool-calls").await.len(), 1);
    assert_eq!(mock.model_requests().len(), 3, "the finished step was kept");
    d.wait_workflow(&run_id, "completed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconciler_fails_a_run_whose_workflow_ended_and_starts_a_missing_one() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call(
        "request_approval",
        json!({"summary": "wait"}).to_string(),
    ));
    mock.push(Reply::text("started by the reconciler"));
    // The first `serve` leaves the repairs to the second, which reconciles every second.
    let off = [("AGENT_RUNTIME_DURABLE_RECONCILE_SECONDS", "3600")];
    let Some(mut d) = Durable::start("durable reconciler", &mock, &off).await else {
        return;
    };
    let agent = d.server.create_agent("paused", &["request_approval"]).await;
    let agent_id = agent["id"].as_str().unwrap();

    // A paused run whose workflow is terminated behind the runtime's back.
    let ended = d.durable_run(&mock, agent_id, json!({})).await;
    d.server.wait_status(&ended, &["paused"]).await;
    terminate(&d.dev, &ended).await;
    // A queued row whose workflow is gone (as when the process died between its commit and
    // the start): with no worker polling, the run stays queued while its workflow is removed.
    d.worker.kill_hard();
    let missing = d.durable_run(&mock, agent_id, json!({})).await;
    terminate(&d.dev, &missing).await;
    let missing_workflow = workflow_id(&missing);
    let (ok, _, stderr) = d
        .dev
        .command(&[
            "workflow",
            "delete",
            "--workflow-id",
            &missing_workflow,
            "--yes",
        ])
        .await;
    assert!(ok, "{stderr}");
    wait_for("the workflow deleted", Duration::from_secs(60), || async {
        let (ok, _, _) = d
            .dev
            .command(&["workflow", "describe", "--workflow-id", &missing_workflow])
            .await;
        (!ok).then_some(())
    })
    .await;
    assert_eq!(d.server.run(&missing).await["status"], "queued");

    d.env
        .insert("AGENT_RUNTIME_DURABLE_RECONCILE_SECONDS".into(), "1".into());
    d.server = Server::start(BIN, &d.env).await;
    d.worker = start_worker(&d.env).await;
    let failed = d.server.wait_status(&ended, &["failed"]).await;
    assert_eq!(
        failed["error_message"],
        "temporal workflow is terminated while runtime run remained paused",
        "{failed}"
    );
    let done = d
        .server
        .wait_status(&missing, &["completed", "failed"])
        .await;
    assert_eq!(done["status"], "completed", "{done}");
    d.wait_workflow(&missing, "completed").await;
    one_terminal_event(&d.server.events(&missing).await);
}

async fn terminate(dev: &TemporalDev, run_id: &str) {
    let (ok, _, stderr) = dev
        .command(&[
            "workflow",
            "terminate",
            "--workflow-id",
            &workflow_id(run_id),
            "--reason",
            "test",
        ])
        .await;
    assert!(ok, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_without_temporal_and_a_malformed_address_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockProvider::start().await;
    let mut env = sqlite_env(dir.path(), &mock);
    let (status, _, stderr) = run_command(BIN, &["worker", "--addr", "127.0.0.1:0"], &env).await;
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("needs TEMPORAL_ADDRESS"), "{stderr}");
    env.insert("TEMPORAL_ADDRESS".into(), "temporal-without-port".into());
    let (status, _, stderr) = run_command(BIN, &["serve"], &env).await;
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("TEMPORAL_ADDRESS") && stderr.contains("is not a host:port"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_serve_does_not_stop_a_durable_run() {
    let mock = MockProvider::start().await;
    for step in 0..3 {
        mock.push(
            Reply::tool_call("get_context", json!({"step": step}).to_string())
                .delay(Duration::from_millis(500)),
        );
    }
    mock.push(Reply::text("finished without the API"));
    let Some(mut d) = Durable::start("durable serve kill", &mock, &[]).await else {
        return;
    };
    let agent = d.server.create_agent("headless", &["get_context"]).await;
    let run_id = d
        .durable_run(&mock, agent["id"].as_str().unwrap(), json!({}))
        .await;
    wait_model_requests(&mock, 1).await;
    d.server.process.kill_hard();
    // The worker goes on alone; the API comes back to a finished run.
    wait_model_requests(&mock, 4).await;
    d.server = Server::start(BIN, &d.env).await;
    d.wait_completed(&run_id).await;
    d.assert_whole_history(&run_id).await;
    assert_eq!(d.server.list(&run_id, "tool-calls").await.len(), 3);
    d.wait_workflow(&run_id, "completed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_chat_continues_as_new_and_keeps_its_consumed_resume_ids() {
    let mock = MockProvider::start().await;
    for turn in 0..4 {
        mock.push(Reply::text(format!("answer {turn}")));
    }
    let every_two = [("AGENT_RUNTIME_DURABLE_TURNS_PER_WORKFLOW_RUN", "2")];
    let Some(d) = Durable::start("durable continue-as-new", &mock, &every_two).await else {
        return;
    };
    let agent = d.server.create_agent("chatty", &[]).await;
    let policy = json!({"turn_policy": {"mode": "pause_after_assistant"}});
    let run_id = d
        .durable_run(&mock, agent["id"].as_str().unwrap(), policy)
        .await;
    d.server.wait_status(&run_id, &["paused"]).await;
    let first = d.execution(&run_id).await["temporal_run_id"].clone();
    let resume = format!("/v1/runs/{run_id}/resume?app_id={APP}");
    for turn in 1..=3 {
        let reply = json!({"intent": "reply", "content": format!("reply {turn}"),
                           "resume_id": format!("reply-{turn}")});
        let (status, body) = d.server.post(&resume, reply).await;
        assert_eq!(status, 200, "{body}");
        wait_for("the reply's turn", WAIT, || async {
            let run = d.server.run(&run_id).await;
            (mock.model_requests().len() == turn + 1 && run["status"] == "paused").then_some(())
        })
        .await;
    }
    let info = d.execution(&run_id).await;
    assert_ne!(
        info["temporal_run_id"], first,
        "the workflow continued as new: {info}"
    );
    assert_eq!(info["state"], "running", "{info}");
    let (ok, stdout, stderr) = d
        .dev
        .command(&[
            "workflow",
            "describe",
            "--workflow-id",
            &workflow_id(&run_id),
            "--run-id",
            first.as_str().unwrap_or_default(),
            "--output",
            "json",
        ])
        .await;
    assert!(ok, "{stderr}");
    assert!(stdout.contains("CONTINUED_AS_NEW"), "{stdout}");
    // A resume id consumed before the continue-as-new still wakes nothing.
    d.assert_consumed_signal_wakes_nothing(&run_id, "reply-1")
        .await;
    assert_eq!(mock.model_requests().len(), 4);
    assert_contiguous(&d.server.events(&run_id).await);
}

/// A resume committed while Temporal is down cannot reach the workflow: it is rolled back
/// whole (run, approval state, interaction, message, checkpoint) with a 500 that says so, and
/// the same resume goes through once Temporal is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_whose_signal_fails_is_rolled_back_whole_and_can_be_retried() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call(
        "request_approval",
        json!({"summary": "ship it?"}).to_string(),
    ));
    mock.push(Reply::text("approved, shipping"));
    mock.push(Reply::text("answered"));
    let Some(mut d) = Durable::start("durable resume rollback", &mock, &[]).await else {
        return;
    };
    let agent = d.server.create_agent("undone", &["request_approval"]).await;
    let policy = json!({"turn_policy": {"mode": "pause_after_assistant"}, "mode": "interactive"});
    let run_id = d
        .durable_run(&mock, agent["id"].as_str().unwrap(), policy)
        .await;
    d.server.wait_status(&run_id, &["paused"]).await;
    d.wait_step(&run_id, "awaiting_approval").await;

    // An approval with a note: it sets the approval state and appends the note as a message.
    let resume = format!("/v1/runs/{run_id}/resume?app_id={APP}");
    let approval = json!({"intent": "approve", "content": "ship it now", "resume_id": "approve-1"});
    let before = d.snapshot(&run_id).await;
    assert_eq!(before.run["pause_reason"], "human_approval");
    assert_ne!(before.run["approval_state"], "approved");
    d.dev.stop();
    let (status, error) = d.server.post(&resume, approval.clone()).await;
    assert_eq!(status, 500, "{error}");
    assert!(
        error["error"]
            .as_str()
            .unwrap_or("")
            .contains("rolled back"),
        "{error}"
    );
    d.assert_rolled_back(&run_id, &before).await;

    d.dev.restart().await;
    let (status, body) = d.server.post(&resume, approval).await;
    assert_eq!(status, 200, "{body}");
    let run = wait_for("the approved turn", WAIT, || async {
        let run = d.server.run(&run_id).await;
        (run["pause_reason"] == "awaiting_user_message").then_some(run)
    })
    .await;
    assert_eq!(run["approval_state"], "approved", "{run}");
    let messages = d.server.list(&run_id, "messages").await;
    let notes = messages.iter().filter(|m| m["content"] == "ship it now");
    assert_eq!(notes.count(), 1, "{messages:?}");

    // A reply rolled back leaves nothing for the model: the checkpoint it queued the reply
    // on is restored, so the turn of the retried reply sees only that one.
    d.wait_step(&run_id, "awaiting_input").await;
    let before = d.snapshot(&run_id).await;
    d.dev.stop();
    let first = json!({"intent": "reply", "content": "first try", "resume_id": "reply-1"});
    let (status, error) = d.server.post(&resume, first).await;
    assert_eq!(status, 500, "{error}");
    d.assert_rolled_back(&run_id, &before).await;
    d.dev.restart().await;
    let second = json!({"intent": "reply", "content": "second try", "resume_id": "reply-2"});
    let (status, body) = d.server.post(&resume, second).await;
    assert_eq!(status, 200, "{body}");
    wait_for("the reply's turn", WAIT, || async {
        let run = d.server.run(&run_id).await;
        (mock.model_requests().len() == 3 && run["status"] == "paused").then_some(())
    })
    .await;
    let asked = mock.model_requests()[2].body.to_string();
    assert!(
        asked.contains("second try") && !asked.contains("first try"),
        "{asked}"
    );
    let events = d.server.events(&run_id).await;
    assert_contiguous(&events);
    assert_eq!(d.execution(&run_id).await["state"], "running");
}

/// SIGTERM to a worker whose turn has a model call in flight: the worker stops polling, lets
/// the step reach its checkpoint and exits before its shutdown grace runs out; the run is not
/// failed, and a second worker completes it from that checkpoint, each step once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stopped_by_sigterm_hands_its_turn_to_another_worker() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call("get_context", "{}"));
    mock.push(
        Reply::tool_call("get_context", json!({"part": 2}).to_string())
            .delay(Duration::from_secs(3)),
    );
    let Some(mut d) = Durable::start("durable worker sigterm", &mock, &[]).await else {
        return;
    };
    let agent = d.server.create_agent("stopped", &["get_context"]).await;
    let run_id = d
        .durable_run(&mock, agent["id"].as_str().unwrap(), json!({}))
        .await;
    wait_model_requests(&mock, 2).await;
    d.worker.terminate();
    // The service's shutdown grace is 20 s: a worker that needed it all abandoned its step.
    let status = d.worker.wait_exit(Duration::from_secs(20)).await;
    let stderr = d.worker.stderr();
    assert!(
        status.success(),
        "SIGTERM must exit 0, got {status}: {stderr}"
    );
    assert!(!stderr.contains("abandoning"), "{stderr}");

    // Not failed: running at its last checkpoint, its workflow still running.
    let left = d.server.run(&run_id).await;
    assert_eq!(left["status"], "running", "{left}");
    assert_eq!(d.execution(&run_id).await["state"], "running");
    let events = d.server.events(&run_id).await;
    assert_eq!(
        event_types(&events).last().map(String::as_str),
        Some("tool_call_finished"),
        "the in-flight step was finished and kept"
    );
    assert_eq!(d.server.list(&run_id, "tool-calls").await.len(), 2);

    mock.push(Reply::text("finished by the second worker"));
    d.worker = start_worker(&d.env).await;
    d.wait_completed(&run_id).await;
    d.assert_whole_history(&run_id).await;
    assert_eq!(d.server.list(&run_id, "tool-calls").await.len(), 2);
    assert_eq!(mock.model_requests().len(), 3, "no step was asked twice");
    d.wait_workflow(&run_id, "completed").await;
}

/// Without a replica link (no NATS) `POST pause` reaches a turn executing in a worker (through
/// the store: the turn's next commit sees the request), the run pauses at the step's end, and
/// a resume executes the rest in a new turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_reaches_a_turn_in_a_worker_without_a_replica_link() {
    let mock = MockProvider::start().await;
    mock.push(Reply::tool_call("get_context", "{}").delay(Duration::from_secs(2)));
    mock.push(Reply::text("done after the pause"));
    let Some(d) = Durable::start("durable pause", &mock, &[]).await else {
        return;
    };
    assert!(!d.env.contains_key("AGENT_RUNTIME_NATS_URL"));
    let agent = d.server.create_agent("pausable", &["get_context"]).await;
    let run_id = d
        .durable_run(&mock, agent["id"].as_str().unwrap(), json!({}))
        .await;
    wait_model_requests(&mock, 1).await;
    let pause = format!("/v1/runs/{run_id}/pause?app_id={APP}");
    let (status, body) = d.server.post(&pause, json!({})).await;
    assert_eq!(status, 200, "{body}");
    let paused = d
        .server
        .wait_status(&run_id, &["paused", "completed"])
        .await;
    assert_eq!(paused["status"], "paused", "{paused}");
    assert_eq!(paused["pause_reason"], "manual", "{paused}");
    d.wait_step(&run_id, "awaiting_input").await;
    assert_eq!(
        mock.model_requests().len(),
        1,
        "paused before the next step"
    );
    assert_eq!(d.server.list(&run_id, "tool-calls").await.len(), 1);

    let resume = format!("/v1/runs/{run_id}/resume?app_id={APP}");
    let (status, body) = d
        .server
        .post(&resume, json!({"intent": "continue", "resume_id": "go-on"}))
        .await;
    assert_eq!(status, 200, "{body}");
    d.wait_completed(&run_id).await;
    d.assert_whole_history(&run_id).await;
    assert_eq!(mock.model_requests().len(), 2);
    d.wait_workflow(&run_id, "completed").await;
}

/// Durable runs on PostgreSQL: one completes, and the reconciler's query of stale durable rows
/// finds a paused run whose workflow was terminated and fails it with the contract's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_runs_and_the_reconciler_on_postgres() {
    on_fresh_database("e2e::durable::on_postgres", |database_url| async move {
        let mock = MockProvider::start().await;
        mock.push(Reply::tool_call("get_context", "{}"));
        mock.push(Reply::text("done on postgres"));
        let every_second = [("AGENT_RUNTIME_DURABLE_RECONCILE_SECONDS", "1")];
        let case = "durable on postgres";
        let Some(d) = Durable::start_on(case, &mock, &every_second, Some(&database_url)).await
        else {
            return;
        };
        let (_, caps) = d.server.get("/v1/capabilities").await;
        assert_eq!(caps["store"]["driver"], "postgres", "{caps}");
        let agent = d
            .server
            .create_agent("pg", &["get_context", "request_approval"])
            .await;
        let agent_id = agent["id"].as_str().unwrap();
        let run_id = d.durable_run(&mock, agent_id, json!({})).await;
        d.wait_completed(&run_id).await;
        d.wait_workflow(&run_id, "completed").await;
        d.assert_whole_history(&run_id).await;

        mock.push(Reply::tool_call(
            "request_approval",
            json!({"summary": "wait"}).to_string(),
        ));
        let ended = d.durable_run(&mock, agent_id, json!({})).await;
        d.server.wait_status(&ended, &["paused"]).await;
        terminate(&d.dev, &ended).await;
        let failed = d.server.wait_status(&ended, &["failed"]).await;
        assert_eq!(
            failed["error_message"],
            "temporal workflow is terminated while runtime run remained paused",
            "{failed}"
        );
        one_terminal_event(&d.server.events(&ended).await);
    })
    .await;
}

/// An agent that needs approval before it starts: the run pauses before its first step, with
/// no checkpoint yet. An approval (with a note for the model) rolled back leaves the run
/// without the note queued, so the first model call, after the retried approval, sees it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_before_the_first_step_rolled_back_leaves_nothing_queued() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("worked once approved"));
    let Some(mut d) = Durable::start("durable rollback before a step", &mock, &[]).await else {
        return;
    };
    let gated = json!({"app_id": APP, "name": "gated", "system_prompt": "You help with tickets.",
                       "allowed_tools": [], "approval_mode": "always"});
    let (status, agent) = d.server.post("/v1/agents", gated).await;
    assert_eq!(status, 201, "{agent}");
    let run_id = d
        .durable_run(&mock, agent["id"].as_str().unwrap(), json!({}))
        .await;
    let paused = d.server.wait_status(&run_id, &["paused"]).await;
    assert_eq!(paused["pause_reason"], "human_approval", "{paused}");
    d.wait_step(&run_id, "awaiting_approval").await;

    let resume = format!("/v1/runs/{run_id}/resume?app_id={APP}");
    let approval = json!({"intent": "approve", "content": "go ahead, carefully",
                          "resume_id": "gate-1"});
    let before = d.snapshot(&run_id).await;
    d.dev.stop();
    let (status, error) = d.server.post(&resume, approval.clone()).await;
    assert_eq!(status, 500, "{error}");
    d.assert_rolled_back(&run_id, &before).await;
    d.dev.restart().await;
    let (status, body) = d.server.post(&resume, approval).await;
    assert_eq!(status, 200, "{body}");
    let done = d.wait_completed(&run_id).await;
    assert_eq!(done["approval_state"], "approved", "{done}");
    let requests = mock.model_requests();
    assert_eq!(requests.len(), 1);
    let asked = requests[0].body.to_string();
    assert_eq!(asked.matches("go ahead, carefully").count(), 1, "{asked}");
    d.assert_whole_history(&run_id).await;
}

mod tls;
