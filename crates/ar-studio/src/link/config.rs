//! The link client's configuration and the errors that end one connection attempt.

use std::time::Duration;

/// How a runtime links to a studio.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// The studio's base URL, e.g. `http://127.0.0.1:8092`.
    pub studio_url: String,
    /// The studio's bearer token, for a hosted studio.
    pub token: Option<String>,
    /// Commands executing at once (16).
    pub max_running: usize,
    /// Commands held (waiting or executing) at once; past it new ones are rejected (256).
    pub max_admitted: usize,
    /// Newest command ids remembered for at-most-once (4096).
    pub seen_capacity: usize,
    /// Cadence of `accepted` re-posts while a command is held (10 s); zero: none.
    pub heartbeat: Duration,
    /// Reconnect backoff floor (0.5 s) and ceiling (30 s).
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// One ack's timeout (10 s).
    pub ack_timeout: Duration,
    /// A stream silent this long is taken as dead (60 s; the studio pings every 15 s).
    pub idle_timeout: Duration,
    /// Frames larger than this are acked `rejected` (8 MiB).
    pub max_frame: usize,
}

impl LinkConfig {
    /// Defaults for a studio at `studio_url`.
    pub fn new(studio_url: impl Into<String>) -> Self {
        Self {
            studio_url: studio_url.into().trim_end_matches('/').to_string(),
            token: None,
            max_running: 16,
            max_admitted: 256,
            seen_capacity: 4096,
            heartbeat: Duration::from_secs(10),
            backoff_min: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            ack_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_frame: 8 << 20,
        }
    }
}

/// Why one connection attempt ended.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("studio link: http: {0}")]
    Http(#[from] reqwest::Error),
    #[error("studio link: {what} answered {status}")]
    Status { what: &'static str, status: u16 },
    #[error("studio link: the stream went silent")]
    Idle,
    #[error("studio link: started outside a tokio runtime")]
    NoRuntime,
}
