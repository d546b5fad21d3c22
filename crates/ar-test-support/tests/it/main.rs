//! Integration tests of the mock model provider: each wire format over real HTTP with reqwest,
//! streaming and not, plus scripting features and real-CLI checks.

mod anthropic;
mod chat;
mod cli;
mod responses;
mod scripting;

use serde_json::Value;

/// One parsed SSE event.
#[derive(Debug, Clone)]
pub struct Sse {
    pub event: Option<String>,
    pub data: String,
}

impl Sse {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data)
            .unwrap_or_else(|e| panic!("bad SSE JSON {e}: {}", self.data))
    }
}

/// Splits an SSE body into events, strictly: the body must be exactly the frames the shared
/// encoder writes for them (`event:` when named, one `data:` line, a blank line).
pub fn parse_sse(body: &str) -> Vec<Sse> {
    let mut decoder = ar_sse::Decoder::new();
    decoder.push(body.as_bytes());
    let mut events = Vec::new();
    let mut rewritten = String::new();
    while let Some(ev) = decoder.next_event() {
        assert!(
            ev.id.is_none() && !ev.data.contains('\n'),
            "unexpected SSE frame: {ev:?}"
        );
        rewritten.push_str(&ar_sse::frame(None, &ev.event, &ev.data));
        events.push(Sse {
            event: (!ev.event.is_empty()).then_some(ev.event),
            data: ev.data,
        });
    }
    assert_eq!(rewritten, body, "SSE body must be exactly its frames");
    events
}

pub async fn post(url: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .expect("request")
}

pub async fn post_sse(url: &str, body: Value) -> Vec<Sse> {
    let resp = post(url, body).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    parse_sse(&resp.text().await.expect("body"))
}
