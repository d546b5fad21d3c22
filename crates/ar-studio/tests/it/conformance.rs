//! Link-client conformance against the studio over real HTTP: every frame kind, reconnects, at-most-once, lost commands, late acks, heartbeats, admission, budgets.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ar_studio::http::RouterOptions;
use ar_studio::link::{
    Admission, CommandHandler, LinkClient, LinkConfig, LinkHandle, Outcome, Rejection, Work,
    REASON_BUDGET_EXCEEDED,
};
use ar_studio::wire::{
    ApprovalDecision, Budget, Command, CommandState, Registration, SessionCommand, SteerMessage,
    VERB_DECIDE,
};
use ar_studio::{ServerConfig, StudioConfig};
use async_trait::async_trait;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, registration, serve, serve_with, test_config, Served};

#[derive(Default)]
struct Recorder {
    executed: Mutex<HashMap<String, u32>>,
    steers: Mutex<Vec<SteerMessage>>,
    breakpoints: Mutex<Vec<Vec<String>>>,
    kinds: Mutex<Vec<&'static str>>,
    release: Notify,
    admit_gate: Notify,
    budget: Mutex<Budget>,
}

struct TestHandler {
    id: String,
    rec: Arc<Recorder>,
}

#[async_trait]
impl CommandHandler for TestHandler {
    async fn registration(&self) -> Registration {
        let mut reg = registration(&self.id);
        reg.budget = *self.rec.budget.lock();
        reg
    }

    async fn admit(&self, work: &Work) -> Result<Admission, Rejection> {
        if let Work::Run(c) = work {
            if c.agent != "helper" {
                return Err(Rejection::with_kind(
                    format!("unknown agent {}", c.agent),
                    "not_found",
                ));
            }
            if c.input.as_deref() == Some("hold-admit") {
                self.rec.admit_gate.notified().await;
            }
        }
        Ok(Admission {
            run_id: format!("pg_{}", work.command_id()),
        })
    }

    async fn execute(
        &self,
        work: Work,
        _admission: Admission,
        cancel: CancellationToken,
    ) -> Outcome {
        let id = work.command_id().to_string();
        *self.rec.executed.lock().entry(id).or_default() += 1;
        let (kind, input) = match &work {
            Work::Run(c) => ("run", c.input.clone().unwrap_or_default()),
            Work::Approve(_) => ("approve", String::new()),
            Work::Session(_) => ("session", String::new()),
        };
        self.rec.kinds.lock().push(kind);
        match input.as_str() {
            "block" => {
                cancel.cancelled().await;
                Outcome::failed("canceled")
            }
            "hold" => {
                tokio::select! {
                    _ = self.rec.release.notified() => Outcome { tokens: 10, ..Outcome::succeeded() },
                    _ = cancel.cancelled() => Outcome::failed("canceled"),
                }
            }
            _ => Outcome {
                tokens: 10,
                ..Outcome::succeeded()
            },
        }
    }

    async fn steer(&self, steer: SteerMessage) {
        self.rec.steers.lock().push(steer);
    }

    async fn breakpoints(&self, tools: Vec<String>) {
        self.rec.breakpoints.lock().push(tools);
    }
}

fn link_config(s: &Served) -> LinkConfig {
    LinkConfig {
        backoff_min: Duration::from_millis(10),
        backoff_max: Duration::from_millis(100),
        heartbeat: Duration::ZERO,
        ..LinkConfig::new(format!("http://{}", s.addr))
    }
}

fn start(s: &Served, cfg: LinkConfig) -> (LinkHandle, Arc<Recorder>) {
    let rec = Arc::new(Recorder::default());
    start_with(s, cfg, rec)
}

fn start_with(_s: &Served, cfg: LinkConfig, rec: Arc<Recorder>) -> (LinkHandle, Arc<Recorder>) {
    let handler = Arc::new(TestHandler {
        id: "rt".into(),
        rec: rec.clone(),
    });
    (
        LinkClient::start(cfg, handler).expect("inside a runtime"),
        rec,
    )
}

fn cmd(id: &str, input: &str) -> Command {
    Command {
        command_id: id.into(),
        agent: "helper".into(),
        input: Some(input.into()),
        ..Command::default()
    }
}

fn executions(rec: &Recorder, id: &str) -> u32 {
    rec.executed.lock().get(id).copied().unwrap_or(0)
}

async fn settled(s: &Served, id: &str, state: CommandState) {
    eventually(|| s.server.state_of(id) == Some(state)).await;
}

#[tokio::test]
async fn every_frame_kind_reaches_the_handler_and_is_acked() {
    let config = ServerConfig {
        ping_every: Duration::from_millis(30),
        ..test_config()
    };
    let s = serve(config).await;
    let (link, rec) = start(&s, link_config(&s));
    eventually(|| s.server.connected("rt")).await;
    eventually(|| !rec.breakpoints.lock().is_empty()).await;

    s.server.enqueue("rt", cmd("c1", "hi")).expect("run");
    settled(&s, "c1", CommandState::Finished).await;
    let row = s.server.command("c1").expect("row");
    assert_eq!(
        (row.run_id.as_str(), row.status.as_str()),
        ("pg_c1", "succeeded")
    );

    s.server
        .set_breakpoints("rt", &["pay".into()])
        .expect("breakpoints");
    eventually(|| rec.breakpoints.lock().last() == Some(&vec!["pay".to_string()])).await;

    s.server.steer("rt", "pg_c1", "focus").expect("steer");
    eventually(|| rec.steers.lock().iter().any(|m| m.message == "focus")).await;

    let d = s
        .server
        .enqueue_approval(
            "rt",
            ApprovalDecision {
                run_id: "pg_c1".into(),
                call_id: "k".into(),
                decision: "approve".into(),
                ..Default::default()
            },
        )
        .expect("approve");
    settled(&s, &d.command_id, CommandState::Finished).await;

    let sc = s
        .server
        .enqueue_session(
            "rt",
            SessionCommand {
                verb: VERB_DECIDE.into(),
                session_id: "s".into(),
                call_id: "k".into(),
                decision: "deny".into(),
                ..Default::default()
            },
        )
        .expect("session");
    settled(&s, &sc.command_id, CommandState::Finished).await;

    s.server
        .enqueue("rt", cmd("blocked", "block"))
        .expect("run");
    settled(&s, "blocked", CommandState::Accepted).await;
    s.server.cancel_run("pg_blocked").expect("cancel");
    settled(&s, "blocked", CommandState::Finished).await;
    let row = s.server.command("blocked").expect("row");
    assert_eq!(
        (row.status.as_str(), row.error.as_deref()),
        ("failed", Some("canceled"))
    );

    let mut ghost = cmd("g", "hi");
    ghost.agent = "ghost".into();
    s.server.enqueue("rt", ghost).expect("run");
    settled(&s, "g", CommandState::Rejected).await;
    assert_eq!(
        s.server.command("g").expect("row").error.as_deref(),
        Some("unknown agent ghost")
    );
    assert_eq!(executions(&rec, "g"), 0);

    eventually(|| link.stats().pings > 0).await;
    let stats = link.stats();
    assert!(
        stats.runs >= 3
            && stats.approvals == 1
            && stats.sessions == 1
            && stats.cancels == 1
            && stats.steers == 1
    );
    assert_eq!(*rec.kinds.lock(), vec!["run", "approve", "session", "run"]);
    for id in ["c1", "blocked"] {
        assert_eq!(executions(&rec, id), 1);
    }
    link.stop().await;
}

#[tokio::test]
async fn reconnects_resume_after_the_cursor_and_never_run_twice() {
    let config = ServerConfig {
        ack_deadline: Duration::ZERO,
        ..test_config()
    };
    let s = serve(config).await;
    let (link, rec) = start(&s, link_config(&s));
    eventually(|| s.server.connected("rt")).await;
    s.server.enqueue("rt", cmd("x", "hold-admit")).expect("run");
    eventually(|| link.stats().runs == 1).await;
    s.server.enqueue("rt", cmd("y", "hi")).expect("run");
    settled(&s, "y", CommandState::Finished).await;
    assert_eq!(link.cursor().as_deref(), Some("y"));
    // The cursor's row ages out, so the resumed stream re-sends every queued command, x too.
    s.clock.advance(Duration::from_secs(25 * 3600));
    s.server.sweep();
    assert!(s.server.command("y").is_err());
    assert_eq!(s.server.state_of("x"), Some(CommandState::Queued));
    let taken = s.server.open_stream("rt", None).expect("take the feed");
    drop(taken);
    eventually(|| link.stats().streams_opened >= 2 && s.server.connected("rt")).await;
    eventually(|| link.stats().duplicates == 1).await;
    rec.admit_gate.notify_one();
    settled(&s, "x", CommandState::Finished).await;
    assert_eq!(executions(&rec, "x"), 1, "at most once");
    assert!(link.stats().registrations >= 2, "every reconnect registers");
    link.stop().await;
}

#[tokio::test]
async fn a_command_lost_before_its_ack_never_runs() {
    let s = serve(test_config()).await;
    let (link, rec) = start(&s, link_config(&s));
    eventually(|| s.server.connected("rt")).await;
    s.server.enqueue("rt", cmd("x", "hold-admit")).expect("run");
    eventually(|| link.stats().runs == 1).await;
    s.clock.advance(Duration::from_secs(31));
    s.server.sweep();
    assert_eq!(s.server.state_of("x"), Some(CommandState::Lost));
    rec.admit_gate.notify_one();
    eventually(|| link.stats().conflicts == 1).await;
    assert_eq!(executions(&rec, "x"), 0);
    assert_eq!(s.server.state_of("x"), Some(CommandState::Lost));
    link.stop().await;
}

#[tokio::test]
async fn a_late_finish_wins_over_the_timer() {
    let s = serve(test_config()).await;
    let cfg = LinkConfig {
        heartbeat: Duration::from_secs(3600),
        ..link_config(&s)
    };
    let (link, rec) = start(&s, cfg);
    eventually(|| s.server.connected("rt")).await;
    s.server.enqueue("rt", cmd("x", "hold")).expect("run");
    settled(&s, "x", CommandState::Accepted).await;
    // heartbeat_ms = 1 h: the watch is max(10 min, 3 × min(1 h, 10 min)) = 30 min.
    s.clock.advance(Duration::from_secs(29 * 60));
    s.server.sweep();
    assert_eq!(s.server.state_of("x"), Some(CommandState::Accepted));
    s.clock.advance(Duration::from_secs(2 * 60));
    s.server.sweep();
    assert_eq!(s.server.state_of("x"), Some(CommandState::Lost));
    rec.release.notify_one();
    settled(&s, "x", CommandState::Finished).await;
    let row = s.server.command("x").expect("row");
    assert_eq!((row.status.as_str(), row.error), ("succeeded", None));
    link.stop().await;
}

#[tokio::test]
async fn heartbeats_keep_a_long_run_accepted() {
    let s = serve(test_config()).await;
    let cfg = LinkConfig {
        heartbeat: Duration::from_millis(20),
        ..link_config(&s)
    };
    let (link, rec) = start(&s, cfg);
    eventually(|| s.server.connected("rt")).await;
    s.server.enqueue("rt", cmd("x", "hold")).expect("run");
    settled(&s, "x", CommandState::Accepted).await;
    for _ in 0..3 {
        s.clock.advance(Duration::from_secs(9 * 60));
        let seen = link.stats().heartbeats;
        eventually(|| link.stats().heartbeats > seen + 1).await;
        s.server.sweep();
        assert_eq!(s.server.state_of("x"), Some(CommandState::Accepted));
    }
    rec.release.notify_one();
    settled(&s, "x", CommandState::Finished).await;
    link.stop().await;
}

#[tokio::test]
async fn admission_is_bounded_and_oversized_frames_are_rejected() {
    let s = serve(test_config()).await;
    let cfg = LinkConfig {
        max_admitted: 2,
        max_frame: 4096,
        ..link_config(&s)
    };
    let (link, rec) = start(&s, cfg);
    eventually(|| s.server.connected("rt")).await;
    for id in ["a", "b", "c"] {
        s.server.enqueue("rt", cmd(id, "hold")).expect("run");
    }
    settled(&s, "c", CommandState::Rejected).await;
    assert!(s
        .server
        .command("c")
        .expect("row")
        .error
        .unwrap_or_default()
        .contains("runtime busy"));
    s.server
        .enqueue("rt", cmd("big", &"x".repeat(10_000)))
        .expect("run");
    settled(&s, "big", CommandState::Rejected).await;
    assert!(s
        .server
        .command("big")
        .expect("row")
        .error
        .unwrap_or_default()
        .contains("frame over"));
    rec.release.notify_waiters();
    settled(&s, "a", CommandState::Finished).await;
    settled(&s, "b", CommandState::Finished).await;
    assert_eq!(executions(&rec, "c"), 0);
    link.stop().await;
}

#[tokio::test]
async fn experiment_budgets_are_reserved_at_admission() {
    let s = serve(test_config()).await;
    let rec = Arc::new(Recorder::default());
    *rec.budget.lock() = Budget {
        max_runs_per_experiment: 1,
        max_tokens_per_experiment: 0,
    };
    let (link, rec) = start_with(&s, link_config(&s), rec);
    eventually(|| s.server.connected("rt")).await;
    for id in ["e1", "e2"] {
        let mut c = cmd(id, "hi");
        c.experiment_id = "exp".into();
        s.server.enqueue("rt", c).expect("run");
        eventually(|| s.server.state_of(id).is_some_and(|st| st.is_terminal())).await;
    }
    assert_eq!(s.server.state_of("e1"), Some(CommandState::Finished));
    let row = s.server.command("e2").expect("row");
    assert_eq!(row.state, CommandState::Rejected);
    assert_eq!(
        row.reason.map(|r| r.kind).as_deref(),
        Some(REASON_BUDGET_EXCEEDED)
    );
    assert_eq!(executions(&rec, "e2"), 0);
    link.stop().await;
}

#[tokio::test]
async fn the_client_rides_out_a_studio_restart() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let config = StudioConfig::default();
    let first = tokio::spawn(ar_studio::serve_studio(config.clone(), listener, async {
        let _ = stop_rx.await;
    }));
    let rec = Arc::new(Recorder::default());
    let handler = Arc::new(TestHandler {
        id: "rt".into(),
        rec: rec.clone(),
    });
    let cfg = LinkConfig {
        backoff_min: Duration::from_millis(10),
        backoff_max: Duration::from_millis(50),
        heartbeat: Duration::ZERO,
        ..LinkConfig::new(format!("http://{addr}"))
    };
    let link = LinkClient::start(cfg, handler).expect("inside a runtime");
    eventually(|| link.stats().streams_opened == 1).await;
    let _ = stop_tx.send(());
    let _ = first.await;
    let listener = tokio::net::TcpListener::bind(addr).await.expect("rebind");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let second = tokio::spawn(ar_studio::serve_studio(config, listener, async {
        let _ = stop_rx.await;
    }));
    eventually(|| link.stats().streams_opened >= 2).await;
    assert!(link.stats().registrations >= 2);
    link.stop().await;
    let _ = stop_tx.send(());
    let _ = second.await;
}

#[tokio::test]
async fn the_client_speaks_to_a_token_guarded_studio() {
    let s = serve_with(
        test_config(),
        RouterOptions {
            token: Some("t0k".into()),
            runs: None,
        },
    )
    .await;
    let cfg = LinkConfig {
        token: Some("t0k".into()),
        ..link_config(&s)
    };
    let (link, _rec) = start(&s, cfg);
    eventually(|| s.server.connected("rt")).await;
    s.server.enqueue("rt", cmd("c", "hi")).expect("run");
    settled(&s, "c", CommandState::Finished).await;
    link.stop().await;
}
