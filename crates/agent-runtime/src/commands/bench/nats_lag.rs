//! The NATS side of `bench service --sink nats`: a stream of the benchmark's own, the server's settings for it, and the publish lag a subscriber sees.
//!
//! The lag of a persisted event is the time from its `sent_at` (stamped when the engine
//! commits it) to its arrival at a core subscriber of the stream's subjects, which NATS
//! delivers when it stores the message: commit to JetStream, as close as an outside observer
//! gets to commit-to-ack.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use ar_process::EnvPolicy;
use futures::StreamExt as _;

use super::percentile;

/// A stream and subject prefix of this benchmark run.
pub struct NatsBench {
    url: String,
    stream: String,
    prefix: String,
    client: async_nats::Client,
}

impl NatsBench {
    pub async fn connect(url: &str) -> anyhow::Result<NatsBench> {
        let client = tokio::time::timeout(Duration::from_secs(5), async_nats::connect(url))
            .await
            .context("connecting to NATS timed out")?
            .context("connecting to NATS")?;
        let id = std::process::id();
        Ok(NatsBench {
            url: url.to_string(),
            stream: format!("AR_BENCH_{id}"),
            prefix: format!("ar_bench_{id}"),
            client,
        })
    }

    /// The server's settings for the `log,nats` sinks on this stream.
    pub fn env(&self, env: EnvPolicy) -> EnvPolicy {
        let prefix = &self.prefix;
        env.with("AGENT_RUNTIME_EVENT_SINK", "log,nats")
            .with("AGENT_RUNTIME_NATS_URL", self.url.clone())
            .with("AGENT_RUNTIME_NATS_STREAM", self.stream.clone())
            .with("AGENT_RUNTIME_NATS_STREAM_SUBJECTS", format!("{prefix}.>"))
            .with(
                "AGENT_RUNTIME_NATS_SUBJECT_TEMPLATE",
                format!("{prefix}.{{app_id}}.{{run_id}}.{{event_type}}"),
            )
            .with(
                "AGENT_RUNTIME_NATS_V2_SUBJECT_TEMPLATE",
                format!("{prefix}.v2.{{app_id}}.{{run_id}}.{{event_type}}"),
            )
    }

    /// Waits (up to 10 s) until the server has created the stream: its sink is connected.
    pub async fn wait_ready(&self) -> anyhow::Result<()> {
        let js = async_nats::jetstream::new(self.client.clone());
        for _ in 0..200 {
            if js.get_stream(&self.stream).await.is_ok() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("the server did not create the stream {}", self.stream)
    }

    /// Starts recording the lag of every persisted event published from now on.
    pub async fn watch(&self) -> anyhow::Result<LagWatch> {
        let mut subscription = self
            .client
            .subscribe(format!("{}.>", self.prefix))
            .await
            .context("subscribing to the benchmark's subjects")?;
        let samples: Arc<Mutex<Vec<f64>>> = Arc::default();
        let last = Arc::new(Mutex::new(Instant::now()));
        let (into, seen) = (samples.clone(), last.clone());
        let task = tokio::spawn(async move {
            while let Some(message) = subscription.next().await {
                if let Some(lag) = lag_ms(&message.payload) {
                    lock(&into).push(lag);
                    *lock(&seen) = Instant::now();
                }
            }
        });
        Ok(LagWatch {
            samples,
            last,
            task,
            started: Instant::now(),
        })
    }

    /// Deletes the benchmark's stream.
    pub async fn delete(&self) {
        let _ = async_nats::jetstream::new(self.client.clone())
            .delete_stream(&self.stream)
            .await;
    }
}

/// The two fields of an envelope the lag needs: decoding only these keeps the subscriber's
/// CPU (which shares the machine with the server being measured) low.
#[derive(serde::Deserialize)]
struct Stamp<'a> {
    #[serde(default)]
    sequence_no: i64,
    #[serde(default, borrow)]
    sent_at: Option<&'a str>,
}

/// Milliseconds from a persisted event's `sent_at` to now; `None` for a delta (sequence 0).
fn lag_ms(payload: &[u8]) -> Option<f64> {
    let stamp: Stamp<'_> = serde_json::from_slice(payload).ok()?;
    if stamp.sequence_no == 0 {
        return None;
    }
    let sent_at = ar_wire::time::parse(stamp.sent_at?).ok()?;
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .ok()?
        .as_micros() as i64;
    Some((now - sent_at.timestamp_micros()) as f64 / 1000.0)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Lag samples being recorded.
pub struct LagWatch {
    samples: Arc<Mutex<Vec<f64>>>,
    last: Arc<Mutex<Instant>>,
    task: tokio::task::JoinHandle<()>,
    started: Instant,
}

impl LagWatch {
    /// Stops once nothing arrived for a second (the backlog, if any, has drained).
    pub async fn finish(self) -> LagReport {
        let called = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let quiet = lock(&self.last).elapsed() > Duration::from_secs(1);
            if quiet && called.elapsed() > Duration::from_secs(1) {
                break;
            }
        }
        self.task.abort();
        let elapsed = lock(&self.last).duration_since(self.started);
        let mut lags = std::mem::take(&mut *lock(&self.samples));
        lags.sort_by(f64::total_cmp);
        LagReport {
            events: lags.len(),
            elapsed_secs: elapsed.as_secs_f64().max(f64::EPSILON),
            lags,
        }
    }
}

/// What the subscriber saw during the throughput measurement.
pub struct LagReport {
    events: usize,
    elapsed_secs: f64,
    /// Milliseconds, sorted.
    lags: Vec<f64>,
}

impl LagReport {
    pub fn print(&self) {
        println!("  NATS sink (JetStream, same machine)");
        println!("    persisted events published: {}", self.events);
        println!(
            "    events/s sustained:        {:.0}",
            self.events as f64 / self.elapsed_secs
        );
        println!(
            "    publish lag p50 (commit to stored): {:.2} ms",
            percentile(&self.lags, 0.5)
        );
        println!(
            "    publish lag p99:           {:.2} ms",
            percentile(&self.lags, 0.99)
        );
    }
}
