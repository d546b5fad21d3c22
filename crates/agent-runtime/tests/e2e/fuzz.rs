//! The API fuzzed by schemathesis (PyPI, `.ci/steps/install-schemathesis.sh`) against the real
//! binary and its own `/openapi.json`: every operation, with valid and invalid data, for a
//! bounded time. No answer may be a 5xx, none may break the document (status code, content
//! type, headers, body schema), a request without the token must get 401, and afterwards the
//! store must hold nothing a rejected request made: every run in it was answered 202, every
//! agent 200 or 201.
//!
//! `AR_FUZZ_SECONDS` (default 120) bounds the fuzzing, `AR_FUZZ_SEED` fixes its seed (default
//! 1, so CI is repeatable); the report prints how many requests were tried.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use ar_test_support::mock_provider::{MockProvider, Reply};
use ar_test_support::service::*;

use crate::BIN;

/// The checks run: every one about responses. Not run, on purpose: `positive_data_acceptance`
/// and `negative_data_rejection` (the contract decodes as leniently as Go, and many valid
/// shapes are refused for what they mean, e.g. an agent that does not exist),
/// `unsupported_method` (the contract answers 404 for a method a run route does not take),
/// and the stateful checks, which need links the document does not declare.
const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,\
response_headers_conformance,response_schema_conformance,ignored_auth";

fn schemathesis() -> Option<std::path::PathBuf> {
    if let Some(path) = ar_process::find_program("st", None) {
        return Some(path);
    }
    if std::env::var("CI").is_ok_and(|value| value == "true") {
        panic!("schemathesis (`st`) is required under CI=true (.ci/steps/install-schemathesis.sh)");
    }
    eprintln!("!!!!!! SKIPPING: schemathesis is not installed (run .ci/steps/install-schemathesis.sh) !!!!!!");
    None
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error_and_no_response_outside_the_document() {
    let Some(st) = schemathesis() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let mock = MockProvider::start().await;
    let server = Server::start(BIN, &sqlite_env(dir.path(), &mock)).await;
    // Something real for the documented examples (`app_id=host_app`) to list and search: an
    // agent and a completed run with its records.
    mock.set_fallback(Some(Reply::text("Looked at it.")));
    let agent = server.agent("helper", serde_json::json!({})).await;
    let run = server.start_run(&mock, &agent, serde_json::json!({})).await;
    let run_id = run["id"].as_str().expect("run id").to_string();
    server.wait_status(&run_id, &["completed"]).await;
    let seconds = env_number("AR_FUZZ_SECONDS", 120);
    let seed = env_number("AR_FUZZ_SEED", 1);
    let har = dir.path().join("fuzz.har");
    let output = run_schemathesis(&st, &server, dir.path(), &har, seconds, seed).await;
    let entries = har_entries(&har);
    println!(
        "schemathesis: {} requests tried in at most {seconds} s (seed {seed})",
        entries.len()
    );
    assert!(
        output.status.success(),
        "schemathesis failed (seed {seed}):\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        entries.len() > 500,
        "only {} requests were tried",
        entries.len()
    );
    let server_errors: Vec<String> = entries
        .iter()
        .filter(|entry| entry["response"]["status"].as_u64().unwrap_or(0) >= 500)
        .map(|entry| entry["request"]["url"].to_string())
        .collect();
    assert!(server_errors.is_empty(), "5xx answers: {server_errors:?}");
    assert_nothing_made_by_rejected_requests(dir.path(), &entries, &run_id).await;
    drop(server);
}

async fn run_schemathesis(
    st: &Path,
    server: &Server,
    dir: &Path,
    har: &Path,
    seconds: u64,
    seed: u64,
) -> std::process::Output {
    let mut command = tokio::process::Command::new(st);
    command
        .current_dir(dir)
        .arg("run")
        .arg(server.url("/openapi.json"))
        .args(["--header", &format!("Authorization: Bearer {TOKEN}")])
        .args(["--checks", CHECKS])
        .args(["--max-time", &seconds.to_string()])
        .args(["--seed", &seed.to_string()])
        .args(["--workers", "2", "--request-timeout", "10"])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--suppress-health-check", "all", "--no-color"])
        .args(["--report", "har", "--report-har-path"])
        .arg(har)
        .kill_on_drop(true);
    // The fuzzing is bounded by --max-time; the whole command by that and a margin.
    let bound = Duration::from_secs(seconds + 180);
    tokio::time::timeout(bound, command.output())
        .await
        .unwrap_or_else(|_| panic!("schemathesis ran longer than {bound:?}"))
        .expect("run schemathesis")
}

fn har_entries(har: &Path) -> Vec<Value> {
    let text =
        std::fs::read_to_string(har).unwrap_or_else(|error| panic!("{}: {error}", har.display()));
    let har: Value = serde_json::from_str(&text).expect("HAR is JSON");
    har["log"]["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The `id` of each answer of `method` to a path ending in `suffix` with one of `statuses`.
fn ids_answered(
    entries: &[Value],
    method: &str,
    suffix: &str,
    statuses: &[u64],
) -> BTreeSet<String> {
    entries
        .iter()
        .filter(|entry| entry["request"]["method"] == method)
        .filter(|entry| {
            let url = entry["request"]["url"].as_str().unwrap_or_default();
            url.split('?').next().unwrap_or_default().ends_with(suffix)
                || (suffix.is_empty() && !url.is_empty())
        })
        .filter(|entry| statuses.contains(&entry["response"]["status"].as_u64().unwrap_or(0)))
        .filter_map(|entry| {
            let text = entry["response"]["content"]["text"].as_str()?;
            let body: Value = serde_json::from_str(text).ok()?;
            body["id"].as_str().map(str::to_string)
        })
        .collect()
}

async fn assert_nothing_made_by_rejected_requests(dir: &Path, entries: &[Value], seeded_run: &str) {
    let mut started = ids_answered(entries, "POST", "/runs", &[202]);
    started.insert(seeded_run.to_string());
    let runs: BTreeSet<String> = sqlite_strings(dir, "SELECT id FROM runs")
        .await
        .into_iter()
        .collect();
    let stray: Vec<&String> = runs.difference(&started).collect();
    assert!(stray.is_empty(), "runs no 202 answered: {stray:?}");
    let mut agents = ids_answered(entries, "PUT", "", &[200, 201]);
    agents.extend(ids_answered(entries, "POST", "/agents", &[201]));
    agents.insert("helper".into());
    let stored: BTreeSet<String> = sqlite_strings(dir, "SELECT id FROM agents")
        .await
        .into_iter()
        .collect();
    let stray: Vec<&String> = stored.difference(&agents).collect();
    assert!(stray.is_empty(), "agents no 2xx answered: {stray:?}");
    println!(
        "schemathesis: {} runs and {} agents made, each by an accepted request",
        runs.len(),
        stored.len()
    );
}
