//! Authority mux, cluster router, gateway (cap, tracer, failover) and the fake runtime.

use std::sync::{Arc, Mutex};

use ar_dispatch::fake::{FakeScript, FakeStep};
use ar_dispatch::{
    AuthorityMux, ClusterRouter, DispatchError, EventType, FakeRuntime, Gateway, RunEvent, RunSpec,
    Runtime, State, Status, Tracer,
};

use crate::support::{collect, data_of};
use crate::wire::{policy, sub_spec};

fn spec(agent: &str) -> RunSpec {
    RunSpec {
        agent: agent.into(),
        prompt: "p".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn fake_replays_and_signals() {
    let fake = FakeRuntime::new()
        .with_script("a", FakeScript::answer("hi"))
        .with_script(
            "b",
            FakeScript {
                steps: vec![
                    FakeStep::AwaitSignal,
                    FakeStep::Event(EventType::Tool, "{}".into()),
                    FakeStep::Exit(2),
                ],
            },
        );
    let run = fake.dispatch(spec("a")).await.unwrap();
    let ev = collect(&run).await;
    assert_eq!(
        ev.iter().map(|e| e.kind).collect::<Vec<_>>(),
        vec![EventType::Started, EventType::Message, EventType::Exited]
    );
    assert_eq!(run.wait().await.state, State::Succeeded);

    let run = fake.dispatch(spec("b")).await.unwrap();
    run.signal("go").await.unwrap();
    let ev = collect(&run).await;
    assert_eq!(data_of(&ev, EventType::Message), vec!["go"]);
    let st = run.wait().await;
    assert_eq!((st.state, st.exit_code), (State::Failed, 2));
    assert_eq!(fake.signals().len(), 1);

    let run = fake.dispatch(spec("b")).await.unwrap();
    run.cancel();
    assert_eq!(run.wait().await.state, State::Canceled);
    assert!(matches!(
        fake.dispatch(spec("zzz")).await,
        Err(DispatchError::UnknownAgent(_))
    ));
}

#[tokio::test]
async fn mux_keeps_lanes_apart() {
    let legacy = Arc::new(FakeRuntime::new().with_script("codex", FakeScript::answer("legacy")));
    let sub =
        Arc::new(FakeRuntime::new().with_script("codex-subscription", FakeScript::answer("sub")));
    let mux = AuthorityMux::new(legacy.clone(), sub.clone());

    let run = mux.dispatch(spec("codex")).await.unwrap();
    assert_eq!(
        data_of(&collect(&run).await, EventType::Message),
        vec!["legacy"]
    );
    let run = mux
        .dispatch(sub_spec("gpt-5.5", policy("gpt-5.5")))
        .await
        .unwrap();
    assert_eq!(
        data_of(&collect(&run).await, EventType::Message),
        vec!["sub"]
    );

    // codex-subscription without authority is refused, never sent to the legacy lane
    let e = mux.dispatch(spec("codex-subscription")).await.unwrap_err();
    assert_eq!(e.code(), "chat_policy_unavailable");
    let mut bad = sub_spec("gpt-5.5", policy("gpt-5.5"));
    bad.authority = ar_dispatch::AuthorityMode("other".into());
    assert_eq!(
        mux.dispatch(bad).await.unwrap_err().code(),
        "chat_policy_unavailable"
    );
    let mut bad = sub_spec("gpt-5.5", policy("gpt-5.5"));
    bad.workdir = "/tmp".into();
    assert_eq!(
        mux.dispatch(bad).await.unwrap_err().code(),
        "chat_policy_unavailable"
    );
    assert_eq!(legacy.dispatched().len(), 1);
    assert_eq!(sub.dispatched().len(), 1);
}

#[tokio::test]
async fn cluster_routes_by_machine() {
    let local = Arc::new(FakeRuntime::new().with_script("a", FakeScript::answer("local")));
    let peer = Arc::new(FakeRuntime::new().with_script("a", FakeScript::answer("peer")));
    let cluster = ClusterRouter::new("here", local.clone()).with_peer("there", peer.clone());
    for (machine, want) in [("", "local"), ("here", "local"), ("there", "peer")] {
        let mut s = spec("a");
        s.machine = machine.into();
        let run = cluster.dispatch(s).await.unwrap();
        assert_eq!(
            data_of(&collect(&run).await, EventType::Message),
            vec![want]
        );
    }
    let mut s = spec("a");
    s.machine = "nowhere".into();
    let e = cluster.dispatch(s).await.unwrap_err();
    assert!(
        matches!(e, DispatchError::UnknownMachine(ref m) if m == "nowhere"),
        "{e}"
    );
    assert_eq!(local.dispatched().len() + peer.dispatched().len(), 3);
}

#[derive(Default)]
struct Recorder {
    log: Mutex<Vec<String>>,
}

impl Tracer for Recorder {
    fn on_dispatch(&self, flow: &str, spec: &RunSpec, run_id: &str) {
        self.log
            .lock()
            .unwrap()
            .push(format!("dispatch {flow} {} {run_id}", spec.agent));
    }
    fn on_refused(&self, flow: &str, _spec: &RunSpec, error: &DispatchError) {
        self.log
            .lock()
            .unwrap()
            .push(format!("refused {flow} {}", error.code()));
    }
    fn on_event(&self, event: &RunEvent) {
        self.log
            .lock()
            .unwrap()
            .push(format!("event {}", event.kind.as_str()));
    }
    fn on_finish(&self, run_id: &str, status: &Status) {
        self.log
            .lock()
            .unwrap()
            .push(format!("finish {run_id} {:?}", status.state));
    }
}

#[tokio::test]
async fn gateway_caps_traces_and_fails_over() {
    let inner = Arc::new(
        FakeRuntime::new()
            .failing("primary")
            .with_script("backup", FakeScript::answer("from backup")),
    );
    let tracer = Arc::new(Recorder::default());
    let gw = Gateway::new(inner.clone())
        .with_cap(2)
        .with_tracer(tracer.clone())
        .with_failover("primary", "backup");
    let mut s = spec("primary");
    s.run_id = "flowA:1".into();
    let run = gw.dispatch(s).await.unwrap();
    assert_eq!(
        data_of(&collect(&run).await, EventType::Message),
        vec!["from backup"]
    );
    assert_eq!(run.wait().await.state, State::Succeeded);
    assert_eq!(gw.spent("flowA"), 1);

    let mut s = spec("backup");
    s.run_id = "flowA:2".into();
    gw.dispatch(s).await.unwrap().wait().await;
    let mut s = spec("backup");
    s.run_id = "flowA:3".into();
    let e = gw.dispatch(s).await.unwrap_err();
    assert!(
        matches!(
            e,
            DispatchError::BudgetExceeded {
                spent: 2,
                cap: 2,
                ..
            }
        ),
        "{e}"
    );
    // another flow has its own budget
    let mut s = spec("backup");
    s.run_id = "flowB:1".into();
    gw.dispatch(s).await.unwrap().wait().await;
    // a refused dispatch costs nothing
    let mut s = spec("unknown");
    s.run_id = "flowC:1".into();
    assert!(gw.dispatch(s).await.is_err());
    assert_eq!(gw.spent("flowC"), 0);
    // bounded wait for the tracer to see the last finish
    for _ in 0..200 {
        if tracer
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with("finish"))
            .count()
            >= 3
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let log = tracer.log.lock().unwrap().clone();
    assert_eq!(log[0], "dispatch flowA backup flowA:1");
    assert!(log.contains(&"event message".to_string()));
    assert!(log.contains(&"finish flowA:1 Succeeded".to_string()));
    assert!(log.contains(&"refused flowA budget_exceeded".to_string()));
    assert!(log.contains(&"refused flowC unknown_agent".to_string()));
    assert_eq!(
        inner
            .dispatched()
            .iter()
            .filter(|s| s.agent == "primary")
            .count(),
        1
    );
}
