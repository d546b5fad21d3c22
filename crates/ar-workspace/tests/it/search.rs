//! The search tools: ripgrep's rules (.gitignore, hidden files, types, context), grep's,
//! globs, limits.

use ar_workspace::Access;
use serde_json::json;

use crate::support::{err, fixture, ok, Fixture};

fn lay_tree(fx: &Fixture) {
    let root = fx.root();
    for (path, text) in [
        (".gitignore", "target/\n*.log\n"),
        ("src/lib.rs", "pub fn needle() {}\n// needle again\n"),
        ("src/util.py", "def needle():\n    pass\n"),
        ("target/debug/out.rs", "needle in target\n"),
        ("build.log", "needle in a log\n"),
        (".hidden/config.rs", "needle hidden\n"),
        ("node_modules/pkg/index.js", "needle in node_modules\n"),
        ("docs/guide.md", "one\ntwo\nneedle\nthree\nfour\n"),
    ] {
        let full = root.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }
}

#[tokio::test]
async fn ripgrep_respects_gitignore_hidden_files_and_types() {
    let fx = fixture(Access::ReadWrite);
    lay_tree(&fx);
    let out = fx.call("ripgrep", json!({"pattern": "needle"})).await;
    let text = ok(&out);
    assert!(text.contains("src/lib.rs:1:pub fn needle() {}"), "{text}");
    assert!(text.contains("src/util.py:1:def needle():"), "{text}");
    assert!(text.contains("docs/guide.md:3:needle"), "{text}");
    for hidden in ["target/", "build.log", ".hidden", "node_modules"] {
        assert!(!text.contains(hidden), "{hidden} searched: {text}");
    }
    let rust = fx
        .call("ripgrep", json!({"pattern": "needle", "file_type": "rust"}))
        .await;
    assert!(ok(&rust).contains("src/lib.rs") && !rust.content.contains("util.py"));
    let unknown = fx
        .call("ripgrep", json!({"pattern": "x", "file_type": "nonsense"}))
        .await;
    assert!(err(&unknown).contains("unknown file_type"));
    let context = fx
        .call(
            "ripgrep",
            json!({"pattern": "needle", "path": "docs", "context_lines": 1}),
        )
        .await;
    assert_eq!(
        ok(&context),
        "docs/guide.md-2-two\ndocs/guide.md:3:needle\ndocs/guide.md-4-three"
    );
    let upper = fx
        .call(
            "ripgrep",
            json!({"pattern": "NEEDLE", "case_insensitive": true, "path": "docs"}),
        )
        .await;
    assert!(ok(&upper).contains("docs/guide.md:3:needle"));
    let literal = fx
        .call(
            "ripgrep",
            json!({"pattern": "fn needle()", "fixed_strings": true}),
        )
        .await;
    assert!(ok(&literal).contains("src/lib.rs:1:"));
    let bad = fx.call("ripgrep", json!({"pattern": "(unclosed"})).await;
    assert!(err(&bad).contains("invalid pattern"));
    let wide = fx
        .call("ripgrep", json!({"pattern": "x", "context_lines": 6}))
        .await;
    assert!(err(&wide).contains("between 0 and 5"));
}

#[tokio::test]
async fn results_are_cut_at_max_results() {
    let fx = fixture(Access::ReadWrite);
    let lines: String = (0..500).map(|i| format!("hit {i}\n")).collect();
    std::fs::write(fx.root().join("many.txt"), lines).unwrap();
    let out = fx.call("ripgrep", json!({"pattern": "hit"})).await;
    let text = ok(&out);
    assert_eq!(
        text.lines().filter(|l| l.starts_with("many.txt:")).count(),
        50
    );
    assert!(text.contains("results cut at 50"));
    let out = fx
        .call("grep", json!({"pattern": "hit", "max_results": 200}))
        .await;
    assert_eq!(
        ok(&out)
            .lines()
            .filter(|l| l.starts_with("many.txt:"))
            .count(),
        200
    );
    assert!(err(&fx
        .call("grep", json!({"pattern": "hit", "max_results": 201}))
        .await)
    .contains("between 1 and 200"));
}

#[tokio::test]
async fn grep_searches_hidden_and_ignored_files_but_not_vendored_dirs() {
    let fx = fixture(Access::ReadWrite);
    lay_tree(&fx);
    let out = fx.call("grep", json!({"pattern": "needle"})).await;
    let text = ok(&out);
    assert!(
        text.contains("build.log:1:")
            && text.contains(".hidden/config.rs:1:")
            && text.contains("target/debug/out.rs:1:"),
        "{text}"
    );
    assert!(!text.contains("node_modules"), "{text}");
    let only_py = fx
        .call("grep", json!({"pattern": "needle", "include": "*.py"}))
        .await;
    assert_eq!(ok(&only_py), "src/util.py:1:def needle():");
    let none = fx.call("grep", json!({"pattern": "absent-word"})).await;
    assert_eq!(ok(&none), "No matches found.");
}

#[tokio::test]
async fn search_files_matches_globs_and_queries() {
    let fx = fixture(Access::ReadWrite);
    lay_tree(&fx);
    let top = fx.call("search_files", json!({"pattern": "*.log"})).await;
    assert_eq!(ok(&top), "build.log");
    let deep = fx.call("search_files", json!({"pattern": "**/*.rs"})).await;
    let text = ok(&deep);
    assert!(
        text.contains("src/lib.rs")
            && text.contains("src/main.rs")
            && !text.contains("node_modules"),
        "{text}"
    );
    let query = fx
        .call(
            "search_files",
            json!({"pattern": "src/*", "query": "needle"}),
        )
        .await;
    let text = ok(&query);
    assert!(
        text.contains("src/lib.rs:1: pub fn needle() {}")
            && text.contains("src/util.py:1: def needle():"),
        "{text}"
    );
    assert!(err(&fx
        .call("search_files", json!({"pattern": "[unclosed"}))
        .await)
    .contains("invalid glob"));
}
