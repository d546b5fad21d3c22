//! `GET /metrics`: the service's Prometheus metrics (OpenMetrics text), recorded at the edges
//! the composition root owns so the engine stays unaware of them: the store (every commit is
//! timed, and its events say which runs changed status, which tool calls finished and when a
//! step was checkpointed: [`store::MeteredStore`]), the model client (each call timed, its
//! tokens counted by provider: [`model::MeteredModels`]), the SSE responses (streams open),
//! and, when scraped, the store's runs by status and the outboxes' cursors.
//!
//! Recording is a few atomic operations per commit or call; label values that are not fixed
//! strings (provider, tool) are allocated only for model and tool calls.

pub mod model;
pub mod store;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use ar_core::store::Store;
use ar_core::RunStatus;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProviderLabel {
    provider: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelCallLabels {
    provider: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    provider: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutboxLabel {
    outbox: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Every metric of the service, registered once.
pub struct Metrics {
    registry: Registry,
    run_transitions: Family<StatusLabel, Counter>,
    runs: Family<StatusLabel, Gauge>,
    run_seconds: Histograms<StatusLabel>,
    step_seconds: Histogram,
    model_calls: Family<ModelCallLabels, Counter>,
    model_seconds: Histograms<ProviderLabel>,
    model_tokens: Family<TokenLabels, Counter>,
    tool_calls: Family<ToolLabels, Counter>,
    tool_seconds: Histograms<ToolLabels>,
    commit_seconds: Histogram,
    sse_open: Gauge,
    outbox_lag: Family<OutboxLabel, Gauge>,
    /// The outboxes' cursor names (callbacks, the NATS sink), read when scraped.
    outboxes: parking_lot::Mutex<Vec<String>>,
    /// The position of the newest event this process appended, for the outbox lag.
    appended: AtomicI64,
}

fn seconds_from_1ms() -> Histogram {
    // 1 ms … ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

fn seconds_from_10ms() -> Histogram {
    // 10 ms … ~3 h.
    Histogram::new(exponential_buckets(0.01, 2.0, 21))
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut metrics = Metrics {
            registry: Registry::with_prefix("agent_runtime"),
            run_transitions: Family::default(),
            runs: Family::default(),
            run_seconds: Family::new_with_constructor(seconds_from_10ms),
            step_seconds: seconds_from_1ms(),
            model_calls: Family::default(),
            model_seconds: Family::new_with_constructor(seconds_from_1ms),
            model_tokens: Family::default(),
            tool_calls: Family::default(),
            tool_seconds: Family::new_with_constructor(seconds_from_1ms),
            // 50 µs … ~3 s.
            commit_seconds: Histogram::new(exponential_buckets(0.00005, 2.0, 17)),
            sse_open: Gauge::default(),
            outbox_lag: Family::default(),
            outboxes: parking_lot::Mutex::new(Vec::new()),
            appended: AtomicI64::new(0),
        };
        metrics.register();
        metrics
    }

    fn register(&mut self) {
        let r = &mut self.registry;
        r.register(
            "runs",
            "Runs in the store by status (read when scraped)",
            self.runs.clone(),
        );
        r.register(
            "run_transitions",
            "Runs that entered a status (queued, running, paused, completed, failed, cancelled)",
            self.run_transitions.clone(),
        );
        r.register(
            "run_duration_seconds",
            "Time from a run's start to its end, by final status",
            self.run_seconds.clone(),
        );
        r.register(
            "step_duration_seconds",
            "Time of one run step: from the run's start or resumption, or its previous step, to the step's checkpoint",
            self.step_seconds.clone(),
        );
        r.register(
            "model_calls",
            "Model calls by provider and outcome",
            self.model_calls.clone(),
        );
        r.register(
            "model_call_duration_seconds",
            "Time of a model call, to its last streamed byte",
            self.model_seconds.clone(),
        );
        r.register(
            "model_tokens",
            "Model tokens by provider and kind (input, cached_input, output, reasoning_output)",
            self.model_tokens.clone(),
        );
        r.register(
            "tool_calls",
            "Tool calls by tool and outcome (ok, error)",
            self.tool_calls.clone(),
        );
        r.register(
            "tool_call_duration_seconds",
            "Time of a tool call",
            self.tool_seconds.clone(),
        );
        r.register(
            "store_commit_duration_seconds",
            "Time of a store commit (a run's creation or a change to it)",
            self.commit_seconds.clone(),
        );
        r.register(
            "sse_streams_open",
            "Event streams open now",
            self.sse_open.clone(),
        );
        r.register(
            "queue_depth",
            "Runs admitted and waiting to start (status queued; read when scraped)",
            QueueDepth(self.runs.clone()),
        );
        r.register(
            "outbox_lag_events",
            "Events appended here that an outbox (callbacks, NATS) has not delivered yet",
            self.outbox_lag.clone(),
        );
    }

    /// Names an outbox's cursor, so its lag is reported.
    pub fn watch_outbox(&self, cursor_name: impl Into<String>) {
        self.outboxes.lock().push(cursor_name.into());
    }

    /// A stream that counts as open until the guard drops.
    pub fn sse_stream(self: &Arc<Self>) -> SseGuard {
        self.sse_open.inc();
        SseGuard(self.clone())
    }

    /// The text a scrape gets: the store's runs by status and the outboxes' lag read now.
    pub async fn render(&self, store: &dyn Store, appended: i64) -> String {
        self.appended.fetch_max(appended, Ordering::Relaxed);
        match store.count_runs_by_status().await {
            Ok(counts) => {
                for status in RunStatus::ALL {
                    let count = counts
                        .iter()
                        .find(|(counted, _)| counted == status)
                        .map_or(0, |(_, count)| *count);
                    self.runs
                        .get_or_create(&StatusLabel {
                            status: status.as_str(),
                        })
                        .set(count);
                }
            }
            Err(error) => tracing::warn!(%error, "metrics: counting runs by status failed"),
        }
        let outboxes = self.outboxes.lock().clone();
        let newest = self.appended.load(Ordering::Relaxed);
        for name in outboxes {
            if let Ok(Some(position)) = store.get_cursor(&name).await {
                self.outbox_lag
                    .get_or_create(&OutboxLabel { outbox: name })
                    .set((newest - position).max(0));
            }
        }
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::error!(%error, "metrics: encoding failed");
        }
        text
    }
}

/// `queue_depth` is the `queued` count of `runs`, under a name of its own.
#[derive(Debug)]
struct QueueDepth(Family<StatusLabel, Gauge>);

impl prometheus_client::encoding::EncodeMetric for QueueDepth {
    fn encode(
        &self,
        encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        let queued = self.0.get_or_create(&StatusLabel {
            status: RunStatus::Queued.as_str(),
        });
        queued.encode(encoder)
    }

    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        prometheus_client::metrics::MetricType::Gauge
    }
}

/// Holds an SSE stream's place in `sse_streams_open`.
pub struct SseGuard(Arc<Metrics>);

impl Drop for SseGuard {
    fn drop(&mut self) {
        self.0.sse_open.dec();
    }
}
