//! `fetch_url`'s `output_path`: a file written beneath a run's workspace root, resolved by the
//! kernel (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, as `ar-workspace` does), so
//! `..`, absolute paths and symlinks cannot lead outside. Missing parent directories are made
//! one component at a time beneath the root; the file is written under a temporary name and
//! renamed over the target, which replaces the name (a symlink there is replaced, never
//! followed).

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Component, Path};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// Why an output file was not written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("output_path must be a relative path of normal components inside the workspace")]
    BadPath,
    #[error("the workspace root {root} cannot be opened: {source}")]
    Root {
        root: String,
        #[source]
        source: std::io::Error,
    },
    #[error("output_path {path} leads outside the workspace")]
    Escapes { path: String },
    #[error("output_path {path} cannot be written: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Writes `bytes` to `rel` beneath `root` (replacing a file of that name) and returns the
/// number of bytes written.
pub fn write_beneath(root: &Path, rel: &str, bytes: &[u8]) -> Result<usize, OutputError> {
    let (parents, name) = split(rel)?;
    let root_fd = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| OutputError::Root {
        root: root.display().to_string(),
        source: e.into(),
    })?;
    let io = |source: Errno| match source {
        Errno::XDEV | Errno::LOOP => OutputError::Escapes { path: rel.into() },
        source => OutputError::Io {
            path: rel.into(),
            source: source.into(),
        },
    };
    let mut dir =
        rustix::fs::openat2(&root_fd, ".", dir_flags(), Mode::empty(), RESOLVE).map_err(io)?;
    for part in parents {
        dir = child_dir(&dir, part).map_err(io)?;
    }
    let temp = format!(".{name}.fetch-{:016x}", rand::random::<u64>());
    let fd = rustix::fs::openat2(
        &dir,
        temp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::from_raw_mode(0o644),
        RESOLVE,
    )
    .map_err(io)?;
    let mut file = std::fs::File::from(fd);
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    let renamed = written
        .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))
        .and_then(|()| rustix::fs::renameat(&dir, temp.as_str(), &dir, name));
    if let Err(err) = renamed {
        let _ = rustix::fs::unlinkat(&dir, temp.as_str(), rustix::fs::AtFlags::empty());
        return Err(io(err));
    }
    Ok(bytes.len())
}

fn dir_flags() -> OFlags {
    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC
}

/// The directory `part` under `dir`, made if missing (a symlink to a directory beneath the root
/// is followed; the kernel refuses one leading out).
fn child_dir(dir: &OwnedFd, part: &str) -> Result<OwnedFd, Errno> {
    match rustix::fs::openat2(dir, part, dir_flags(), Mode::empty(), RESOLVE) {
        Err(Errno::NOENT) => {
            match rustix::fs::mkdirat(dir, part, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(err) => return Err(err),
            }
            rustix::fs::openat2(dir, part, dir_flags(), Mode::empty(), RESOLVE)
        }
        other => other,
    }
}

/// The parent components and the file name of a relative path of normal components.
fn split(rel: &str) -> Result<(Vec<&str>, &str), OutputError> {
    if rel.is_empty() || rel.contains('\0') || rel.len() > 4096 || rel.ends_with('/') {
        return Err(OutputError::BadPath);
    }
    let mut parts = Vec::new();
    for component in Path::new(rel).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str().ok_or(OutputError::BadPath)?),
            Component::CurDir => {}
            _ => return Err(OutputError::BadPath),
        }
    }
    let name = parts.pop().ok_or(OutputError::BadPath)?;
    Ok((parts, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_beneath_the_root_and_makes_parents() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            write_beneath(dir.path(), "a/b/page.html", b"hi").unwrap(),
            2
        );
        assert_eq!(
            std::fs::read(dir.path().join("a/b/page.html")).unwrap(),
            b"hi"
        );
        write_beneath(dir.path(), "./a/b/page.html", b"again").unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("a/b/page.html")).unwrap(),
            b"again"
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("a/b")).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left");
    }

    #[test]
    fn escapes_are_refused_and_nothing_lands_outside() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("passwd")).unwrap();
        for bad in ["../x", "/etc/x", "a/../../x", "", "a/", "a\0b"] {
            assert!(
                matches!(
                    write_beneath(dir.path(), bad, b"x"),
                    Err(OutputError::BadPath)
                ),
                "{bad:?}"
            );
        }
        let escaped = write_beneath(dir.path(), "out/x", b"x").unwrap_err();
        assert!(matches!(escaped, OutputError::Escapes { .. }), "{escaped}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        // A symlink at the target name is replaced, never written through.
        write_beneath(dir.path(), "passwd", b"mine").unwrap();
        assert!(!dir.path().join("passwd").is_symlink());
        assert_eq!(std::fs::read(dir.path().join("passwd")).unwrap(), b"mine");
    }
}
