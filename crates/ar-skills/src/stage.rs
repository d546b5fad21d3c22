//! Staging: the skills a run's skill tools offer, written as files the run can read —
//! `{workspace root}/.agent-runtime/skills/<key>/` when the run has a writable workspace, else
//! a per-run directory under the system's temporary directory, removed when the run ends.
//! Each skill directory holds its `SKILL.md` and, for a packaged skill, the package's files.
//!
//! The workspace belongs to the agent and the repository's authors, so the staging path is
//! walked one component at a time from a directory descriptor with `O_NOFOLLOW`: a
//! `.agent-runtime` that is a symlink (to `/etc`, say) is refused, not followed. Files are
//! created with `O_EXCL | O_NOFOLLOW` after the old staging tree is removed the same way.

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use crate::definition::SkillDefinition;

/// The staging directory beneath a workspace root.
pub const WORKSPACE_STAGE: [&str; 2] = [".agent-runtime", "skills"];
/// The directory under the system's temporary directory holding per-run staging.
pub const TEMP_STAGE: &str = "agent-runtime-skills";

/// Where a run's skills were staged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    /// The directory holding one directory per skill.
    pub root: PathBuf,
    pub kind: StageKind,
    pub skills: Vec<StagedSkill>,
}

/// Whether staging lives in the run's workspace or in a temporary directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageKind {
    Workspace,
    Temporary,
}

impl StageKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StageKind::Workspace => "workspace",
            StageKind::Temporary => "temporary",
        }
    }
}

/// One staged skill: its key (also its directory's name) and its files, relative paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedSkill {
    pub key: String,
    pub files: Vec<String>,
}

/// Why staging failed.
#[derive(Debug, thiserror::Error)]
#[error("skills could not be staged at {path}: {reason}")]
pub struct StageError {
    pub path: String,
    pub reason: String,
}

fn failure(path: &Path, what: &str, errno: Errno) -> StageError {
    StageError {
        path: path.display().to_string(),
        reason: format!("{what}: {errno}"),
    }
}

/// The per-run temporary staging directory's name (run ids are ULIDs; anything else is
/// reduced to safe characters so the name stays one component).
pub fn temp_name(run_id: &str) -> String {
    let name: String = run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(128)
        .collect();
    if name.is_empty() {
        "run".to_string()
    } else {
        name
    }
}

/// Stages `skills` beneath `base` at `rel` (each component created if missing, none
/// followed if it is a link), replacing what an earlier turn staged there.
pub fn stage(
    skills: &[&SkillDefinition],
    base: &Path,
    rel: &[&str],
    kind: StageKind,
) -> Result<Staged, StageError> {
    let mut root = base.to_path_buf();
    let mut dir = rustix::fs::open(
        base,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| failure(base, "open", e))?;
    for part in rel {
        root.push(part);
        dir = ensure_dir(&dir, part).map_err(|e| failure(&root, "create", e))?;
    }
    if kind == StageKind::Workspace {
        exclude_from_git(base)
            .map_err(|e| failure(&base.join(".git/info/exclude"), "update", e))?;
    }
    clear_dir(&dir).map_err(|e| failure(&root, "clear", e))?;
    let mut staged = Vec::with_capacity(skills.len());
    for skill in skills {
        let skill_dir = root.join(&skill.key);
        let fd = ensure_dir(&dir, &skill.key).map_err(|e| failure(&skill_dir, "create", e))?;
        let files = write_skill(&fd, skill)
            .map_err(|(file, e)| failure(&skill_dir.join(file), "write", e))?;
        staged.push(StagedSkill {
            key: skill.key.clone(),
            files,
        });
    }
    Ok(Staged {
        root,
        kind,
        skills: staged,
    })
}

/// The line that keeps staging out of a repository's commits.
const GIT_EXCLUDE: &str = "/.agent-runtime/";

/// Adds [`GIT_EXCLUDE`] to `{root}/.git/info/exclude` when `root` is a git work tree, so a
/// commit the run makes (or a push, a pull request) never carries the staged skills. A root
/// without a `.git` directory is left alone.
fn exclude_from_git(root: &Path) -> Result<(), Errno> {
    let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let root = rustix::fs::open(root, flags, Mode::empty())?;
    let git = match rustix::fs::openat(&root, ".git", flags, Mode::empty()) {
        Ok(git) => git,
        Err(Errno::NOENT) | Err(Errno::NOTDIR) | Err(Errno::LOOP) => return Ok(()),
        Err(other) => return Err(other),
    };
    let info = ensure_dir(&git, "info")?;
    let file_flags =
        OFlags::RDWR | OFlags::CREATE | OFlags::APPEND | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&info, "exclude", file_flags, Mode::from_raw_mode(0o644))?;
    let mut file = std::fs::File::from(fd);
    let mut text = String::new();
    let io = |e: std::io::Error| Errno::from_io_error(&e).unwrap_or(Errno::IO);
    std::io::Read::read_to_string(&mut file, &mut text).map_err(io)?;
    if text.lines().any(|line| line.trim() == GIT_EXCLUDE) {
        return Ok(());
    }
    let separator = if text.is_empty() || text.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    writeln!(file, "{separator}{GIT_EXCLUDE}").map_err(io)
}

/// Writes a skill's files: the package's, or a `SKILL.md` rendered from the definition.
fn write_skill(dir: &OwnedFd, skill: &SkillDefinition) -> Result<Vec<String>, (String, Errno)> {
    if skill.files.is_empty() {
        let text = render_skill_md(skill);
        write_file(dir, &["SKILL.md"], text.as_bytes()).map_err(|e| ("SKILL.md".to_string(), e))?;
        return Ok(vec!["SKILL.md".to_string()]);
    }
    for file in skill.files.iter() {
        let parts: Vec<&str> = file.path.split('/').collect();
        write_file(dir, &parts, &file.content).map_err(|e| (file.path.clone(), e))?;
    }
    Ok(skill.files.iter().map(|f| f.path.clone()).collect())
}

/// A `SKILL.md` for a skill that has no package (built-in, provider text, repository).
fn render_skill_md(skill: &SkillDefinition) -> String {
    let mut front = serde_yaml::Mapping::new();
    for (field, value) in [
        ("name", &skill.key),
        ("title", &skill.title),
        ("description", &skill.description),
    ] {
        front.insert(field.into(), value.as_str().into());
    }
    let yaml = serde_yaml::to_string(&front).unwrap_or_default();
    format!("---\n{yaml}---\n\n{}\n", skill.instructions)
}

/// Creates `parts` (directories, then the file) beneath `dir`, the file new.
fn write_file(dir: &OwnedFd, parts: &[&str], content: &[u8]) -> Result<(), Errno> {
    let Some((name, parents)) = parts.split_last() else {
        return Err(Errno::INVAL);
    };
    let mut current = ensure_dir(dir, ".")?;
    for part in parents {
        current = ensure_dir(&current, part)?;
    }
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&current, *name, flags, Mode::from_raw_mode(0o644))?;
    std::fs::File::from(fd)
        .write_all(content)
        .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))
}

/// Opens directory `name` beneath `dir`, creating it if missing; a link is refused.
fn ensure_dir(dir: &impl AsFd, name: &str) -> Result<OwnedFd, Errno> {
    match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o755)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(other) => return Err(other),
    }
    let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(dir, name, flags, Mode::empty())
}

/// Removes everything inside `dir`, following no link.
fn clear_dir(dir: &OwnedFd) -> Result<(), Errno> {
    let mut names = Vec::new();
    let mut entries = rustix::fs::Dir::read_from(dir)?;
    while let Some(entry) = entries.read() {
        let name = entry?.file_name().to_owned();
        if name.as_bytes() != b"." && name.as_bytes() != b".." {
            names.push(name);
        }
    }
    for name in names {
        remove_at(dir, &name)?;
    }
    Ok(())
}

/// Removes `name` beneath `dir`: a file or link is unlinked, a directory emptied first.
fn remove_at(dir: &OwnedFd, name: &std::ffi::CStr) -> Result<(), Errno> {
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => return Ok(()),
        Err(Errno::ISDIR) | Err(Errno::PERM) => {}
        Err(other) => return Err(other),
    }
    let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let inner = rustix::fs::openat(dir, name, flags, Mode::empty())?;
    clear_dir(&inner)?;
    rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)
}

/// Removes a run's temporary staging directory (the run ended). Missing is fine.
pub fn remove_temporary(run_id: &str) -> Result<(), StageError> {
    let base = std::env::temp_dir().join(TEMP_STAGE);
    let dir = match rustix::fs::open(
        &base,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(dir) => dir,
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(failure(&base, "open", e)),
    };
    let name = std::ffi::CString::new(temp_name(run_id))
        .map_err(|_| failure(&base, "name", Errno::INVAL))?;
    remove_at(&dir, &name).map_err(|e| failure(&base.join(temp_name(run_id)), "remove", e))
}

/// Reads `path` (relative) of a staged skill, resolved by the kernel beneath the skill's
/// directory (`openat2` with `RESOLVE_BENEATH`): no `..` out, no absolute path, no link out.
/// Only a regular file with one link, at most `limit` bytes.
pub fn read_staged(skill_dir: &Path, path: &str, limit: u64) -> Result<Vec<u8>, String> {
    if path.is_empty() || path.starts_with('/') || path.contains('\0') || path.len() > 1024 {
        return Err(format!("{path:?} is not a relative path inside the skill"));
    }
    let dir = rustix::fs::open(
        skill_dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("the skill's staged files are not there: {e}"))?;
    let resolve = rustix::fs::ResolveFlags::BENEATH | rustix::fs::ResolveFlags::NO_MAGICLINKS;
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    let fd =
        rustix::fs::openat2(&dir, path, flags, Mode::empty(), resolve).map_err(|e| match e {
            Errno::XDEV | Errno::LOOP => format!("{path:?} leads outside the skill"),
            Errno::NOENT => format!("the skill has no file {path:?}"),
            other => format!("{path:?} cannot be opened: {other}"),
        })?;
    let file = std::fs::File::from(fd);
    let meta = file.metadata().map_err(|e| format!("{path:?}: {e}"))?;
    use std::os::unix::fs::MetadataExt;
    if !meta.is_file() || meta.nlink() != 1 {
        return Err(format!("{path:?} is not a regular file of the skill"));
    }
    if meta.len() > limit {
        return Err(format!("{path:?} is larger than {limit} bytes"));
    }
    let mut content = Vec::new();
    use std::io::Read;
    file.take(limit)
        .read_to_end(&mut content)
        .map_err(|e| format!("{path:?}: {e}"))?;
    Ok(content)
}

#[cfg(test)]
mod tests;
