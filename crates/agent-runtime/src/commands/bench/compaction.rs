//! `bench compaction`: what keeping a long run inside its model's window costs. The 300-step
//! run of the e2e test (a host MCP tool with ~1.7 KB outputs) through a child server against
//! the mock model, once with a context window of 8192 tokens and `native_context`, once with an
//! unbounded model and no policy. (The runtime's own work in one compaction, without the model
//! call, is `cargo bench -p ar-engine --bench compaction`.)

use std::time::{Duration, Instant};

use anyhow::Context as _;
use ar_test_support::mock_provider::{LongRun, MockProvider};
use ar_test_support::provider_host::{tool, ProviderHost};
use serde_json::{json, Value};

use super::percentile;
use super::service::{start_server_with, APP};

const STEPS: usize = 300;
const WINDOW: u64 = 8192;

/// What one 300-step run came to.
struct LongRunFigures {
    wall: Duration,
    server_cpu_ms: f64,
    requests: usize,
    summaries: usize,
    trims: usize,
    /// Input tokens (the mock's count) of the largest request and of the last one (the whole
    /// transcript after the 300th step).
    largest_request: u64,
    last_request: u64,
    last_request_bytes: usize,
    /// Milliseconds from `context.compaction_started` to `..._completed`, per summary.
    summary_ms: Vec<f64>,
}

pub async fn run() -> anyhow::Result<()> {
    let with = long_run(Some(WINDOW)).await?;
    let without = long_run(None).await?;
    let mut summary_ms = with.summary_ms.clone();
    summary_ms.sort_by(f64::total_cmp);
    println!("300-step run, tool outputs of ~1.7 KB, SQLite, mock model:");
    for (name, figures) in [
        ("window 8192 + native_context", &with),
        ("unbounded, no policy", &without),
    ] {
        println!(
            "  {name}: {:.2} s, server CPU {:.0} ms, {} model requests ({} summaries, {} trims), largest request {} tokens, last request {} tokens ({} KB)",
            figures.wall.as_secs_f64(),
            figures.server_cpu_ms,
            figures.requests,
            figures.summaries,
            figures.trims,
            figures.largest_request,
            figures.last_request,
            figures.last_request_bytes / 1024,
        );
    }
    println!(
        "  one summary compaction end to end (started → completed, the mock's summary call included): p50 {:.1} ms, p95 {:.1} ms",
        percentile(&summary_ms, 0.5),
        percentile(&summary_ms, 0.95)
    );
    Ok(())
}

/// The 300-step run through a child server; `window` bounds the mock model and turns the
/// agent's `native_context` on.
async fn long_run(window: Option<u64>) -> anyhow::Result<LongRunFigures> {
    let mock = MockProvider::start().await;
    mock.set_context_window(window);
    let script = LongRun::new(STEPS, "docs__bulk_read", 40);
    mock.long_run(script.clone());
    let host = ProviderHost::start(None, vec![tool("bulk_read", "Read a chunk", false)]).await;
    let providers = json!({"mcp_providers": [{"name": "docs", "url": host.url()}]});
    let server = start_server_with("sqlite", "", &mock, (None, providers), &[]).await?;
    let mut config = json!({"max_tool_steps": STEPS + 10});
    if let Some(window) = window {
        config["native_context"] = json!({"enabled": true, "context_window": window});
    }
    server
        .put(
            &format!("/v1/agents/reader?app_id={APP}"),
            json!({"app_id": APP, "name": "reader", "allowed_tools": ["docs__bulk_read"],
                   "execution_config": config}),
        )
        .await?;
    let cpu_before = server.cpu();
    let started = Instant::now();
    let run = server
        .post(
            "/v1/runs",
            json!({"app_id": APP, "agent_id": "reader", "target": {"type": "bench", "id": "1"},
                   "instructions": "Read every chunk.",
                   "model": {"provider": "openai_compatible", "model": "mock",
                             "endpoint": {"id": "mock", "base_url": mock.base_url(), "auth_mode": "none"}},
                   "model_credential": {"type": "none"}}),
        )
        .await?;
    let run_id = run["id"].as_str().context("run id")?.to_string();
    let status = wait_ended(&server, &run_id).await?;
    let wall = started.elapsed();
    let server_cpu_ms = server.cpu() - cpu_before;
    anyhow::ensure!(status == "completed", "the run ended {status}");
    let events = server
        .get(&format!("/v1/runs/{run_id}/events/history?app_id={APP}"))
        .await?;
    let requests = mock.model_requests();
    let last = requests.last().context("no request")?;
    Ok(LongRunFigures {
        wall,
        server_cpu_ms,
        requests: requests.len(),
        summaries: script.summaries(),
        trims: count(&events, |e| {
            e["type"] == "context.compaction_completed" && e["data"]["summarized_messages"] == 0
        }),
        largest_request: requests.iter().map(|r| r.tokens).max().unwrap_or(0),
        last_request: last.tokens,
        last_request_bytes: last.body.to_string().len(),
        summary_ms: summary_latencies(&events),
    })
}

async fn wait_ended(server: &super::service::Server, run_id: &str) -> anyhow::Result<String> {
    for _ in 0..12_000 {
        let run = server
            .get(&format!("/v1/runs/{run_id}?app_id={APP}"))
            .await?;
        let status = run["status"].as_str().unwrap_or_default().to_string();
        if !matches!(status.as_str(), "queued" | "running") {
            return Ok(status);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("the run did not end within ten minutes")
}

fn count(events: &Value, matches: impl Fn(&Value) -> bool) -> usize {
    events
        .as_array()
        .map_or(0, |events| events.iter().filter(|e| matches(e)).count())
}

/// Milliseconds between each `context.compaction_started` and the next completion (the v1
/// envelope's `sent_at` is the event's commit time).
fn summary_latencies(events: &Value) -> Vec<f64> {
    let at = |event: &Value| {
        event["sent_at"]
            .as_str()
            .and_then(|text| chrono::DateTime::parse_from_rfc3339(text).ok())
    };
    let mut latencies = Vec::new();
    let mut started = None;
    for event in events.as_array().into_iter().flatten() {
        match event["type"].as_str() {
            Some("context.compaction_started") => started = at(event),
            Some("context.compaction_completed") => {
                if let (Some(from), Some(to)) = (started.take(), at(event)) {
                    latencies.push((to - from).num_microseconds().unwrap_or(0) as f64 / 1000.0);
                }
            }
            _ => {}
        }
    }
    latencies
}
