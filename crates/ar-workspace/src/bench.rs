//! Benchmarks of the workspace tools, shared by `cargo bench -p ar-workspace` and
//! `agent-runtime bench tools`: `read_file` of a 1 MB file, `ripgrep` over a 10,000-file
//! tree, and `run_command`'s overhead over a plain spawn of the same program.

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::{Access, CommandPolicy, WorkspaceTools};

/// The target for `run_command`'s overhead over a plain spawn (median).
pub const SPAWN_OVERHEAD_TARGET: Duration = Duration::from_millis(2);

/// How many times each measurement runs.
#[derive(Debug, Clone, Copy)]
pub struct BenchConfig {
    pub read_runs: usize,
    pub search_runs: usize,
    pub spawn_runs: usize,
    /// Files in the search tree (in directories of 100).
    pub tree_files: usize,
}

impl Default for BenchConfig {
    fn default() -> Self {
        Self {
            read_runs: 200,
            search_runs: 20,
            spawn_runs: 200,
            tree_files: 10_000,
        }
    }
}

/// Median and 95th percentile of one measurement.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub median: Duration,
    pub p95: Duration,
    pub runs: usize,
}

impl Timing {
    fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort();
        let at = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
        Timing {
            median: at(0.5),
            p95: at(0.95),
            runs: samples.len(),
        }
    }
}

/// The figures of one benchmark run.
#[derive(Debug, Clone)]
pub struct BenchReport {
    pub read_file: Timing,
    pub ripgrep: Timing,
    pub run_command: Timing,
    pub plain_spawn: Timing,
    pub sandbox: String,
}

impl BenchReport {
    /// `run_command`'s median overhead over a plain spawn.
    pub fn spawn_overhead(&self) -> Duration {
        self.run_command
            .median
            .saturating_sub(self.plain_spawn.median)
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl fmt::Display for BenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let row = |f: &mut fmt::Formatter<'_>, name: &str, t: &Timing| {
            writeln!(
                f,
                "{name:<38} median {:>8.3} ms   p95 {:>8.3} ms   ({} runs)",
                ms(t.median),
                ms(t.p95),
                t.runs
            )
        };
        row(f, "read_file, 1 MB file (120 lines)", &self.read_file)?;
        row(f, "ripgrep, 10,000-file tree", &self.ripgrep)?;
        row(f, "run_command `true`", &self.run_command)?;
        row(f, "plain spawn of `true`", &self.plain_spawn)?;
        let overhead = self.spawn_overhead();
        let verdict = if overhead <= SPAWN_OVERHEAD_TARGET {
            "within"
        } else {
            "OVER"
        };
        writeln!(
            f,
            "run_command overhead over a plain spawn: {:.3} ms ({verdict} the {:.0} ms target)",
            ms(overhead),
            ms(SPAWN_OVERHEAD_TARGET)
        )?;
        write!(f, "sandbox: {}", self.sandbox)
    }
}

/// Errors that stop a benchmark.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("fixture: {0}")]
    Fixture(#[from] std::io::Error),
    #[error("workspace: {0}")]
    Workspace(#[from] crate::WorkspaceError),
    #[error("{tool} failed: {message}")]
    Tool { tool: &'static str, message: String },
    #[error("plain spawn: {0}")]
    Spawn(#[from] ar_process::ProcessError),
}

/// A 1 MB text file of numbered lines.
pub fn write_megabyte_file(path: &Path) -> std::io::Result<()> {
    let line = "the quick brown fox jumps over the lazy dog, line number ";
    let mut text = String::with_capacity(1 << 20);
    let mut n = 0;
    while text.len() < 1 << 20 {
        n += 1;
        text.push_str(&format!("{line}{n:>6}\n"));
    }
    std::fs::write(path, text)
}

/// A tree of `files` small source files in directories of 100, one of them holding the
/// pattern the benchmark searches for.
pub fn write_tree(root: &Path, files: usize) -> std::io::Result<()> {
    for i in 0..files {
        let dir = root.join(format!("pkg{:03}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&dir)?;
        }
        let marker = if i == files / 2 {
            "let needle_marker = 1;\n"
        } else {
            ""
        };
        let body = format!(
            "// file {i}\npub fn function_{i}(x: u32) -> u32 {{\n    x + {i}\n}}\n{marker}"
        );
        std::fs::write(dir.join(format!("file{i}.rs")), body.repeat(8))?;
    }
    Ok(())
}

async fn time_calls(
    tools: &WorkspaceTools,
    tool: &'static str,
    input: serde_json::Value,
    runs: usize,
) -> Result<Timing, BenchError> {
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let out = tools.call_tool(tool, input.clone()).await;
        samples.push(started.elapsed());
        if out.is_error {
            return Err(BenchError::Tool {
                tool,
                message: out.content,
            });
        }
    }
    Ok(Timing::of(samples))
}

/// Runs the benchmarks in `dir` (which it fills).
pub async fn run_bench(dir: &Path, config: BenchConfig) -> Result<BenchReport, BenchError> {
    let root = dir.join("workspace");
    std::fs::create_dir_all(root.join("tree"))?;
    write_megabyte_file(&root.join("big.txt"))?;
    write_tree(&root.join("tree"), config.tree_files)?;
    let mut policy = CommandPolicy::default();
    policy.allowed_programs.push("true".to_string());
    let tools = WorkspaceTools::with_policy(&root, Access::ReadWrite, policy)?;

    let read_file = time_calls(
        &tools,
        "read_file",
        json!({"path": "big.txt"}),
        config.read_runs,
    )
    .await?;
    let ripgrep = time_calls(
        &tools,
        "ripgrep",
        json!({"pattern": "needle_\\w+", "path": "tree"}),
        config.search_runs,
    )
    .await?;
    // Warm up both spawn paths (page cache, the tokio process driver) before measuring.
    for _ in 0..10 {
        ar_process::run_plain("true", &[]).await?;
    }
    let run_command = time_calls(
        &tools,
        "run_command",
        json!({"program": "true"}),
        config.spawn_runs,
    )
    .await?;
    let mut plain = Vec::with_capacity(config.spawn_runs);
    for _ in 0..config.spawn_runs {
        let started = Instant::now();
        ar_process::run_plain("true", &[]).await?;
        plain.push(started.elapsed());
    }
    let probe = tools
        .call_tool("run_command", json!({"program": "true"}))
        .await;
    let sandbox = probe
        .structured
        .as_ref()
        .map(|s| s["sandbox"].to_string())
        .unwrap_or_default();
    Ok(BenchReport {
        read_file,
        ripgrep,
        run_command,
        plain_spawn: Timing::of(plain),
        sandbox,
    })
}
