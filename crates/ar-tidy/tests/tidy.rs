//! The tidy test: reads `cargo metadata` and the source tree and fails on a broken rule.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

/// Internal crates each crate may depend on (normal dependencies), from ARCHITECTURE.md.
fn allowed_edges() -> BTreeMap<&'static str, &'static [&'static str]> {
    BTreeMap::from([
        ("ar-core", &[][..]),
        ("ar-wire", &[][..]),
        ("ar-process", &[][..]),
        ("ar-sse", &[][..]),
        ("ar-studio", &["ar-core", "ar-sse"][..]),
        ("ar-tidy", &[][..]),
        ("ar-config", &["ar-core"][..]),
        ("ar-store", &["ar-core"][..]),
        ("ar-events", &["ar-core", "ar-sse"][..]),
        ("ar-llm", &["ar-core", "ar-sse"][..]),
        (
            "ar-tools",
            &["ar-core", "ar-config", "ar-process", "ar-wire"][..],
        ),
        ("ar-dispatch", &["ar-core", "ar-process"][..]),
        ("ar-engine", &["ar-core"][..]),
        (
            "ar-server",
            &[
                "ar-core",
                "ar-wire",
                "ar-config",
                "ar-store",
                "ar-events",
                "ar-llm",
                "ar-tools",
                "ar-engine",
                "ar-dispatch",
                "ar-process",
                "ar-sse",
                "ar-studio",
            ][..],
        ),
        (
            "agent-runtime",
            &[
                "ar-core",
                "ar-wire",
                "ar-config",
                "ar-server",
                "ar-dispatch",
                "ar-studio",
                "ar-store",
                "ar-process",
                "ar-test-support",
            ][..],
        ),
        (
            "ar-test-support",
            &[
                "ar-core",
                "ar-wire",
                "ar-config",
                "ar-store",
                "ar-events",
                "ar-llm",
                "ar-tools",
                "ar-engine",
                "ar-server",
                "ar-process",
                "ar-dispatch",
                "ar-sse",
                "ar-studio",
            ][..],
        ),
    ])
}

/// Third-party crates a crate must never depend on (I/O kept out of the core and engine).
fn banned_external() -> BTreeMap<&'static str, &'static [&'static str]> {
    BTreeMap::from([
        (
            "ar-core",
            &["tokio", "sqlx", "reqwest", "axum", "async-nats", "hyper"][..],
        ),
        ("ar-wire", &["tokio", "sqlx", "reqwest", "axum"][..]),
        (
            "ar-engine",
            &["sqlx", "reqwest", "axum", "async-nats", "hyper"][..],
        ),
    ])
}

fn metadata() -> serde_json::Value {
    let output = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(workspace_root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata is JSON")
}

#[test]
fn dependency_direction_follows_architecture() {
    let metadata = metadata();
    let allowed = allowed_edges();
    let banned = banned_external();
    let mut problems = Vec::new();
    for package in metadata["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().unwrap_or_default();
        let Some(edges) = allowed.get(name) else {
            problems.push(format!(
                "crate {name} is not listed in the tidy rules (add it to ARCHITECTURE.md and here)"
            ));
            continue;
        };
        for dependency in package["dependencies"].as_array().into_iter().flatten() {
            let dep = dependency["name"].as_str().unwrap_or_default();
            let is_dev = dependency["kind"].as_str() == Some("dev");
            let internal = dep.starts_with("ar-") || dep == "agent-runtime";
            if internal && !is_dev && !edges.contains(&dep) {
                problems.push(format!(
                    "{name} -> {dep} goes against the dependency direction"
                ));
            }
            if !is_dev
                && banned
                    .get(name)
                    .map(|list| list.contains(&dep))
                    .unwrap_or(false)
            {
                problems.push(format!("{name} must not depend on {dep}"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "dependency rules broken:\n{}",
        problems.join("\n")
    );
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name == "node_modules" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_starts_with_a_module_doc() {
    let mut files = Vec::new();
    rust_files(&workspace_root().join("crates"), &mut files);
    assert!(
        files.len() > 20,
        "found too few Rust files: {}",
        files.len()
    );
    let missing: Vec<String> = files
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "files without a leading //! doc:\n{}",
        missing.join("\n")
    );
}

#[test]
fn only_ar_process_spawns_processes() {
    let mut files = Vec::new();
    rust_files(&workspace_root().join("crates"), &mut files);
    let offenders: Vec<String> = files
        .iter()
        .filter(|path| {
            let text = path.to_string_lossy();
            // Test code and the process crate itself may spawn.
            !text.contains("/ar-process/")
                && !text.contains("/tests/")
                && !text.contains("/ar-test-support/")
        })
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            // Unit-test modules sit at the end of a file; only code before them counts.
            let production = text.split("#[cfg(test)]").next().unwrap_or_default();
            production
                .lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .any(|line| line.contains("Command::new("))
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "process spawning outside ar-process:\n{}",
        offenders.join("\n")
    );
}
