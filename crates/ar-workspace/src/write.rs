//! The file mutations `write_file` and `edit_file`, behind the read-before-write and
//! stale-file checks.

use ar_core::tool::ToolOutput;
use serde::Deserialize;
use similar::TextDiff;

use crate::error::{ToolError, ToolResult};
use crate::fs::{display, EntryKind, MAX_FILE_BYTES};
use crate::host::Inner;
use crate::read::looks_binary;
use crate::state::Need;

/// Characters of diff shown after a change.
const MAX_DIFF_CHARS: usize = 4000;

#[derive(Deserialize)]
pub(crate) struct WriteInput {
    #[serde(default)]
    path: String,
    content: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct EditInput {
    #[serde(default)]
    path: String,
    #[serde(default)]
    old_string: String,
    new_string: Option<String>,
}

/// A unified diff of a change, cut to a readable size.
pub(crate) fn diff(path: &str, old: &str, new: &str) -> String {
    let rendered = TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(2)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    match rendered.char_indices().nth(MAX_DIFF_CHARS) {
        Some((cut, _)) => format!(
            "{}\n[diff cut at {MAX_DIFF_CHARS} characters]",
            &rendered[..cut]
        ),
        None => rendered,
    }
}

/// Refuses what is at `raw` when it is not a regular file a mutation may replace.
pub(crate) fn replaceable(kind: Option<EntryKind>, raw: &str) -> ToolResult<bool> {
    match kind {
        None => Ok(false),
        Some(EntryKind::File) => Ok(true),
        Some(EntryKind::Dir) => Err(ToolError::new(format!(
            "{} is a directory, not a file",
            display(raw)
        ))),
        Some(EntryKind::Symlink) => Err(ToolError::new(format!(
            "{} is a symbolic link; changes do not follow or replace links (change the file it points to by its own path)",
            display(raw)
        ))),
        Some(EntryKind::Other) => Err(ToolError::new(format!(
            "{} is not a regular file",
            display(raw)
        ))),
    }
}

pub(crate) fn write_file(inner: &Inner, input: WriteInput) -> ToolResult<ToolOutput> {
    let Some(content) = input.content else {
        return Err(ToolError::new(
            "content is required (the file's full new content)",
        ));
    };
    if content.len() as u64 > MAX_FILE_BYTES {
        return Err(ToolError::new(format!(
            "content is {} bytes; at most {MAX_FILE_BYTES} bytes are written at once",
            content.len()
        )));
    }
    let path = input.path.as_str();
    let _guard = inner.mutation_guard();
    let exists = replaceable(inner.root.lstat_kind(path)?, path)?;
    let old = if exists {
        let (data, meta) = inner.root.read_all(path)?;
        inner.reads.check(path, &meta, &data, Need::Complete)?;
        Some(data)
    } else {
        None
    };
    let meta = inner.root.write_replace(path, content.as_bytes())?;
    inner
        .reads
        .record_write(path, &meta, content.as_bytes(), "write_file");
    let text = match old {
        None => format!("Created {} ({} bytes).", path, content.len()),
        Some(old) => {
            let old = String::from_utf8_lossy(&old);
            format!(
                "Wrote {} bytes to {}.\n{}",
                content.len(),
                path,
                diff(path, &old, &content)
            )
        }
    };
    Ok(ToolOutput::text(text))
}

pub(crate) fn edit_file(inner: &Inner, input: EditInput) -> ToolResult<ToolOutput> {
    let path = input.path.as_str();
    if input.old_string.is_empty() {
        return Err(ToolError::new(
            "old_string is required and must not be empty",
        ));
    }
    let Some(new_string) = input.new_string else {
        return Err(ToolError::new(
            "new_string is required (empty to delete old_string)",
        ));
    };
    let _guard = inner.mutation_guard();
    if !replaceable(inner.root.lstat_kind(path)?, path)? {
        return Err(ToolError::new(format!(
            "{} does not exist; create it with write_file",
            display(path)
        )));
    }
    let (data, meta) = inner.root.read_all(path)?;
    inner.reads.check(path, &meta, &data, Need::Read)?;
    if looks_binary(&data) {
        return Err(ToolError::new(format!(
            "{} appears to be binary; it is not edited",
            display(path)
        )));
    }
    let content = String::from_utf8(data).map_err(|_| {
        ToolError::new(format!(
            "{} is not UTF-8 text; it is not edited",
            display(path)
        ))
    })?;
    let (old, new) = match_line_endings(&content, &input.old_string, &new_string);
    let found = content.matches(old.as_str()).count();
    match found {
        0 => {
            return Err(ToolError::new(format!(
                "old_string was not found in {}; read the file again and copy the text exactly, whitespace included",
                display(path)
            )))
        }
        1 => {}
        n => {
            return Err(ToolError::new(format!(
                "old_string occurs {n} times in {}; include more surrounding lines so that it occurs once",
                display(path)
            )))
        }
    }
    if old == new {
        return Ok(ToolOutput::text(format!(
            "No change: new_string equals old_string in {path}."
        )));
    }
    let at = content.find(old.as_str()).unwrap_or(0);
    let line = content[..at].matches('\n').count() + 1;
    let updated = content.replacen(old.as_str(), &new, 1);
    let meta = inner.root.write_replace(path, updated.as_bytes())?;
    inner
        .reads
        .record_write(path, &meta, updated.as_bytes(), "edit_file");
    Ok(ToolOutput::text(format!(
        "Edited {path}: replaced 1 occurrence at line {line}.\n{}",
        diff(path, &content, &updated)
    )))
}

/// A file whose lines all end in CRLF is matched with LF text from the model, by turning
/// the model's line endings into CRLF (nothing else in the file is rewritten).
fn match_line_endings(content: &str, old: &str, new: &str) -> (String, String) {
    let crlf_only = content.contains("\r\n") && !content.replace("\r\n", "").contains('\n');
    if !crlf_only {
        return (old.to_string(), new.to_string());
    }
    let to_crlf = |s: &str| s.replace("\r\n", "\n").replace('\n', "\r\n");
    (to_crlf(old), to_crlf(new))
}
