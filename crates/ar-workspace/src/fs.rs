//! The confined file system: every path a tool names is resolved by the kernel beneath the
//! workspace root's directory descriptor, at the moment it is opened.
//!
//! Resolution is `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS` on the root's
//! descriptor: `..` that would climb out, absolute symlinks, relative symlinks that lead
//! outside and `/proc` magic links all fail in the kernel with `EXDEV`/`ELOOP`, whatever the
//! directory tree looks like at that instant. Nothing is checked on the string and then
//! opened by name, so a symlink swapped in after a check gains nothing. Without `openat2`
//! (Linux older than 5.6) the tools refuse to work rather than fall back to string checks.
//!
//! Rules beyond resolution:
//! - only regular files are read or written (no FIFOs, devices or sockets);
//! - a regular file with more than one hard link is refused for reading and writing: its
//!   other names may live outside the root (a link into a package store, or to a file the
//!   agent should never see), and a link count does not say where they are;
//! - a write never goes through an existing inode: the new content is written to a fresh
//!   file in the same directory and renamed over the old name, so no other link or open
//!   descriptor sees it; the final name must not be a symlink;
//! - walks (search) open each directory by one name relative to its parent with
//!   `O_NOFOLLOW` and never follow symlinks.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, ResolveFlags};
use rustix::io::Errno;

use crate::error::ToolError;

/// The longest path accepted, in bytes (Linux's `PATH_MAX` less the NUL).
pub const MAX_PATH_BYTES: usize = 4095;
/// The longest path component accepted, in bytes (`NAME_MAX`).
pub const MAX_NAME_BYTES: usize = 255;
/// The largest file the tools read whole (line counts, fingerprints, edits).
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// The workspace root: an open directory descriptor and the real path it had when opened.
#[derive(Debug)]
pub(crate) struct Root {
    fd: OwnedFd,
    real: PathBuf,
}

/// A regular file opened beneath the root.
pub(crate) struct OpenFile {
    pub file: File,
    pub meta: std::fs::Metadata,
}

/// What [`Root::open_any`] found.
pub(crate) enum Opened {
    Dir(OwnedFd),
    File,
}

/// A directory entry seen while listing or walking.
pub(crate) struct Entry {
    pub name: String,
    pub kind: EntryKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EntryKind {
    File,
    Dir,
    Symlink,
    Other,
}

impl Root {
    /// Opens `path` (trusted host input: the lease's root) as the root.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let real = std::fs::canonicalize(path)?;
        let fd = rustix::fs::open(
            &real,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        // Probe openat2 once so a kernel without it fails at open, not on the first call.
        rustix::fs::openat2(
            &fd,
            ".",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            RESOLVE,
        )?;
        Ok(Self { fd, real })
    }

    /// The root's real path when it was opened.
    pub fn real_path(&self) -> &Path {
        &self.real
    }

    /// The root's descriptor (for Landlock rules).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// `openat2` beneath the root, retried on the `EAGAIN` a concurrent rename can cause.
    fn open_beneath(&self, rel: &str, flags: OFlags, mode: u32) -> Result<OwnedFd, ToolError> {
        self.open_raw(rel, flags, mode)
            .map_err(|e| path_error(rel, e))
    }

    fn open_raw(&self, rel: &str, flags: OFlags, mode: u32) -> Result<OwnedFd, Errno> {
        let path = if rel.is_empty() { "." } else { rel };
        // openat2 refuses O_PATH with any flag but O_DIRECTORY, O_NOFOLLOW and O_CLOEXEC.
        let flags = if flags.contains(OFlags::PATH) {
            flags | OFlags::CLOEXEC
        } else {
            flags | OFlags::CLOEXEC | OFlags::NOCTTY
        };
        let mut last = Errno::AGAIN;
        for _ in 0..8 {
            match rustix::fs::openat2(&self.fd, path, flags, Mode::from_raw_mode(mode), RESOLVE) {
                Err(Errno::AGAIN) => last = Errno::AGAIN,
                done => return done,
            }
        }
        Err(last)
    }

    /// Opens a regular file for reading (see the module rules).
    pub fn open_read(&self, raw: &str) -> Result<OpenFile, ToolError> {
        let rel = check_path(raw)?;
        let fd = self.open_beneath(rel, OFlags::RDONLY | OFlags::NONBLOCK, 0)?;
        let file = File::from(fd);
        let meta = file.metadata().map_err(|e| ToolError::io(raw, e))?;
        regular_single_link(raw, &meta)?;
        Ok(OpenFile { file, meta })
    }

    /// Reads a whole regular file, refusing one over [`MAX_FILE_BYTES`].
    pub fn read_all(&self, raw: &str) -> Result<(Vec<u8>, std::fs::Metadata), ToolError> {
        let OpenFile { file, meta } = self.open_read(raw)?;
        read_bounded(raw, file, meta)
    }

    /// Opens whatever `raw` names (`""` is the root): a directory, or a regular file under
    /// the same rules as [`Root::open_read`].
    pub fn open_any(&self, raw: &str) -> Result<Opened, ToolError> {
        let rel = check_dir_path(raw)?;
        let fd = self.open_beneath(rel, OFlags::RDONLY | OFlags::NONBLOCK, 0)?;
        let file = File::from(fd);
        let meta = file.metadata().map_err(|e| ToolError::io(raw, e))?;
        if meta.is_dir() {
            return Ok(Opened::Dir(OwnedFd::from(file)));
        }
        regular_single_link(raw, &meta)?;
        Ok(Opened::File)
    }

    /// Opens a directory beneath the root for listing (`""` is the root).
    pub fn open_dir(&self, raw: &str) -> Result<OwnedFd, ToolError> {
        let rel = check_dir_path(raw)?;
        self.open_beneath(rel, OFlags::RDONLY | OFlags::DIRECTORY, 0)
    }

    /// The real path of a directory beneath the root (for a command's working directory).
    pub fn dir_real_path(&self, raw: &str) -> Result<PathBuf, ToolError> {
        let fd = self.open_dir(raw)?;
        // The kernel's name for the descriptor: what the check saw, not the string.
        let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
        match std::fs::read_link(&link) {
            Ok(path) if path.starts_with(&self.real) => Ok(path),
            Ok(_) => Err(ToolError::new(format!(
                "working directory {} is not inside the workspace root",
                display(raw)
            ))),
            Err(_) => Ok(self.real.join(check_dir_path(raw)?)),
        }
    }

    /// The parent directory of a file path and the file's own name, the parent created
    /// (one component at a time, each resolved beneath the root) when `create`.
    fn parent_of<'a>(&self, raw: &'a str, create: bool) -> Result<(OwnedFd, &'a str), ToolError> {
        let (parent, name) = split_name(raw)?;
        if create {
            self.create_dirs(parent)?;
        }
        let fd = self.open_beneath(parent, OFlags::PATH | OFlags::DIRECTORY, 0)?;
        Ok((fd, name))
    }

    fn create_dirs(&self, parent: &str) -> Result<(), ToolError> {
        let mut base = String::new();
        for name in parent.split('/').filter(|n| !n.is_empty() && *n != ".") {
            if name != ".." {
                let dir = self.open_beneath(&base, OFlags::PATH | OFlags::DIRECTORY, 0)?;
                match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o755)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(path_error(&format!("{base}/{name}"), e)),
                }
            }
            if !base.is_empty() {
                base.push('/');
            }
            base.push_str(name);
        }
        Ok(())
    }

    /// What is at `raw` now, without following a final symlink; `None` when nothing is
    /// (its directory missing included).
    pub fn lstat_kind(&self, raw: &str) -> Result<Option<EntryKind>, ToolError> {
        let (parent, name) = split_name(raw)?;
        let dir = match self.open_raw(parent, OFlags::PATH | OFlags::DIRECTORY, 0) {
            Ok(dir) => dir,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(path_error(raw, e)),
        };
        match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(kind_of(FileType::from_raw_mode(st.st_mode)))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(path_error(raw, e)),
        }
    }

    /// Replaces (or creates) the file at `raw` with `content`: written to a fresh file beside
    /// it and renamed over the name. Keeps an existing file's permission bits. Returns the
    /// new file's metadata.
    pub fn write_replace(&self, raw: &str, content: &[u8]) -> Result<std::fs::Metadata, ToolError> {
        let (dir, name) = self.parent_of(raw, true)?;
        let mode = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => existing_mode(raw, &st)?,
            Err(Errno::NOENT) => 0o644,
            Err(e) => return Err(path_error(raw, e)),
        };
        let temp = temp_name(name);
        let fd = rustix::fs::openat2(
            &dir,
            temp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
            RESOLVE,
        )
        .map_err(|e| path_error(raw, e))?;
        let mut file = File::from(fd);
        let written = file.write_all(content).and_then(|()| {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode)).map_err(Into::into)
        });
        // The version recorded is the one after the rename (which changes the inode's ctime).
        let renamed = written.and_then(|()| {
            rustix::fs::renameat(&dir, temp.as_str(), &dir, name)?;
            file.metadata()
        });
        renamed.map_err(|e| {
            let _ = rustix::fs::unlinkat(&dir, temp.as_str(), AtFlags::empty());
            ToolError::io(raw, e)
        })
    }

    /// Removes the regular file at `raw` (never a directory or what a symlink points to).
    pub fn remove_file(&self, raw: &str) -> Result<(), ToolError> {
        let (dir, name) = self.parent_of(raw, false)?;
        let st = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| path_error(raw, e))?;
        existing_mode(raw, &st)?;
        rustix::fs::unlinkat(&dir, name, AtFlags::empty()).map_err(|e| path_error(raw, e))
    }

    /// Renames `from` to `to`, refusing to replace anything at `to`.
    pub fn rename_new(&self, from: &str, to: &str) -> Result<(), ToolError> {
        let (from_dir, from_name) = self.parent_of(from, false)?;
        let (to_dir, to_name) = self.parent_of(to, true)?;
        rustix::fs::renameat_with(
            &from_dir,
            from_name,
            &to_dir,
            to_name,
            RenameFlags::NOREPLACE,
        )
        .map_err(|e| path_error(to, e))
    }
}

/// A file path's directory and its own name (which must be a name, not `.` or `..`).
fn split_name(raw: &str) -> Result<(&str, &str), ToolError> {
    let rel = check_path(raw)?.trim_end_matches('/');
    let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    if name.is_empty() || name == "." || name == ".." {
        return Err(ToolError::new(format!(
            "path must name a file: {}",
            display(raw)
        )));
    }
    Ok((parent, name))
}

/// Reads a directory's entries (sorted by name; `.` and `..` left out).
pub(crate) fn list(dir: &OwnedFd) -> std::io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let bytes = entry.file_name().to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let name = String::from_utf8_lossy(bytes).into_owned();
        let mut kind = kind_of(entry.file_type());
        if entry.file_type() == FileType::Unknown {
            kind = rustix::fs::statat(dir, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                .map(|st| kind_of(FileType::from_raw_mode(st.st_mode)))
                .unwrap_or(EntryKind::Other);
        }
        out.push(Entry { name, kind });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Opens the subdirectory `name` of `dir` without following a symlink.
pub(crate) fn open_child_dir(dir: &OwnedFd, name: &str) -> std::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat2(
        dir,
        name,
        flags,
        Mode::empty(),
        RESOLVE,
    )?)
}

/// Opens the regular file `name` of `dir` without following a symlink, refusing hard-linked
/// files like every other read.
pub(crate) fn open_child_file(dir: &OwnedFd, name: &str) -> std::io::Result<Option<File>> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = File::from(rustix::fs::openat2(
        dir,
        name,
        flags,
        Mode::empty(),
        RESOLVE,
    )?);
    let meta = file.metadata()?;
    Ok((meta.is_file() && meta.nlink() <= 1).then_some(file))
}

pub(crate) fn read_bounded(
    raw: &str,
    file: File,
    meta: std::fs::Metadata,
) -> Result<(Vec<u8>, std::fs::Metadata), ToolError> {
    if meta.len() > MAX_FILE_BYTES {
        return Err(ToolError::new(format!(
            "{} is {} bytes; files over {} bytes are not read whole (use ripgrep to find what you need)",
            display(raw),
            meta.len(),
            MAX_FILE_BYTES
        )));
    }
    let mut data = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut data)
        .map_err(|e| ToolError::io(raw, e))?;
    if data.len() as u64 > MAX_FILE_BYTES {
        return Err(ToolError::new(format!(
            "{} grew past {} bytes while it was read",
            display(raw),
            MAX_FILE_BYTES
        )));
    }
    Ok((data, meta))
}

fn regular_single_link(raw: &str, meta: &std::fs::Metadata) -> Result<(), ToolError> {
    if meta.is_dir() {
        return Err(ToolError::new(format!(
            "{} is a directory, not a file",
            display(raw)
        )));
    }
    if !meta.is_file() {
        return Err(ToolError::new(format!(
            "{} is not a regular file",
            display(raw)
        )));
    }
    if meta.nlink() > 1 {
        return Err(hard_link_error(raw, meta.nlink()));
    }
    Ok(())
}

// `st_nlink` is 64 bits here and 32 on some targets.
#[allow(clippy::useless_conversion)]
fn existing_mode(raw: &str, st: &rustix::fs::Stat) -> Result<u32, ToolError> {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile if st.st_nlink > 1 => Err(hard_link_error(raw, st.st_nlink.into())),
        FileType::RegularFile => Ok(st.st_mode & 0o7777),
        FileType::Directory => Err(ToolError::new(format!(
            "{} is a directory, not a file",
            display(raw)
        ))),
        FileType::Symlink => Err(ToolError::new(format!(
            "{} is a symbolic link; changes do not follow or replace links (change the file it points to by its own path)",
            display(raw)
        ))),
        _ => Err(ToolError::new(format!(
            "{} is not a regular file",
            display(raw)
        ))),
    }
}

fn hard_link_error(raw: &str, links: u64) -> ToolError {
    ToolError::new(format!(
        "{} has {links} hard links; files with more than one link are refused because their other names may be outside the workspace",
        display(raw)
    ))
}

fn kind_of(file_type: FileType) -> EntryKind {
    match file_type {
        FileType::RegularFile => EntryKind::File,
        FileType::Directory => EntryKind::Dir,
        FileType::Symlink => EntryKind::Symlink,
        _ => EntryKind::Other,
    }
}

fn temp_name(name: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // Short enough that a NAME_MAX-long name still leaves room for the suffix.
    let stem: String = name.chars().take(200).collect();
    format!(".{stem}.ar-tmp-{}-{n}", std::process::id())
}

/// Checks a tool's path argument before the kernel sees it: NUL bytes, lengths and absolute
/// paths are refused here with clear messages (containment itself is the kernel's job).
pub(crate) fn check_path(raw: &str) -> Result<&str, ToolError> {
    let rel = check_dir_path(raw)?;
    if rel.is_empty() || rel == "." {
        return Err(ToolError::new(
            "path is required (a file path relative to the workspace root)",
        ));
    }
    Ok(rel)
}

/// Like [`check_path`], but `""` and `"."` name the root.
pub(crate) fn check_dir_path(raw: &str) -> Result<&str, ToolError> {
    if raw.contains('\0') {
        return Err(ToolError::new("path contains a NUL byte"));
    }
    if raw.len() > MAX_PATH_BYTES {
        return Err(ToolError::new(format!(
            "path is too long ({} bytes; the limit is {MAX_PATH_BYTES})",
            raw.len()
        )));
    }
    if let Some(long) = raw.split('/').find(|c| c.len() > MAX_NAME_BYTES) {
        return Err(ToolError::new(format!(
            "path component is too long ({} bytes; the limit is {MAX_NAME_BYTES})",
            long.len()
        )));
    }
    if raw.starts_with('/') {
        return Err(ToolError::new(format!(
            "absolute paths are not allowed: {} (give a path relative to the workspace root)",
            display(raw)
        )));
    }
    let rel = raw.trim();
    Ok(if rel == "." { "" } else { rel })
}

fn path_error(raw: &str, errno: Errno) -> ToolError {
    let shown = display(raw);
    let message = match errno {
        Errno::XDEV => format!("path escapes the workspace root: {shown}"),
        Errno::LOOP => format!(
            "path {shown} has too many symbolic links or passes through a /proc magic link"
        ),
        Errno::NOENT => format!("no such file or directory: {shown}"),
        Errno::NOTDIR => format!("a component of {shown} is not a directory"),
        Errno::ISDIR => format!("{shown} is a directory, not a file"),
        Errno::EXIST => format!("{shown} already exists"),
        Errno::ACCESS | Errno::PERM => format!("permission denied: {shown}"),
        Errno::NAMETOOLONG => format!("path is too long: {shown}"),
        Errno::NOSYS => "openat2 is not available on this kernel (Linux 5.6 or later is needed); the workspace tools do not run without it".to_string(),
        other => format!("{shown}: {}", std::io::Error::from(other)),
    };
    ToolError::new(message)
}

/// A path as shown in messages: quoted, control characters escaped, at most 200 characters.
pub(crate) fn display(raw: &str) -> String {
    let cut: String = raw.chars().take(200).collect();
    if cut.len() < raw.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}
