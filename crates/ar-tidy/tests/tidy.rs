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
        ("ar-wire", &["ar-core"][..]),
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
            &[
                "ar-core",
                "ar-config",
                "ar-mcp",
                "ar-process",
                "ar-skills",
                "ar-wire",
            ][..],
        ),
        ("ar-dispatch", &["ar-core", "ar-process"][..]),
        ("ar-engine", &["ar-core", "ar-skills"][..]),
        ("ar-mcp", &["ar-core", "ar-sse", "ar-process"][..]),
        ("ar-nats", &["ar-core", "ar-events", "ar-wire"][..]),
        ("ar-temporal", &["ar-core"][..]),
        ("ar-client", &["ar-sse", "ar-wire"][..]),
        ("ar-workspace", &["ar-core", "ar-process"][..]),
        ("ar-skills", &["ar-core"][..]),
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
                "ar-skills",
                "ar-dispatch",
                "ar-mcp",
                "ar-nats",
                "ar-process",
                "ar-sse",
                "ar-studio",
                "ar-temporal",
                "ar-workspace",
            ][..],
        ),
        (
            "agent-runtime",
            &[
                "ar-client",
                "ar-core",
                "ar-wire",
                "ar-config",
                "ar-server",
                "ar-nats",
                "ar-dispatch",
                "ar-studio",
                "ar-store",
                "ar-process",
                "ar-mcp",
                "ar-test-support",
                "ar-tools",
                "ar-workspace",
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
            "ar-skills",
            &["tokio", "sqlx", "reqwest", "axum", "async-nats", "hyper"][..],
        ),
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
            production_code(&text)
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

/// The engine's components (admission, lifecycle, the native and CLI loops, studio) reach the
/// engine's shared parts only through its narrow surface (`transact`, `deps`, `config`,
/// `tell_owner`, `spawn_owner`); the engine core and ownership alone touch `Inner`.
#[test]
fn engine_components_keep_to_the_engine_surface() {
    let engine = workspace_root().join("crates/ar-engine/src");
    let mut files = Vec::new();
    rust_files(&engine, &mut files);
    let offenders: Vec<String> = files
        .iter()
        .filter(|path| {
            let relative = path.strip_prefix(&engine).unwrap_or(path);
            relative != std::path::Path::new("engine.rs") && !relative.starts_with("owner")
        })
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            production_code(&text).contains("self.inner.")
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "engine components reaching into Engine::inner (use the engine's methods):\n{}",
        offenders.join("\n")
    );
}

/// The production code of a file: everything but inline `#[cfg(test)]` items (a test module's
/// braces, a test function). A `#[cfg(test)] mod tests;` declaration removes only itself, so
/// the code after it is still checked.
fn production_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        // Skip the attributed item: a one-line declaration, or a braced block.
        let mut depth = 0i64;
        let mut opened = false;
        for item in lines.by_ref() {
            depth += item.matches('{').count() as i64 - item.matches('}').count() as i64;
            opened |= item.contains('{');
            if (opened && depth <= 0) || (!opened && item.trim_end().ends_with(';')) {
                break;
            }
        }
    }
    out
}

fn production_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&workspace_root().join("crates"), &mut files);
    files
        .into_iter()
        .filter(|path| {
            let text = path.to_string_lossy();
            !text.contains("/tests/")
                && !text.contains("/examples/")
                && !text.contains("/benches/")
                && !text.ends_with("/tests.rs")
                && !text.contains("/ar-tidy/")
        })
        .collect()
}

#[test]
fn production_code_keeps_what_follows_a_test_module_declaration() {
    let text = "fn a() {}\n#[cfg(test)]\nmod tests;\nfn b() {}\n#[cfg(test)]\nmod inline {\n    fn c() {}\n}\nfn d() {}\n";
    assert_eq!(production_code(text), "fn a() {}\nfn b() {}\nfn d() {}\n");
}

/// HTTP servers exist in three places, each for its own protocol: the service API (ar-server),
/// the studio control plane (ar-studio, seed 003) and the dispatch node (ar-dispatch, seed 000);
/// ar-test-support's mock model provider is a test peer.
#[test]
fn http_routers_live_only_in_the_servers() {
    let allowed = [
        "/ar-server/",
        "/ar-studio/",
        "/ar-dispatch/",
        "/ar-test-support/",
    ];
    let offenders: Vec<String> = production_files()
        .iter()
        .filter(|path| {
            let text = path.to_string_lossy();
            !allowed.iter().any(|crate_dir| text.contains(crate_dir))
        })
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            builds_a_router(&production_code(&text))
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "HTTP routers outside the three servers:\n{}",
        offenders.join("\n")
    );
}

/// Whether code builds an axum `Router` (not a type whose name merely ends in `Router`).
fn builds_a_router(code: &str) -> bool {
    code.match_indices("Router::new(").any(|(at, _)| {
        !code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// Production functions longer than this many lines fail the test.
const MAX_FUNCTION_LINES: usize = 100;

/// Functions still longer than the limit, with the length each may not exceed (a ratchet:
/// lower a number when a function shrinks, remove the entry when it fits).
const LONG_FUNCTIONS: &[(&str, &str, usize)] = &[];

/// `(name, lines)` of every `fn` in production code, measured from its `fn` line to the
/// closing brace at the same indentation.
fn function_lengths(code: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let signature = [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "async ",
            "const ",
            "unsafe ",
        ]
        .iter()
        .fold(trimmed, |rest, prefix| {
            rest.strip_prefix(prefix).unwrap_or(rest)
        });
        let signature = signature.strip_prefix("async ").unwrap_or(signature);
        let Some(rest) = signature.strip_prefix("fn ") else {
            continue;
        };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let closing = lines[start..].iter().position(|candidate| {
            candidate.len() == indent + 1
                && candidate.starts_with(&" ".repeat(indent))
                && candidate.ends_with('}')
        });
        if let Some(offset) = closing {
            out.push((name, offset + 1));
        }
    }
    out
}

#[test]
fn production_functions_fit_a_screen() {
    let root = workspace_root().join("crates");
    let mut problems = Vec::new();
    let mut still_long = Vec::new();
    for path in production_files() {
        let relative = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .to_string_lossy()
            .to_string();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for (name, lines) in function_lengths(&production_code(&text)) {
            let listed = LONG_FUNCTIONS
                .iter()
                .find(|(file, function, _)| *file == relative && *function == name);
            let cap = listed.map_or(MAX_FUNCTION_LINES, |(_, _, cap)| *cap);
            if lines > cap {
                problems.push(format!(
                    "{relative}: fn {name} is {lines} lines (at most {cap})"
                ));
            }
            if let Some(entry) = listed.filter(|_| lines > MAX_FUNCTION_LINES) {
                still_long.push(*entry);
            }
        }
    }
    // The ratchet only tightens: an entry whose function now fits (or is gone) is removed.
    for entry in LONG_FUNCTIONS {
        if !still_long.contains(entry) {
            problems.push(format!(
                "{}: fn {} fits now; remove it from LONG_FUNCTIONS",
                entry.0, entry.1
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "functions too long (split them by meaning):\n{}",
        problems.join("\n")
    );
}
