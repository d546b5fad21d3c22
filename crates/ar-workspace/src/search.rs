//! The search tools: `search_files` (paths by glob), `ripgrep` and `grep` (contents).
//!
//! Matching is ripgrep's own crates: `grep-regex` and `grep-searcher` for contents,
//! `ignore` for `.gitignore` rules and file types, `globset` for globs. The walk is ours
//! (`fs.rs`): each directory is opened by one name relative to its parent, never through a
//! symlink, so a search cannot be led outside the root; ripgrep's own walker opens paths by
//! name and would follow a directory swapped for a symlink mid-walk.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use ar_core::tool::ToolOutput;
use globset::{GlobBuilder, GlobMatcher};
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::types::{Types, TypesBuilder};
use serde::Deserialize;
use serde_json::json;

use crate::error::{ToolError, ToolResult};
use crate::fs::{display, list, open_child_dir, open_child_file, EntryKind, Opened, Root};
use crate::host::{single_repository, Inner};
use crate::schema::{SEARCH_DEFAULT_RESULTS, SEARCH_MAX_CONTEXT, SEARCH_MAX_RESULTS};

/// Directories no search enters (besides what `.gitignore` rules leave out for `ripgrep`).
const EXCLUDED_DIRS: &[&str] = &[".git", "node_modules", "vendor", "dist", "__pycache__"];
/// How long one search may walk.
const SEARCH_TIME_LIMIT: Duration = Duration::from_secs(30);
/// Directory depth a walk goes to.
const MAX_DEPTH: usize = 64;
/// Characters of a matching line shown.
const MAX_MATCH_CHARS: usize = 500;
/// Paths `search_files` lists, and lines it shows with a query.
const MAX_PATHS: usize = 200;
const MAX_QUERY_LINES: usize = 100;
/// The largest `.gitignore` read.
const MAX_GITIGNORE_BYTES: u64 = 1024 * 1024;

#[derive(Deserialize)]
pub(crate) struct RipgrepInput {
    #[serde(default)]
    pattern: String,
    #[serde(default)]
    path: String,
    #[serde(default)]
    file_type: Option<String>,
    #[serde(default)]
    context_lines: Option<i64>,
    #[serde(default)]
    max_results: Option<i64>,
    #[serde(default)]
    case_insensitive: bool,
    #[serde(default)]
    fixed_strings: bool,
    #[serde(default)]
    repository: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct GrepInput {
    #[serde(default)]
    pattern: String,
    #[serde(default)]
    path: String,
    #[serde(default)]
    include: Option<String>,
    #[serde(default)]
    max_results: Option<i64>,
    #[serde(default)]
    repository: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct SearchFilesInput {
    #[serde(default, alias = "glob")]
    pattern: String,
    #[serde(default)]
    query: Option<String>,
    #[serde(default)]
    path: String,
    #[serde(default)]
    repository: Option<String>,
}

/// Which entries a walk skips.
struct WalkRules {
    hidden: bool,
    gitignore: bool,
}

/// What a walk hands each regular file: its path relative to the root, and its directory.
trait Visitor {
    /// False stops the walk.
    fn file(&mut self, rel: &str, dir: &OwnedFd, name: &str) -> bool;
    /// Directories, for visitors that list them; false stops the walk.
    fn dir(&mut self, _rel: &str) -> bool {
        true
    }
}

/// How a walk ended.
#[derive(Default)]
struct WalkEnd {
    timed_out: bool,
    stopped: bool,
}

struct Walker<'a> {
    rules: &'a WalkRules,
    deadline: Instant,
    ignores: Vec<Gitignore>,
    end: WalkEnd,
}

impl Walker<'_> {
    fn walk(&mut self, dir: &OwnedFd, rel: &str, depth: usize, visitor: &mut dyn Visitor) {
        if depth > MAX_DEPTH || self.end.stopped || self.end.timed_out {
            return;
        }
        let Ok(entries) = list(dir) else { return };
        let pushed = self.rules.gitignore && self.push_gitignore(dir, rel, &entries);
        for entry in &entries {
            if Instant::now() > self.deadline {
                self.end.timed_out = true;
                break;
            }
            if self.end.stopped {
                break;
            }
            let child = join(rel, &entry.name);
            if self.skipped(&entry.name, &child, entry.kind) {
                continue;
            }
            match entry.kind {
                EntryKind::File => {
                    if !visitor.file(&child, dir, &entry.name) {
                        self.end.stopped = true;
                    }
                }
                EntryKind::Dir => {
                    if !visitor.dir(&child) {
                        self.end.stopped = true;
                    } else if let Ok(sub) = open_child_dir(dir, &entry.name) {
                        self.walk(&sub, &child, depth + 1, visitor);
                    }
                }
                // Symlinks are never followed; other kinds hold no text.
                EntryKind::Symlink | EntryKind::Other => {}
            }
        }
        if pushed {
            self.ignores.pop();
        }
    }

    fn skipped(&self, name: &str, rel: &str, kind: EntryKind) -> bool {
        if kind == EntryKind::Dir && EXCLUDED_DIRS.contains(&name) {
            return true;
        }
        if !self.rules.hidden && name.starts_with('.') {
            return true;
        }
        let path = format!("/{rel}");
        for ignore in self.ignores.iter().rev() {
            let found = ignore.matched(Path::new(&path), kind == EntryKind::Dir);
            if found.is_ignore() {
                return true;
            }
            if found.is_whitelist() {
                return false;
            }
        }
        false
    }

    fn push_gitignore(&mut self, dir: &OwnedFd, rel: &str, entries: &[crate::fs::Entry]) -> bool {
        if !entries
            .iter()
            .any(|e| e.name == ".gitignore" && e.kind == EntryKind::File)
        {
            return false;
        }
        let Ok(Some(file)) = open_child_file(dir, ".gitignore") else {
            return false;
        };
        let mut text = String::new();
        if std::io::Read::read_to_string(
            &mut std::io::Read::take(file, MAX_GITIGNORE_BYTES),
            &mut text,
        )
        .is_err()
        {
            return false;
        }
        let mut builder = GitignoreBuilder::new(format!("/{rel}"));
        for line in text.lines() {
            // A bad line is skipped, as git does.
            let _ = builder.add_line(None, line);
        }
        match builder.build() {
            Ok(ignore) => {
                self.ignores.push(ignore);
                true
            }
            Err(_) => false,
        }
    }
}

fn join(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        name.to_string()
    } else {
        format!("{rel}/{name}")
    }
}

fn walk(
    root: &Root,
    raw: &str,
    rules: &WalkRules,
    visitor: &mut dyn Visitor,
) -> ToolResult<WalkEnd> {
    let mut walker = Walker {
        rules,
        deadline: Instant::now() + SEARCH_TIME_LIMIT,
        ignores: Vec::new(),
        end: WalkEnd::default(),
    };
    let rel = crate::state::key(crate::fs::check_dir_path(raw)?);
    match root.open_any(raw)? {
        Opened::Dir(dir) => walker.walk(&dir, &rel, 0, visitor),
        Opened::File => {
            // A file named directly is searched even when hidden or ignored.
            let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel.as_str()));
            let parent = root.open_dir(parent)?;
            visitor.file(&rel, &parent, name);
        }
    }
    Ok(walker.end)
}

fn result_count(name: &str, value: Option<i64>) -> ToolResult<usize> {
    match value {
        None | Some(0) => Ok(SEARCH_DEFAULT_RESULTS),
        Some(v) if v >= 1 && v as usize <= SEARCH_MAX_RESULTS => Ok(v as usize),
        Some(v) => Err(ToolError::new(format!(
            "{name} must be between 1 and {SEARCH_MAX_RESULTS} (got {v})"
        ))),
    }
}

/// Collects matching lines of the files a walk hands it, `path:line:text` (context lines
/// `path-line-text`), up to a limit.
struct ContentSearch {
    matcher: RegexMatcher,
    searcher: Searcher,
    types: Option<Types>,
    include: Option<GlobMatcher>,
    context: bool,
    max: usize,
    out: Vec<String>,
    shown: usize,
    truncated: bool,
    linked: usize,
}

impl Visitor for ContentSearch {
    fn file(&mut self, rel: &str, dir: &OwnedFd, name: &str) -> bool {
        if let Some(types) = &self.types {
            if types.matched(Path::new(name), false).is_ignore() {
                return true;
            }
        }
        if let Some(include) = &self.include {
            if !include.is_match(name) {
                return true;
            }
        }
        let file = match open_child_file(dir, name) {
            Ok(Some(file)) => file,
            Ok(None) => {
                self.linked += 1;
                return true;
            }
            Err(_) => return true,
        };
        let before = self.out.len();
        if self.context && before > 0 {
            self.out.push("--".to_string());
        }
        let mut sink = Lines {
            rel,
            out: &mut self.out,
            shown: &mut self.shown,
            max: self.max,
            matches: 0,
        };
        let _ = self.searcher.search_file(&self.matcher, &file, &mut sink);
        if sink.matches == 0 {
            self.out.truncate(before);
        }
        if self.shown >= self.max {
            self.truncated = true;
            return false;
        }
        true
    }
}

struct Lines<'a> {
    rel: &'a str,
    out: &'a mut Vec<String>,
    shown: &'a mut usize,
    max: usize,
    matches: usize,
}

impl Lines<'_> {
    fn push(&mut self, sep: char, number: Option<u64>, bytes: &[u8]) -> bool {
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches(['\n', '\r']);
        let shown = match text.char_indices().nth(MAX_MATCH_CHARS) {
            Some((cut, _)) => format!("{} …", &text[..cut]),
            None => text.to_string(),
        };
        let number = number.unwrap_or(0);
        self.out
            .push(format!("{}{sep}{number}{sep}{shown}", self.rel));
        *self.shown += 1;
        *self.shown < self.max
    }
}

impl Sink for &mut Lines<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.matches += 1;
        Ok(self.push(':', found.line_number(), found.bytes()))
    }

    fn context(&mut self, _: &Searcher, context: &SinkContext<'_>) -> Result<bool, Self::Error> {
        Ok(self.push('-', context.line_number(), context.bytes()))
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, Self::Error> {
        self.out.push("--".to_string());
        Ok(true)
    }
}

fn searcher(context: usize) -> Searcher {
    SearcherBuilder::new()
        .line_number(true)
        .before_context(context)
        .after_context(context)
        .binary_detection(BinaryDetection::quit(0))
        .build()
}

fn content_output(tool: &str, search: ContentSearch, end: WalkEnd) -> ToolOutput {
    let count = search.shown;
    let mut text = if count == 0 {
        "No matches found.".to_string()
    } else {
        search.out.join("\n")
    };
    if search.truncated {
        text.push_str(&format!(
            "\n[results cut at {}; narrow the pattern or path, or raise max_results (at most {SEARCH_MAX_RESULTS})]",
            search.max
        ));
    }
    if end.timed_out {
        text.push_str(&format!(
            "\n[{tool} stopped after {} s; results are partial: narrow the path]",
            SEARCH_TIME_LIMIT.as_secs()
        ));
    }
    if search.linked > 0 {
        text.push_str(&format!(
            "\n[{} hard-linked files were not searched]",
            search.linked
        ));
    }
    let mut output = ToolOutput::text(text);
    output.structured = Some(json!({
        "count": count, "truncated": search.truncated, "timed_out": end.timed_out,
    }));
    output
}

pub(crate) fn ripgrep(inner: &Inner, input: RipgrepInput) -> ToolResult<ToolOutput> {
    single_repository(&input.repository)?;
    if input.pattern.is_empty() {
        return Err(ToolError::new("pattern is required"));
    }
    let context = match input.context_lines {
        None => 0,
        Some(v) if (0..=SEARCH_MAX_CONTEXT as i64).contains(&v) => v as usize,
        Some(v) => {
            return Err(ToolError::new(format!(
                "context_lines must be between 0 and {SEARCH_MAX_CONTEXT} (got {v})"
            )))
        }
    };
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(input.case_insensitive)
        .fixed_strings(input.fixed_strings)
        .line_terminator(Some(b'\n'))
        .build(&input.pattern)
        .map_err(|e| ToolError::new(format!("invalid pattern: {e}")))?;
    let types = match input.file_type.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(kind) => Some(file_types(kind)?),
    };
    let mut search = ContentSearch {
        matcher,
        searcher: searcher(context),
        types,
        include: None,
        context: context > 0,
        max: result_count("max_results", input.max_results)?,
        out: Vec::new(),
        shown: 0,
        truncated: false,
        linked: 0,
    };
    let rules = WalkRules {
        hidden: false,
        gitignore: true,
    };
    let end = walk(&inner.root, &input.path, &rules, &mut search)?;
    Ok(content_output("ripgrep", search, end))
}

fn file_types(kind: &str) -> ToolResult<Types> {
    let mut builder = TypesBuilder::new();
    builder.add_defaults();
    builder.select(kind);
    builder.build().map_err(|e| {
        ToolError::new(format!("unknown file_type {kind:?} ({e}); use a ripgrep type name such as rust, go, py, js, ts, java"))
    })
}

pub(crate) fn grep(inner: &Inner, input: GrepInput) -> ToolResult<ToolOutput> {
    single_repository(&input.repository)?;
    if input.pattern.is_empty() {
        return Err(ToolError::new("pattern is required"));
    }
    let matcher = RegexMatcherBuilder::new()
        .line_terminator(Some(b'\n'))
        .build(&input.pattern)
        .map_err(|e| ToolError::new(format!("invalid regular expression: {e}")))?;
    let include = match input.include.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(glob) => Some(glob_matcher(glob)?),
    };
    let mut search = ContentSearch {
        matcher,
        searcher: searcher(0),
        types: None,
        include,
        context: false,
        max: result_count("max_results", input.max_results)?,
        out: Vec::new(),
        shown: 0,
        truncated: false,
        linked: 0,
    };
    let rules = WalkRules {
        hidden: true,
        gitignore: false,
    };
    let end = walk(&inner.root, &input.path, &rules, &mut search)?;
    Ok(content_output("grep", search, end))
}

fn glob_matcher(glob: &str) -> ToolResult<GlobMatcher> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| ToolError::new(format!("invalid glob {}: {e}", display(glob))))
}

/// Paths matching a glob, optionally with the lines that contain a query.
struct PathSearch {
    glob: GlobMatcher,
    query: Option<String>,
    paths: Vec<String>,
    lines: Vec<String>,
    truncated: bool,
}

impl Visitor for PathSearch {
    fn file(&mut self, rel: &str, dir: &OwnedFd, name: &str) -> bool {
        if !self.glob.is_match(rel) {
            return true;
        }
        let Some(query) = &self.query else {
            self.paths.push(rel.to_string());
            self.truncated = self.paths.len() >= MAX_PATHS;
            return !self.truncated;
        };
        let Ok(Some(file)) = open_child_file(dir, name) else {
            return true;
        };
        let Ok(meta) = file.metadata() else {
            return true;
        };
        let Ok((data, _)) = crate::fs::read_bounded(rel, file, meta) else {
            return true;
        };
        if crate::read::looks_binary(&data) {
            return true;
        }
        let text = String::from_utf8_lossy(&data);
        for (n, line) in (1..).zip(text.lines()) {
            if line.contains(query.as_str()) {
                let shown: String = line.chars().take(MAX_MATCH_CHARS).collect();
                self.lines.push(format!("{rel}:{n}: {shown}"));
                if self.lines.len() >= MAX_QUERY_LINES {
                    self.truncated = true;
                    return false;
                }
            }
        }
        true
    }

    fn dir(&mut self, rel: &str) -> bool {
        if self.query.is_none() && self.glob.is_match(rel) {
            self.paths.push(format!("{rel}/"));
            self.truncated = self.paths.len() >= MAX_PATHS;
            return !self.truncated;
        }
        true
    }
}

pub(crate) fn search_files(inner: &Inner, input: SearchFilesInput) -> ToolResult<ToolOutput> {
    single_repository(&input.repository)?;
    let pattern = input.pattern.trim();
    if pattern.is_empty() {
        return Err(ToolError::new(
            "pattern is required (a glob such as **/*.rs)",
        ));
    }
    let query = input.query.filter(|q| !q.is_empty());
    let mut search = PathSearch {
        glob: glob_matcher(pattern)?,
        query,
        paths: Vec::new(),
        lines: Vec::new(),
        truncated: false,
    };
    let rules = WalkRules {
        hidden: true,
        gitignore: false,
    };
    let end = walk(&inner.root, &input.path, &rules, &mut search)?;
    let found = if search.query.is_some() {
        &search.lines
    } else {
        &search.paths
    };
    let mut text = if found.is_empty() {
        "No matches found.".to_string()
    } else {
        found.join("\n")
    };
    if search.truncated {
        text.push_str("\n[results cut; narrow the pattern or path]");
    }
    if end.timed_out {
        text.push_str("\n[search_files stopped after 30 s; results are partial]");
    }
    Ok(ToolOutput::text(text))
}
