//! Conformance cases for value fidelity: NUL characters are stripped (never an error), and
//! JSON values, unicode and timestamps come back exactly as the store reported them.

use std::sync::Arc;

use ar_core::store::{Checkpoint, CreateRun, RunChange, SecretChange, Store};
use ar_core::EventKind;
use ar_core::{InteractionStatus, RunEvent};
use serde_json::json;

use crate::fixtures::{
    agent, artifact, at, create, interaction, map, message, micros, run, stored, tool_call,
};

pub async fn nul_characters_are_stripped(store: Arc<dyn Store>) {
    let mut agent = agent("app-a", "agent-nul", 0);
    agent.name = "na\0me".to_string();
    agent.system_prompt = "\0prompt\0".to_string();
    agent.execution_config = Some(json!({"k\0ey": "va\0lue", "list": ["\0"]}));
    assert!(store.put_agent(&agent).await.unwrap());
    let read = store
        .get_agent("app-a", "agent-nul")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.name, "name");
    assert_eq!(read.system_prompt, "prompt");
    assert_eq!(
        read.execution_config,
        Some(json!({"key": "value", "list": [""]}))
    );

    let mut run = run("app-a", "host\0-nul", 0);
    run.error_message = "bad\0 thing".to_string();
    run.input.instructions = "do\0 it".to_string();
    run.output_summary = map(json!({"out\0": "put\0"}));
    let mut msg = message("assistant", "hel\0lo");
    msg.content_blocks = Some(json!([{"text": "a\0b"}]));
    let event = RunEvent::PlanUpdated(ar_core::event::PlanUpdated {
        content: "x\0y".to_string(),
        note: "n\0".to_string(),
        ..Default::default()
    });
    let change = RunChange {
        run: Some(run.clone()),
        messages: vec![msg],
        events: vec![event],
        secrets: vec![SecretChange::Put {
            kind: "mo\0del".to_string(),
            ciphertext: vec![0, 1],
        }],
        ..RunChange::for_run(&run)
    };
    let CreateRun::Created(committed) = store.create_run(change).await.unwrap() else {
        panic!("expected a new run");
    };
    assert_eq!(committed.messages[0].content, "hello");
    assert_eq!(
        committed.messages[0].content_blocks,
        Some(json!([{"text": "ab"}]))
    );
    assert_eq!(committed.events[0].kind, EventKind::PlanUpdated);
    assert_eq!(
        *committed.events[0].data,
        map(
            json!({"content": "xy", "note": "n", "plan": null, "data": {}, "host_run_id": "host-nul"})
        )
    );
    // The text the event keeps for its envelopes is the cleaned object, as stored.
    let text = committed.events[0]
        .data
        .json()
        .map(|raw| raw.get().to_owned());
    assert_eq!(
        text,
        Some(serde_json::to_string(&*committed.events[0].data).unwrap())
    );
    assert_eq!(committed.events[0].host_run_id, "host-nul");

    let read = store.get_run("app-a", &run.id).await.unwrap().unwrap();
    assert_eq!(read.host_run_id, "host-nul");
    assert_eq!(read.error_message, "bad thing");
    assert_eq!(read.input.instructions, "do it");
    assert_eq!(read.output_summary, map(json!({"out": "put"})));
    assert_eq!(
        store.list_messages("app-a", &run.id).await.unwrap(),
        committed.messages
    );
    assert_eq!(
        store
            .list_events_after("app-a", &run.id, 0, None)
            .await
            .unwrap(),
        committed.events
    );
    assert_eq!(
        store.get_secret(&run.id, "model").await.unwrap(),
        Some(vec![0, 1])
    );
    // Lookups are normalized the same way.
    assert_eq!(
        store.get_secret(&run.id, "mo\0del").await.unwrap(),
        Some(vec![0, 1])
    );
    assert!(store
        .get_run_by_host_run_id("app-a", "host\0-nul")
        .await
        .unwrap()
        .is_some());
    assert!(store.get_run("app-a", "\0").await.unwrap().is_none());

    let mut call = tool_call("call\0_1", Some(json!({"out": "\0"})));
    call.input = json!("\0");
    let mut question = interaction("int\0", InteractionStatus::Pending);
    question.title = "ti\0tle".to_string();
    store
        .commit(RunChange {
            tool_calls: vec![call],
            interactions: vec![question],
            checkpoint: Some(Checkpoint {
                run_id: run.id.clone(),
                step: 0,
                state: json!({"\0": "\0"}),
                created_at: at(0),
            }),
            ..RunChange::for_run(&run)
        })
        .await
        .unwrap();
    let calls = store.list_tool_calls("app-a", &run.id).await.unwrap();
    assert_eq!(
        (calls[0].id.as_str(), &calls[0].input, &calls[0].output),
        ("call_1", &json!(""), &Some(json!({"out": ""})))
    );
    let questions = store.list_interactions("app-a", &run.id).await.unwrap();
    assert_eq!(
        (questions[0].id.as_str(), questions[0].title.as_str()),
        ("int", "title")
    );
    assert_eq!(
        store
            .latest_checkpoint(&run.id)
            .await
            .unwrap()
            .unwrap()
            .state,
        json!({"": ""})
    );
}

pub async fn json_and_text_round_trip_exactly(store: Arc<dyn Store>) {
    let mut run = run("app-a", "h-ü", 0);
    run.output_summary = map(json!({
        "float": 0.1,
        "whole_float": 100.0,
        "tiny": 1.5e-5,
        "negative": -42,
        "big": u64::MAX,
        "min": i64::MIN,
        "unicode": "日本語 — emoji 🎉, quotes \" and \\ backslash, newline\n, tab\t",
        "nested": {"deep": [[], {}, [null, true, false]]},
        "empty": "",
    }));
    run.error_message = "ошибка 🚨 \u{7f} \u{1}".to_string();
    let created = create(store.as_ref(), &run).await;
    assert_eq!(
        store.get_run("app-a", &run.id).await.unwrap(),
        Some(stored(&run))
    );

    let mut msg = message("assistant", "x");
    msg.content = "line1\r\nline2 \u{feff} ✓".to_string();
    msg.content_blocks = Some(json!(["a", 1, 2.5, null, {"b": [true]}]));
    msg.tool_invocations = Some(serde_json::Value::Null);
    msg.created_at = at(7) + chrono::Duration::nanoseconds(999);
    let mut art = artifact("content");
    art.metadata = None;
    let committed = store
        .commit(RunChange {
            messages: vec![msg.clone()],
            artifacts: vec![art],
            ..RunChange::for_run(&run)
        })
        .await
        .unwrap();
    let listed = store.list_messages("app-a", &run.id).await.unwrap();
    assert_eq!(listed, committed.messages);
    assert_eq!(listed[0].created_at, micros(msg.created_at));
    assert_eq!(
        listed[0].tool_invocations,
        Some(serde_json::Value::Null),
        "JSON null is not SQL NULL"
    );
    assert_eq!(listed[0].content, msg.content);
    assert_eq!(
        store.list_artifacts("app-a", &run.id).await.unwrap(),
        committed.artifacts
    );
    assert_eq!(
        store.list_artifacts("app-a", &run.id).await.unwrap()[0].metadata,
        None
    );
    let feed = crate::commit::feed(store.as_ref(), 0, 10, 1).await;
    assert_eq!(feed.first(), created.events.first());
}
