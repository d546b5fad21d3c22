//! Runs the studio benchmark and prints its figures (what `agent-runtime bench studio` shows).

#[tokio::main]
async fn main() {
    let report = ar_studio::bench::run_bench().await;
    println!("{report}");
}
