//! The read tools: `read_file`, `read_files`, `read_file_range` and `list_directory`.

use ar_core::tool::ToolOutput;
use serde::Deserialize;
use serde_json::json;

use crate::error::{ToolError, ToolResult};
use crate::fs::{display, list, EntryKind};
use crate::host::{single_repository, Inner};
use crate::schema::{
    READ_FILES_DEFAULT_LINES, READ_FILES_MAX_FILES, READ_FILES_MAX_LINES, READ_FILES_TOTAL_LINES,
    READ_FILE_DEFAULT_LINES, READ_FILE_MAX_LINES,
};
use crate::state::count_lines;

/// Characters of numbered lines one read call returns at most (all its files together).
const READ_OUTPUT_BUDGET: usize = 64 * 1024;
/// Characters of one line shown; the rest is cut with a note.
const MAX_LINE_CHARS: usize = 2000;
/// Entries `list_directory` shows.
const MAX_LIST_ENTRIES: usize = 1000;

#[derive(Deserialize)]
pub(crate) struct ReadFileInput {
    #[serde(default)]
    path: String,
    #[serde(default, alias = "offset")]
    offset_line: Option<i64>,
    #[serde(default, alias = "limit")]
    limit_lines: Option<i64>,
    #[serde(default)]
    repository: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct ReadFilesInput {
    #[serde(default)]
    files: Vec<ReadFilesEntry>,
}

#[derive(Deserialize)]
struct ReadFilesEntry {
    #[serde(default)]
    path: String,
    #[serde(default)]
    start_line: Option<i64>,
    #[serde(default)]
    limit_lines: Option<i64>,
    #[serde(default)]
    repository: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct ReadRangeInput {
    #[serde(default)]
    path: String,
    start_line: Option<i64>,
    end_line: Option<i64>,
    #[serde(default)]
    repository: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct ListInput {
    #[serde(default)]
    path: String,
    #[serde(default)]
    repository: Option<String>,
}

/// Numbered lines of one file, as one read returned them.
pub(crate) struct Window {
    pub path: String,
    pub start: usize,
    pub end: usize,
    pub total: usize,
    pub text: String,
    pub budget_cut: bool,
}

impl Window {
    fn has_more(&self) -> bool {
        self.end < self.total
    }

    fn footer(&self) -> String {
        if self.has_more() {
            let why = if self.budget_cut {
                " (output limit reached)"
            } else {
                ""
            };
            format!(
                "[lines {}-{} of {}{why}; {} more: continue with offset_line={}]",
                self.start,
                self.end,
                self.total,
                self.total - self.end,
                self.end + 1
            )
        } else if self.total == 0 {
            "[empty file]".to_string()
        } else {
            format!(
                "[lines {}-{} of {}; end of file]",
                self.start, self.end, self.total
            )
        }
    }

    fn structured(&self) -> serde_json::Value {
        let mut value = json!({
            "path": self.path, "start_line": self.start, "end_line": self.end,
            "total_lines": self.total, "has_more": self.has_more(),
        });
        if self.has_more() {
            value["next_start_line"] = json!(self.end + 1);
            value["continuation_reason"] = json!(if self.budget_cut {
                "output_limit"
            } else {
                "line_limit"
            });
        }
        value
    }
}

/// A positive integer argument, or its default; zero and negatives are refused.
fn positive(name: &str, value: Option<i64>, default: usize) -> ToolResult<usize> {
    match value {
        None => Ok(default),
        Some(v) if v >= 1 => Ok(usize::try_from(v).unwrap_or(usize::MAX)),
        Some(v) => Err(ToolError::new(format!(
            "{name} must be at least 1 (got {v})"
        ))),
    }
}

/// Whether content is binary: a NUL byte in its first 8 KiB.
pub(crate) fn looks_binary(data: &[u8]) -> bool {
    data[..data.len().min(8192)].contains(&0)
}

/// Reads lines `start..start+limit` of `raw` within `budget` characters and records the
/// read for the stale-file checks.
pub(crate) fn read_window(
    inner: &Inner,
    raw: &str,
    start: usize,
    limit: usize,
    budget: usize,
    via: &'static str,
) -> ToolResult<Window> {
    let (data, meta) = inner.root.read_all(raw)?;
    if looks_binary(&data) {
        return Err(ToolError::new(format!(
            "{} appears to be a binary file; it is not shown",
            display(raw)
        )));
    }
    let total = count_lines(&data);
    if start > total.max(1) {
        return Err(ToolError::new(format!(
            "line {start} is past the end of {} ({total} lines)",
            display(raw)
        )));
    }
    let mut text = String::new();
    let mut end = start - 1;
    let mut budget_cut = false;
    for (n, line) in (start..).zip(data.split(|b| *b == b'\n').skip(start - 1).take(limit)) {
        if n > total {
            break;
        }
        let shown = numbered(n, line);
        if end >= start && text.len() + shown.len() > budget {
            budget_cut = true;
            break;
        }
        text.push_str(&shown);
        end = n;
    }
    inner
        .reads
        .record_read(raw, &meta, &data, total, (start, end), via);
    Ok(Window {
        path: raw.to_string(),
        start,
        end,
        total,
        text,
        budget_cut,
    })
}

fn numbered(n: usize, line: &[u8]) -> String {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = String::from_utf8_lossy(line);
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!(
            "{n:>6}\t{} …[line cut at {MAX_LINE_CHARS} characters]\n",
            &text[..cut]
        ),
        None => format!("{n:>6}\t{text}\n"),
    }
}

fn window_output(window: Window) -> ToolOutput {
    let mut output = ToolOutput::text(format!("{}{}", window.text, window.footer()));
    output.structured = Some(window.structured());
    output
}

pub(crate) fn read_file(inner: &Inner, input: ReadFileInput) -> ToolResult<ToolOutput> {
    single_repository(&input.repository)?;
    let start = positive("offset_line", input.offset_line, 1)?;
    let limit = positive("limit_lines", input.limit_lines, READ_FILE_DEFAULT_LINES)?;
    if limit > READ_FILE_MAX_LINES {
        return Err(ToolError::new(format!(
            "limit_lines is at most {READ_FILE_MAX_LINES} (got {limit}); read the rest in further calls"
        )));
    }
    let window = read_window(
        inner,
        &input.path,
        start,
        limit,
        READ_OUTPUT_BUDGET,
        "read_file",
    )?;
    Ok(window_output(window))
}

pub(crate) fn read_file_range(inner: &Inner, input: ReadRangeInput) -> ToolResult<ToolOutput> {
    single_repository(&input.repository)?;
    let (Some(start), Some(end)) = (input.start_line, input.end_line) else {
        return Err(ToolError::new("start_line and end_line are required"));
    };
    let start = positive("start_line", Some(start), 1)?;
    let end = positive("end_line", Some(end), 1)?;
    if end < start {
        return Err(ToolError::new(format!(
            "end_line ({end}) is before start_line ({start})"
        )));
    }
    let span = end - start + 1;
    if span > READ_FILE_MAX_LINES {
        return Err(ToolError::new(format!(
            "a range is at most {READ_FILE_MAX_LINES} lines (asked for {span})"
        )));
    }
    let window = read_window(
        inner,
        &input.path,
        start,
        span,
        READ_OUTPUT_BUDGET,
        "read_file_range",
    )?;
    Ok(window_output(window))
}

pub(crate) fn read_files(inner: &Inner, input: ReadFilesInput) -> ToolResult<ToolOutput> {
    let count = input.files.len();
    if count == 0 {
        return Err(ToolError::new("files is required: give 1 to 4 files"));
    }
    if count > READ_FILES_MAX_FILES {
        return Err(ToolError::new(format!(
            "too many files: at most {READ_FILES_MAX_FILES} per call (got {count})"
        )));
    }
    let mut asked = Vec::with_capacity(count);
    for file in &input.files {
        single_repository(&file.repository)?;
        let start = positive("start_line", file.start_line, 1)?;
        let limit = positive("limit_lines", file.limit_lines, READ_FILES_DEFAULT_LINES)?;
        if limit > READ_FILES_MAX_LINES {
            return Err(ToolError::new(format!(
                "limit_lines for {} is at most {READ_FILES_MAX_LINES} (got {limit})",
                display(&file.path)
            )));
        }
        asked.push((file.path.as_str(), start, limit));
    }
    let total: usize = asked.iter().map(|(_, _, limit)| limit).sum();
    if total > READ_FILES_TOTAL_LINES {
        return Err(ToolError::new(format!(
            "too many lines asked for in all: at most {READ_FILES_TOTAL_LINES} per call (got {total})"
        )));
    }
    let budget = READ_OUTPUT_BUDGET / count;
    let mut files = Vec::with_capacity(count);
    for (path, start, limit) in asked {
        let window = read_window(inner, path, start, limit, budget, "read_files")?;
        let mut value = window.structured();
        value["content"] = json!(format!("{}{}", window.text, window.footer()));
        files.push(value);
    }
    let body = json!({"count": files.len(), "files": files});
    let mut output = ToolOutput::text(body.to_string());
    output.structured = Some(body);
    Ok(output)
}

pub(crate) fn list_directory(inner: &Inner, input: ListInput) -> ToolResult<ToolOutput> {
    single_repository(&input.repository)?;
    let dir = inner.root.open_dir(&input.path)?;
    let entries = list(&dir).map_err(|e| ToolError::io(&input.path, e))?;
    if entries.is_empty() {
        return Ok(ToolOutput::text("Directory is empty."));
    }
    let shown: Vec<String> = entries
        .iter()
        .take(MAX_LIST_ENTRIES)
        .map(|entry| match entry.kind {
            EntryKind::Dir => format!("{}/", entry.name),
            EntryKind::Symlink => format!("{}@", entry.name),
            EntryKind::File | EntryKind::Other => entry.name.clone(),
        })
        .collect();
    let mut text = shown.join("\n");
    if entries.len() > MAX_LIST_ENTRIES {
        text.push_str(&format!(
            "\n[{} more entries not shown; list a subdirectory or use search_files]",
            entries.len() - MAX_LIST_ENTRIES
        ));
    }
    Ok(ToolOutput::text(text))
}
