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

/// Splits an SSE body into events (strict: `\n\n` separators, `event:`/`data:` lines only).
pub fn parse_sse(body: &str) -> Vec<Sse> {
    assert!(
        body.ends_with("\n\n"),
        "SSE body must end with a blank line"
    );
    body.split("\n\n")
        .filter(|b| !b.is_empty())
        .map(|block| {
            let mut ev = Sse {
                event: None,
                data: String::new(),
            };
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    ev.event = Some(v.to_string());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    ev.data = v.to_string();
                } else {
                    panic!("unexpected SSE line: {line:?}");
                }
            }
            ev
        })
        .collect()
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
