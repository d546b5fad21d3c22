//! SSE stream (ids, resume without gaps or duplicates, closing after the terminal event) and
//! the v2 event protocol.

use std::time::Duration;

use ar_test_support::mock_provider::{AutoScript, MockProvider, Reply};
use serde_json::json;

use ar_test_support::service::*;

#[tokio::test]
async fn sse_stream_has_ids_resumes_without_gaps_and_closes_after_terminal() {
    let mock = MockProvider::start().await;
    mock.auto(AutoScript::five_step("get_context"));
    let server = TestServer::start(&mock).await;
    let agent = server
        .agent("streamed", json!({"allowed_tools": ["get_context"]}))
        .await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap().to_string();

    let response = server
        .client
        .get(server.url(&format!("/v1/runs/{run_id}/events?app_id={APP}")))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let frames = read_frames(response).await;
    let persisted: Vec<&Frame> = frames.iter().filter(|f| f.id.is_some()).collect();
    let ids: Vec<i64> = persisted.iter().map(|f| f.id.unwrap()).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as i64).collect::<Vec<_>>(),
        "every persisted event once, in order"
    );
    assert_eq!(
        persisted.last().unwrap().event,
        "run.completed",
        "the stream ends after the terminal event"
    );
    for frame in &persisted {
        assert_eq!(frame.data["sequence_no"].as_i64(), frame.id);
    }
    let history = server.events(&run_id).await;
    assert_eq!(history.len(), ids.len());

    // Resume from the middle: exactly the rest.
    let middle = ids.len() as i64 / 2;
    let response = server
        .client
        .get(server.url(&format!("/v1/runs/{run_id}/events?app_id={APP}")))
        .header("Last-Event-ID", middle.to_string())
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let rest: Vec<i64> = read_frames(response)
        .await
        .iter()
        .filter_map(|f| f.id)
        .collect();
    assert_eq!(rest, ((middle + 1)..=ids.len() as i64).collect::<Vec<_>>());
    let response = server
        .client
        .get(server.url(&format!(
            "/v1/runs/{run_id}/events?app_id={APP}&after_sequence={}",
            ids.len() - 1
        )))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let last: Vec<i64> = read_frames(response)
        .await
        .iter()
        .filter_map(|f| f.id)
        .collect();
    assert_eq!(last, vec![ids.len() as i64]);
    server.stop().await;
}

#[tokio::test]
async fn live_subscriber_sees_deltas_and_every_persisted_event_once() {
    let mock = MockProvider::start().await;
    mock.push(
        Reply::text_deltas(["Hel", "lo ", "world"])
            .delay(Duration::from_millis(300))
            .chunk_delay(Duration::from_millis(30)),
    );
    let server = TestServer::start(&mock).await;
    let agent = server.agent("live", json!({})).await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap().to_string();
    let response = server
        .client
        .get(server.url(&format!("/v1/runs/{run_id}/events?app_id={APP}")))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let frames = read_frames(response).await;
    let deltas: Vec<String> = frames
        .iter()
        .filter(|f| f.event == "assistant_message_delta")
        .map(|f| {
            f.data["data"]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(deltas.concat(), "Hello world", "{frames:?}");
    let ids: Vec<i64> = frames.iter().filter_map(|f| f.id).collect();
    assert_eq!(ids, (1..=ids.len() as i64).collect::<Vec<_>>());
    let started = frames
        .iter()
        .position(|f| f.event == "assistant_message_started")
        .unwrap();
    let first_delta = frames
        .iter()
        .position(|f| f.event == "assistant_message_delta")
        .unwrap();
    assert!(started < first_delta, "started precedes deltas");
    server.stop().await;
}

#[tokio::test]
async fn v2_protocol_pages_and_snapshots() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("v2 answer"));
    let server = TestServer::start(&mock).await;
    let (status, _) = server
        .put(
            "/v1/agents/v2agent?app_id=v2_app",
            json!({"app_id": "v2_app", "name": "v2"}),
        )
        .await;
    assert_eq!(status, 201);
    let body = json!({
        "app_id": "v2_app", "agent_id": "v2agent", "target": {"type": "doc", "id": "D"},
        "model": {"provider": "openai_compatible", "model": "m", "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "none"}},
        "model_credential": {"type": "none"}
    });
    let (status, run) = server.post("/v1/runs", body).await;
    assert_eq!(status, 202, "{run}");
    let run_id = run["id"].as_str().unwrap();
    for _ in 0..500 {
        if server
            .get(&format!("/v1/runs/{run_id}?app_id=v2_app"))
            .await
            .1["status"]
            == "completed"
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (status, page) = server
        .get(&format!(
            "/v2/runs/{run_id}/events?app_id=v2_app&after_sequence=1&page_size=2"
        ))
        .await;
    assert_eq!(status, 200, "{page}");
    let events = page["events"].as_array().unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["sequence_no"], 2);
    assert_eq!(events[0]["schema_version"], "2");
    assert_eq!(events[0]["revision"], 2);
    assert_eq!(page["next_sequence_no"], 3);
    assert!(page.get("stream_state_snapshot").is_none());
    let (_, all) = server
        .get(&format!("/v2/runs/{run_id}/events?app_id=v2_app"))
        .await;
    assert!(all["stream_state_snapshot"]["state"]["events"].is_array());
    let completed = all["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "assistant_message_completed")
        .unwrap()
        .clone();
    assert_eq!(completed["segment_id"], completed["data"]["message_id"]);
    let (status, snapshot) = server
        .get(&format!("/v2/runs/{run_id}/stream-state?app_id=v2_app"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(snapshot["through_sequence"], all["next_sequence_no"]);
    let (status, body) = server
        .get(&format!(
            "/v2/runs/{run_id}/events?app_id=v2_app&page_size=0"
        ))
        .await;
    assert_eq!(status, 400, "{body}");
    // A v1 app does not get the v2 API.
    let (status, body) = server
        .get(&format!("/v2/runs/{run_id}/events?app_id={APP}"))
        .await;
    assert_eq!(status, 404);
    assert_eq!(body["error"], "v2 event protocol is not enabled for app");
    server.stop().await;
}

/// A finished run's stream with a cursor at or past its last event ends at once: its terminal
/// event is already behind the cursor.
#[tokio::test]
async fn the_stream_of_a_finished_run_ends_at_once_for_a_cursor_past_its_end() {
    let mock = MockProvider::start().await;
    mock.push(Reply::text("done"));
    let server = TestServer::start(&mock).await;
    let agent = server.agent("finished", json!({})).await;
    let run = server.start_run(&mock, &agent, json!({})).await;
    let run_id = run["id"].as_str().unwrap().to_string();
    server.wait_status(&run_id, &["completed"]).await;
    let last = server.events(&run_id).await.len() as i64;
    for cursor in [last, last + 1, last + 1_000_000] {
        let response = server.open_stream(&run_id, Some(cursor)).await;
        let frames = tokio::time::timeout(Duration::from_secs(5), read_frames(response))
            .await
            .unwrap_or_else(|_| panic!("Last-Event-ID {cursor}: the stream stayed open"));
        assert!(frames.is_empty(), "Last-Event-ID {cursor}: {frames:?}");
        let response = server
            .client
            .get(server.url(&format!(
                "/v1/runs/{run_id}/events?app_id={APP}&after_sequence={cursor}"
            )))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let frames = tokio::time::timeout(Duration::from_secs(5), read_frames(response))
            .await
            .unwrap_or_else(|_| panic!("after_sequence {cursor}: the stream stayed open"));
        assert!(frames.is_empty(), "after_sequence {cursor}: {frames:?}");
    }
    // Just before the end: exactly the terminal event, then the end.
    let response = server.open_stream(&run_id, Some(last - 1)).await;
    let frames = read_frames(response).await;
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0].event, "run.completed");
    server.stop().await;
}
