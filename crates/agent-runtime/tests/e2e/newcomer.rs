//! A newcomer's path, as the README tells it, in a real browser: the README's first command
//! (`agent-runtime serve --demo`, nothing configured, no key), the console link it prints,
//! the demo run found there waiting for approval, approved with the console's button, seen
//! completed, then followed with `agent-runtime runs watch` as printed. Then a plain `serve`
//! with nothing configured, whose console says what to do next. Runs `tests/browser/newcomer.mjs`; screenshots under `target/browser-artifacts/`.

use std::time::Duration;

use ar_test_support::browser;
use ar_test_support::service::*;

use crate::BIN;

/// The console link and the demo run `serve` printed (the run is empty for a plain `serve`).
fn printed_link_and_run(stderr: &str) -> (String, String) {
    let after = |label: &str| {
        stderr.lines().find_map(|line| {
            line.split_once(label)
                .map(|(_, rest)| rest.trim().to_string())
        })
    };
    let link = after("open the console:").unwrap_or_else(|| {
        // A plain `serve`: the link is on the listening line; the token on its own line.
        let addr = after("agent runtime listening on ")
            .and_then(|rest| rest.split_whitespace().next().map(str::to_string))
            .unwrap_or_else(|| panic!("no address printed:\n{stderr}"));
        let token = stderr
            .lines()
            .skip_while(|line| !line.contains("development service token"))
            .nth(1)
            .map(str::trim)
            .unwrap_or_else(|| panic!("no token printed:\n{stderr}"));
        format!("{addr}/studio#token={token}")
    });
    let run = after("demo run ")
        .and_then(|rest| rest.split_whitespace().next().map(str::to_string))
        .map(|run| run.trim_end_matches(';').to_string())
        .unwrap_or_default();
    (link, run)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_follows_the_readme_to_a_completed_demo_run_in_the_console() {
    if !browser::require_browser() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut demo = Server::start_with_args(BIN, &["serve", "--demo"], &base_env(dir.path())).await;
    demo.process
        .wait_stderr_line("start a demo run:", WAIT)
        .await;
    let (link, run) = printed_link_and_run(&demo.process.stderr());
    assert!(run.starts_with("run_"), "{}", demo.process.stderr());
    let token = link.split_once("#token=").map(|(_, t)| t.to_string());
    let demo = demo.with_token(token);

    let empty_dir = tempfile::tempdir().expect("tempdir");
    let mut empty = Server::start(BIN, &base_env(empty_dir.path())).await;
    empty
        .process
        .wait_stderr_line("development service token", WAIT)
        .await;
    let (empty_link, _) = printed_link_and_run(&empty.process.stderr());

    browser::run_script(
        "newcomer.mjs",
        &[
            ("CONSOLE_URL", link),
            ("RUN", run.clone()),
            ("EMPTY_URL", empty_link),
        ],
        Duration::from_secs(150),
    )
    .await;
    for shot in [
        "newcomer-1-waiting.png",
        "newcomer-2-completed.png",
        "newcomer-3-changes.png",
        "newcomer-4-empty.png",
    ] {
        assert!(
            browser::artifacts().join(shot).exists(),
            "screenshot {shot}"
        );
    }
    // The browser's approval is the service's: the run completed through /v1.
    let (status, body) = demo.get(&format!("/v1/runs/{run}?app_id=demo")).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("completed")),
        "{body}"
    );
    let (_, history) = demo
        .get(&format!("/v1/runs/{run}/events/history?app_id=demo"))
        .await;
    let types = event_types(history.as_array().expect("a list"));
    assert!(types.iter().any(|t| t == "run.resumed"), "{types:?}");
    // The CLI follows the approved run as the printed line says, with the token serve saved.
    let (status, stdout, stderr) = run_command(
        BIN,
        &[
            "runs",
            "watch",
            &run,
            "--app",
            "demo",
            "--url",
            &format!("http://{}", demo.addr),
        ],
        &base_env(dir.path()),
    )
    .await;
    assert!(
        status.success(),
        "runs watch: {status:?}\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("[demo model]"), "{stdout}");
    // The two runs started in the browser: one sent back with changes, one cancelled.
    let (_, runs) = demo.get("/studio/api/runs?app=demo").await;
    let mut statuses: Vec<&str> = runs["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["status"].as_str().unwrap_or_default())
        .collect();
    statuses.sort_unstable();
    assert_eq!(statuses, ["cancelled", "completed", "completed"], "{runs}");
}
