//! `agent-runtime bench tools`: the workspace tools' benchmark (ar-workspace's `bench`).

pub async fn run() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let config = ar_workspace::bench::BenchConfig::default();
    let report = ar_workspace::bench::run_bench(dir.path(), config).await?;
    println!("{report}");
    Ok(())
}
