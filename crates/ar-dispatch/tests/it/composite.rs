//! Authority mux, cluster router and the fake runtime they are tested over.

use std::sync::Arc;

use ar_dispatch::{AuthorityMux, ClusterRouter, DispatchError, EventType, RunSpec, Runtime, State};

use crate::fake::{FakeRuntime, FakeScript, FakeStep};
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
