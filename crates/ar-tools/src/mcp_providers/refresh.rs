//! Keeping a provider's catalogue fresh: one refresh at a time (callers that arrive during a
//! refresh take its outcome instead of listing again), the first load retried with jittered
//! exponential backoff until it succeeds, then a refresh every `refresh_interval` (jittered),
//! and the provider's health as the refreshes leave it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ar_config::app::McpProvider;
use ar_mcp::provider::ProviderConnection;
use parking_lot::{Mutex, RwLock};
use rand::Rng;
use tokio_util::sync::CancellationToken;

use super::catalog::ProviderCatalog;
use super::{is_required, AppProviders};

/// First retry delay of a failed load; doubled per attempt up to [`MAX_RETRY_DELAY`].
const FIRST_RETRY_DELAY: Duration = Duration::from_millis(500);
const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// Where a provider stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderStatus {
    /// No catalogue yet, no attempt finished.
    Loading,
    /// The last refresh succeeded.
    Ready,
    /// A catalogue is published, but the last refresh failed (the old one stays).
    Degraded,
    /// No catalogue: every attempt so far failed.
    Failed,
}

impl ProviderStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderStatus::Loading => "loading",
            ProviderStatus::Ready => "ok",
            ProviderStatus::Degraded => "degraded",
            ProviderStatus::Failed => "error",
        }
    }
}

/// A provider's health, secret-free.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderHealth {
    pub name: String,
    pub transport: &'static str,
    pub required: bool,
    pub status: ProviderStatus,
    pub tool_count: usize,
    /// The last refresh's failure, and tools left out of the catalogue.
    pub error: String,
    pub last_success: Option<SystemTime>,
}

/// What one refresh did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RefreshOutcome {
    /// A catalogue was published, different from the one before.
    Changed,
    /// A catalogue was published, the same as before.
    Unchanged,
    Failed,
}

#[derive(Debug, Default)]
struct HealthState {
    last_error: Option<String>,
    last_success: Option<SystemTime>,
    last_outcome: Option<RefreshOutcome>,
}

/// One provider: its settings, connection, accepted catalogue and health.
pub(crate) struct Provider {
    pub(crate) config: McpProvider,
    pub(crate) connection: Box<dyn ProviderConnection>,
    catalog: RwLock<Option<Arc<ProviderCatalog>>>,
    health: Mutex<HealthState>,
    /// One refresh at a time; `finished` counts those done, so a caller that waited for the
    /// lock knows whether a refresh ran meanwhile.
    refreshing: tokio::sync::Mutex<()>,
    finished: AtomicU64,
    /// When a run's unknown tool last made this provider refresh.
    unknown_refresh_at: Mutex<Option<Instant>>,
}

impl Provider {
    pub(crate) fn new(config: McpProvider, connection: Box<dyn ProviderConnection>) -> Self {
        Provider {
            config,
            connection,
            catalog: RwLock::new(None),
            health: Mutex::default(),
            refreshing: tokio::sync::Mutex::new(()),
            finished: AtomicU64::new(0),
            unknown_refresh_at: Mutex::new(None),
        }
    }

    pub(crate) fn catalog(&self) -> Option<Arc<ProviderCatalog>> {
        self.catalog.read().clone()
    }

    pub(crate) fn set_catalog(&self, catalog: Arc<ProviderCatalog>) {
        *self.catalog.write() = Some(catalog);
    }

    /// A required provider without a catalogue keeps the process unready.
    pub(crate) fn holds_readiness(&self) -> bool {
        is_required(&self.config) && self.catalog.read().is_none()
    }

    /// Takes the unknown-tool refresh if its cooldown has passed.
    pub(crate) fn take_unknown_refresh_slot(&self) -> bool {
        let mut last = self.unknown_refresh_at.lock();
        let now = Instant::now();
        let due =
            last.is_none_or(|at| now.duration_since(at) >= self.config.unknown_refresh_cooldown);
        if due {
            *last = Some(now);
        }
        due
    }

    pub(crate) fn health(&self) -> ProviderHealth {
        let state = self.health.lock();
        let catalog = self.catalog();
        let status = match (&catalog, &state.last_outcome) {
            (_, None) => ProviderStatus::Loading,
            (Some(_), Some(RefreshOutcome::Failed)) => ProviderStatus::Degraded,
            (Some(_), Some(_)) => ProviderStatus::Ready,
            (None, Some(_)) => ProviderStatus::Failed,
        };
        let mut error = state.last_error.clone().unwrap_or_default();
        if let Some(left_out) = catalog.as_ref().filter(|c| !c.left_out.is_empty()) {
            if !error.is_empty() {
                error.push_str("; ");
            }
            error.push_str(&format!(
                "left out tools whose names models cannot take: {}",
                left_out.left_out.join(", ")
            ));
        }
        ProviderHealth {
            name: self.config.name.clone(),
            transport: self.config.transport.as_str(),
            required: is_required(&self.config),
            status,
            tool_count: catalog.map_or(0, |c| c.entries.len()),
            error,
            last_success: state.last_success,
        }
    }

    fn record(&self, outcome: RefreshOutcome, error: Option<String>) {
        let mut state = self.health.lock();
        state.last_outcome = Some(outcome);
        if outcome == RefreshOutcome::Failed {
            state.last_error = error;
        } else {
            state.last_error = None;
            state.last_success = Some(SystemTime::now());
        }
    }
}

impl AppProviders {
    /// Lists provider `index` and publishes the catalogue, unless a refresh finished while
    /// this one waited for its turn: then that refresh's outcome is this one's.
    pub(crate) async fn refresh(&self, index: usize) -> RefreshOutcome {
        let provider = &self.providers[index];
        let seen = provider.finished.load(Ordering::Acquire);
        let _turn = provider.refreshing.lock().await;
        if provider.finished.load(Ordering::Acquire) != seen {
            return provider
                .health
                .lock()
                .last_outcome
                .unwrap_or(RefreshOutcome::Failed);
        }
        let before = provider.catalog();
        let outcome = match provider.connection.list_tools().await {
            Ok(listed) => self.publish(index, listed).map(|catalog| {
                let same = before.is_some_and(|old| same_tools(&old, &catalog));
                if same {
                    RefreshOutcome::Unchanged
                } else {
                    RefreshOutcome::Changed
                }
            }),
            Err(error) => Err(error.to_string()),
        };
        let outcome = match outcome {
            Ok(outcome) => {
                provider.record(outcome, None);
                outcome
            }
            Err(error) => {
                tracing::warn!(app_id = %self.app_id, provider = %provider.config.name, %error, "MCP provider refresh failed; the previous catalogue stays");
                provider.record(RefreshOutcome::Failed, Some(error));
                RefreshOutcome::Failed
            }
        };
        provider.finished.fetch_add(1, Ordering::Release);
        outcome
    }
}

fn same_tools(old: &ProviderCatalog, new: &ProviderCatalog) -> bool {
    old.entries.len() == new.entries.len()
        && old
            .entries
            .iter()
            .zip(&new.entries)
            .all(|(a, b)| a.definition == b.definition && a.original == b.original)
}

/// Loads provider `index` until it succeeds, then refreshes it every `refresh_interval` (if
/// set), until `stop`.
pub(crate) async fn maintain(app: Arc<AppProviders>, index: usize, stop: CancellationToken) {
    let mut failures = 0u32;
    loop {
        if app.refresh(index).await != RefreshOutcome::Failed {
            break;
        }
        failures += 1;
        if !pause(&stop, retry_delay(failures)).await {
            return;
        }
    }
    let Some(interval) = app.providers[index].config.refresh_interval else {
        return;
    };
    failures = 0;
    loop {
        let wait = if failures == 0 {
            jitter(interval, 0.1)
        } else {
            retry_delay(failures).min(interval)
        };
        if !pause(&stop, wait).await {
            return;
        }
        match app.refresh(index).await {
            RefreshOutcome::Failed => failures += 1,
            _ => failures = 0,
        }
    }
}

/// Sleeps `wait`; false when stopped first.
async fn pause(stop: &CancellationToken, wait: Duration) -> bool {
    tokio::select! {
        () = stop.cancelled() => false,
        () = tokio::time::sleep(wait) => true,
    }
}

/// The delay before retry `failures` (1-based): doubling from 500 ms to 30 s, ±25 %.
pub(crate) fn retry_delay(failures: u32) -> Duration {
    let doubled = FIRST_RETRY_DELAY.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    jitter(doubled.min(MAX_RETRY_DELAY), 0.25)
}

/// `base` scaled by a random factor in `1 ± spread`, so providers of many replicas do not
/// refresh in step.
fn jitter(base: Duration, spread: f64) -> Duration {
    let factor = rand::thread_rng().gen_range((1.0 - spread)..=(1.0 + spread));
    base.mul_f64(factor)
}
