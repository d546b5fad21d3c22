//! The file tools' behaviour: limits, continuation, read-before-write and stale-file checks,
//! edits, patches, the catalogue per access mode.

use ar_core::tool::ToolHost;
use ar_workspace::{Access, TOOL_NAMES};
use serde_json::json;

use crate::support::{err, fixture, ok};

fn numbered(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

#[tokio::test]
async fn read_file_reads_120_lines_and_says_where_to_continue() {
    let fx = fixture(Access::ReadWrite);
    std::fs::write(fx.root().join("long.txt"), numbered(300)).unwrap();
    let out = fx.call("read_file", json!({"path": "long.txt"})).await;
    let text = ok(&out);
    assert!(text.contains("     1\tline 1\n") && text.contains("   120\tline 120\n"));
    assert!(!text.contains("line 121\n"));
    assert!(text.contains("continue with offset_line=121"), "{text}");
    let structured = out.structured.unwrap();
    assert_eq!(structured["end_line"], 120);
    assert_eq!(structured["total_lines"], 300);
    let out = fx
        .call(
            "read_file",
            json!({"path": "long.txt", "offset_line": 281, "limit_lines": 240}),
        )
        .await;
    assert!(ok(&out).contains("end of file") && out.content.contains("line 300"));
    let too_many = fx
        .call("read_file", json!({"path": "long.txt", "limit_lines": 241}))
        .await;
    assert!(err(&too_many).contains("at most 240"));
    let past = fx
        .call("read_file", json!({"path": "long.txt", "offset_line": 301}))
        .await;
    assert!(err(&past).contains("past the end"));
    let zero = fx
        .call("read_file", json!({"path": "long.txt", "offset_line": 0}))
        .await;
    assert!(err(&zero).contains("at least 1"));
}

#[tokio::test]
async fn read_files_and_read_file_range_keep_their_limits() {
    let fx = fixture(Access::ReadWrite);
    for name in ["a", "b", "c", "d", "e"] {
        std::fs::write(fx.root().join(format!("{name}.txt")), numbered(200)).unwrap();
    }
    let files = |names: &[&str], limit: u64| json!({"files": names.iter().map(|n| json!({"path": format!("{n}.txt"), "limit_lines": limit})).collect::<Vec<_>>()});
    let out = fx
        .call(
            "read_files",
            json!({"files": [{"path": "a.txt"}, {"path": "b.txt", "start_line": 190}]}),
        )
        .await;
    let body: serde_json::Value = serde_json::from_str(ok(&out)).unwrap();
    assert_eq!(body["count"], 2);
    assert_eq!(body["files"][0]["end_line"], 60);
    assert_eq!(body["files"][0]["next_start_line"], 61);
    assert_eq!(body["files"][1]["end_line"], 200);
    assert_eq!(body["files"][1]["has_more"], false);
    assert!(err(&fx
        .call("read_files", files(&["a", "b", "c", "d", "e"], 10))
        .await)
    .contains("at most 4"));
    assert!(err(&fx.call("read_files", files(&["a"], 121)).await).contains("at most 120"));
    assert!(
        err(&fx.call("read_files", files(&["a", "b", "c"], 120)).await).contains("at most 320")
    );
    let range = fx
        .call(
            "read_file_range",
            json!({"path": "a.txt", "start_line": 10, "end_line": 12}),
        )
        .await;
    let text = ok(&range);
    assert!(
        text.contains("    10\tline 10")
            && text.contains("    12\tline 12")
            && !text.contains("line 13\n")
    );
    let wide = fx
        .call(
            "read_file_range",
            json!({"path": "a.txt", "start_line": 1, "end_line": 241}),
        )
        .await;
    assert!(err(&wide).contains("at most 240"));
    let backwards = fx
        .call(
            "read_file_range",
            json!({"path": "a.txt", "start_line": 5, "end_line": 4}),
        )
        .await;
    assert!(err(&backwards).contains("before start_line"));
}

#[tokio::test]
async fn binary_files_fifos_and_directories_are_refused_for_reading() {
    let fx = fixture(Access::ReadWrite);
    std::fs::write(fx.root().join("blob.bin"), b"\x00\x01\x02binary").unwrap();
    assert!(err(&fx.call("read_file", json!({"path": "blob.bin"})).await).contains("binary"));
    assert!(err(&fx.call("read_file", json!({"path": "src"})).await).contains("directory"));
    let fifo = fx.root().join("pipe");
    ar_process::capture_output(
        &ar_process::ProcessSpec::new("mkfifo", fx.root()).args([fifo.display().to_string()]),
        100,
    )
    .await
    .unwrap();
    // Opened without blocking, then refused: a FIFO is not a regular file.
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        fx.call("read_file", json!({"path": "pipe"})),
    )
    .await
    .expect("reading a FIFO blocked");
    assert!(err(&out).contains("not a regular file"));
}

#[tokio::test]
async fn writes_need_a_complete_fresh_read_of_an_existing_file() {
    let fx = fixture(Access::ReadWrite);
    let created = fx
        .call(
            "write_file",
            json!({"path": "new/dir/file.txt", "content": "hello\n"}),
        )
        .await;
    assert!(ok(&created).contains("Created"));
    assert_eq!(
        std::fs::read_to_string(fx.root().join("new/dir/file.txt")).unwrap(),
        "hello\n"
    );
    // Written by this run: known, so it may be replaced at once.
    ok(&fx
        .call(
            "write_file",
            json!({"path": "new/dir/file.txt", "content": "again\n"}),
        )
        .await);

    std::fs::write(fx.root().join("long.txt"), numbered(200)).unwrap();
    let unread = fx
        .call("write_file", json!({"path": "long.txt", "content": "x"}))
        .await;
    assert!(err(&unread).contains("before changing it"));
    ok(&fx.call("read_file", json!({"path": "long.txt"})).await);
    let partial = fx
        .call("write_file", json!({"path": "long.txt", "content": "x"}))
        .await;
    assert!(err(&partial).contains("only part"));
    ok(&fx
        .call("read_file", json!({"path": "long.txt", "offset_line": 121}))
        .await);
    ok(&fx
        .call("write_file", json!({"path": "long.txt", "content": "x\n"}))
        .await);

    std::fs::write(fx.root().join("shared.txt"), "one\n").unwrap();
    ok(&fx.call("read_file", json!({"path": "shared.txt"})).await);
    std::fs::write(fx.root().join("shared.txt"), "two\n").unwrap();
    let stale = fx
        .call(
            "write_file",
            json!({"path": "shared.txt", "content": "three\n"}),
        )
        .await;
    assert!(err(&stale).contains("changed since"));
    assert_eq!(
        std::fs::read_to_string(fx.root().join("shared.txt")).unwrap(),
        "two\n"
    );
}

#[tokio::test]
async fn a_write_keeps_permissions_and_never_writes_through_a_link() {
    use std::os::unix::fs::PermissionsExt;
    let fx = fixture(Access::ReadWrite);
    let script = fx.root().join("run.sh");
    std::fs::write(&script, "echo 1\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    ok(&fx.call("read_file", json!({"path": "run.sh"})).await);
    ok(&fx
        .call(
            "write_file",
            json!({"path": "run.sh", "content": "echo 2\n"}),
        )
        .await);
    assert_eq!(
        std::fs::metadata(&script).unwrap().permissions().mode() & 0o777,
        0o755
    );
    std::os::unix::fs::symlink("src/main.rs", fx.root().join("alias.rs")).unwrap();
    let out = fx
        .call("write_file", json!({"path": "alias.rs", "content": "x"}))
        .await;
    assert!(err(&out).contains("symbolic link"));
    assert!(std::fs::read_to_string(fx.root().join("src/main.rs"))
        .unwrap()
        .contains("println"));
}

#[tokio::test]
async fn edit_file_replaces_exactly_one_occurrence() {
    let fx = fixture(Access::ReadWrite);
    std::fs::write(fx.root().join("e.txt"), "alpha\nbeta\nbeta\ngamma\n").unwrap();
    let unread = fx
        .call(
            "edit_file",
            json!({"path": "e.txt", "old_string": "alpha", "new_string": "A"}),
        )
        .await;
    assert!(err(&unread).contains("before changing it"));
    ok(&fx
        .call("read_file", json!({"path": "e.txt", "limit_lines": 1}))
        .await);
    let twice = fx
        .call(
            "edit_file",
            json!({"path": "e.txt", "old_string": "beta", "new_string": "B"}),
        )
        .await;
    assert!(err(&twice).contains("occurs 2 times"));
    let missing = fx
        .call(
            "edit_file",
            json!({"path": "e.txt", "old_string": "delta", "new_string": "D"}),
        )
        .await;
    assert!(err(&missing).contains("not found"));
    let edited = fx
        .call(
            "edit_file",
            json!({"path": "e.txt", "old_string": "alpha\nbeta", "new_string": "A\nbeta"}),
        )
        .await;
    assert!(
        ok(&edited).contains("at line 1")
            && edited.content.contains("-alpha")
            && edited.content.contains("+A")
    );
    assert_eq!(
        std::fs::read_to_string(fx.root().join("e.txt")).unwrap(),
        "A\nbeta\nbeta\ngamma\n"
    );
    // A second edit needs no new read: the run knows what it wrote.
    ok(&fx
        .call(
            "edit_file",
            json!({"path": "e.txt", "old_string": "gamma", "new_string": "G"}),
        )
        .await);
    std::fs::write(fx.root().join("e.txt"), "changed elsewhere\n").unwrap();
    let stale = fx
        .call(
            "edit_file",
            json!({"path": "e.txt", "old_string": "changed", "new_string": "x"}),
        )
        .await;
    assert!(err(&stale).contains("changed since"));

    std::fs::write(fx.root().join("dos.txt"), "one\r\ntwo\r\n").unwrap();
    ok(&fx.call("read_file", json!({"path": "dos.txt"})).await);
    ok(&fx
        .call(
            "edit_file",
            json!({"path": "dos.txt", "old_string": "one\ntwo", "new_string": "1\n2"}),
        )
        .await);
    assert_eq!(
        std::fs::read_to_string(fx.root().join("dos.txt")).unwrap(),
        "1\r\n2\r\n"
    );
}

#[tokio::test]
async fn apply_patch_adds_updates_moves_and_deletes_or_changes_nothing() {
    let fx = fixture(Access::ReadWrite);
    std::fs::write(fx.root().join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(fx.root().join("b.txt"), "bee\n").unwrap();
    std::fs::write(fx.root().join("c.txt"), "sea\n").unwrap();
    for path in ["a.txt", "b.txt", "c.txt"] {
        ok(&fx.call("read_file", json!({"path": path})).await);
    }
    let failing = "*** Begin Patch\n*** Update File: a.txt\n@@\n one\n-two\n+TWO\n*** Update File: b.txt\n@@\n-not there\n+x\n*** End Patch\n";
    let out = fx.call("apply_patch", json!({"patch": failing})).await;
    assert!(err(&out).contains("does not match"), "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(fx.root().join("a.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );

    let patch = "*** Begin Patch\n*** Add File: docs/new.md\n+# New\n+text\n*** Update File: a.txt\n@@\n one\n-two\n+TWO\n three\n*** Update File: b.txt\n*** Move to: moved/b.txt\n@@\n-bee\n+BEE\n*** Delete File: c.txt\n*** End Patch\n";
    let out = fx.call("apply_patch", json!({"patch": patch})).await;
    let text = ok(&out);
    assert!(
        text.contains("A docs/new.md")
            && text.contains("M a.txt")
            && text.contains("R b.txt -> moved/b.txt")
            && text.contains("D c.txt"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root().join("docs/new.md")).unwrap(),
        "# New\ntext\n"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root().join("a.txt")).unwrap(),
        "one\nTWO\nthree\n"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root().join("moved/b.txt")).unwrap(),
        "BEE\n"
    );
    assert!(!fx.root().join("b.txt").exists() && !fx.root().join("c.txt").exists());

    let unread = "*** Begin Patch\n*** Update File: src/main.rs\n@@\n-fn main() {\n+fn start() {\n*** End Patch\n";
    assert!(
        err(&fx.call("apply_patch", json!({"patch": unread})).await).contains("before changing it")
    );
    let twice =
        "*** Begin Patch\n*** Delete File: a.txt\n*** Delete File: ./a.txt\n*** End Patch\n";
    assert!(err(&fx.call("apply_patch", json!({"patch": twice})).await).contains("more than once"));
    let exists = "*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch\n";
    assert!(err(&fx.call("apply_patch", json!({"patch": exists})).await).contains("already exists"));
}

#[tokio::test]
async fn list_directory_and_list_symbols() {
    let fx = fixture(Access::ReadWrite);
    std::fs::write(fx.root().join("README.md"), "hi\n").unwrap();
    std::os::unix::fs::symlink("README.md", fx.root().join("link")).unwrap();
    let out = fx.call("list_directory", json!({"path": ""})).await;
    assert_eq!(ok(&out), "README.md\nlink@\nsrc/");
    let empty = std::fs::create_dir(fx.root().join("empty"));
    empty.unwrap();
    assert_eq!(
        ok(&fx.call("list_directory", json!({"path": "empty"})).await),
        "Directory is empty."
    );
    let symbols = fx
        .call("list_symbols", json!({"path": "src/main.rs"}))
        .await;
    assert_eq!(ok(&symbols), "function main (lines 1-3)");
    let unknown = fx.call("list_symbols", json!({"path": "README.md"})).await;
    assert!(err(&unknown).contains("does not know the language"));
}

#[tokio::test]
async fn the_catalogue_follows_the_access_mode_and_the_contract() {
    let fx = fixture(Access::ReadWrite);
    let catalogue = fx.tools.catalog("app");
    let names: Vec<&str> = catalogue.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names.len(), TOOL_NAMES.len());
    for name in TOOL_NAMES {
        assert!(names.contains(name), "{name} missing");
    }
    for definition in &catalogue {
        let mutating = matches!(
            definition.name.as_str(),
            "write_file" | "edit_file" | "apply_patch" | "run_command"
        );
        assert_eq!(definition.mutating, mutating, "{}", definition.name);
        assert_eq!(definition.category, "Workspace");
    }
    let read_only = fixture(Access::ReadOnly);
    let names: Vec<String> = read_only
        .tools
        .definitions()
        .into_iter()
        .map(|d| d.name)
        .collect();
    assert!(!names
        .iter()
        .any(|n| n == "write_file" || n == "edit_file" || n == "apply_patch"));
    assert!(names.iter().any(|n| n == "run_command"));
    let refused = read_only
        .call("write_file", json!({"path": "x.txt", "content": "x"}))
        .await;
    assert!(err(&refused).contains("read-only"));
    assert!(!read_only.root().join("x.txt").exists());
    let unknown = fx.call("create_branch", json!({"name": "x"})).await;
    assert!(err(&unknown).contains("not a workspace tool"));
    let bad = fx.call("read_file", json!({"path": 7})).await;
    assert!(err(&bad).contains("invalid input for read_file"));
    let other = fx
        .call(
            "read_file",
            json!({"path": "src/main.rs", "repository": "other"}),
        )
        .await;
    assert!(err(&other).contains("not checked out"));
}

#[test]
fn a_missing_root_is_a_clear_error() {
    let error =
        ar_workspace::WorkspaceTools::open("/nonexistent/agent-runtime-root", Access::ReadWrite)
            .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("/nonexistent/agent-runtime-root"),
        "{error}"
    );
}
