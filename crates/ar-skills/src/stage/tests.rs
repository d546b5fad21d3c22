//! Staging into a directory an agent may have tampered with, and confined reads back.

use std::sync::Arc;

use super::*;
use crate::definition::SkillFile;
use crate::Catalog;

fn packaged() -> SkillDefinition {
    let mut skill = Catalog::built_in().get("code_builder").unwrap().clone();
    skill.key = "triage".into();
    skill.files = Arc::new(vec![
        SkillFile {
            path: "SKILL.md".into(),
            content: b"---\nname: triage\n---\nx".to_vec(),
        },
        SkillFile {
            path: "scripts/labels.md".into(),
            content: b"bug, feature".to_vec(),
        },
    ]);
    skill
}

#[test]
fn skills_are_staged_and_a_second_turn_replaces_the_first() {
    let root = tempfile::tempdir().unwrap();
    let built_in = Catalog::built_in().get("api_doc_writing").unwrap();
    let package = packaged();
    let staged = stage(
        &[built_in, &package],
        root.path(),
        &WORKSPACE_STAGE,
        StageKind::Workspace,
    )
    .unwrap();
    let dir = root.path().join(".agent-runtime/skills");
    assert_eq!(staged.root, dir);
    assert_eq!(staged.skills[1].files, ["SKILL.md", "scripts/labels.md"]);
    let text = std::fs::read_to_string(dir.join("api_doc_writing/SKILL.md")).unwrap();
    assert!(text.starts_with("---\nname: api_doc_writing\n"), "{text}");
    assert!(text.contains(&built_in.instructions));
    assert_eq!(
        std::fs::read(dir.join("triage/scripts/labels.md")).unwrap(),
        b"bug, feature"
    );

    std::fs::write(dir.join("triage/stale.txt"), "old").unwrap();
    std::os::unix::fs::symlink("/etc", dir.join("link")).unwrap();
    stage(
        &[&package],
        root.path(),
        &WORKSPACE_STAGE,
        StageKind::Workspace,
    )
    .unwrap();
    assert!(!dir.join("api_doc_writing").exists());
    assert!(!dir.join("triage/stale.txt").exists());
    assert!(
        std::fs::symlink_metadata(dir.join("link")).is_err(),
        "the link is removed, not followed"
    );
    assert!(std::path::Path::new("/etc/passwd").exists());
}

#[test]
fn a_staging_path_that_is_a_link_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join(".agent-runtime")).unwrap();
    let error = stage(
        &[&packaged()],
        root.path(),
        &WORKSPACE_STAGE,
        StageKind::Workspace,
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("skills could not be staged at"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing written outside"
    );
}

#[test]
fn staged_files_are_read_back_confined() {
    let root = tempfile::tempdir().unwrap();
    let staged = stage(&[&packaged()], root.path(), &["s"], StageKind::Temporary).unwrap();
    let dir = staged.root.join("triage");
    assert_eq!(
        read_staged(&dir, "scripts/labels.md", 1024).unwrap(),
        b"bug, feature"
    );
    std::fs::write(root.path().join("secret"), "s").unwrap();
    std::os::unix::fs::symlink(root.path().join("secret"), dir.join("out")).unwrap();
    std::fs::hard_link(root.path().join("secret"), dir.join("hard")).unwrap();
    for (path, wanted) in [
        ("../../secret", "leads outside"),
        ("/etc/passwd", "not a relative path"),
        ("out", "leads outside"),
        ("hard", "not a regular file"),
        ("scripts", "not a regular file"),
        ("ghost.md", "has no file"),
    ] {
        let error = read_staged(&dir, path, 1024).unwrap_err();
        assert!(error.contains(wanted), "{path}: {error}");
    }
    assert!(read_staged(&dir, "scripts/labels.md", 3)
        .unwrap_err()
        .contains("larger than"));
}

#[test]
fn temporary_names_stay_one_component() {
    assert_eq!(temp_name("01JABC"), "01JABC");
    assert_eq!(temp_name("../x/y"), "___x_y");
    assert_eq!(temp_name(""), "run");
}

#[test]
fn staging_in_a_git_work_tree_is_excluded_from_its_commits() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join(".git/info")).unwrap();
    std::fs::write(
        root.path().join(".git/info/exclude"),
        "# git ls-files --others\n*.log",
    )
    .unwrap();
    for _ in 0..2 {
        stage(
            &[&packaged()],
            root.path(),
            &WORKSPACE_STAGE,
            StageKind::Workspace,
        )
        .unwrap();
    }
    let exclude = std::fs::read_to_string(root.path().join(".git/info/exclude")).unwrap();
    assert_eq!(
        exclude,
        "# git ls-files --others\n*.log\n/.agent-runtime/\n"
    );
    let plain = tempfile::tempdir().unwrap();
    stage(
        &[&packaged()],
        plain.path(),
        &WORKSPACE_STAGE,
        StageKind::Workspace,
    )
    .unwrap();
    assert!(!plain.path().join(".git").exists());
}
