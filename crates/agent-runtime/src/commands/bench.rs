//! `agent-runtime bench`: the benchmarks whose figures README.md reports.

use clap::Args;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Which benchmark: service (the 5-step agent over HTTP).
    #[arg(default_value = "service")]
    pub which: String,
}

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("unknown benchmark {:?}", args.which)
}
