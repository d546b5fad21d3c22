//! A repository's own skills: `<root>/.agents/skills/<name>/SKILL.md`. The workspace calls
//! [`discover`] with a lease's root; what it finds joins a run as available skills.
//!
//! The tree belongs to whoever wrote the repository: symbolic links are not followed (the
//! last component is opened with `O_NOFOLLOW`, directories are checked without following),
//! files are capped in size and number, and a bad file is reported without hiding the others.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::definition::{parse_skill_md, SkillDefinition, SkillError, SourceKind};

/// Largest `SKILL.md` read.
pub const MAX_SKILL_BYTES: usize = 256 * 1024;
/// Most skills taken from one repository.
pub const MAX_SKILLS: usize = 64;

/// What a repository holds: its usable skills and the files that could not be used.
#[derive(Debug, Default)]
pub struct Discovery {
    pub skills: Vec<SkillDefinition>,
    pub problems: Vec<SkillError>,
}

/// Reads `<root>/.agents/skills`. A repository without one has no skills.
pub fn discover(root: &Path) -> Discovery {
    let mut found = Discovery::default();
    let dir = root.join(".agents").join("skills");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return found;
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    for name in names.into_iter().take(MAX_SKILLS) {
        let origin = format!(".agents/skills/{name}/SKILL.md");
        match read_one(&dir.join(&name).join("SKILL.md"), &origin) {
            Ok(Some(skill)) => found.skills.push(skill),
            Ok(None) => {}
            Err(problem) => found.problems.push(problem),
        }
    }
    found
}

/// One skill directory's `SKILL.md`; `None` when it has none.
fn read_one(path: &Path, origin: &str) -> Result<Option<SkillDefinition>, SkillError> {
    let io = |source| SkillError::Io {
        origin: origin.to_string(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = match file {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io(error)),
    };
    if !file.metadata().map_err(io)?.is_file() {
        return Err(io(std::io::Error::other("not a regular file")));
    }
    let mut text = String::new();
    let read = file
        .take(MAX_SKILL_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .map_err(io)?;
    if read > MAX_SKILL_BYTES {
        return Err(SkillError::TooLarge {
            origin: origin.to_string(),
            limit: MAX_SKILL_BYTES,
        });
    }
    parse_skill_md(&text, origin, SourceKind::Repository).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, name: &str, text: &str) {
        let dir = root.join(".agents/skills").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SKILL.md"), text).unwrap();
    }

    #[test]
    fn finds_skills_reports_bad_ones_and_follows_no_links() {
        let root = tempfile::tempdir().unwrap();
        write(
            root.path(),
            "lint",
            "---\nname: lint\ndescription: Run the linter.\n---\nRun it.",
        );
        write(root.path(), "broken", "no front matter");
        std::fs::create_dir_all(root.path().join(".agents/skills/empty")).unwrap();
        let outside = tempfile::tempdir().unwrap();
        write(
            outside.path(),
            "secret",
            "---\nname: secret\ndescription: d\n---\nleak",
        );
        let linked = root.path().join(".agents/skills/linked");
        std::fs::create_dir_all(&linked).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join(".agents/skills/secret/SKILL.md"),
            linked.join("SKILL.md"),
        )
        .unwrap();
        std::os::unix::fs::symlink(
            outside.path().join(".agents/skills/secret"),
            root.path().join(".agents/skills/dirlink"),
        )
        .unwrap();
        let found = discover(root.path());
        let keys: Vec<_> = found.skills.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(keys, ["lint"]);
        assert_eq!(found.skills[0].source, SourceKind::Repository);
        let problems: Vec<String> = found.problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("broken/SKILL.md: SKILL.md must start"));
        assert!(problems[1].contains("linked/SKILL.md: cannot be read"));
    }

    #[test]
    fn a_repository_without_skills_has_none_and_big_files_are_refused() {
        let root = tempfile::tempdir().unwrap();
        assert!(discover(root.path()).skills.is_empty());
        let big = format!(
            "---\nname: big\ndescription: d\n---\n{}",
            "x".repeat(MAX_SKILL_BYTES)
        );
        write(root.path(), "big", &big);
        let found = discover(root.path());
        assert!(found.problems[0].to_string().contains("larger than"));
    }
}
