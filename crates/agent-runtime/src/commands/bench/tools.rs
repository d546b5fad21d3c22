//! `agent-runtime bench tools`: the workspace tools' benchmark (ar-workspace's `bench`) and
//! the clone of a 1,000-commit repository as a repository workspace makes it (ar-tools').

/// Commits of the cloned repository, and how many clones are timed.
const CLONE_COMMITS: usize = 1_000;
const CLONE_RUNS: usize = 10;

pub async fn run() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let config = ar_workspace::bench::BenchConfig::default();
    let report = ar_workspace::bench::run_bench(dir.path(), config).await?;
    println!("{report}");
    let clones = tempfile::tempdir()?;
    let clone =
        ar_tools::repository::bench::bench_clone(clones.path(), CLONE_COMMITS, CLONE_RUNS).await?;
    println!(
        "{:<38} median {:>8.3} ms   p95 {:>8.3} ms   ({} runs)",
        format!("clone, {}-commit repository", clone.commits),
        clone.median.as_secs_f64() * 1000.0,
        clone.p95.as_secs_f64() * 1000.0,
        clone.runs
    );
    Ok(())
}
