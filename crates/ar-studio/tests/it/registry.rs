//! The registry and command state machine driven directly, with the manual clock: ids, timers, late acks, sweeps, breakpoints, pruning.

use std::sync::Arc;
use std::time::Duration;

use ar_studio::server::{AckError, StreamStart};
use ar_studio::wire::{
    scripted_miss_text, Ack, ApprovalDecision, Command, CommandState, SessionCommand,
    BREAKPOINTS_BY_RUNTIME, BREAKPOINTS_BY_STUDIO, REASON_SCRIPTED_MISS, VERB_DECIDE, VERB_STEER,
};
use ar_studio::{ManualClock, ServerConfig, StudioError, StudioServer};

use crate::support::{registration, test_config};

fn studio(config: ServerConfig) -> (StudioServer, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::starting_now());
    (StudioServer::with_clock(config, clock.clone()), clock)
}

fn connect(s: &StudioServer, id: &str) -> StreamStart {
    s.register(registration(id)).expect("register");
    s.open_stream(id, None).expect("open")
}

fn run(id: &str) -> Command {
    Command {
        command_id: id.to_string(),
        agent: "helper".into(),
        input: Some("hi".into()),
        ..Command::default()
    }
}

fn ack(id: &str, state: &str, run: &str) -> Ack {
    Ack {
        command_id: id.into(),
        state: state.into(),
        run_id: run.into(),
        ..Ack::default()
    }
}

fn frames(start: &mut StreamStart) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(b) = start.feed.try_recv() {
        out.push(String::from_utf8_lossy(&b).to_string());
    }
    out
}

fn state(s: &StudioServer, id: &str) -> CommandState {
    s.command(id).expect("row").state
}

#[tokio::test]
async fn ids_are_minted_validated_and_never_reused() {
    let (s, _) = studio(test_config());
    let mut st = connect(&s, "rt");
    let minted = s.enqueue("rt", run("")).expect("enqueue");
    assert!(minted.command_id.starts_with("cmd_") && minted.command_id.len() == 30);
    for bad in ["a\nid: forged", "has space", "", "é"] {
        if bad.is_empty() {
            continue;
        }
        assert!(matches!(
            s.enqueue("rt", run(bad)),
            Err(StudioError::InvalidCommandId)
        ));
        assert!(s.command(bad).is_err());
    }
    assert!(matches!(
        s.enqueue("rt", run(&minted.command_id)),
        Err(StudioError::DuplicateCommand)
    ));
    assert!(matches!(
        s.enqueue("nope", run("x")),
        Err(StudioError::UnknownRuntime)
    ));
    let got = frames(&mut st);
    assert_eq!(got.len(), 1, "only the valid command reached the stream");
    assert!(got[0].starts_with(&format!("id: {}\nevent: run\ndata: {{", minted.command_id)));
}

#[tokio::test]
async fn unacked_commands_are_lost_after_the_ack_deadline_and_late_accepts_are_refused() {
    let (s, clock) = studio(test_config());
    let _st = connect(&s, "rt");
    s.enqueue("rt", run("c1")).expect("enqueue");
    clock.advance(Duration::from_secs(29));
    s.sweep();
    assert_eq!(state(&s, "c1"), CommandState::Queued);
    clock.advance(Duration::from_secs(2));
    s.sweep();
    let row = s.command("c1").expect("row");
    assert_eq!(row.state, CommandState::Lost);
    assert_eq!(row.error.as_deref(), Some("no ack in time"));
    assert!(matches!(
        s.ack(&ack("c1", "accepted", "r1")),
        Err(AckError::Lost { .. })
    ));
    assert_eq!(
        state(&s, "c1"),
        CommandState::Lost,
        "a refused ack changes nothing"
    );
    // A late finished still records what did run, and replaces the timer's text.
    s.ack(&Ack {
        status: "succeeded".into(),
        ..ack("c1", "finished", "r1")
    })
    .expect("finished");
    let row = s.command("c1").expect("row");
    assert_eq!(
        (row.state, row.error, row.status.as_str()),
        (CommandState::Finished, None, "succeeded")
    );
}

#[tokio::test]
async fn rejected_applies_to_queued_and_lost_rows() {
    let (s, clock) = studio(test_config());
    let _st = connect(&s, "rt");
    s.enqueue("rt", run("q")).expect("enqueue");
    s.enqueue("rt", run("l")).expect("enqueue");
    s.ack(&Ack {
        error: "unknown tool".into(),
        ..ack("q", "rejected", "")
    })
    .expect("reject");
    assert_eq!(state(&s, "q"), CommandState::Rejected);
    clock.advance(Duration::from_secs(31));
    s.sweep();
    s.ack(&ack("l", "rejected", "")).expect("reject lost");
    assert_eq!(state(&s, "l"), CommandState::Rejected);
    assert!(matches!(
        s.ack(&ack("zz", "accepted", "")),
        Err(AckError::UnknownCommand(_))
    ));
    assert!(matches!(
        s.ack(&ack("q", "bogus", "")),
        Err(AckError::BadState(_))
    ));
    assert!(matches!(
        s.ack(&ack("", "accepted", "")),
        Err(AckError::MissingCommand)
    ));
}

#[tokio::test]
async fn disconnect_loses_queued_at_once_and_watches_accepted() {
    let (s, clock) = studio(test_config());
    let st = connect(&s, "rt");
    s.enqueue("rt", run("a")).expect("enqueue");
    s.enqueue("rt", run("q")).expect("enqueue");
    s.ack(&ack("a", "accepted", "run-a")).expect("accept");
    s.stream_ended("rt", st.feed_id);
    assert!(!s.connected("rt"));
    assert_eq!(state(&s, "q"), CommandState::Lost);
    // A repeated accepted ack from a runtime that does not heartbeat keeps the sweep's watch.
    clock.advance(Duration::from_secs(300));
    s.ack(&ack("a", "accepted", "run-a")).expect("repeat");
    clock.advance(Duration::from_secs(299));
    s.sweep();
    assert_eq!(state(&s, "a"), CommandState::Accepted);
    clock.advance(Duration::from_secs(2));
    s.sweep();
    let row = s.command("a").expect("row");
    assert_eq!(row.state, CommandState::Lost);
    assert_eq!(
        row.error.as_deref(),
        Some("runtime disconnected, no finish")
    );
    s.ack(&Ack {
        status: "failed".into(),
        error: "boom".into(),
        ..ack("a", "finished", "")
    })
    .expect("late finish wins");
    let row = s.command("a").expect("row");
    assert_eq!(
        (row.state, row.run_id.as_str(), row.error.as_deref()),
        (CommandState::Finished, "run-a", Some("boom"))
    );
}

#[tokio::test]
async fn heartbeats_keep_a_long_command_alive_and_silence_loses_it() {
    let (s, clock) = studio(test_config());
    let mut reg = registration("rt");
    reg.heartbeat_ms = 300_000; // 5 min: the watch is max(10 min, 15 min)
    s.register(reg).expect("register");
    let _st = s.open_stream("rt", None).expect("open");
    s.enqueue("rt", run("c")).expect("enqueue");
    s.ack(&ack("c", "accepted", "r")).expect("accept");
    for _ in 0..4 {
        clock.advance(Duration::from_secs(14 * 60));
        s.sweep();
        assert_eq!(state(&s, "c"), CommandState::Accepted);
        s.ack(&ack("c", "accepted", "r")).expect("beat");
    }
    clock.advance(Duration::from_secs(14 * 60));
    s.sweep();
    assert_eq!(state(&s, "c"), CommandState::Accepted);
    clock.advance(Duration::from_secs(61));
    s.sweep();
    let row = s.command("c").expect("row");
    assert_eq!(row.state, CommandState::Lost);
    assert!(row.error.unwrap_or_default().contains("no heartbeat"));
}

#[tokio::test]
async fn heartbeat_watch_is_at_least_the_finish_deadline_and_caps_the_beat() {
    let (s, clock) = studio(test_config());
    let mut reg = registration("rt");
    reg.heartbeat_ms = 1_000; // 1 s: the watch is the finish deadline (10 min)
    s.register(reg.clone()).expect("register");
    let _st = s.open_stream("rt", None).expect("open");
    s.enqueue("rt", run("c")).expect("enqueue");
    s.ack(&ack("c", "accepted", "r")).expect("accept");
    clock.advance(Duration::from_secs(599));
    s.sweep();
    assert_eq!(state(&s, "c"), CommandState::Accepted);
    clock.advance(Duration::from_secs(2));
    s.sweep();
    assert_eq!(state(&s, "c"), CommandState::Lost);
    // An absurd beat is taken at most the finish deadline: 3 × 10 min.
    reg.heartbeat_ms = i64::MAX;
    s.register(reg).expect("register");
    s.enqueue("rt", run("d")).expect("enqueue");
    s.ack(&ack("d", "accepted", "r2")).expect("accept");
    clock.advance(Duration::from_secs(30 * 60 - 1));
    s.sweep();
    assert_eq!(state(&s, "d"), CommandState::Accepted);
    clock.advance(Duration::from_secs(2));
    s.sweep();
    assert_eq!(state(&s, "d"), CommandState::Lost);
}

#[tokio::test]
async fn accepted_while_disconnected_gets_a_finish_watch() {
    let (s, clock) = studio(test_config());
    let st = connect(&s, "rt");
    s.enqueue("rt", run("c")).expect("enqueue");
    // The feed is dropped (not the disconnect sweep): the row stays queued with its ack timer.
    drop(st);
    s.cancel("rt", "c"); // delivery fails on the closed receiver: the feed is dropped
    assert!(!s.connected("rt"));
    assert_eq!(state(&s, "c"), CommandState::Queued);
    s.ack(&ack("c", "accepted", "r")).expect("accept");
    clock.advance(Duration::from_secs(601));
    s.sweep();
    assert_eq!(state(&s, "c"), CommandState::Lost);
}

#[tokio::test]
async fn a_full_feed_drops_the_stream_and_the_backlog_resends() {
    let config = ServerConfig {
        feed_size: 4,
        ..test_config()
    };
    let (s, _) = studio(config);
    let mut first = connect(&s, "rt");
    s.enqueue("rt", run("a")).expect("enqueue");
    s.ack(&ack("a", "accepted", "ra")).expect("accept");
    for i in 0..4 {
        s.enqueue("rt", run(&format!("c{i}")))
            .expect("enqueue succeeds; the row is kept");
    }
    assert!(!s.connected("rt"), "a full feed closes the stream");
    assert!(matches!(
        s.enqueue("rt", run("c9")),
        Err(StudioError::NotConnected)
    ));
    let got = frames(&mut first);
    assert_eq!(got.len(), 4, "the old feed drains what it held, then ends");
    assert!(first.feed.try_recv().is_err());
    let mut second = s.open_stream("rt", Some("c1")).expect("reopen");
    let opening: Vec<String> = second
        .opening
        .drain(..)
        .map(|b| String::from_utf8_lossy(&b).to_string())
        .collect();
    assert!(opening[0] == "event: ping\ndata: {}\n\n");
    assert!(opening[1].contains("event: breakpoints"));
    let ids: Vec<&str> = opening[2..]
        .iter()
        .map(|f| f.lines().next().unwrap_or_default())
        .collect();
    assert_eq!(ids, vec!["id: c2", "id: c3"]);
    // An id this studio never minted means nothing after it.
    let third = s
        .open_stream("rt", Some("cmd_01ZZZZZZZZZZZZZZZZZZZZZZZZ"))
        .expect("reopen");
    assert_eq!(third.opening.len(), 2);
    let from_start = s.open_stream("rt", None).expect("reopen");
    assert_eq!(from_start.opening.len(), 2 + 4);
}

#[tokio::test]
async fn a_new_stream_replaces_the_old_one() {
    let (s, _) = studio(test_config());
    let mut old = connect(&s, "rt");
    let mut new = s.open_stream("rt", None).expect("reopen");
    s.enqueue("rt", run("c")).expect("enqueue");
    assert!(frames(&mut old).is_empty());
    assert!(old.feed.recv().await.is_none(), "the replaced feed ends");
    assert_eq!(frames(&mut new).len(), 1);
    // The replaced stream's end does not run the disconnect sweep.
    s.stream_ended("rt", old.feed_id);
    assert!(s.connected("rt"));
    assert_eq!(state(&s, "c"), CommandState::Queued);
}

#[tokio::test]
async fn breakpoints_are_stored_only_when_delivered_and_adopted_when_unknown() {
    let (s, _) = studio(test_config());
    let mut reg = registration("rt");
    reg.breakpoints = vec!["pay".into()];
    s.register(reg.clone()).expect("register");
    let view = &s.snapshot()[0];
    assert_eq!(
        (view.breakpoints.clone(), view.breakpoints_by.as_str()),
        (vec!["pay".to_string()], BREAKPOINTS_BY_RUNTIME)
    );
    assert!(matches!(
        s.set_breakpoints("rt", &["search".into()]),
        Err(StudioError::NotConnected)
    ));
    assert_eq!(s.breakpoints_of("rt"), vec!["pay"]);
    let mut st = s.open_stream("rt", None).expect("open");
    assert!(String::from_utf8_lossy(&st.opening[1])
        .ends_with("event: breakpoints\ndata: {\"tools\":[\"pay\"]}\n\n"));
    s.set_breakpoints_from("rt", &["search".into()], "api")
        .expect("set");
    assert!(frames(&mut st)[0].ends_with("event: breakpoints\ndata: {\"tools\":[\"search\"]}\n\n"));
    let view = &s.snapshot()[0];
    assert_eq!(view.breakpoints_by, BREAKPOINTS_BY_STUDIO);
    assert_eq!(view.breakpoints_surface, "api");
    assert!(view.breakpoints_set_at.is_some());
    // Re-registration keeps the studio's set ...
    s.register(reg.clone()).expect("register");
    assert_eq!(s.breakpoints_of("rt"), vec!["search"]);
    // ... unless the runtime owns its set.
    reg.breakpoints_own = true;
    s.register(reg).expect("register");
    assert_eq!(s.breakpoints_of("rt"), vec!["pay"]);
    // An empty set clears, and is sent as [].
    s.set_breakpoints("rt", &[]).expect("clear");
    assert!(frames(&mut st)
        .last()
        .is_some_and(|f| f.ends_with("data: {\"tools\":[]}\n\n")));
}

#[tokio::test]
async fn forget_refuses_connected_and_busy_runtimes() {
    let (s, _) = studio(test_config());
    let st = connect(&s, "rt");
    assert!(matches!(s.forget("rt"), Err(StudioError::Connected)));
    s.enqueue("rt", run("c")).expect("enqueue");
    s.ack(&ack("c", "accepted", "r")).expect("accept");
    s.stream_ended("rt", st.feed_id);
    assert!(matches!(s.forget("rt"), Err(StudioError::RuntimeBusy)));
    s.ack(&ack("c", "finished", "r")).expect("finish");
    s.forget("rt").expect("forget");
    assert!(s.snapshot().is_empty());
    assert!(matches!(s.forget("rt"), Err(StudioError::UnknownRuntime)));
}

#[tokio::test]
async fn pruning_keeps_rows_for_a_day_and_at_most_the_cap() {
    let config = ServerConfig {
        max_commands: 5,
        ..test_config()
    };
    let (s, clock) = studio(config);
    let mut st = connect(&s, "rt");
    for i in 0..8 {
        let id = format!("c{i}");
        s.enqueue("rt", run(&id)).expect("enqueue");
        if i < 6 {
            s.ack(&ack(&id, "finished", &format!("r{i}")))
                .expect("finish");
        }
        let _ = frames(&mut st);
    }
    assert_eq!(s.command_count(), 5);
    assert!(s.command("c0").is_err() && s.command("c2").is_err());
    assert!(s.command("c3").is_ok() && s.command("c7").is_ok());
    clock.advance(Duration::from_secs(24 * 3600 + 1));
    s.sweep();
    assert!(
        s.command("c3").is_err(),
        "terminal rows go after the retention"
    );
    // Still-queued rows were lost by their ack timer, then age out too.
    clock.advance(Duration::from_secs(24 * 3600 + 1));
    s.sweep();
    assert_eq!(s.command_count(), 0);
    assert!(s.runtime_of("r3").is_none());
}

#[tokio::test]
async fn dead_runtimes_are_pruned_after_the_finish_deadline_or_a_day_with_breakpoints() {
    let (s, clock) = studio(test_config());
    let a = connect(&s, "plain");
    let mut reg = registration("held");
    reg.breakpoints = vec!["pay".into()];
    s.register(reg).expect("register");
    let b = s.open_stream("held", None).expect("open");
    s.stream_ended("plain", a.feed_id);
    s.stream_ended("held", b.feed_id);
    clock.advance(Duration::from_secs(601));
    let ids: Vec<String> = s.snapshot().into_iter().map(|v| v.id).collect();
    assert_eq!(ids, vec!["held"]);
    clock.advance(Duration::from_secs(24 * 3600));
    assert!(s.snapshot().is_empty());
}

#[tokio::test]
async fn acks_teach_run_routes_and_cancel_run_follows_them() {
    let (s, _) = studio(test_config());
    let mut st = connect(&s, "rt");
    let mut cmd = run("c");
    cmd.public_id = "pub-1".into();
    s.enqueue("rt", cmd).expect("enqueue");
    assert!(matches!(s.cancel_run("r"), Err(StudioError::UnknownRun)));
    s.ack(&ack("c", "accepted", "r")).expect("accept");
    assert_eq!(s.runtime_of("r").as_deref(), Some("rt"));
    assert_eq!(s.public_of("r").as_deref(), Some("pub-1"));
    assert!(s.any_own_runs());
    let _ = frames(&mut st);
    let target = s.cancel_run("r").expect("cancel");
    assert_eq!(
        (target.runtime_id.as_str(), target.command_id.as_str()),
        ("rt", "c")
    );
    assert_eq!(
        frames(&mut st),
        vec!["event: cancel\ndata: {\"command_id\":\"c\"}\n\n".to_string()]
    );
    s.ack(&ack("c", "finished", "r")).expect("finish");
    assert!(matches!(s.cancel_run("r"), Err(StudioError::RunFinished)));
}

#[tokio::test]
async fn decisions_and_steers_are_listed_on_their_run() {
    let (s, _) = studio(test_config());
    let mut st = connect(&s, "rt");
    s.enqueue("rt", run("c")).expect("enqueue");
    s.ack(&ack("c", "accepted", "r")).expect("accept");
    let d = s
        .enqueue_approval(
            "rt",
            ApprovalDecision {
                run_id: "r".into(),
                call_id: "call-1".into(),
                decision: "approve".into(),
                ..Default::default()
            },
        )
        .expect("approve");
    s.steer("rt", "r", "focus").expect("steer");
    let on = s.commands_on("r");
    assert_eq!(on.len(), 2);
    assert_eq!(
        (
            on[0].verb.as_str(),
            on[0].call_id.as_str(),
            on[0].command_id.as_str()
        ),
        (VERB_DECIDE, "call-1", d.command_id.as_str())
    );
    assert_eq!(on[1].verb, VERB_STEER);
    let got = frames(&mut st);
    assert!(got[1].starts_with(&format!("id: {}\nevent: approve\n", d.command_id)));
    assert!(got[2].contains("event: steer\ndata: {\"run_id\":\"r\",\"message\":\"focus\"}"));
    assert_eq!(
        state(&s, &d.command_id),
        CommandState::Queued,
        "a decision is acked like any command"
    );
}

#[tokio::test]
async fn session_commands_and_discovery_queries() {
    let (s, _) = studio(test_config());
    let mut reg = registration("rt");
    reg.sessions = true;
    reg.instance = "inst-1".into();
    s.register(reg).expect("register");
    assert!(!s.any_sessions() && !s.holds_instance("inst-1"));
    let mut st = s.open_stream("rt", None).expect("open");
    assert!(s.any_sessions() && s.holds_instance("inst-1") && !s.holds_instance(""));
    assert_eq!(s.sessions_runtime("svc").as_deref(), Some("rt"));
    assert_eq!(s.sessions_runtime("other"), None);
    let sc = s
        .enqueue_session(
            "rt",
            SessionCommand {
                verb: VERB_STEER.into(),
                session_id: "sess".into(),
                message: "hello".into(),
                ..Default::default()
            },
        )
        .expect("session");
    let got = frames(&mut st);
    assert!(got[0].starts_with(&format!("id: {}\nevent: session\ndata: {{", sc.command_id)));
    for bad in [
        SessionCommand {
            verb: "explode".into(),
            session_id: "s".into(),
            ..Default::default()
        },
        SessionCommand {
            verb: VERB_STEER.into(),
            ..Default::default()
        },
    ] {
        assert!(matches!(
            s.enqueue_session("rt", bad),
            Err(StudioError::InvalidSessionCommand(_))
        ));
    }
    assert!(frames(&mut st).is_empty());
    assert_eq!(state(&s, &sc.command_id), CommandState::Queued);
}

#[tokio::test]
async fn snapshot_and_manifests_describe_the_runtimes() {
    let (s, clock) = studio(test_config());
    let _a = connect(&s, "a");
    clock.advance(Duration::from_secs(1));
    s.register(registration("b")).expect("register");
    let views = s.snapshot();
    assert_eq!(
        views.iter().map(|v| v.id.as_str()).collect::<Vec<_>>(),
        vec!["b", "a"]
    );
    let agent = &views[0].agents[0];
    assert_eq!(agent.instructions, "be brief");
    assert_eq!(agent.model_provider, "fake");
    assert_eq!(agent.manifest_hash.len(), 64);
    assert!(agent.defaults.is_some());
    let tools: Vec<(&str, &str, bool, bool)> = agent
        .tools
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.side_effects.as_str(),
                t.allow,
                t.approval,
            )
        })
        .collect();
    assert_eq!(
        tools,
        vec![
            ("search", "safe", false, false),
            ("pay", "never", true, true),
            ("read", "safe", false, false)
        ]
    );
    assert!(views[1].connected && !views[0].connected);
    let manifests = s.manifests();
    assert_eq!(manifests.len(), 1, "same service and document: one entry");
    assert!(manifests[0].live);
    assert_eq!(manifests[0].agents[0].name, "helper");
}

#[tokio::test]
async fn scripted_miss_reasons_reach_the_command_status() {
    let (s, _) = studio(test_config());
    let _st = connect(&s, "rt");
    s.enqueue("rt", run("c")).expect("enqueue");
    s.ack(&ack("c", "accepted", "r")).expect("accept");
    let text = scripted_miss_text(2, &["input".to_string(), "tools".to_string()]);
    s.ack(&Ack {
        status: "failed".into(),
        error: text,
        ..ack("c", "finished", "r")
    })
    .expect("finish");
    let reason = s.command("c").expect("row").reason.expect("reason");
    assert_eq!(reason.kind, REASON_SCRIPTED_MISS);
    assert_eq!(reason.step, 2);
    assert_eq!(reason.components, vec!["input", "tools"]);
}

#[tokio::test]
async fn shutdown_ends_every_stream_and_refuses_new_work() {
    let (s, _) = studio(test_config());
    let mut st = connect(&s, "rt");
    s.shutdown().await;
    assert!(st.feed.recv().await.is_none());
    assert!(matches!(
        s.open_stream("rt", None),
        Err(StudioError::ShuttingDown)
    ));
    assert!(s.register(registration("x")).is_err());
    assert!(matches!(
        s.enqueue("rt", run("c")),
        Err(StudioError::ShuttingDown)
    ));
}
