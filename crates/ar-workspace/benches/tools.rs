//! `cargo bench -p ar-workspace --bench tools`: the workspace tools' benchmark (the same
//! figures `agent-runtime bench tools` prints).

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = ar_workspace::bench::BenchConfig::default();
    match runtime.block_on(ar_workspace::bench::run_bench(dir.path(), config)) {
        Ok(report) => println!("{report}"),
        Err(error) => {
            eprintln!("bench tools failed: {error}");
            std::process::exit(1);
        }
    }
}
