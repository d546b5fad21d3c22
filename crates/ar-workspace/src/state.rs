//! What this run has read: the read-before-write and stale-file checks on mutations.
//!
//! Every read records the file's version (device, inode, size, modification and change
//! times) and the SHA-256 of its whole content, with the line ranges seen. A mutation of an
//! existing file (an edit, a patch, a deletion) needs a recorded read whose version and
//! content still match the file now; replacing a whole file with `write_file` needs every
//! line of it to have been seen. A successful
//! mutation records the new content as fully read, so a run can edit a file again without
//! reading it back. The state lives in the host object, one per run.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::error::{ToolError, ToolResult};
use crate::fs::display;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Version {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Version {
    fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

#[derive(Debug, Clone)]
struct Observation {
    version: Version,
    digest: [u8; 32],
    total_lines: usize,
    /// Merged 1-based inclusive line ranges seen of this content.
    seen: Vec<(usize, usize)>,
    via: &'static str,
}

impl Observation {
    fn complete(&self) -> bool {
        self.total_lines == 0
            || matches!(self.seen.as_slice(), [(1, end)] if *end >= self.total_lines)
    }
}

/// What a mutation requires of the file's earlier reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Some of it was read (targeted edits: `edit_file`, `apply_patch` updates and deletions).
    Read,
    /// All of it was read (full replacement with `write_file`).
    Complete,
}

/// The reads of one run.
#[derive(Debug, Default)]
pub(crate) struct ReadState {
    files: Mutex<HashMap<String, Observation>>,
}

/// The key of a path: the relative path with empty and `.` components dropped.
pub(crate) fn key(raw: &str) -> String {
    raw.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect::<Vec<_>>()
        .join("/")
}

pub(crate) fn digest(content: &[u8]) -> [u8; 32] {
    Sha256::digest(content).into()
}

impl ReadState {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Observation>> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that lines `start..=end` of this content were read.
    pub fn record_read(
        &self,
        raw: &str,
        meta: &std::fs::Metadata,
        content: &[u8],
        total_lines: usize,
        range: (usize, usize),
        via: &'static str,
    ) {
        let version = Version::of(meta);
        let digest = digest(content);
        let mut files = self.lock();
        let entry = files.entry(key(raw));
        let observation = entry.or_insert_with(|| Observation {
            version: version.clone(),
            digest,
            total_lines,
            seen: Vec::new(),
            via,
        });
        if observation.version != version || observation.digest != digest {
            *observation = Observation {
                version,
                digest,
                total_lines,
                seen: Vec::new(),
                via,
            };
        }
        observation.via = via;
        if range.1 >= range.0 {
            observation.seen = merge(&observation.seen, range);
        }
    }

    /// Records a file this run just wrote as fully known.
    pub fn record_write(
        &self,
        raw: &str,
        meta: &std::fs::Metadata,
        content: &[u8],
        via: &'static str,
    ) {
        let total_lines = count_lines(content);
        let observation = Observation {
            version: Version::of(meta),
            digest: digest(content),
            total_lines,
            seen: vec![(1, total_lines.max(1))],
            via,
        };
        self.lock().insert(key(raw), observation);
    }

    /// Forgets a file this run deleted or moved away.
    pub fn forget(&self, raw: &str) {
        self.lock().remove(&key(raw));
    }

    /// Refuses a mutation of an existing file that was not read as `need` says, or that
    /// changed since (`meta` and `content` are the file as it is now).
    pub fn check(
        &self,
        raw: &str,
        meta: &std::fs::Metadata,
        content: &[u8],
        need: Need,
    ) -> ToolResult<()> {
        let files = self.lock();
        let Some(observation) = files.get(&key(raw)) else {
            return Err(ToolError::new(format!(
                "read {} before changing it (use read_file); existing files are only changed after this run has read them",
                display(raw)
            )));
        };
        if observation.version != Version::of(meta) || observation.digest != digest(content) {
            return Err(ToolError::new(format!(
                "refusing to change {} because it changed since this run last read it (with {}); read it again and retry",
                display(raw),
                observation.via
            )));
        }
        if need == Need::Complete && !observation.complete() {
            return Err(ToolError::new(format!(
                "only part of {} has been read; read the rest (continue from the next offset_line) before replacing or deleting it, or use edit_file/apply_patch for a targeted change",
                display(raw)
            )));
        }
        Ok(())
    }
}

fn merge(seen: &[(usize, usize)], range: (usize, usize)) -> Vec<(usize, usize)> {
    let mut all: Vec<(usize, usize)> = seen.to_vec();
    all.push(range);
    all.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(all.len());
    for (start, end) in all {
        match out.last_mut() {
            Some(last) if start <= last.1 + 1 => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

/// Lines in `content`: a final line without a newline counts, an empty file has none.
pub(crate) fn count_lines(content: &[u8]) -> usize {
    let newlines = content.iter().filter(|b| **b == b'\n').count();
    if content.is_empty() || content.ends_with(b"\n") {
        newlines
    } else {
        newlines + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_into_complete_coverage() {
        let merged = merge(&[(1, 10), (30, 40)], (11, 29));
        assert_eq!(merged, vec![(1, 40)]);
        assert_eq!(merge(&[(5, 9)], (1, 3)), vec![(1, 3), (5, 9)]);
    }

    #[test]
    fn line_counts() {
        assert_eq!(count_lines(b""), 0);
        assert_eq!(count_lines(b"a"), 1);
        assert_eq!(count_lines(b"a\n"), 1);
        assert_eq!(count_lines(b"a\nb"), 2);
    }

    #[test]
    fn keys_ignore_dots_and_doubled_slashes() {
        assert_eq!(key("./a//b/"), "a/b");
    }
}
