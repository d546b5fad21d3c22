//! `RemoteRuntime`: the client of a node server; dispatches over HTTP and re-emits the node's
//! NDJSON events — as wire events ([`Runtime::dispatch`]) or, for a CLI turn whose node sends
//! its raw stdout lines, as the typed output the local runtime would give
//! ([`Runtime::start`]: each line read by the agent's own parser on this side).
//!
//! A run whose stream breaks, or ends without `exited`, failed; for typed output it was lost
//! ([`AgentOutput::Lost`]): the node died, became unreachable or shut down, and the caller may
//! run the turn again elsewhere.

use std::sync::Arc;
use std::time::Duration;

use ar_core::secret::Secret;
use async_trait::async_trait;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::consts::{EXIT_CODE_CANCELED, EXIT_CODE_NODE_SHUTDOWN};
use crate::local::AgentOutput;
use crate::providers::parser_for;
use crate::run::{run_id_for, DispatchError, Run, RunControl, RunError, RunSink, Runtime};
use crate::spec::RunSpec;
use crate::stream::StreamParser;
use crate::{EventType, RunEvent, State, Status};

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
            .tcp_nodelay(true)
            .build()
            .map_err(unreachable)?;
        Ok(Self {
            name: format!("remote:{}", name.into()),
            base,
            token: Secret::new(token),
            client,
        })
    }

    /// The node's base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The node's capabilities (`GET /api/node/capabilities`), bounded by `timeout`.
    pub async fn capabilities(&self, timeout: Duration) -> Result<NodeCapabilities, DispatchError> {
        let response = self
            .client
            .get(format!("{}/api/node/capabilities", self.base))
            .bearer_auth(self.token.expose())
            .timeout(timeout)
            .send()
            .await
            .map_err(unreachable)?;
        let status = response.status();
        let body = response.bytes().await.map_err(unreachable)?;
        if !status.is_success() {
            return Err(DispatchError::Remote {
                status: Some(status.as_u16()),
                message: format!(
                    "HTTP {}: {}",
                    status.as_u16(),
                    String::from_utf8_lossy(&body).trim()
                ),
            });
        }
        serde_json::from_slice(&body).map_err(|error| DispatchError::Remote {
            status: Some(status.as_u16()),
            message: format!("the node's capabilities are not valid: {error}"),
        })
    }

    /// Posts the spec; the node's streaming answer and the run id.
    async fn exec(&self, mut spec: RunSpec) -> Result<(reqwest::Response, String), DispatchError> {
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
        Ok((resp, run_id))
    }

    fn control(&self, run_id: &str, token: &CancellationToken) -> Arc<RemoteControl> {
        Arc::new(RemoteControl {
            token: token.clone(),
            client: self.client.clone(),
            url: format!("{}/api/exec/{}", self.base, run_id),
            auth: self.token.clone(),
        })
    }
}

/// What a node says of itself (`GET /api/node/capabilities`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeCapabilities {
    /// The node's name.
    pub name: String,
    /// Its runtime's name.
    pub runtime: String,
    /// The agents it serves.
    pub agents: Vec<String>,
    /// Runs it is running.
    pub active_runs: usize,
    /// Its limit of concurrent runs (0: none).
    pub max_concurrent_runs: usize,
    /// False while it shuts down (it takes no new runs).
    pub accepting: bool,
    /// Its version.
    pub version: String,
    /// Seed 000's inventory of its agents (CLIs, versions, readiness with evidence).
    pub inventory: Option<crate::contracts::AgentSourceInventorySnapshot>,
}

/// The node could not be reached (no HTTP answer).
fn unreachable(error: reqwest::Error) -> DispatchError {
    let detail = std::error::Error::source(&error)
        .map(|cause| cause.to_string())
        .unwrap_or_else(|| error.to_string());
    DispatchError::Remote {
        status: None,
        message: if error.is_timeout() {
            "the node did not answer in time".to_string()
        } else {
            format!("the node could not be reached: {detail}")
        },
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

    async fn dispatch(&self, spec: RunSpec) -> Result<Run, DispatchError> {
        let (resp, run_id) = self.exec(spec).await?;
        let token = CancellationToken::new();
        let (sink, parts) = RunSink::channel(run_id.clone(), token.clone());
        let control = self.control(&run_id, &token);
        tokio::spawn(async move {
            let relayed = forward(resp, &sink, Some).await;
            let ending = conclude(relayed, token.is_cancelled());
            let last = wire_ending(sink.id(), &ending);
            sink.finish(ending.status, last).await;
        });
        Ok(Run::new(parts, control))
    }

    async fn start(&self, spec: RunSpec) -> Result<Run<AgentOutput>, DispatchError> {
        let mut parser = parser_for(&spec.agent);
        let node = self.name.clone();
        let (resp, run_id) = self.exec(spec).await?;
        let token = CancellationToken::new();
        let (sink, parts) = RunSink::channel(run_id.clone(), token.clone());
        let control = self.control(&run_id, &token);
        tokio::spawn(async move {
            let relayed = forward(resp, &sink, |event| typed(parser.as_mut(), event)).await;
            let ending = conclude(relayed, token.is_cancelled());
            let last = typed_ending(&node, &ending);
            sink.finish(ending.status, last).await;
        });
        Ok(Run::new(parts, control))
    }
}

/// A node's raw event as typed output: a stdout line read by the agent's parser.
fn typed(parser: &mut dyn StreamParser, event: RunEvent) -> Option<AgentOutput> {
    match event.kind {
        EventType::Started => Some(AgentOutput::Started),
        EventType::Stdout => {
            let events = parser.parse(&event.data);
            Some(AgentOutput::Line {
                text: event.data,
                events,
            })
        }
        EventType::Stderr => Some(AgentOutput::Stderr(event.data)),
        // A node sends its raw lines for turns; summaries and errors are kept in `Relayed`.
        _ => None,
    }
}

/// What a node's event stream delivered before it ended.
#[derive(Default)]
struct Relayed {
    /// The `exited` event, held back for the ending (after the status is set).
    exited: Option<RunEvent>,
    /// The data of the last `error` event.
    last_error: Option<String>,
    /// Why the stream could not be read to its end.
    broken: Option<String>,
}

/// Re-emits the node's NDJSON events (keep-alive blank lines skipped; `translate` says what
/// each becomes) until `exited`, a broken line or the end of the body.
async fn forward<E>(
    resp: reqwest::Response,
    sink: &RunSink<E>,
    mut translate: impl FnMut(RunEvent) -> Option<E>,
) -> Relayed {
    let mut body = resp.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    let mut relayed = Relayed::default();
    while let Some(chunk) = body.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                relayed.broken = Some(format!("reading the node's stream failed: {e}"));
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
                    if let Some(out) = translate(ev) {
                        sink.emit(out).await;
                    }
                }
                Err(e) => {
                    relayed.broken =
                        Some(format!("the node sent a line that is not an event: {e}"));
                    return relayed;
                }
            }
        }
        if buf.len() > MAX_REMOTE_LINE {
            relayed.broken = Some("the node sent an over-long line".into());
            return relayed;
        }
    }
    relayed
}

/// How a remote run ended.
struct Ending {
    status: Status,
    /// The node's `exited` event.
    exited: Option<RunEvent>,
    /// Why the node went away before the run ended.
    lost: Option<String>,
    /// The node sent no `error` event saying so (the wire stream gets one of ours).
    unreported: bool,
}

/// The remote run's final status: from the node's `exited` event, else a failure (the node
/// went away, unless we cancelled).
fn conclude(relayed: Relayed, canceled: bool) -> Ending {
    let Relayed {
        exited,
        last_error,
        broken,
    } = relayed;
    if let Some(ev) = exited {
        let code = ev.code;
        let shutdown = ev.error_code == EXIT_CODE_NODE_SHUTDOWN;
        let status = if shutdown {
            Status::ended(
                State::Failed,
                code,
                "the node shut down before the run ended",
            )
        } else if canceled || ev.error_code == EXIT_CODE_CANCELED {
            Status::ended(State::Canceled, code, "canceled")
        } else if code == 0 && last_error.is_none() {
            Status::ended(State::Succeeded, 0, "")
        } else {
            let detail = last_error
                .or_else(|| (!ev.data.is_empty()).then(|| ev.data.clone()))
                .unwrap_or_else(|| format!("exit status {code}"));
            Status::ended(State::Failed, code, detail)
        };
        let lost = shutdown.then(|| status.err.clone());
        return Ending {
            status,
            exited: Some(ev),
            lost,
            unreported: false,
        };
    }
    let unreported = broken.is_some() || last_error.is_none();
    let reason = broken
        .or(last_error)
        .unwrap_or_else(|| "the node's stream ended without a terminal event".into());
    if canceled {
        return Ending {
            status: Status::ended(State::Canceled, -1, "canceled"),
            exited: None,
            lost: None,
            unreported: false,
        };
    }
    Ending {
        status: Status::ended(State::Failed, -1, reason.clone()),
        exited: None,
        lost: Some(reason),
        unreported,
    }
}

/// The last wire events: the node's `exited`, or a synthetic `error` when it sent none.
fn wire_ending(run_id: &str, ending: &Ending) -> Vec<RunEvent> {
    match (&ending.exited, &ending.lost) {
        (Some(ev), _) => vec![ev.clone()],
        (None, Some(reason)) if ending.unreported => {
            vec![RunEvent::error(run_id, reason.clone(), "")]
        }
        (None, _) => Vec::new(),
    }
}

/// The last typed output: `Lost` when the node went away, then `Exited`.
fn typed_ending(node: &str, ending: &Ending) -> Vec<AgentOutput> {
    let mut out = Vec::new();
    if let Some(reason) = &ending.lost {
        out.push(AgentOutput::Lost(format!("{node}: {reason}")));
    }
    out.push(AgentOutput::Exited {
        code: ending.status.exit_code,
        canceled: ending.status.state == State::Canceled,
        egress: ending.exited.as_ref().and_then(|ev| ev.egress.clone()),
    });
    out
}
