//! Confinement: every file tool against every kind of escape, and a symlink swapped in
//! while tools run.

use std::os::unix::fs::symlink;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ar_workspace::Access;
use serde_json::{json, Value};

use crate::support::{err, fixture, ok, Fixture, SECRET};

/// Escape routes laid into the root: symlinks out (relative and absolute, to a directory and
/// to a file) and a hard link to a file outside.
fn lay_escapes(fx: &Fixture) {
    let root = fx.root();
    symlink("/etc", root.join("link_etc")).unwrap();
    symlink("../outside", root.join("link_outside")).unwrap();
    symlink("../outside/secret.rs", root.join("link_secret.rs")).unwrap();
    symlink(fx.outside().join("secret.rs"), root.join("link_abs.rs")).unwrap();
    std::fs::hard_link(fx.outside().join("secret.rs"), root.join("hard.rs")).unwrap();
}

struct Case {
    name: &'static str,
    path: String,
    /// Any of these in the error is the expected refusal.
    expect: &'static [&'static str],
}

fn cases(fx: &Fixture) -> Vec<Case> {
    let outside_abs = fx.outside().join("secret.rs").display().to_string();
    let escapes: &'static [&'static str] = &["escapes the workspace root"];
    vec![
        Case {
            name: "dot-dot",
            path: "../outside/secret.rs".into(),
            expect: escapes,
        },
        Case {
            name: "dot-dot inside a path",
            path: "src/../../outside/secret.rs".into(),
            expect: escapes,
        },
        Case {
            name: "absolute system path",
            path: "/etc/passwd".into(),
            expect: &["absolute paths are not allowed"],
        },
        Case {
            name: "absolute path outside",
            path: outside_abs,
            expect: &["absolute paths are not allowed"],
        },
        Case {
            name: "symlinked dir to /etc",
            path: "link_etc/passwd".into(),
            expect: escapes,
        },
        Case {
            name: "symlinked dir outside",
            path: "link_outside/secret.rs".into(),
            expect: escapes,
        },
        Case {
            name: "relative file symlink out",
            path: "link_secret.rs".into(),
            expect: &["escapes the workspace root", "symbolic link"],
        },
        Case {
            name: "absolute file symlink out",
            path: "link_abs.rs".into(),
            expect: &["escapes the workspace root", "symbolic link"],
        },
        Case {
            name: "hard link to a file outside",
            path: "hard.rs".into(),
            expect: &["hard links"],
        },
        Case {
            name: "very long path",
            path: format!("{}x.rs", "a/".repeat(2100)),
            expect: &["too long"],
        },
        Case {
            name: "very long component",
            path: format!("{}.rs", "x".repeat(300)),
            expect: &["too long"],
        },
        Case {
            name: "NUL byte",
            path: "src/ma\0in.rs".into(),
            expect: &["NUL"],
        },
    ]
}

fn patch(op: &str, path: &str) -> Value {
    let body = match op {
        "Update" => format!("*** Update File: {path}\n@@\n-fn {SECRET}() {{}}\n+pwned"),
        "Add" => format!("*** Add File: {path}\n+pwned"),
        _ => format!("*** Delete File: {path}"),
    };
    json!({"patch": format!("*** Begin Patch\n{body}\n*** End Patch\n")})
}

/// Every tool that takes a path, with the input that hands it `path`.
fn tool_inputs(path: &str) -> Vec<(&'static str, Value)> {
    // (An `apply_patch` that adds a file over one of the escape routes is refused as "already
    // exists" before anything is resolved through it: accepted too, see `also_accepted`.)
    vec![
        ("read_file", json!({"path": path})),
        ("read_files", json!({"files": [{"path": path}]})),
        (
            "read_file_range",
            json!({"path": path, "start_line": 1, "end_line": 1}),
        ),
        ("list_directory", json!({"path": path})),
        ("search_files", json!({"pattern": "**", "path": path})),
        ("ripgrep", json!({"pattern": SECRET, "path": path})),
        ("grep", json!({"pattern": SECRET, "path": path})),
        ("list_symbols", json!({"path": path})),
        ("write_file", json!({"path": path, "content": "pwned"})),
        (
            "edit_file",
            json!({"path": path, "old_string": "fn", "new_string": "pwned"}),
        ),
        ("apply_patch", patch("Update", path)),
        ("apply_patch", patch("Add", path)),
        ("apply_patch", patch("Delete", path)),
        (
            "run_command",
            json!({"program": "ls", "working_directory": path}),
        ),
    ]
}

/// Tools that take a directory may answer a file path with "not a directory" instead, and
/// adding a file where a link already is is refused as such.
fn also_accepted(tool: &str) -> &'static [&'static str] {
    match tool {
        "list_directory" | "run_command" => &["not a directory"],
        "apply_patch" => &["already exists"],
        _ => &[],
    }
}

#[tokio::test]
async fn every_file_tool_refuses_every_escape() {
    let fx = fixture(Access::ReadWrite);
    lay_escapes(&fx);
    let before = fx.outside_snapshot();
    let passwd = std::fs::read("/etc/passwd").unwrap_or_default();
    let mut failures = Vec::new();
    for case in cases(&fx) {
        for (tool, input) in tool_inputs(&case.path) {
            let out = fx.call(tool, input).await;
            let expected = case.expect.iter().chain(also_accepted(tool));
            let refused = out.is_error && expected.clone().any(|e| out.content.contains(e));
            if !refused || out.content.contains(SECRET) || out.content.contains("root:x:0:0") {
                failures.push(format!("{tool} / {}: {}", case.name, out.content));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "not refused as expected:\n{}",
        failures.join("\n\n")
    );
    assert_eq!(
        fx.outside_snapshot(),
        before,
        "a file outside the root changed"
    );
    assert_eq!(std::fs::read("/etc/passwd").unwrap_or_default(), passwd);
}

#[tokio::test]
async fn searches_of_the_whole_root_do_not_follow_links_out() {
    let fx = fixture(Access::ReadWrite);
    lay_escapes(&fx);
    for (tool, input) in [
        ("ripgrep", json!({"pattern": SECRET})),
        ("grep", json!({"pattern": SECRET})),
        (
            "search_files",
            json!({"pattern": "**/*.rs", "query": SECRET}),
        ),
    ] {
        let out = fx.call(tool, input).await;
        let text = ok(&out);
        assert!(!text.contains(&format!("{SECRET}()")), "{tool}: {text}");
    }
    let listed = fx.call("search_files", json!({"pattern": "**"})).await;
    let listed = ok(&listed);
    assert!(listed.contains("src/main.rs"), "{listed}");
    assert!(
        !listed.contains("link_etc/"),
        "a symlinked directory was entered: {listed}"
    );
}

#[tokio::test]
async fn a_path_that_was_fine_is_refused_once_a_symlink_replaces_it() {
    let fx = fixture(Access::ReadWrite);
    let swap = fx.root().join("swap");
    std::fs::create_dir(&swap).unwrap();
    std::fs::write(swap.join("secret.rs"), "fn inside() {}\n").unwrap();
    ok(&fx
        .call("read_file", json!({"path": "swap/secret.rs"}))
        .await);
    std::fs::rename(&swap, fx.root().join("swap_was")).unwrap();
    symlink("../outside", &swap).unwrap();
    let out = fx
        .call("read_file", json!({"path": "swap/secret.rs"}))
        .await;
    assert!(
        err(&out).contains("escapes the workspace root"),
        "{}",
        out.content
    );
    let out = fx
        .call("write_file", json!({"path": "swap/new.rs", "content": "x"}))
        .await;
    assert!(
        err(&out).contains("escapes the workspace root"),
        "{}",
        out.content
    );
    assert!(!fx.outside().join("new.rs").exists());
}

#[tokio::test]
async fn a_symlink_swapped_in_while_tools_run_never_leads_outside() {
    let fx = fixture(Access::ReadWrite);
    let race = fx.root().join("race");
    std::fs::create_dir(&race).unwrap();
    std::fs::write(race.join("secret.rs"), "fn inside() {}\n").unwrap();
    let before = fx.outside_snapshot();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, root) = (Arc::clone(&stop), fx.root());
        std::thread::spawn(move || {
            // Swapped atomically (RENAME_EXCHANGE), so "race" is always there: a real
            // directory one moment, a symlink out the next.
            let (race, link) = (root.join("race"), root.join("race_link"));
            symlink("../outside", &link).unwrap();
            let mut swaps = 0u32;
            while !stop.load(Ordering::Relaxed) {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    &race,
                    rustix::fs::CWD,
                    &link,
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
                std::thread::yield_now();
                swaps += 1;
            }
            swaps
        })
    };
    let mut inside_reads = 0;
    for i in 0..300 {
        for (tool, input) in [
            ("read_file", json!({"path": "race/secret.rs"})),
            ("ripgrep", json!({"pattern": "fn", "path": "race"})),
            ("list_symbols", json!({"path": "race/secret.rs"})),
            (
                "write_file",
                json!({"path": format!("race/new{i}.rs"), "content": "pwned"}),
            ),
        ] {
            let out = fx.call(tool, input).await;
            assert!(
                !out.content.contains(SECRET),
                "{tool} read outside: {}",
                out.content
            );
            if tool == "read_file" && !out.is_error {
                inside_reads += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(swaps > 10, "the swapper barely ran ({swaps} swaps)");
    assert!(inside_reads > 0, "no read ever saw the real directory");
    assert_eq!(
        fx.outside_snapshot(),
        before,
        "a file appeared or changed outside the root"
    );
}
