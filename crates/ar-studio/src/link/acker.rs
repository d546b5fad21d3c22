//! Posting acks to the studio: best effort with a timeout, a few retries on transport errors, the studio's answer kept.

use std::time::Duration;

use reqwest::StatusCode;

use crate::wire::Ack;

/// What the studio said to an ack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckAnswer {
    /// 200.
    Ok,
    /// 409: the command was marked lost and must not run.
    Conflict,
    /// Any other status.
    Refused(u16),
    /// No answer (transport error or timeout) after the retries.
    Unreachable,
}

/// Posts acks to one studio.
#[derive(Debug, Clone)]
pub(crate) struct Acker {
    pub(crate) http: reqwest::Client,
    pub(crate) url: String,
    pub(crate) token: Option<String>,
    pub(crate) timeout: Duration,
}

impl Acker {
    pub(crate) async fn post(&self, ack: &Ack, attempts: u32) -> AckAnswer {
        for attempt in 0..attempts.max(1) {
            let mut req = self.http.post(&self.url).json(ack).timeout(self.timeout);
            if let Some(t) = &self.token {
                req = req.bearer_auth(t);
            }
            match req.send().await {
                Ok(resp) => {
                    return match resp.status() {
                        StatusCode::OK => AckAnswer::Ok,
                        StatusCode::CONFLICT => AckAnswer::Conflict,
                        s => AckAnswer::Refused(s.as_u16()),
                    }
                }
                Err(err) => {
                    tracing::debug!(error = %err, attempt, "studio link: ack not delivered");
                    tokio::time::sleep(Duration::from_millis(50 << attempt.min(6))).await;
                }
            }
        }
        AckAnswer::Unreachable
    }
}
