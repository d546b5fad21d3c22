//! `RemoteRuntime`: the client of a node server; dispatches over HTTP and re-emits the node's NDJSON events.

use std::sync::Arc;
use std::time::Duration;

use ar_core::secret::Secret;
use async_trait::async_trait;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::event::{EventType, RunEvent, State, Status};
use crate::run::{run_id_for, DispatchError, Run, RunControl, RunError, RunSink, Runtime};
use crate::spec::RunSpec;

/// Longest NDJSON line accepted from a node.
pub const MAX_REMOTE_LINE: usize = 4 * 1024 * 1024;

/// Dispatches to a node at `base_url` (e.g. `http://127.0.0.1:8091`).
#[derive(Debug, Clone)]
pub struct RemoteRuntime {
    name: String,
    base: String,
    /// The node's bearer token (`Secret`, so `Debug` never shows it).
    token: Secret,
    client: reqwest::Client,
}

impl RemoteRuntime {
    /// A client for one node.
    pub fn new(
        name: impl Into<String>,
        base_url: &str,
        token: impl Into<String>,
    ) -> Result<Self, DispatchError> {
        let base = base_url.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(DispatchError::Remote {
                status: None,
                message: format!("node url {base_url:?} must be http(s)"),
            });
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(unreachable)?;
        Ok(Self {
            name: format!("remote:{}", name.into()),
            base,
            token: Secret::new(token),
            client,
        })
    }
}

/// The node could not be reached (no HTTP answer).
fn unreachable(error: reqwest::Error) -> DispatchError {
    DispatchError::Remote {
        status: None,
        message: error.to_string(),
    }
}

struct RemoteControl {
    token: CancellationToken,
    client: reqwest::Client,
    url: String,
    auth: Secret,
}

#[async_trait]
impl RunControl for RemoteControl {
    fn cancel(&self) {
        if self.token.is_cancelled() {
            return;
        }
        self.token.cancel();
        let req = self
            .client
            .post(format!("{}/cancel", self.url))
            .bearer_auth(self.auth.expose());
        // Best effort: the node also cancels when our stream goes away.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = req.send().await;
            });
        }
    }
    async fn signal(&self, input: &str) -> Result<(), RunError> {
        let resp = self
            .client
            .post(format!("{}/signal", self.url))
            .bearer_auth(self.auth.expose())
            .body(input.to_string())
            .send()
            .await
            .map_err(|e| RunError::Remote(e.to_string()))?;
        match resp.status().as_u16() {
            204 | 200 => Ok(()),
            404 | 409 => Err(RunError::Finished),
            s => {
                let body = resp.text().await.unwrap_or_default();
                Err(RunError::Remote(format!("HTTP {s}: {body}")))
            }
        }
    }
}

#[async_trait]
impl Runtime for RemoteRuntime {
    fn name(&self) -> &str {
        &self.name
    }

    async fn dispatch(&self, mut spec: RunSpec) -> Result<Run, DispatchError> {
        spec.validate_authority()?;
        let run_id = run_id_for(&spec)?;
        spec.run_id = run_id.clone();
        let resp = self
            .client
            .post(format!("{}/api/exec", self.base))
            .bearer_auth(self.token.expose())
            .header("content-type", "application/json")
            .body(spec.to_json())
            .send()
            .await
            .map_err(unreachable)?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            return Err(DispatchError::Remote {
                status: Some(status.as_u16()),
                message: format!("HTTP {}: {}", status.as_u16(), body.trim()),
            });
        }
        let token = CancellationToken::new();
        let (sink, parts) = RunSink::channel(run_id.clone(), token.clone());
        let control = Arc::new(RemoteControl {
            token: token.clone(),
            client: self.client.clone(),
            url: format!("{}/api/exec/{}", self.base, run_id),
            auth: self.token.clone(),
        });
        tokio::spawn(relay(resp, sink, token));
        Ok(Run::new(parts, control))
    }
}

/// What a node's event stream delivered before it ended.
#[derive(Default)]
struct Relayed {
    /// The `exited` event, held back for `finish` (after the status is set).
    exited: Option<RunEvent>,
    /// The data of the last `error` event.
    last_error: Option<String>,
    /// Why the stream could not be read to its end.
    broken: Option<String>,
}

async fn relay(resp: reqwest::Response, sink: RunSink, token: CancellationToken) {
    let relayed = forward(resp, &sink).await;
    let canceled = token.is_cancelled();
    let (status, last) = conclude(sink.id(), relayed, canceled);
    sink.finish(status, last).await;
}

/// Re-emits the node's NDJSON events (keep-alive blank lines skipped) until `exited`, a
/// broken line or the end of the body.
async fn forward(resp: reqwest::Response, sink: &RunSink) -> Relayed {
    let mut body = resp.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    let mut relayed = Relayed::default();
    while let Some(chunk) = body.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                relayed.broken = Some(format!("reading node stream: {e}"));
                return relayed;
            }
        };
        buf.extend_from_slice(&chunk);
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            let line = &line[..line.len() - 1];
            if line.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            match serde_json::from_slice::<RunEvent>(line) {
                Ok(ev) if ev.kind == EventType::Exited => {
                    relayed.exited = Some(ev);
                    return relayed;
                }
                Ok(ev) => {
                    if ev.kind == EventType::Error {
                        relayed.last_error = Some(ev.data.clone());
                    }
                    sink.emit(ev).await;
                }
                Err(e) => {
                    relayed.broken = Some(format!("bad event line from node: {e}"));
                    return relayed;
                }
            }
        }
        if buf.len() > MAX_REMOTE_LINE {
            relayed.broken = Some("node sent an over-long line".into());
            return relayed;
        }
    }
    relayed
}

/// The remote run's final status and last events: from the node's `exited` event, else a
/// failure (with a synthetic `error` event when the stream broke or just stopped).
fn conclude(run_id: &str, relayed: Relayed, canceled: bool) -> (Status, Vec<RunEvent>) {
    let ended = |msg: String| {
        let state = if canceled {
            State::Canceled
        } else {
            State::Failed
        };
        Status::ended(state, -1, msg)
    };
    match relayed {
        Relayed {
            exited: Some(ev),
            last_error,
            ..
        } => {
            let code = ev.code;
            let canceled = canceled || ev.error_code == crate::consts::EXIT_CODE_CANCELED;
            let status = if canceled {
                Status::ended(State::Canceled, code, "canceled")
            } else if code == 0 && last_error.is_none() {
                Status::ended(State::Succeeded, 0, "")
            } else {
                Status::ended(
                    State::Failed,
                    code,
                    last_error.unwrap_or_else(|| format!("exit status {code}")),
                )
            };
            (status, vec![ev])
        }
        // The node ended the stream with an `error` event (terminal on the wire).
        Relayed {
            last_error: Some(msg),
            broken: None,
            ..
        } => (ended(msg), Vec::new()),
        Relayed { broken, .. } => {
            let msg = broken.unwrap_or_else(|| "node stream ended without a terminal event".into());
            (ended(msg.clone()), vec![RunEvent::error(run_id, msg, "")])
        }
    }
}
