//! Durable at-least-once delivery of persisted events to HTTP callbacks (an app's, or the global one of all apps), using the events table as the outbox.
//!
//! Each callback owns a named cursor in the store (a position in the store-wide event order).
//! Its worker tails `list_events_after_position`, keeps the events of its app whose type it
//! accepts, POSTs the body the caller renders, and moves the cursor past an event only once that
//! event was delivered (2xx) or permanently rejected (4xx other than 408/429). Anything else is
//! retried with exponential backoff, in order, so a callback sees its events in log order and a
//! restart resumes at the first undelivered one. Receivers must dedupe (the `Idempotency-Key`
//! header carries the event id).
//!
//! Workers wake when the bus reports an appended event and otherwise poll every second (events
//! committed by another replica never reach this process's bus).

use std::sync::Arc;
use std::time::Duration;

use ar_core::event::StoredEvent;
use ar_core::secret::Secret;
use ar_core::store::{Store, StoreError};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::bus::Bus;

/// Renders the HTTP body (JSON) of one event; the server supplies the v1 envelope renderer.
pub type RenderFn = Arc<dyn Fn(&StoredEvent) -> Vec<u8> + Send + Sync>;

/// Where a callback without a cursor starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartPosition {
    /// After the last event in the log when the callback is first seen (the default: a new
    /// callback does not receive the whole history).
    #[default]
    End,
    /// From the first event in the log.
    Beginning,
    /// After this store position.
    After(i64),
}

/// Whose events a callback receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppFilter {
    /// One app's (`apps[].event_callbacks`).
    One(String),
    /// Every app's (the legacy global callback, `AGENT_RUNTIME_EVENT_CALLBACK_URL`).
    All,
}

impl AppFilter {
    fn accepts(&self, app_id: &str) -> bool {
        match self {
            AppFilter::One(app) => app == app_id,
            AppFilter::All => true,
        }
    }
}

/// One HTTP callback of one app, or of all.
#[derive(Debug, Clone)]
pub struct CallbackTarget {
    /// Name of the store cursor; must be stable across restarts and unique per callback.
    /// It appears in logs, so it must not contain secrets.
    pub cursor_name: String,
    pub apps: AppFilter,
    pub url: String,
    pub token: Option<Secret>,
    /// Accepted event types; empty = every persisted event of the app.
    pub event_types: Vec<String>,
    pub start: StartPosition,
}

impl CallbackTarget {
    fn accepts(&self, event: &StoredEvent) -> bool {
        self.apps.accepts(&event.app_id)
            && (self.event_types.is_empty()
                || self.event_types.iter().any(|t| t == event.kind.as_str()))
    }
}

/// Tuning of the dispatcher.
#[derive(Debug, Clone, Copy)]
pub struct DispatcherOptions {
    /// Events read per store query.
    pub batch_size: i64,
    /// Store poll interval when not woken by the bus.
    pub poll_interval: Duration,
    /// Timeout of one HTTP attempt.
    pub request_timeout: Duration,
    /// First retry delay; doubles per failed attempt.
    pub initial_backoff: Duration,
    /// Cap of the retry delay.
    pub max_backoff: Duration,
}

impl Default for DispatcherOptions {
    fn default() -> Self {
        DispatcherOptions {
            batch_size: 100,
            poll_interval: Duration::from_secs(1),
            request_timeout: Duration::from_secs(10),
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(30),
        }
    }
}

/// Failure to set up the dispatcher.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

struct Shared {
    store: Arc<dyn Store>,
    render: RenderFn,
    client: reqwest::Client,
    options: DispatcherOptions,
}

/// Delivers events to a set of callbacks, one worker per callback.
pub struct CallbackDispatcher {
    shared: Arc<Shared>,
    targets: Vec<CallbackTarget>,
    signal: Option<watch::Receiver<i64>>,
}

impl std::fmt::Debug for CallbackDispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackDispatcher")
            .field("targets", &self.targets)
            .field("options", &self.shared.options)
            .finish()
    }
}

impl CallbackDispatcher {
    /// A dispatcher with default options. Redirects are not followed (a callback that redirects
    /// is misconfigured, and following would resend the bearer token elsewhere).
    pub fn new(
        store: Arc<dyn Store>,
        render: RenderFn,
        targets: Vec<CallbackTarget>,
    ) -> Result<Self, OutboxError> {
        CallbackDispatcher::with_options(store, render, targets, DispatcherOptions::default())
    }

    pub fn with_options(
        store: Arc<dyn Store>,
        render: RenderFn,
        targets: Vec<CallbackTarget>,
        options: DispatcherOptions,
    ) -> Result<Self, OutboxError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("agent-runtime/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(CallbackDispatcher {
            shared: Arc::new(Shared {
                store,
                render,
                client,
                options,
            }),
            targets,
            signal: None,
        })
    }

    /// Wakes workers as soon as `bus` publishes a persisted event.
    pub fn wake_on(mut self, bus: &Bus) -> Self {
        self.signal = Some(bus.appended_signal());
        self
    }

    /// Creates the cursor of every callback that has none yet, at its start position, so that
    /// events committed from now on are delivered even if a worker starts later. Workers do
    /// this themselves too (retrying); calling it first closes the window at startup.
    pub async fn init_cursors(&self) -> Result<(), StoreError> {
        for target in &self.targets {
            load_or_create_cursor(
                self.shared.store.as_ref(),
                &target.cursor_name,
                target.start,
            )
            .await?;
        }
        Ok(())
    }

    /// Runs every callback's worker until `cancel` fires. A delivery in flight is abandoned
    /// (its event is delivered again after restart).
    pub async fn run(self, cancel: CancellationToken) {
        let workers = self.targets.into_iter().map(|target| {
            let worker = Worker {
                shared: self.shared.clone(),
                target,
                signal: self.signal.clone(),
                cancel: cancel.clone(),
                cursor: 0,
                stored: None,
            };
            worker.run()
        });
        futures::future::join_all(workers).await;
    }

    /// Runs [`CallbackDispatcher::run`] as a background task.
    pub fn spawn(self, cancel: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(self.run(cancel))
    }
}

/// The position of the cursor `name`, created at `start` when missing. When another worker
/// (another replica) creates it first, theirs is used. Every reader of the log through a
/// cursor (callbacks, the NATS sink) starts here.
pub async fn load_or_create_cursor(
    store: &dyn Store,
    name: &str,
    start: StartPosition,
) -> Result<i64, StoreError> {
    if let Some(position) = store.get_cursor(name).await? {
        return Ok(position);
    }
    let start = match start {
        StartPosition::Beginning => 0,
        StartPosition::After(position) => position.max(0),
        StartPosition::End => end_of_log(store).await?,
    };
    if store.advance_cursor(name, None, start).await? {
        return Ok(start);
    }
    Ok(store.get_cursor(name).await?.unwrap_or(start))
}

/// Position of the newest event. The store port has no "latest position" query, so this
/// pages through the log once (only when a cursor is first created).
async fn end_of_log(store: &dyn Store) -> Result<i64, StoreError> {
    const PAGE: i64 = 1000;
    let mut position = 0;
    loop {
        let page = store.list_events_after_position(position, PAGE).await?;
        match page.last() {
            Some(last) => position = last.position,
            None => return Ok(position),
        }
        if (page.len() as i64) < PAGE {
            return Ok(position);
        }
    }
}

/// What happened to one event.
enum Outcome {
    Delivered,
    Rejected,
    Cancelled,
}

struct Worker {
    shared: Arc<Shared>,
    target: CallbackTarget,
    signal: Option<watch::Receiver<i64>>,
    cancel: CancellationToken,
    /// Position of the last event handled (delivered, rejected or filtered out).
    cursor: i64,
    /// The cursor's value in the store, as far as we know.
    stored: Option<i64>,
}

impl Worker {
    async fn run(mut self) {
        if !self.init_cursor().await {
            return;
        }
        tracing::debug!(callback = %self.target.cursor_name, cursor = self.cursor, "callback worker started");
        while !self.cancel.is_cancelled() {
            let batch = match self
                .shared
                .store
                .list_events_after_position(self.cursor, self.shared.options.batch_size)
                .await
            {
                Ok(batch) => batch,
                Err(err) => {
                    tracing::warn!(callback = %self.target.cursor_name, error = %err, "reading the outbox failed");
                    if !self.idle().await {
                        return;
                    }
                    continue;
                }
            };
            if batch.is_empty() {
                if !self.idle().await {
                    return;
                }
                continue;
            }
            for event in batch {
                if self.target.accepts(&event) {
                    match self.deliver(&event).await {
                        Outcome::Delivered | Outcome::Rejected => {}
                        Outcome::Cancelled => {
                            // Keep the progress made on filtered-out events before this one.
                            self.persist().await;
                            return;
                        }
                    }
                    self.cursor = event.position;
                    self.persist().await;
                } else {
                    self.cursor = event.position;
                }
            }
            self.persist().await;
        }
    }

    /// Loads the cursor, creating it at the configured start. False when cancelled first.
    async fn init_cursor(&mut self) -> bool {
        loop {
            match self.try_init_cursor().await {
                Ok(()) => return true,
                Err(err) => {
                    tracing::warn!(callback = %self.target.cursor_name, error = %err, "loading the callback cursor failed");
                    if !self.idle().await {
                        return false;
                    }
                }
            }
        }
    }

    async fn try_init_cursor(&mut self) -> Result<(), StoreError> {
        let position = load_or_create_cursor(
            self.shared.store.as_ref(),
            &self.target.cursor_name,
            self.target.start,
        )
        .await?;
        self.cursor = position;
        self.stored = Some(position);
        Ok(())
    }

    /// Writes the in-memory cursor to the store (compare-and-swap). Failures are logged and
    /// retried with the next write; the worst case after a crash is a redelivery.
    async fn persist(&mut self) {
        if self.stored.is_some_and(|stored| stored >= self.cursor) {
            return;
        }
        let store = &self.shared.store;
        for _ in 0..3 {
            match store
                .advance_cursor(&self.target.cursor_name, self.stored, self.cursor)
                .await
            {
                Ok(true) => {
                    self.stored = Some(self.cursor);
                    return;
                }
                Ok(false) => match store.get_cursor(&self.target.cursor_name).await {
                    Ok(current) => {
                        self.stored = current;
                        if let Some(current) = current.filter(|c| *c >= self.cursor) {
                            // Another worker got further; continue from there.
                            self.cursor = current;
                            return;
                        }
                    }
                    Err(err) => {
                        tracing::warn!(callback = %self.target.cursor_name, error = %err, "reading the callback cursor failed");
                        return;
                    }
                },
                Err(err) => {
                    tracing::warn!(callback = %self.target.cursor_name, error = %err, "saving the callback cursor failed");
                    return;
                }
            }
        }
    }

    /// Waits for an append signal, the poll interval or cancellation. False when cancelled.
    async fn idle(&mut self) -> bool {
        let sleep = tokio::time::sleep(self.shared.options.poll_interval);
        match self.signal.as_mut() {
            Some(signal) => {
                tokio::select! {
                    _ = self.cancel.cancelled() => false,
                    _ = sleep => true,
                    changed = signal.changed() => {
                        if changed.is_err() {
                            // The bus is gone; polling alone from now on.
                            self.signal = None;
                        }
                        true
                    }
                }
            }
            None => {
                tokio::select! {
                    _ = self.cancel.cancelled() => false,
                    _ = sleep => true,
                }
            }
        }
    }

    /// Delivers one event, retrying transient failures until delivered, rejected or cancelled.
    async fn deliver(&self, event: &StoredEvent) -> Outcome {
        let options = &self.shared.options;
        let body = (self.shared.render)(event);
        let mut backoff = options.initial_backoff;
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let mut request = self
                .shared
                .client
                .post(&self.target.url)
                .timeout(options.request_timeout)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .header("Idempotency-Key", &event.event_id)
                .body(body.clone());
            if let Some(token) = &self.target.token {
                request = request.bearer_auth(token.expose());
            }
            let result = tokio::select! {
                _ = self.cancel.cancelled() => return Outcome::Cancelled,
                result = request.send() => result,
            };
            let failure = match result {
                Ok(response) => {
                    let status = response.status();
                    if status.is_success() {
                        tracing::debug!(callback = %self.target.cursor_name, event_id = %event.event_id, attempt, "event delivered");
                        return Outcome::Delivered;
                    }
                    let retryable = status.is_server_error()
                        || status == reqwest::StatusCode::REQUEST_TIMEOUT
                        || status == reqwest::StatusCode::TOO_MANY_REQUESTS;
                    if !retryable {
                        tracing::warn!(
                            callback = %self.target.cursor_name,
                            event_id = %event.event_id,
                            event_type = %event.kind,
                            status = status.as_u16(),
                            "callback rejected the event; skipping it"
                        );
                        return Outcome::Rejected;
                    }
                    format!("HTTP {}", status.as_u16())
                }
                // `without_url` keeps a query string (which may carry a token) out of the log.
                Err(err) => err.without_url().to_string(),
            };
            tracing::warn!(
                callback = %self.target.cursor_name,
                event_id = %event.event_id,
                attempt,
                retry_in_ms = backoff.as_millis() as u64,
                error = %failure,
                "callback delivery failed; will retry"
            );
            tokio::select! {
                _ = self.cancel.cancelled() => return Outcome::Cancelled,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(options.max_backoff);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    use ar_core::event::{EventBus, LiveEvent};
    use ar_core::EventKind;
    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::post;
    use axum::Router;
    use serde_json::Value;

    use super::*;
    use crate::fake_store::FakeStore;

    #[derive(Debug, Clone)]
    struct Received {
        authorization: Option<String>,
        idempotency_key: Option<String>,
        body: Value,
    }

    type Script = Arc<dyn Fn(usize, &Value) -> StatusCode + Send + Sync>;

    #[derive(Clone)]
    struct Receiver {
        received: Arc<Mutex<Vec<Received>>>,
        calls: Arc<AtomicUsize>,
        script: Script,
    }

    async fn hook(State(state): State<Receiver>, headers: HeaderMap, body: String) -> StatusCode {
        let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let call = state.calls.fetch_add(1, Ordering::SeqCst);
        let header = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        state.received.lock().unwrap().push(Received {
            authorization: header("authorization"),
            idempotency_key: header("idempotency-key"),
            body: body.clone(),
        });
        (state.script)(call, &body)
    }

    /// A local receiver; returns its URL and what it received.
    async fn receiver(script: Script) -> (String, Arc<Mutex<Vec<Received>>>) {
        let state = Receiver {
            received: Arc::default(),
            calls: Arc::default(),
            script,
        };
        let received = state.received.clone();
        let app = Router::new().route("/hook", post(hook)).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        (format!("http://{addr}/hook?tenant=1"), received)
    }

    fn render() -> RenderFn {
        Arc::new(|event: &StoredEvent| {
            serde_json::to_vec(&serde_json::json!({
                "event_id": event.event_id,
                "app_id": event.app_id,
                "type": event.kind.as_str(),
                "sequence_no": event.sequence_no,
            }))
            .unwrap()
        })
    }

    fn fast() -> DispatcherOptions {
        DispatcherOptions {
            batch_size: 3,
            poll_interval: Duration::from_millis(20),
            request_timeout: Duration::from_secs(2),
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(40),
        }
    }

    fn target(
        url: &str,
        token: Option<&str>,
        event_types: &[EventKind],
        start: StartPosition,
    ) -> CallbackTarget {
        CallbackTarget {
            cursor_name: "callback:app:test".into(),
            apps: AppFilter::One("app".into()),
            url: url.into(),
            token: token.map(Secret::new),
            event_types: event_types.iter().map(|t| t.as_str().to_string()).collect(),
            start,
        }
    }

    fn ids(received: &Mutex<Vec<Received>>) -> Vec<String> {
        received
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.body["event_id"].as_str().unwrap_or("").to_string())
            .collect()
    }

    async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !check() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn ok() -> Script {
        Arc::new(|_, _| StatusCode::OK)
    }

    #[tokio::test]
    async fn delivers_with_bearer_and_filters_by_app_and_type() {
        let (url, received) = receiver(ok()).await;
        let store = Arc::new(FakeStore::default());
        store.append("app", "run_1", EventKind::RunStarted);
        store.append("other", "run_2", EventKind::RunCompleted);
        let wanted = store.append("app", "run_1", EventKind::RunCompleted);
        store.append("app", "run_3", EventKind::RunStarted);
        let cancel = CancellationToken::new();
        let target = target(
            &url,
            Some("tok-1"),
            &[EventKind::RunCompleted],
            StartPosition::Beginning,
        );
        let handle =
            CallbackDispatcher::with_options(store.clone(), render(), vec![target], fast())
                .unwrap()
                .spawn(cancel.clone());
        wait_until("cursor at the end", || {
            store.cursor("callback:app:test") == Some(4)
        })
        .await;
        cancel.cancel();
        handle.await.unwrap();
        let got = received.lock().unwrap().clone();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].authorization.as_deref(), Some("Bearer tok-1"));
        assert_eq!(
            got[0].idempotency_key.as_deref(),
            Some(wanted.event_id.as_str())
        );
        assert_eq!(got[0].body["type"], "run.completed");
        assert_eq!(got[0].body["app_id"], "app");
    }

    #[tokio::test]
    async fn the_global_callback_gets_every_apps_events_from_a_cursor_made_before_it_ran() {
        let (url, received) = receiver(ok()).await;
        let store = Arc::new(FakeStore::default());
        store.append("app", "run_1", EventKind::RunStarted);
        let mut global = target(&url, None, &[], StartPosition::End);
        global.apps = AppFilter::All;
        let dispatcher =
            CallbackDispatcher::with_options(store.clone(), render(), vec![global], fast())
                .unwrap();
        dispatcher.init_cursors().await.unwrap();
        assert_eq!(
            store.cursor("callback:app:test"),
            Some(1),
            "created at the end"
        );
        // Committed before any worker runs: still delivered.
        store.append("app", "run_1", EventKind::RunCompleted);
        store.append("other", "run_2", EventKind::RunStarted);
        let cancel = CancellationToken::new();
        let handle = dispatcher.spawn(cancel.clone());
        wait_until("two deliveries", || received.lock().unwrap().len() == 2).await;
        cancel.cancel();
        handle.await.unwrap();
        let apps: Vec<Value> = received
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.body["app_id"].clone())
            .collect();
        assert_eq!(apps, vec!["app", "other"]);
        assert_eq!(ids(&received), vec!["evt_2", "evt_3"]);
    }

    #[tokio::test]
    async fn empty_event_types_means_all_and_no_token_means_no_header() {
        let (url, received) = receiver(ok()).await;
        let store = Arc::new(FakeStore::default());
        for _ in 0..7 {
            store.append("app", "run_1", EventKind::PlanUpdated);
        }
        let cancel = CancellationToken::new();
        let handle = CallbackDispatcher::with_options(
            store.clone(),
            render(),
            vec![target(&url, None, &[], StartPosition::Beginning)],
            fast(),
        )
        .unwrap()
        .spawn(cancel.clone());
        wait_until("seven deliveries", || received.lock().unwrap().len() == 7).await;
        cancel.cancel();
        handle.await.unwrap();
        assert_eq!(
            ids(&received),
            (1..=7).map(|n| format!("evt_{n}")).collect::<Vec<_>>()
        );
        assert!(received
            .lock()
            .unwrap()
            .iter()
            .all(|r| r.authorization.is_none()));
    }

    #[tokio::test]
    async fn retries_server_errors_and_429_then_succeeds_in_order() {
        let script: Script = Arc::new(|call, _| match call {
            0 => StatusCode::INTERNAL_SERVER_ERROR,
            1 => StatusCode::TOO_MANY_REQUESTS,
            2 => StatusCode::REQUEST_TIMEOUT,
            _ => StatusCode::ACCEPTED,
        });
        let (url, received) = receiver(script).await;
        let store = Arc::new(FakeStore::default());
        store.append("app", "run_1", EventKind::RunStarted);
        store.append("app", "run_1", EventKind::RunCompleted);
        let cancel = CancellationToken::new();
        let handle = CallbackDispatcher::with_options(
            store.clone(),
            render(),
            vec![target(&url, None, &[], StartPosition::Beginning)],
            fast(),
        )
        .unwrap()
        .spawn(cancel.clone());
        wait_until("cursor at the end", || {
            store.cursor("callback:app:test") == Some(2)
        })
        .await;
        cancel.cancel();
        handle.await.unwrap();
        assert_eq!(
            ids(&received),
            vec!["evt_1", "evt_1", "evt_1", "evt_1", "evt_2"]
        );
    }

    #[tokio::test]
    async fn permanent_client_error_is_skipped() {
        let script: Script = Arc::new(|_, body| {
            if body["event_id"] == "evt_2" {
                StatusCode::BAD_REQUEST
            } else {
                StatusCode::OK
            }
        });
        let (url, received) = receiver(script).await;
        let store = Arc::new(FakeStore::default());
        for _ in 0..3 {
            store.append("app", "run_1", EventKind::PlanUpdated);
        }
        let cancel = CancellationToken::new();
        let handle = CallbackDispatcher::with_options(
            store.clone(),
            render(),
            vec![target(&url, None, &[], StartPosition::Beginning)],
            fast(),
        )
        .unwrap()
        .spawn(cancel.clone());
        wait_until("cursor at the end", || {
            store.cursor("callback:app:test") == Some(3)
        })
        .await;
        cancel.cancel();
        handle.await.unwrap();
        assert_eq!(
            ids(&received),
            vec!["evt_1", "evt_2", "evt_3"],
            "the 400 is tried once, then skipped"
        );
    }

    #[tokio::test]
    async fn new_callback_starts_at_the_end_of_the_log() {
        let (url, received) = receiver(ok()).await;
        let store = Arc::new(FakeStore::default());
        for _ in 0..4 {
            store.append("app", "run_1", EventKind::PlanUpdated);
        }
        let cancel = CancellationToken::new();
        let handle = CallbackDispatcher::with_options(
            store.clone(),
            render(),
            vec![target(&url, None, &[], StartPosition::End)],
            fast(),
        )
        .unwrap()
        .spawn(cancel.clone());
        wait_until("cursor created", || {
            store.cursor("callback:app:test") == Some(4)
        })
        .await;
        store.append("app", "run_1", EventKind::RunCompleted);
        wait_until("new event delivered", || {
            received.lock().unwrap().len() == 1
        })
        .await;
        cancel.cancel();
        handle.await.unwrap();
        assert_eq!(ids(&received), vec!["evt_5"]);
    }

    #[tokio::test]
    async fn bus_wakes_the_worker_before_the_poll_interval() {
        let (url, received) = receiver(ok()).await;
        let store = Arc::new(FakeStore::default());
        let bus = Bus::new();
        let options = DispatcherOptions {
            poll_interval: Duration::from_secs(3600),
            ..fast()
        };
        let cancel = CancellationToken::new();
        let handle = CallbackDispatcher::with_options(
            store.clone(),
            render(),
            vec![target(&url, None, &[], StartPosition::Beginning)],
            options,
        )
        .unwrap()
        .wake_on(&bus)
        .spawn(cancel.clone());
        wait_until("cursor created", || {
            store.cursor("callback:app:test") == Some(0)
        })
        .await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        bus.publish(LiveEvent::from(store.append(
            "app",
            "run_1",
            EventKind::RunStarted,
        )));
        wait_until("woken delivery", || received.lock().unwrap().len() == 1).await;
        cancel.cancel();
        handle.await.unwrap();
    }

    #[tokio::test]
    async fn restart_mid_way_loses_nothing() {
        // The receiver fails evt_3 until it is "repaired", so the first dispatcher dies while
        // retrying it.
        let repaired = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = repaired.clone();
        let script: Script = Arc::new(move |_, body| {
            if body["event_id"] == "evt_3" && !flag.load(Ordering::SeqCst) {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::OK
            }
        });
        let (url, received) = receiver(script).await;
        let store = Arc::new(FakeStore::default());
        for _ in 0..5 {
            store.append("app", "run_1", EventKind::PlanUpdated);
        }
        let first = CallbackDispatcher::with_options(
            store.clone(),
            render(),
            vec![target(&url, None, &[], StartPosition::Beginning)],
            fast(),
        )
        .unwrap()
        .spawn(CancellationToken::new());
        wait_until("evt_3 being retried", || {
            ids(&received).iter().filter(|id| *id == "evt_3").count() >= 2
        })
        .await;
        // Crash: the task is aborted, not shut down.
        first.abort();
        let _ = first.await;
        assert_eq!(
            store.cursor("callback:app:test"),
            Some(2),
            "cursor stops before the undelivered event"
        );

        for _ in 0..3 {
            store.append("app", "run_1", EventKind::PlanUpdated);
        }
        repaired.store(true, Ordering::SeqCst);
        let cancel = CancellationToken::new();
        let second = CallbackDispatcher::with_options(
            store.clone(),
            render(),
            vec![target(&url, None, &[], StartPosition::End)],
            fast(),
        )
        .unwrap()
        .spawn(cancel.clone());
        wait_until("cursor at the end", || {
            store.cursor("callback:app:test") == Some(8)
        })
        .await;
        cancel.cancel();
        second.await.unwrap();

        let got = ids(&received);
        let mut first_seen: Vec<String> = Vec::new();
        for id in got {
            if !first_seen.contains(&id) {
                first_seen.push(id);
            }
        }
        assert_eq!(
            first_seen,
            (1..=8).map(|n| format!("evt_{n}")).collect::<Vec<_>>()
        );
    }
}
