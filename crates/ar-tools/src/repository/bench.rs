//! The clone benchmark of `agent-runtime bench tools`: a bare repository of N commits built
//! with the real `git fast-import` (seconds, not minutes, for 1,000 commits), then cloned
//! over `file://` (git's pack protocol, as for a remote) exactly as a repository workspace is
//! prepared: clone of the base branch, work branch, commit identity.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ar_core::workspace::WorkspaceError;
use ar_wire::host::RepositoryWorkspaceSpec;

use ar_process::{ProcessSpec, StdinMode};

use super::{clone_into, failed, git, GitAuth};

/// Median and 95th percentile of the clones.
#[derive(Debug, Clone, Copy)]
pub struct CloneTiming {
    pub commits: usize,
    pub median: Duration,
    pub p95: Duration,
    pub runs: usize,
}

/// The fast-import stream of `commits` commits on `main`, each changing one of 50 files.
fn import_stream(commits: usize) -> String {
    let mut stream = String::new();
    for i in 1..=commits {
        let message = format!("change {i}");
        let content = format!("line written by commit {i}\n").repeat(20);
        let _ = write!(
            stream,
            "commit refs/heads/main\nmark :{i}\ncommitter Bench <bench@example.com> {} +0000\n\
             data {}\n{message}\n",
            1_700_000_000 + i,
            message.len()
        );
        if i > 1 {
            let _ = writeln!(stream, "from :{}", i - 1);
        }
        let _ = write!(
            stream,
            "M 100644 inline src/file{}.txt\ndata {}\n{content}\n",
            i % 50,
            content.len()
        );
    }
    stream
}

/// `git fast-import` of `stream` into the bare repository `bare`, through `ar-process`.
async fn fast_import(bare: &Path, stream: String) -> Result<(), WorkspaceError> {
    use tokio::io::AsyncWriteExt as _;
    let spec = ProcessSpec::new("git", bare)
        .args(["fast-import", "--quiet"])
        .stdin(StdinMode::Piped);
    let mut child = ar_process::spawn(&spec).map_err(|e| failed("bench", e))?;
    let tail = child.stderr_tail();
    if let Some(mut stdin) = child.take_stdin() {
        stdin
            .write_all(stream.as_bytes())
            .await
            .map_err(|e| failed("bench", e))?;
        // Closing stdin ends the import.
        drop(stdin);
    }
    let exit = child.wait().await.map_err(|e| failed("bench", e))?;
    if !exit.success() {
        return Err(failed(
            "bench",
            format!("git fast-import: {}", tail.snapshot()),
        ));
    }
    Ok(())
}

/// A bare repository of `commits` commits on `main` under `dir`.
pub async fn make_repository(dir: &Path, commits: usize) -> Result<PathBuf, WorkspaceError> {
    let bare = dir.join("remote.git");
    std::fs::create_dir_all(&bare).map_err(|e| failed("bench", e))?;
    let none = GitAuth::default();
    git::run(&bare, &none, &["init", "--quiet", "--bare", "-b", "main"])
        .await
        .map_err(|e| failed("bench", e))?;
    fast_import(&bare, import_stream(commits)).await?;
    Ok(bare)
}

/// Clones a `commits`-commit repository `runs` times the way a workspace is prepared.
pub async fn bench_clone(
    dir: &Path,
    commits: usize,
    runs: usize,
) -> Result<CloneTiming, WorkspaceError> {
    let bare = make_repository(dir, commits).await?;
    let spec = RepositoryWorkspaceSpec {
        clone_url: format!("file://{}", bare.display()),
        base_branch: "main".into(),
        ..Default::default()
    };
    let mut samples = Vec::with_capacity(runs);
    for run in 0..runs.max(1) {
        let checkout = dir.join("checkouts").join(format!("run{run}"));
        let started = Instant::now();
        clone_into(&spec, &checkout, "bench").await?;
        samples.push(started.elapsed());
        std::fs::remove_dir_all(&checkout).map_err(|e| failed("bench", e))?;
    }
    samples.sort();
    let at = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    Ok(CloneTiming {
        commits,
        median: at(0.5),
        p95: at(0.95),
        runs: samples.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_fixture_has_its_commits_and_clones_onto_the_work_branch() {
        let dir = tempfile::tempdir().unwrap();
        let bare = make_repository(dir.path(), 30).await.unwrap();
        let count = git::run(&bare, &GitAuth::default(), &["rev-list", "--count", "main"])
            .await
            .unwrap();
        assert_eq!(count.trim(), "30");
        let timing = bench_clone(dir.path(), 30, 2).await.unwrap();
        assert_eq!((timing.commits, timing.runs), (30, 2));
        assert!(timing.median <= timing.p95);
    }
}
